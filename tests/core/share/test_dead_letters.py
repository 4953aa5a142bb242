"""Share groups' dead letters (KIP-1191) in the engine: ARCHIVING, the dead letters noted,
their archiving once written, a restart resuming them; and the writer's topic rules and
headers."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from twisted.internet import defer, task
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.share.config import (
    DLQ_COPY_RECORD,
    DLQ_TOPIC,
    InvalidShareConfig,
    parse_group_configs,
    validate,
)
from brokerd.core.share.dead_letters import (
    DeadLetterRules,
    DeadLetterWriter,
    dead_letter_headers,
    refusal,
)
from brokerd.core.share.engine import ShareEngine
from brokerd.core.share.partition import AckBatch, DeadLetter, DeadLetterReason, LogSpan
from brokerd.core.share.service import ShareService
from brokerd.core.share.states import AckType, RecordState
from brokerd.storage.record.decode import decode_records
from brokerd.storage.stores.share_state import ShareStateRecord, ShareStateStore
from brokerd.storage.types import AppendInfo, TopicInfo

from tests.core.share.test_service import batch
from tests.deferreds import outcome_of
from tests.fake_core import BatchLogCore

G, T = "g", "t"


def engine(dlq: str = "dlq.t") -> ShareEngine:
    e = ShareEngine()
    overrides = {DLQ_TOPIC: dlq} if dlq else {}
    e.set_overrides(G, {**overrides, "share.delivery.count.limit": "2"})
    e.ensure(G, T, 0, log_start=0, log_end=0)
    return e


class _TempJournal(SynchronousTestCase):
    def journal_path(self) -> str:
        """A share-state journal's path in a directory removed after the test."""
        directory = tempfile.mkdtemp(prefix="dlq-")
        self.addCleanup(shutil.rmtree, directory, True)
        return str(Path(directory) / "share-state.log")


class DeadLetterEngineTests(_TempJournal):
    def test_reject_is_archiving_until_dead_lettered(self) -> None:
        e = engine()
        e.acquire(G, T, 0, "m", [LogSpan(0, 3)], 10, 0)
        e.acknowledge(G, T, 0, "m", [AckBatch(0, 1, (AckType.REJECT,)),
                                     AckBatch(2, 3, (AckType.ACCEPT,))])
        part = e.partition(G, T, 0)
        assert part is not None
        assert part.entry(0) is not None and part.entry(0).state is RecordState.ARCHIVING  # type: ignore[union-attr]
        # ARCHIVING holds the start offset (Kafka: it is not terminal).
        self.assertEqual(part.start, 0)
        (noted,) = e.take_dead_letters()
        self.assertEqual((noted.group, noted.topic, noted.partition, noted.dlq_topic),
                         (G, T, 0, "dlq.t"))
        self.assertEqual(noted.letters, (DeadLetter(0, 1, 1, DeadLetterReason.REJECTED),))
        self.assertEqual(e.take_dead_letters(), [])  # taken once
        records = e.dead_lettered(G, T, 0, 0, 1)
        self.assertEqual(len(records), 1)
        self.assertEqual(part.start, 4)
        self.assertEqual(part.summary().archived, 2)

    def test_delivery_limit_is_a_dead_letter_with_its_reason(self) -> None:
        e = engine()
        for now in (0, 1):
            e.acquire(G, T, 0, "m", [LogSpan(0, 0)], 10, now)
            e.acknowledge(G, T, 0, "m", [AckBatch(0, 0, (AckType.RELEASE,))])
        (noted,) = e.take_dead_letters()
        self.assertEqual(noted.letters,
                         (DeadLetter(0, 0, 2, DeadLetterReason.DELIVERY_COUNT_EXCEEDED),))

    def test_without_a_topic_archived_directly(self) -> None:
        e = engine(dlq="")
        e.acquire(G, T, 0, "m", [LogSpan(0, 0)], 10, 0)
        e.acknowledge(G, T, 0, "m", [AckBatch(0, 0, (AckType.REJECT,))])
        self.assertEqual(e.take_dead_letters(), [])
        part = e.partition(G, T, 0)
        assert part is not None
        self.assertEqual(part.start, 1)

    def test_gaps_and_skips_are_not_dead_letters(self) -> None:
        e = engine()
        e.acquire(G, T, 0, "m", [LogSpan(0, 1), LogSpan(2, 2, skip=True)], 10, 0)
        e.acknowledge(G, T, 0, "m", [AckBatch(0, 1, (AckType.GAP,))])
        self.assertEqual(e.take_dead_letters(), [])

    def test_a_restart_resumes_archiving_records(self) -> None:
        path = self.journal_path()
        store = ShareStateStore.open(path)
        e = ShareEngine()
        journal: list[ShareStateRecord] = []
        journal += e.set_overrides(G, {DLQ_TOPIC: "dlq.t"})
        journal += e.ensure(G, T, 0, log_start=0, log_end=0)[1]
        journal += e.acquire(G, T, 0, "m", [LogSpan(0, 2)], 10, 0)[1]
        journal += e.acknowledge(G, T, 0, "m", [AckBatch(1, 1, (AckType.REJECT,))])
        store.write(journal)
        e.take_dead_letters()
        # The broker stops before the dead letter is written: the journal has ARCHIVING.
        store.close()
        store = ShareStateStore.open(path)
        self.addCleanup(store.close)
        again = ShareEngine()
        again.restore(store.partitions(), store.group_configs())
        (noted,) = again.take_dead_letters()
        # The reason is not stored: below the limit, only a reject archives.
        self.assertEqual(noted.letters, (DeadLetter(1, 1, 1, DeadLetterReason.REJECTED),))


