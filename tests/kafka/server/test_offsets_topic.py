"""The records of ``__consumer_offsets`` (brokerd.kafka.server.offsets_topic), sans-IO:
what each journal change becomes, decoded with Kafka's schemas; one batch per partition
per write; compaction keeps each key's latest record at its offset; the run counter; the
offsets journal followed; Fetch (by name and by topic ID) and ListOffsets through the
listener protocol. Under 2 s."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import attrs
import pytest

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.listener.factory_parts import DEFAULT_LIMITS
from brokerd.kafka.listener.protocol import KafkaFactory
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.server.internal_topics import (
    OFFSETS_TOPIC,
    InternalTopics,
    internal_topic_id,
)
from brokerd.kafka.server.offsets_topic import (
    RUN_FILE_NAME,
    RUN_SHIFT,
    OffsetsTopicLog,
    next_run,
)
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis
from brokerd.storage.record.decode import decode_records
from brokerd.storage.stores.offsets_format import (
    Committed,
    GroupDeletion,
    GroupUpdate,
    OffsetDeletion,
    StoredGroup,
    StoredMember,
)

from tests.kafka.listener.test_protocol import KafkaTestCase
from tests.offsets_topic_schema import decode, java_partition

NOW = 1_700_000_000_000


def _batches(data: bytes) -> list[bytes]:
    out = []
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out.append(data[pos : pos + 12 + length])
        pos += 12 + length
    return out


def _read(log: OffsetsTopicLog, group: str, offset: int = 0) -> list[tuple[int, Any]]:
    data = log.read(java_partition(group), offset, 1 << 20)
    assert data is not None
    return [
        (r.offset, decode(r.key or b"", r.value))
        for batch in _batches(data)
        for r in decode_records(batch, max_uncompressed=1 << 20)
    ]


def _committed(offset: int) -> Committed:
    return Committed(offset, 3, "meta", NOW)


def test_commits_groups_and_deletions_in_kafkas_schemas() -> None:
    log = OffsetsTopicLog()
    member = StoredMember("m-1", "inst", "client", "/127.0.0.1", 45000, 300000, b"sub", b"asg")
    log.journal_written([
        ("g", [("orders", 0, _committed(5)), ("orders", 1, _committed(6))]),
        GroupUpdate("g", StoredGroup("consumer", 4, "range", "m-1", (member,))),
    ], NOW)
    log.journal_written([OffsetDeletion("g", (("orders", 1),))], NOW)
    log.journal_written([(None, "orders")], NOW)
    log.journal_written([GroupDeletion("g")], NOW)
    p = java_partition("g")
    assert log.bounds(p) == (0, 6)
    assert log.read(p, 7, 100) is None  # past the end
    assert _read(log, "g") == [
        (0, ("offset", "g", "orders", 0, (5, 3, "meta", NOW))),
        (1, ("offset", "g", "orders", 1, (6, 3, "meta", NOW))),
        (2, ("group", "g", ("consumer", 4, "range", "m-1", ["m-1"]))),
        (3, ("offset", "g", "orders", 1, None)),
        (4, ("offset", "g", "orders", 0, None)),  # the topic was deleted
        (5, ("group", "g", None)),  # no offsets left to tombstone
    ]
    # One batch per journal write.
    data = log.read(p, 0, 1 << 20)
    assert data is not None and len(_batches(data)) == 4


def test_compaction_keeps_each_keys_latest_at_its_offset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("brokerd.kafka.server.offsets_topic.COMPACT_MIN_BYTES", 4096)
    log = OffsetsTopicLog()
    for i in range(200):
        log.journal_written([("g", [("t", i % 2, _committed(i))])], NOW)
    p = java_partition("g")
    data = log.read(p, 0, 1 << 20)
    assert data is not None and len(data) < 4096 * 2
    records = _read(log, "g")
    assert [(o, r[3], r[4][0]) for o, r in records][-2:] == [(198, 0, 198), (199, 1, 199)]
    assert log.bounds(p) == (0, 200)
    # A reader positioned in a compacted gap reads on from the next record kept.
    assert _read(log, "g", 150)[0][0] > 150


def test_runs_number_from_the_counter(tmp_path: Path) -> None:
    assert [next_run(str(tmp_path)) for _ in range(3)] == [0, 1, 2]
    log = OffsetsTopicLog(run=next_run(str(tmp_path)))
    log.journal_written([("g", [("t", 0, _committed(1))])], NOW)
    assert log.bounds(java_partition("g")) == (0, (3 << RUN_SHIFT) + 1)
    (tmp_path / RUN_FILE_NAME).write_bytes(b"junk")
    with pytest.raises(ValueError, match="no run number"):
        next_run(str(tmp_path))


def test_follows_the_offsets_journal(tmp_path: Path) -> None:
    from brokerd.storage.stores.offsets import OffsetStore

    store = OffsetStore.open(str(tmp_path), clock=lambda: NOW / 1000)
    try:
        store.commit("g", [("t", 0, 5, -1, None)])
        log = OffsetsTopicLog()
        store.follow(lambda c, m: log.seed(c.items(), m.items(), NOW), log.journal_written)
        # Two groups in one write (group commit): one batch per partition touched.
        store.commit_many([("g", [("t", 0, 6, 2, "x"), ("t", 1, 1, 2, None)]),
                           ("h", [("t", 0, 9, -1, None)])])
        store.delete_topic("t")
    finally:
        store.close()
    assert [(o, r[3], r[4] and r[4][:3]) for o, r in _read(log, "g")] == [
        (0, 0, (5, -1, "")),  # the seed: the journal's live state when followed
        (1, 0, (6, 2, "x")),
        (2, 1, (1, 2, "")),
        (3, 0, None),
        (4, 1, None),
    ]
    assert [(r[3], r[4] and r[4][0]) for _o, r in _read(log, "h")] == [(0, 9), (0, None)]


class OffsetsTopicOnTheWireTests(KafkaTestCase):
    """Fetch by name and by topic ID (v13), ListOffsets, through the listener protocol."""

    def setUp(self) -> None:
        super().setUp()
        self.log = OffsetsTopicLog()
        self.factory = KafkaFactory(
            self.core,  # type: ignore[arg-type]
            KafkaCoordinators(
                self.groups,  # type: ignore[arg-type]
                internal_topics=InternalTopics(lambda: "cluster", self.log),
            ),
            clock=self.clock,
            advertised_host="broker.example", advertised_port=19092,
            limits=attrs.evolve(DEFAULT_LIMITS, max_frame_bytes=1 << 20),
        )
        self.proto, self.tr = self.connect()

    def fetch(self, version: int, request: apis.FetchRequest) -> apis.FetchPartitionResponse:
        self.send(ApiKey.FETCH, version, request)
        return self.one().responses[0].partitions[0]  # type: ignore[no-any-return]

    def test_read_once_presented(self) -> None:
        p = java_partition("g")
        request = self.fetch_request([(OFFSETS_TOPIC, p, 0, 1 << 20)])
        self.assertEqual(self.fetch(12, request).error_code,
                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)  # not created yet
        self.send(ApiKey.FIND_COORDINATOR, 4, apis.FindCoordinatorRequest(
            key_type=0, coordinator_keys=("g",)))
        self.one()
        self.log.journal_written([("g", [("t", 0, _committed(5))])], NOW)

        by_name = self.fetch(12, request)
        self.assertEqual((by_name.error_code, by_name.high_watermark), (0, 1))
        topic_id = internal_topic_id("cluster", OFFSETS_TOPIC)
        by_id = self.fetch(13, attrs.evolve(request, topics=(attrs.evolve(
            request.topics[0], topic="", topic_id=topic_id),)))
        self.assertEqual(by_id.records, by_name.records)
        (record,) = decode_records(by_id.records, max_uncompressed=1 << 20)
        self.assertEqual(decode(record.key or b"", record.value),
                         ("offset", "g", "t", 0, (5, 3, "meta", NOW)))
        past = self.fetch(12, self.fetch_request([(OFFSETS_TOPIC, p, 2, 1 << 20)]))
        self.assertEqual(past.error_code, ErrorCode.OFFSET_OUT_OF_RANGE)

        answers = {}
        for ts in (-1, -2, NOW):
            self.send(ApiKey.LIST_OFFSETS, 7, apis.ListOffsetsRequest(topics=(
                apis.ListOffsetsTopic(name=OFFSETS_TOPIC, partitions=(
                    apis.ListOffsetsPartition(partition_index=p, timestamp=ts),)),)))
            part = self.one().topics[0].partitions[0]
            answers[ts] = (part.error_code, part.offset)
        self.assertEqual(answers, {-1: (0, 1), -2: (0, 0), NOW: (0, -1)})
        self.assertEqual(self.fetch(12, self.fetch_request([(OFFSETS_TOPIC, 50, 0, 100)]))
                         .error_code, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
