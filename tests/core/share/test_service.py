"""ShareService on a task.Clock with an in-memory log: reads, skips, locks, durability."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer, task
from twisted.python.failure import Failure

from brokerd.core.share.partition import AckBatch, AcquiredRange, InFlightRange, SharePartition
from brokerd.core.share.service import (
    READ_AHEAD_SECONDS,
    AcquireResult,
    FetchResult,
    ShareService,
    spans_of,
)
from brokerd.core.share.states import AckType, RecordState
from brokerd.errors import StorageError
from brokerd.storage import fileio
from brokerd.storage.record.control import encode_marker
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import stamp_base_offset
from brokerd.storage.stores.share_state import ShareStateStore
from brokerd.storage.types import AbortedTxn, LogRead

from tests.deferreds import outcome_of, watch
from tests.fake_core import BatchLogCore


def batch(base: int, n: int, **kw: Any) -> bytes:
    data = bytearray(encode_batch([b"v%d" % (base + i) for i in range(n)], timestamp_ms=0, **kw))
    stamp_base_offset(data, 0, base)
    return bytes(data)


def acquire_many(
    svc: ShareService, group: str, member: str, partitions: list[tuple[str, int]], **kw: Any
) -> defer.Deferred[list[AcquireResult]]:
    """A share fetch without acknowledgements: what it acquired."""

    def results(fetched: FetchResult) -> list[AcquireResult]:
        assert fetched.refused is None
        return fetched.results

    return svc.fetch(group, member, (), partitions, **kw).addCallback(results)


def service(tmp_path: Path) -> tuple[ShareService, BatchLogCore, task.Clock, ShareStateStore]:
    clock = task.Clock()
    core = BatchLogCore(clock)
    store = ShareStateStore.open(str(tmp_path))
    svc = ShareService(core, store, run_write=core.run_write, clock=clock)
    outcome_of(svc.set_overrides("g", {"share.auto.offset.reset": "earliest"}))
    return svc, core, clock, store


def test_acquire_answers_the_batches_holding_the_ranges(tmp_path: Path) -> None:
    svc, core, _clock, store = service(tmp_path)
    core.add(0, batch(0, 3), 3)
    core.add(3, batch(3, 3), 3)
    got = outcome_of(svc.acquire("g", "t", 0, "m", max_records=2))
    assert got.ranges == (AcquiredRange(0, 1, 1),)
    assert got.records == batch(0, 3)
    got = outcome_of(svc.acquire("g", "t", 0, "n", max_records=10))
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
    core.aborted_txns = (AbortedTxn(7, 0),)
    spans, _ = spans_of(b"".join(d for _, _, d in core.batches), [(7, 0)])
    assert [s.skip for s in spans] == [True, True, False]
    got = outcome_of(svc.acquire("g", "t", 0, "m", max_records=10))
    assert got.ranges == (AcquiredRange(3, 3, 1),)
    assert svc.describe("g")[("t", 0)].archived == 3
    store.close()


def test_locks_expire_on_the_clock_and_state_survives_a_restart(tmp_path: Path) -> None:
    svc, core, clock, store = service(tmp_path)
    svc.start()
    core.add(0, batch(0, 4), 4)
    outcome_of(svc.acquire("g", "t", 0, "m", max_records=4))
    outcome_of(svc.acknowledge("g", "t", 0, "m", [AckBatch(0, 0, (AckType.ACCEPT,))]))
    clock.advance(31)
    summary = svc.describe("g")[("t", 0)]
    assert summary.start_offset == 1 and summary.available == 3
    got = outcome_of(svc.acquire("g", "t", 0, "n", max_records=1))
    assert got.ranges == (AcquiredRange(1, 1, 2),)
    svc.stop()
    # As after a crash: the journal is read again; 1 was acquired, so it is available.
    again = ShareService(
        core, ShareStateStore.open(str(tmp_path)), run_write=core.run_write, clock=clock
    )
    got = outcome_of(again.acquire("g", "t", 0, "z", max_records=10))
    assert got.ranges == (AcquiredRange(1, 1, 3), AcquiredRange(2, 3, 2))
    store.close()


def test_acquire_many_waits_then_answers_empty(tmp_path: Path) -> None:
    svc, _core, clock, store = service(tmp_path)
    out = watch(acquire_many(svc, "g", "m", [("t", 0)], max_records=5, max_bytes=1 << 20,
                                 min_bytes=1, max_wait_ms=500))
    assert not out
    for _ in range(6):
        clock.advance(0.1)
    assert out and out[0][0].ranges == ()
    store.close()


# -- one journal write per request, and wake-ups ---------------------------------------


def counting_syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the journal's fdatasyncs."""
    calls: list[int] = []
    datasync = fileio.datasync

    def counted(fd: int) -> None:
        calls.append(fd)
        datasync(fd)

    monkeypatch.setattr(fileio, "datasync", counted)
    return calls