class DeadLetterRuleTests(SynchronousTestCase):
    def test_group_configs(self) -> None:
        config = parse_group_configs({DLQ_TOPIC: "dlq.x", DLQ_COPY_RECORD: "TRUE"})
        self.assertEqual((config.dlq_topic, config.dlq_copy_record), ("dlq.x", True))
        self.assertEqual(parse_group_configs({}).dlq_topic, "")
        with self.assertRaises(InvalidShareConfig):
            validate(DLQ_TOPIC, "__consumer_offsets")
        with self.assertRaises(InvalidShareConfig):
            validate(DLQ_COPY_RECORD, "yes")

    def test_topic_rules_are_kafkas(self) -> None:
        rules = DeadLetterRules()
        on = TopicInfo("dlq.a", 1, {"errors.deadletterqueue.group.enable": "true"})
        self.assertIsNone(refusal("dlq.a", on, rules))
        self.assertIn("prefix", refusal("a", None, rules) or "")
        self.assertIn("auto.create", refusal("dlq.b", None, rules) or "")
        self.assertIsNone(refusal("dlq.b", None, DeadLetterRules(auto_create=True)))
        self.assertIn("group.enable", refusal("dlq.a", TopicInfo("dlq.a", 1), rules) or "")
        self.assertIsNone(refusal("a", TopicInfo("a", 1, {
            "errors.deadletterqueue.group.enable": "true"}), DeadLetterRules(prefix="")))

    def test_headers(self) -> None:
        letter = DeadLetter(7, 7, 3, DeadLetterReason.DELIVERY_COUNT_EXCEEDED)
        self.assertEqual(dict(dead_letter_headers(G, T, 2, 7, letter)), {
            "__dlq.errors.topic": b"t",
            "__dlq.errors.partition": b"2",
            "__dlq.errors.offset": b"7",
            "__dlq.errors.group": b"g",
            "__dlq.errors.delivery.count": b"3",
            "__dlq.errors.message": b"Offset delivery count exceeded the threshold.",
        })


class _DeadLetterTopic(BatchLogCore):
    """The service's log (``t``) and a dead-letter topic ``dlq.t`` whose appends either
    land in ``appended`` or, with ``hang``, never answer (the broker dies first)."""

    def __init__(self, clock: task.Clock, *, hang: bool) -> None:
        super().__init__(clock)
        self.hang = hang
        self.appended: list[bytes] = []

    def topics(self) -> dict[str, TopicInfo]:
        return {"dlq.t": TopicInfo("dlq.t", 1, {"errors.deadletterqueue.group.enable": "true"})}

    def create_topic(self, name: str, partitions: int, configs: Any = None, *,
                     validate_only: bool = False) -> defer.Deferred[None]:
        raise AssertionError("the topic exists")

    def produce_batches(self, topic: str, partition: int, data: bytes, *,
                        acks: int = -1) -> defer.Deferred[AppendInfo]:
        if self.hang:
            return defer.Deferred()
        self.appended.append(data)
        return defer.succeed(AppendInfo(len(self.appended) - 1, len(self.appended) - 1))


class DeadLetterServiceTests(_TempJournal):
    def start(self, path: str, *, hang: bool) -> tuple[ShareService, _DeadLetterTopic,
                                                       ShareStateStore]:
        clock = task.Clock()
        core = _DeadLetterTopic(clock, hang=hang)
        core.add(0, batch(0, 2), 2)
        store = ShareStateStore.open(path)
        writer = DeadLetterWriter(core, DeadLetterRules(), lambda: 1000.0)
        svc = ShareService(
            core, store, run_write=core.run_write, clock=clock, dead_letters=writer
        )
        svc.start()
        self.addCleanup(svc.stop)
        return svc, core, store

    def test_a_crash_before_the_append_writes_it_at_the_next_start(self) -> None:
        path = self.journal_path()
        svc, core, store = self.start(path, hang=True)
        outcome_of(svc.set_overrides("g", {"share.auto.offset.reset": "earliest",
                                       DLQ_TOPIC: "dlq.t"}))
        outcome_of(svc.acquire("g", "t", 0, "m", max_records=2))
        # Answered once ARCHIVING is journaled; the append never answers.
        outcome_of(svc.acknowledge("g", "t", 0, "m", [AckBatch(0, 1, (AckType.REJECT,))]))
        self.assertEqual(svc.describe("g")[("t", 0)].start_offset, 0)
        store.close()  # the broker dies here
        svc, core, store = self.start(path, hang=False)
        self.addCleanup(store.close)
        (data,) = core.appended
        records = decode_records(data, max_uncompressed=1 << 20)
        self.assertEqual(
            [dict(r.headers)["__dlq.errors.offset"] for r in records], [b"0", b"1"]
        )
        self.assertEqual(dict(records[0].headers)["__dlq.errors.message"],
                         b"Offset rejected by client.")
        self.assertEqual(svc.describe("g")[("t", 0)].start_offset, 2)
        # Archived now, durably: a third start writes nothing again.
        store.close()
        svc, core, store = self.start(path, hang=False)
        self.assertEqual(core.appended, [])
