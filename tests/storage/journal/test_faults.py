"""The journal stores' fault handling (brokerd/storage/journal/faults.py) on real files, with
a fake clock and test doubles only for the failing disk: a write that fills the disk
mid-record, a truncate that fails, a failed fdatasync. Also the reopen poller
(brokerd/core/store_recovery.py) on a ``task.Clock``."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer, task

from brokerd.core.store_recovery import StoreRecovery
from brokerd.errors import StorageError
from brokerd.fsm import InvalidTransition
from brokerd.storage import fileio
from brokerd.storage.journal.faults import StoreFaults, StoreOffline, StoreState
from brokerd.storage.offline_backoff import (
    OFFLINE_RETRY_FIRST_SECONDS,
    OFFLINE_RETRY_MAX_SECONDS,
    RetrySchedule,
)
from brokerd.storage.stores.offsets import OffsetStore
from brokerd.storage.stores.txn_log import StoredTxn, TxnLog
from brokerd.storage.write_errors import WRITE_ERROR_LOG_SECONDS

FIRST = OFFLINE_RETRY_FIRST_SECONDS


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def store_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "brokerd.storage"]


def eio(*_: object) -> None:
    raise OSError(errno.EIO, "Input/output error")


def half_then_enospc(fd: int, data: bytes | bytearray | memoryview) -> None:
    """A disk that fills mid-record: half the bytes land, then ENOSPC."""
    view = memoryview(data)
    os.write(fd, view[: len(view) // 2])
    raise OSError(errno.ENOSPC, "No space left on device")


# -- the state machine and the backoff ------------------------------------------------


def test_backoff_doubles_up_to_the_maximum() -> None:
    schedule = RetrySchedule.first(100.0)
    assert (schedule.at, schedule.delay) == (100.0 + FIRST, FIRST)
    assert not schedule.due(100.0 + FIRST - 0.1) and schedule.due(100.0 + FIRST)
    delays = []
    for _ in range(10):
        schedule = schedule.after_failure(200.0)
        delays.append(schedule.delay)
    assert delays[:3] == [2 * FIRST, 4 * FIRST, 8 * FIRST]
    assert delays[-1] == OFFLINE_RETRY_MAX_SECONDS


def test_state_machine_transient_offline_reopen(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    faults = StoreFaults("test store", "/x", clock)
    faults.check_writable()
    faults.write_failed(OSError(errno.ENOSPC, "full"))
    assert faults.state is StoreState.ONLINE and faults.offline_reason is None
    faults.check_writable()  # a transient failure is not latched
    faults.lost_trust("fdatasync failed: EIO")
    assert faults.offline_reason == "fdatasync failed: EIO"
    with pytest.raises(StoreOffline, match="offline until it is reopened"):
        faults.check_writable()
    assert not faults.reopen_due()
    clock.now += FIRST
    assert faults.reopen_due()
    faults.reopen_failed(OSError(errno.EIO, "still broken"))
    assert not faults.reopen_due(clock.now + 2 * FIRST - 0.1)
    assert faults.reopen_due(clock.now + 2 * FIRST)
    faults.reopened()
    assert faults.state is StoreState.ONLINE and faults.next_reopen_at is None
    with pytest.raises(InvalidTransition):
        faults.reopened()  # not in the transition table
    faults.close()
    with pytest.raises(StorageError, match="closed"):
        faults.check_writable()


def test_fault_lines_are_rate_limited_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    faults = StoreFaults("test store", "/x", clock)
    for _ in range(50):
        faults.write_failed(OSError(errno.ENOSPC, "No space left on device"))
    assert len(store_lines(caplog)) == 1
    clock.now += WRITE_ERROR_LOG_SECONDS
    faults.write_failed(OSError(errno.ENOSPC, "No space left on device"))
    lines = store_lines(caplog)
    assert len(lines) == 2
    assert "49 more store errors not logged in the last 10 s" in lines[1]
    assert all(r.exc_info is None for r in caplog.records)  # no tracebacks


# -- the offsets store ----------------------------------------------------------------


def open_store(path: Path, clock: Callable[[], float]) -> OffsetStore:
    return OffsetStore.open(str(path), clock=clock)


def test_enospc_mid_record_fails_one_commit_and_the_next_starts_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    path = tmp_path / "offsets.log"
    store = open_store(path, clock)
    store.commit("g", [("t", 0, 1, 0, "a" * 300)])
    size = path.stat().st_size
    monkeypatch.setattr(fileio, "write_all", half_then_enospc)
    for _ in range(3):
        with pytest.raises(StorageError, match="No space left"):
            store.commit("g", [("t", 0, 2, 0, "b" * 300)])
        assert path.stat().st_size == size  # cut back to the last whole record
    monkeypatch.undo()
    assert store.journal.offline_reason is None
    assert store.fetch("g", "t", 0) == (1, 0, "a" * 300)
    store.commit("g", [("t", 0, 3, 0, None)])  # space returned: no restart needed
    store.close()
    again = open_store(path, clock)
    assert again.journal.truncated_bytes == 0  # nothing torn: the journal stayed whole
    assert again.fetch("g", "t", 0) == (3, 0, None)
    again.close()


def test_partial_record_that_cannot_be_cut_off_takes_the_store_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    path = tmp_path / "offsets.log"
    store = open_store(path, clock)
    store.commit("g", [("t", 0, 1, 0, None)])
    monkeypatch.setattr(fileio, "write_all", half_then_enospc)
    monkeypatch.setattr(os, "ftruncate", eio)
    with pytest.raises(StoreOffline, match="could not be cut off"):
        store.commit("g", [("t", 0, 2, 0, "x" * 100)])
    monkeypatch.undo()
    # Appending now would put records behind the torn one: refused until reopened.
    with pytest.raises(StoreOffline):
        store.commit("g", [("t", 0, 3, 0, None)])
    clock.now += FIRST
    assert store.retry_reopen()
    assert store.journal.truncated_bytes > 0  # the reopen's replay cut the torn record off
    store.commit("g", [("t", 0, 4, 0, None)])
    store.close()
    assert open_store(path, clock).fetch("g", "t", 0) == (4, 0, None)


def test_failed_fsync_goes_offline_and_reopens_from_disk_with_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    path = tmp_path / "offsets.log"
    store = open_store(path, clock)
    store.commit("g", [("t", 0, 1, 0, None)])
    monkeypatch.setattr(fileio, "datasync", eio)
    with pytest.raises(StoreOffline, match="fdatasync failed"):
        store.commit("g", [("t", 0, 2, 0, None)])
    monkeypatch.undo()
    assert "fdatasync failed" in (store.journal.offline_reason or "")
    for _ in range(20):
        with pytest.raises(StoreOffline):
            store.commit("g", [("t", 0, 3, 0, None)])
    assert store.fetch("g", "t", 0) == (1, 0, None)  # reads are still served
    assert not store.retry_reopen()  # not due yet
    clock.now += FIRST
    monkeypatch.setattr(os, "fsync", eio)  # the disk is still broken at the first try
    assert not store.retry_reopen()
    monkeypatch.undo()
    assert store.journal.offline_reason is not None
    clock.now += 2 * FIRST - 1
    assert not store.retry_reopen()  # the delay doubled
    clock.now += 1
    assert store.retry_reopen()
    assert store.journal.offline_reason is None
    store.commit("g", [("t", 0, 5, 0, None)])
    assert store.fetch("g", "t", 0) == (5, 0, None)
    # One line for the failure, the refusals within the window only counted.
    lines = store_lines(caplog)
    assert sum("back online" in line for line in lines) == 1
    assert len([line for line in lines if "back online" not in line]) <= 2, lines
    store.close()
    assert open_store(path, clock).fetch("g", "t", 0) == (5, 0, None)


# -- the transaction log --------------------------------------------------------------


def txn(epoch: int) -> StoredTxn:
    return StoredTxn("tid", 7, epoch, -1, -1, 60000, "Empty")


def test_txn_log_enospc_then_fsync_failure_and_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    path = tmp_path / "transactions.log"
    log = TxnLog.open(str(path), clock=clock)
    log.write(put=[txn(0)])
    monkeypatch.setattr(fileio, "write_all", half_then_enospc)
    with pytest.raises(StorageError, match="No space left"):
        log.write(put=[txn(1)])
    monkeypatch.undo()
    log.write(put=[txn(2)])  # not latched
    monkeypatch.setattr(fileio, "datasync", eio)
    with pytest.raises(StoreOffline):
        log.write(put=[txn(3)])
    monkeypatch.undo()
    with pytest.raises(StoreOffline):
        log.write(put=[txn(4)])
    assert log.transactions()["tid"].producer_epoch == 2
    clock.now += FIRST
    assert log.retry_reopen()
    log.write(put=[txn(5)])
    log.close()
    again = TxnLog.open(str(path), clock=clock)
    assert again.journal.truncated_bytes == 0
    assert again.transactions()["tid"].producer_epoch == 5
    again.close()


# -- the reopen poller ----------------------------------------------------------------


def test_store_recovery_polls_offline_stores_and_reports_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = task.Clock()
    clock.advance(1000)
    offsets = OffsetStore.open(str(tmp_path / "offsets.log"), clock=clock.seconds)
    txns = TxnLog.open(str(tmp_path / "transactions.log"), clock=clock.seconds)
    calls: list[str] = []

    def run_blocking(f: Callable[..., Any], *args: Any) -> defer.Deferred[Any]:
        calls.append(f.__qualname__)
        return defer.maybeDeferred(f, *args)

    recovery = StoreRecovery([offsets, txns], clock=clock, run_blocking=run_blocking)
    recovery.startService()
    try:
        clock.advance(FIRST)
        assert calls == [] and recovery.problems() == []  # nothing offline: no work
        monkeypatch.setattr(fileio, "datasync", eio)
        with pytest.raises(StoreOffline):
            offsets.commit("g", [("t", 0, 1, 0, None)])
        monkeypatch.undo()
        (line,) = recovery.problems()
        assert line.startswith("consumer offsets store offline (reopening from disk)")
        clock.advance(FIRST)
        assert calls == ["OffsetStore.retry_reopen"]
        assert recovery.problems() == []
        offsets.commit("g", [("t", 0, 2, 0, None)])
        assert offsets.fetch("g", "t", 0) == (2, 0, None)
    finally:
        recovery.stopService()
        offsets.close()
        txns.close()


def test_no_traceback_for_store_faults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store = open_store(tmp_path / "offsets.log", FakeClock())
    monkeypatch.setattr(fileio, "write_all", half_then_enospc)
    for _ in range(5):
        with pytest.raises(StorageError):
            store.commit("g", [("t", 0, 1, 0, None)])
    assert not any(r.exc_info for r in caplog.records)
    store.close()


def test_metrics_show_an_offline_store_and_its_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prometheus_client import CollectorRegistry

    from brokerd.metrics.collectors import StoresCollector

    clock = FakeClock()
    offsets = open_store(tmp_path / "offsets.log", clock)
    txns = TxnLog.open(str(tmp_path / "transactions.log"), clock=clock)
    registry = CollectorRegistry()
    registry.register(StoresCollector([offsets, txns]))

    def value(name: str, store: str) -> float | None:
        return registry.get_sample_value(name, {"store": store})

    monkeypatch.setattr(fileio, "datasync", eio)
    with pytest.raises(StoreOffline):
        offsets.commit("g", [("t", 0, 1, 0, None)])
    with pytest.raises(StoreOffline):
        offsets.commit("g", [("t", 0, 1, 0, None)])
    monkeypatch.undo()
    assert value("brokerd_store_offline", "consumer offsets store") == 1
    assert value("brokerd_store_offline", "transaction log") == 0
    assert value("brokerd_store_write_errors_total", "consumer offsets store") == 2
    clock.now += FIRST
    assert offsets.retry_reopen()
    assert value("brokerd_store_offline", "consumer offsets store") == 0
    offsets.close()
    txns.close()