def test_a_fetch_over_partitions_is_one_journal_write_acknowledgements_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, core, _clock, store = service(tmp_path)
    core.add(0, batch(0, 4), 4)
    partitions = [("t", 0), ("t", 1), ("u", 0)]
    first = outcome_of(acquire_many(svc, "g", "m", partitions, max_records=6, max_bytes=1 << 20,
                                    min_bytes=1, max_wait_ms=0))
    assert [r.ranges for r in first] == [
        (AcquiredRange(0, 3, 1),), (AcquiredRange(0, 1, 1),), (),
    ]
    writes = counting_syncs(monkeypatch)
    fetched = outcome_of(svc.fetch(
        "g", "m",
        [("t", 0, [AckBatch(0, 3, (AckType.ACCEPT,))]),
         ("t", 1, [AckBatch(0, 1, (AckType.RELEASE,))]),
         ("u", 0, [AckBatch(0, 0, (AckType.ACCEPT,))])],
        partitions, max_records=10, max_bytes=1 << 20, min_bytes=1, max_wait_ms=0,
    ))
    assert len(writes) == 1
    assert fetched.acknowledged[:2] == (None, None)
    assert isinstance(fetched.acknowledged[2], Exception)  # u-0 holds nothing of m's
    # The released records come back in the same fetch, delivered a second time.
    assert [r.ranges for r in fetched.results] == [
        (), (AcquiredRange(0, 1, 2), AcquiredRange(2, 3, 1)), (AcquiredRange(0, 3, 1),),
    ]
    as_journal_holds(svc, tmp_path)
    assert outcome_of(svc.acknowledge_many("g", "m", [
        ("t", 1, [AckBatch(0, 3, (AckType.ACCEPT,))]),
        ("u", 0, [AckBatch(0, 3, (AckType.ACCEPT,))]),
    ])) == (None, None)
    assert len(writes) == 2
    as_journal_holds(svc, tmp_path)
    store.close()


def test_concurrent_fetches_share_a_write_and_none_waits_for_anothers_sync(
    tmp_path: Path,
) -> None:
    svc, core, _clock, store = service(tmp_path)
    core.add(0, batch(0, 9), 9)
    outcome_of(svc.acquire("g", "t", 0, "m", max_records=0))  # initialised, nothing taken
    held = core.held_writes = []
    fetches = [
        acquire_many(svc, "g", member, [("t", 0)], max_records=3, max_bytes=1 << 20,
                         min_bytes=1, max_wait_ms=0)
        for member in ("a", "b", "c")
    ]
    # The first is syncing; the other two acquired meanwhile and wait for the next write.
    assert len(held) == 1
    d, write = held.pop()
    defer.maybeDeferred(write).chainDeferred(d)
    assert len(held) == 1
    d, write = held.pop()
    defer.maybeDeferred(write).chainDeferred(d)
    assert [outcome_of(f)[0].ranges for f in fetches] == [
        (AcquiredRange(0, 2, 1),), (AcquiredRange(3, 5, 1),), (AcquiredRange(6, 8, 1),),
    ]
    as_journal_holds(svc, tmp_path)
    store.close()


def parked(svc: ShareService, member: str, wait_ms: int = 60_000) -> list[Any]:
    out = watch(acquire_many(svc, "g", member, [("t", 0)], max_records=10, max_bytes=1 << 20,
                                 min_bytes=1, max_wait_ms=wait_ms))
    assert not out, "nothing to acquire: it waits"
    return out


def test_released_and_rejected_records_wake_a_parked_fetch_at_once(tmp_path: Path) -> None:
    svc, core, _clock, store = service(tmp_path)
    core.add(0, batch(0, 4), 4)
    outcome_of(svc.acquire("g", "t", 0, "m", max_records=4))
    waiting = parked(svc, "n")
    # A rejection frees nothing to acquire, but the window moves: the fetch looks again
    # and, finding nothing, parks again.
    outcome_of(svc.acknowledge("g", "t", 0, "m", [AckBatch(0, 0, (AckType.REJECT,))]))
    assert not waiting
    outcome_of(svc.acknowledge("g", "t", 0, "m", [AckBatch(1, 2, (AckType.RELEASE,))]))
    assert waiting and waiting[0][0].ranges == (AcquiredRange(1, 2, 2),)
    # A member leaving gives back what it holds, to whoever waits.
    waiting = parked(svc, "n2")
    outcome_of(svc.release_member("g", "m"))
    assert waiting and waiting[0][0].ranges == (AcquiredRange(3, 3, 2),)
    as_journal_holds(svc, tmp_path)
    store.close()


