"""ShareService on a task.Clock with an in-memory log: reads, skips, locks, durability."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet import defer, task

from brokerd.core.share.partition import AckBatch, AcquiredRange
from brokerd.core.share.service import ShareService, spans_of
from brokerd.core.share.states import AckType
from brokerd.storage.record.control import encode_marker
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import stamp_base_offset
from brokerd.storage.stores.share_state import ShareStateStore
from brokerd.storage.types import AbortedTxn, LogRead, PartitionOffsets, ReadSpec


def batch(base: int, n: int, **kw: Any) -> bytes:
    data = bytearray(encode_batch([b"v%d" % (base + i) for i in range(n)], timestamp_ms=0, **kw))
    stamp_base_offset(data, 0, base)
    return bytes(data)


class FakeCore:
    """A log of whole batches; reads return every batch from the one holding the offset."""

    def __init__(self, clock: task.Clock) -> None:
        self.clock = clock
        self.batches: list[tuple[int, int, bytes]] = []
        self.aborted: tuple[AbortedTxn, ...] = ()

    def add(self, base: int, data: bytes, count: int) -> None:
        self.batches.append((base, base + count - 1, data))

    @property
    def end(self) -> int:
        return self.batches[-1][1] + 1 if self.batches else 0

    def offsets(self, topic: str, partition: int) -> defer.Deferred[PartitionOffsets]:
        return defer.succeed(PartitionOffsets(0, self.end, self.end))

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec
    ) -> defer.Deferred[LogRead]:
        data = b"".join(d for _, last, d in self.batches if last >= offset)
        return defer.succeed(LogRead(data, self.end, 0, self.end, self.aborted))

    def run_write(self, f: Callable[..., Any], /, *args: Any, **kwargs: Any) -> defer.Deferred[Any]:
        return defer.maybeDeferred(f, *args, **kwargs)

    def wait_for_data(self, positions: Any, *, min_bytes: int, max_wait_ms: int,
                      already: int = 0, seen: Any = None) -> defer.Deferred[None]:
        return task.deferLater(self.clock, max_wait_ms / 1000.0, lambda: None)


def result(d: Any) -> Any:
    out: list[Any] = []
    deferred = d if isinstance(d, defer.Deferred) else defer.ensureDeferred(d)
    deferred.addBoth(out.append)
    assert out, "not fired"
    return out[0]


def service(tmp_path: Path) -> tuple[ShareService, FakeCore, task.Clock, ShareStateStore]:
    clock = task.Clock()
    core = FakeCore(clock)
    store = ShareStateStore.open(str(tmp_path))
    svc = ShareService(core, store, clock=clock)
    result(svc.set_overrides("g", {"share.auto.offset.reset": "earliest"}))
    return svc, core, clock, store


def test_acquire_answers_the_batches_holding_the_ranges(tmp_path: Path) -> None:
    svc, core, _clock, store = service(tmp_path)
    core.add(0, batch(0, 3), 3)
    core.add(3, batch(3, 3), 3)
    got = result(svc.acquire("g", "t", 0, "m", max_records=2))
    assert got.ranges == (AcquiredRange(0, 1, 1),)
    assert got.records == batch(0, 3)
    got = result(svc.acquire("g", "t", 0, "n", max_records=10))
    assert got.ranges == (AcquiredRange(2, 5, 1),)
    assert got.records == batch(0, 3) + batch(3, 3)
    store.close()


def test_control_and_aborted_batches_are_archived_not_delivered(tmp_path: Path) -> None:
    svc, core, _clock, store = service(tmp_path)
    core.add(0, batch(0, 2, producer_id=7, producer_epoch=0, base_sequence=0,
                      transactional=True), 2)
    marker = bytearray(encode_marker(7, 0, commit=False, coordinator_epoch=0, timestamp_ms=0))
    stamp_base_offset(marker, 0, 2)
    core.add(2, bytes(marker), 1)
    core.add(3, batch(3, 1), 1)
    core.aborted = (AbortedTxn(7, 0),)
    spans, _ = spans_of(b"".join(d for _, _, d in core.batches), [(7, 0)])
    assert [s.skip for s in spans] == [True, True, False]
    got = result(svc.acquire("g", "t", 0, "m", max_records=10))
    assert got.ranges == (AcquiredRange(3, 3, 1),)
    assert svc.describe("g")[("t", 0)].archived == 3
    store.close()


def test_locks_expire_on_the_clock_and_state_survives_a_restart(tmp_path: Path) -> None:
    svc, core, clock, store = service(tmp_path)
    svc.start()
    core.add(0, batch(0, 4), 4)
    result(svc.acquire("g", "t", 0, "m", max_records=4))
    result(svc.acknowledge("g", "t", 0, "m", [AckBatch(0, 0, (AckType.ACCEPT,))]))
    clock.advance(31)
    summary = svc.describe("g")[("t", 0)]
    assert summary.start_offset == 1 and summary.available == 3
    got = result(svc.acquire("g", "t", 0, "n", max_records=1))
    assert got.ranges == (AcquiredRange(1, 1, 2),)
    svc.stop()
    # As after a crash: the journal is read again; 1 was acquired, so it is available.
    again = ShareService(core, ShareStateStore.open(str(tmp_path)), clock=clock)
    got = result(again.acquire("g", "t", 0, "z", max_records=10))
    assert got.ranges == (AcquiredRange(1, 1, 3), AcquiredRange(2, 3, 2))
    store.close()


def test_acquire_many_waits_then_answers_empty(tmp_path: Path) -> None:
    svc, _core, clock, store = service(tmp_path)
    d = svc.acquire_many("g", "m", [("t", 0)], max_records=5, max_bytes=1 << 20,
                         min_bytes=1, max_wait_ms=500)
    out: list[Any] = []
    d.addBoth(out.append)
    assert not out
    for _ in range(6):
        clock.advance(0.1)
    assert out and out[0][0].ranges == ()
    store.close()
