"""A consumer instance's records call: positions from the committed offset or
``auto.offset.reset``, a position out of range reset, the byte budget (at least one
record), partitions read in turn, and the wait when nothing is there yet."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.trial.unittest import SynchronousTestCase

from brokerd.errors import OffsetOutOfRange, UnknownTopicOrPartition
from brokerd.proxy.consume import RECORD_OVERHEAD, read_records, reset_position
from brokerd.proxy.errors import ProxyError
from brokerd.proxy.instances import ConsumerInstance, InstanceConfig, OffsetReset
from brokerd.storage.types import LogRead, ReadSpec, Record


class Core:
    """The reads a records call makes, over in-memory partitions of decoded records."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], list[Record]] = {}
        self.start: dict[tuple[str, int], int] = {}
        self.reads = self
        self.waits: list[Any] = []
        self.wait: defer.Deferred[None] | None = None

    def add(self, topic: str, partition: int, values: list[bytes], start: int = 0) -> None:
        self.start[(topic, partition)] = start
        self.logs[(topic, partition)] = [
            Record(start + i, 0, None, v) for i, v in enumerate(values)
        ]

    def list_offsets(
        self, topic: str, partition: int, *, read_committed: bool = False
    ) -> defer.Deferred[tuple[int, int]]:
        if (topic, partition) not in self.logs:
            return defer.fail(UnknownTopicOrPartition(topic))
        start = self.start[(topic, partition)]
        return defer.succeed((start, start + len(self.logs[(topic, partition)])))

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec
    ) -> LogRead:
        assert spec.committed
        if (topic, partition) not in self.logs:
            raise UnknownTopicOrPartition(topic)
        records = self.logs[(topic, partition)]
        start = self.start[(topic, partition)]
        end = start + len(records)
        if not start <= offset <= end:
            raise OffsetOutOfRange(offset, start, end)
        return LogRead(b"", end, start, end, decoded=tuple(records[offset - start :]))

    def wait_for_data(self, positions: Any, **kwargs: Any) -> defer.Deferred[None]:
        self.waits.append((positions, kwargs))
        self.wait = defer.Deferred()
        return self.wait


class Instances:
    def __init__(self, committed: dict[tuple[str, int], tuple[int, str]]) -> None:
        self._committed = committed

    def committed(self, instance: Any, partitions: Any) -> dict[tuple[str, int], tuple[int, str]]:
        return {tp: v for tp, v in self._committed.items() if tp in partitions}


def instance(*assigned: tuple[str, int], reset: OffsetReset = OffsetReset.EARLIEST) -> Any:
    consumer = ConsumerInstance("g", "c", "addr", "User:x", InstanceConfig(auto_offset_reset=reset))
    consumer.assignment = frozenset(assigned)
    return consumer


def values(fetched: list[tuple[str, int, Record]]) -> list[tuple[str, int, int, bytes | None]]:
    return [(t, p, r.offset, r.value) for t, p, r in fetched]


class ReadRecordsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.core = Core()

    def read(self, consumer: Any, committed: Any = None, **kw: int) -> Any:
        args = {"max_bytes": 10_000, "wait_ms": 0, "min_bytes": 1, **kw}
        return defer.Deferred.fromCoroutine(read_records(
            self.core, Instances(committed or {}), consumer, **args))  # type: ignore[arg-type]

    def test_positions_start_at_the_commit_else_at_the_reset(self) -> None:
        self.core.add("t", 0, [b"a", b"b", b"c"])
        self.core.add("t", 1, [b"x", b"y"], start=10)
        consumer = instance(("t", 0), ("t", 1))
        got = self.successResultOf(self.read(consumer, {("t", 0): (2, "")}))
        self.assertEqual(sorted(values(got)), [("t", 0, 2, b"c"), ("t", 1, 10, b"x"),
                                               ("t", 1, 11, b"y")])
        self.assertEqual(consumer.positions, {("t", 0): 3, ("t", 1): 12})
        self.assertEqual(consumer.uncommitted, consumer.positions)
        latest = instance(("t", 1), reset=OffsetReset.LATEST)
        self.assertEqual(self.successResultOf(self.read(latest)), [])
        self.assertEqual(latest.positions, {("t", 1): 12})

    def test_without_a_reset_a_partition_with_no_commit_is_an_error(self) -> None:
        self.core.add("t", 0, [b"a"])
        failure = self.failureResultOf(self.read(instance(("t", 0), reset=OffsetReset.NONE)))
        failure.trap(ProxyError)
        self.assertEqual(failure.value.error_code, 42206)

    def test_a_position_out_of_range_is_reset_and_an_unknown_partition_skipped(self) -> None:
        self.core.add("t", 0, [b"kept"], start=5)
        consumer = instance(("t", 0), ("gone", 0))
        consumer.positions[("t", 0)] = 1  # deleted by retention since
        got = self.successResultOf(self.read(consumer))
        self.assertEqual(values(got), [("t", 0, 5, b"kept")])
        self.assertNotIn(("gone", 0), consumer.positions)

    def test_the_budget_holds_but_at_least_one_record_is_answered(self) -> None:
        self.core.add("t", 0, [b"v" * 100, b"w" * 100, b"z"])
        consumer = instance(("t", 0))
        got = self.successResultOf(self.read(consumer, max_bytes=1))
        self.assertEqual(values(got), [("t", 0, 0, b"v" * 100)])
        got = self.successResultOf(self.read(consumer, max_bytes=100 + 2 * RECORD_OVERHEAD + 1))
        self.assertEqual([r[2] for r in values(got)], [1, 2])

    def test_partitions_are_read_in_turn(self) -> None:
        for p in range(3):
            self.core.add("t", p, [b"x" * 50] * 5)
        consumer = instance(("t", 0), ("t", 1), ("t", 2))
        firsts = []
        for _ in range(3):
            got = self.successResultOf(self.read(consumer, max_bytes=1))
            firsts.append(got[0][1])
        self.assertEqual(firsts, [0, 1, 2])

    def test_with_nothing_to_read_the_call_waits_for_data(self) -> None:
        self.core.add("t", 0, [])
        consumer = instance(("t", 0))
        d = self.read(consumer, wait_ms=500, min_bytes=0)
        self.assertNoResult(d)
        [(positions, kwargs)] = self.core.waits
        self.assertEqual(positions, [("t", 0, 0)])
        self.assertEqual((kwargs["min_bytes"], kwargs["max_wait_ms"]), (1, 500))
        self.core.logs[("t", 0)].append(Record(0, 0, None, b"late"))
        assert self.core.wait is not None
        self.core.wait.callback(None)
        self.assertEqual(values(self.successResultOf(d)), [("t", 0, 0, b"late")])


class ResetPositionTests(SynchronousTestCase):
    def test_earliest_and_latest(self) -> None:
        core = Core()
        core.add("t", 0, [b"a", b"b"], start=3)
        for reset, expected in ((OffsetReset.EARLIEST, 3), (OffsetReset.LATEST, 5)):
            d = defer.Deferred.fromCoroutine(reset_position(core, ("t", 0), reset))  # type: ignore[arg-type]
            self.assertEqual(self.successResultOf(d), expected)