def test_an_expired_lock_wakes_a_parked_fetch(tmp_path: Path) -> None:
    svc, core, clock, store = service(tmp_path)
    svc.start()
    core.add(0, batch(0, 2), 2)
    outcome_of(svc.acquire("g", "t", 0, "m", max_records=2))
    waiting = parked(svc, "n")
    clock.advance(29)
    assert not waiting
    clock.advance(1.5)  # the 30 s lock runs out: the waiting fetch gets the records now
    assert waiting and waiting[0][0].ranges == (AcquiredRange(0, 1, 2),)
    svc.stop()
    store.close()


def test_an_acceptance_under_the_lock_limit_wakes_a_parked_fetch(tmp_path: Path) -> None:
    svc, core, _clock, store = service(tmp_path)
    outcome_of(svc.set_overrides("g", {"share.auto.offset.reset": "earliest",
                                   "share.partition.max.record.locks": "100"}))
    core.add(0, batch(0, 150), 150)
    assert outcome_of(svc.acquire("g", "t", 0, "m", max_records=150)).ranges == (
        AcquiredRange(0, 99, 1),
    )
    waiting = parked(svc, "n")  # every lock is taken
    outcome_of(svc.acknowledge("g", "t", 0, "m", [AckBatch(0, 9, (AckType.ACCEPT,))]))
    assert waiting and waiting[0][0].ranges == (AcquiredRange(100, 109, 1),)
    store.close()


# -- a journal that fails ---------------------------------------------------------------


class StoreClock:
    """The journal's clock for its reopen backoff."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def eio(*_: object) -> None:
    raise OSError(errno.EIO, "Input/output error")


def as_journal_holds(svc: ShareService, path: Path) -> None:
    """Memory agrees with the journal file: each share-partition's start, end and
    records' states and delivery counts. A lock is memory's alone (a restart makes an
    acquired record available), so acquired and available compare equal."""
    unlocked = {int(RecordState.ACQUIRED.value): int(RecordState.AVAILABLE.value)}
    fresh = ShareStateStore.open(str(path))
    try:
        on_disk = {
            key: (s.start, s.end, {
                o: (unlocked.get(state, state), count) for o, (state, count) in s.entries.items()
            })
            for key, s in fresh.partitions().items()
        }
    finally:
        fresh.close()
    in_memory = {
        (g, t, p): (part.start, part.end, {
            o: (unlocked.get(int(e.state.value), int(e.state.value)), e.delivery_count)
            for o, e in per_offset(part).items()
        })
        for g in svc.engine.groups()
        for (t, p), part in svc.engine.partitions(g).items()
    }
    assert in_memory == on_disk


def failing_service(
    tmp_path: Path,
) -> tuple[ShareService, BatchLogCore, ShareStateStore, StoreClock]:
    clock = task.Clock()
    core = BatchLogCore(clock)
    store_clock = StoreClock()
    store = ShareStateStore.open(str(tmp_path), clock=store_clock)
    svc = ShareService(core, store, run_write=core.run_write, clock=clock)
    outcome_of(svc.set_overrides("g", {"share.auto.offset.reset": "earliest"}))
    core.add(0, batch(0, 4), 4)
    return svc, core, store, store_clock


def test_a_failed_acknowledgement_is_undone_and_the_rest_stays_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, _core, store, store_clock = failing_service(tmp_path)
    assert outcome_of(svc.acquire("g", "t", 0, "m", max_records=4)).ranges == (
        AcquiredRange(0, 3, 1),
    )
    monkeypatch.setattr(fileio, "datasync", eio)
    failed = outcome_of(svc.acknowledge("g", "t", 0, "m", [AckBatch(0, 1, (AckType.ACCEPT,))]))
    monkeypatch.undo()
    assert isinstance(failed, Failure) and failed.check(StorageError)
    # The accept did not happen: 0-1 are back with the group (as after a restart), while
    # 2-3, whose acquisition the journal holds, stay with m under their lock.
    part = svc.engine.partition("g", "t", 0)
    assert part is not None
    assert {o: (e.state, e.member) for o, e in per_offset(part).items()} == {
        0: (RecordState.AVAILABLE, None), 1: (RecordState.AVAILABLE, None),
        2: (RecordState.ACQUIRED, "m"), 3: (RecordState.ACQUIRED, "m"),
    }
    # While the journal is offline nothing is handed out that it could not record.
    refused = outcome_of(svc.acquire("g", "t", 0, "n", max_records=4))
    assert isinstance(refused.error, StorageError) and refused.ranges == ()
    store_clock.now += 3600
    assert store.retry_reopen()
    # The file kept the accept whose fdatasync failed (its bytes were written); the
    # first write after the reopen brings memory to what the file says.
    outcome_of(svc.acknowledge("g", "t", 0, "m", [AckBatch(2, 3, (AckType.ACCEPT,))]))
    as_journal_holds(svc, tmp_path)
    got = outcome_of(svc.acquire("g", "t", 0, "n", max_records=4))
    assert got.error is None
    as_journal_holds(svc, tmp_path)
    store.close()


def test_writes_queued_behind_a_failed_one_fail_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, core, store, _store_clock = failing_service(tmp_path)
    outcome_of(svc.acquire("g", "t", 0, "m", max_records=2))
    outcome_of(svc.acquire("g", "t", 0, "n", max_records=2))
    held = core.held_writes = []
    first = defer.ensureDeferred(
        svc.acknowledge("g", "t", 0, "m", [AckBatch(0, 1, (AckType.ACCEPT,))])
    )
    second = defer.ensureDeferred(
        svc.acknowledge("g", "t", 0, "n", [AckBatch(2, 3, (AckType.REJECT,))])
    )
    assert len(held) == 1  # the second waits for the first (group commit)
    d, write = held.pop()
    monkeypatch.setattr(fileio, "datasync", eio)
    defer.maybeDeferred(write).chainDeferred(d)  # the write runs, on a failing disk
    monkeypatch.undo()
    assert isinstance(outcome_of(first), Failure) and isinstance(outcome_of(second), Failure)
    assert not held  # the second's records were made on the discarded state: not written
    part = svc.engine.partition("g", "t", 0)
    assert part is not None
    # Neither verdict happened: the four records are back with the group, none archived.
    # (The operators' totals are counters: they carry over, undone reject included.)
    assert {o: (e.state, e.delivery_count) for o, e in per_offset(part).items()} == {
        o: (RecordState.AVAILABLE, 1) for o in range(4)
    }
    as_journal_holds(svc, tmp_path)
    store.close()


def test_a_deleted_topic_takes_every_groups_share_partitions_with_it(tmp_path: Path) -> None:
    svc, core, _clock, store = service(tmp_path)
    outcome_of(svc.set_overrides("h", {"share.auto.offset.reset": "earliest"}))
    core.add(0, batch(0, 2), 2)
    for group in ("g", "h"):
        for topic in ("t", "u"):
            assert outcome_of(svc.acquire(group, topic, 0, "m", max_records=1)).ranges
    svc.forget_topic("t")
    assert {g: sorted(svc.engine.partitions(g)) for g in ("g", "h")} == {
        "g": [("u", 0)], "h": [("u", 0)],
    }
    as_journal_holds(svc, tmp_path)
    store.close()


def test_by_duration_starts_at_the_first_record_of_the_duration(tmp_path: Path) -> None:
    svc, core, clock, store = service(tmp_path)
    for base, seconds in ((0, 1000), (3, 5000), (6, 9000)):
        core.add(base, batch(base, 3), 3, timestamp_ms=seconds * 1000)
    clock.advance(10_000)
    # Within the last 6,000 s: the batches of 5,000 s and 9,000 s.
    outcome_of(svc.set_overrides("recent", {"share.auto.offset.reset": "by_duration:PT6000S"}))
    got = outcome_of(svc.acquire("recent", "t", 0, "m", max_records=100))
    assert got.ranges == (AcquiredRange(3, 8, 1),)
    # Longer than the log: from its start. Shorter than its newest record: from its end,
    # so only what is produced next is delivered.
    outcome_of(svc.set_overrides("all", {"share.auto.offset.reset": "by_duration:P1D"}))
    assert outcome_of(svc.acquire("all", "t", 0, "m", max_records=100)).ranges == (
        AcquiredRange(0, 8, 1),
    )
    outcome_of(svc.set_overrides("new", {"share.auto.offset.reset": "by_duration:PT10S"}))
    assert outcome_of(svc.acquire("new", "t", 0, "m", max_records=100)).ranges == ()
    core.add(9, batch(9, 1), 1, timestamp_ms=10_000_000)
    assert outcome_of(svc.acquire("new", "t", 0, "m", max_records=100)).ranges == (
        AcquiredRange(9, 9, 1),
    )
    # The start is durable: a restart does not place the share-partition again.
    store.close()
    store = ShareStateStore.open(str(tmp_path))
    again = ShareService(core, store, run_write=core.run_write, clock=clock)
    assert again.engine.partition("new", "t", 0) is not None
    assert again.engine.partition("new", "t", 0).start == 9  # type: ignore[union-attr]
    store.close()


def test_isolation_is_read_uncommitted_unless_the_group_says_otherwise(tmp_path: Path) -> None:
    svc, core, _clock, store = service(tmp_path)  # group g: Kafka's default isolation
    core.add(0, batch(0, 2), 2)
    core.add(2, batch(2, 3, producer_id=7, producer_epoch=0, base_sequence=0,
                      transactional=True), 3)
    core.stable_offset = 2  # the transaction of 2-4 is still open
    assert outcome_of(svc.acquire("g", "t", 0, "m", max_records=10)).ranges == (
        AcquiredRange(0, 4, 1),
    )
    outcome_of(svc.set_overrides("c", {"share.auto.offset.reset": "earliest",
                                   "share.isolation.level": "read_committed"}))
    assert outcome_of(svc.acquire("c", "t", 0, "m", max_records=10)).ranges == (
        AcquiredRange(0, 1, 1),
    )
    store.close()


def per_offset(part: SharePartition) -> dict[int, InFlightRange]:
    """The window's runs by offset."""
    return {o: r for r in part.ranges for o in range(r.first, r.last + 1)}


def test_one_log_read_serves_the_next_fetches_until_it_is_old(tmp_path: Path) -> None:
    """A share read reads ahead; the partition's next fetches take their batches from
    what it read (from inside a batch too, when the last fetch took part of it), until
    the read is READ_AHEAD_SECONDS old or its topic is deleted."""
    svc, core, clock, store = service(tmp_path)
    for base in range(0, 12, 3):
        core.add(base, batch(base, 3), 3)
    reads: list[int] = []
    read = core.read

    def counted(*args: Any) -> defer.Deferred[LogRead]:
        reads.append(args[2])
        return read(*args)

    core.read = counted  # type: ignore[method-assign]
    got = outcome_of(svc.acquire("g", "t", 0, "m", max_records=3))
    assert (got.ranges, got.records) == ((AcquiredRange(0, 2, 1),), batch(0, 3))
    got = outcome_of(svc.acquire("g", "t", 0, "n", max_records=2))
    assert (got.ranges, got.records) == ((AcquiredRange(3, 4, 1),), batch(3, 3))
    got = outcome_of(svc.acquire("g", "t", 0, "m", max_records=4))
    assert got.ranges == (AcquiredRange(5, 8, 1),)
    assert got.records == batch(3, 3) + batch(6, 3)
    assert reads == [0]
    clock.advance(READ_AHEAD_SECONDS + 0.1)
    got = outcome_of(svc.acquire("g", "t", 0, "n", max_records=1))
    assert (got.ranges, got.records) == ((AcquiredRange(9, 9, 1),), batch(9, 3))
    assert reads == [0, 9]
    svc.forget_topic("t")
    assert not svc._ahead
    store.close()


def test_a_fetch_overtaken_by_another_reads_again_at_once(tmp_path: Path) -> None:
    """Two fetches read the same batch; the one whose acquisition comes second finds it
    taken and, locks being free, reads again at once (the next batch) instead of
    waiting out its MaxWait."""
    svc, core, _clock, store = service(tmp_path)
    for base in range(0, 9, 3):
        core.add(base, batch(base, 3), 3)
    held: list[tuple[defer.Deferred[LogRead], tuple[Any, ...]]] = []
    read = core.read

    def slow(*args: Any) -> defer.Deferred[LogRead]:
        d: defer.Deferred[LogRead] = defer.Deferred()
        held.append((d, args))
        return d

    core.read = slow  # type: ignore[method-assign]
    # MaxBytes 1: each fetch is given one whole batch.
    one = svc.fetch("g", "m", (), [("t", 0)], max_records=1, max_bytes=1,
                    min_bytes=1, max_wait_ms=500, whole_batches=True)
    two = svc.fetch("g", "n", (), [("t", 0)], max_records=1, max_bytes=1,
                    min_bytes=1, max_wait_ms=500, whole_batches=True)
    assert len(held) == 2
    core.read = read  # type: ignore[method-assign]
    for d, args in held:
        read(*args).chainDeferred(d)
    first, second = outcome_of(one), outcome_of(two)
    assert first.results[0].ranges == (AcquiredRange(0, 2, 1),)
    assert second.results[0].ranges == (AcquiredRange(3, 5, 1),)
    assert second.results[0].records == batch(3, 3)
    store.close()
