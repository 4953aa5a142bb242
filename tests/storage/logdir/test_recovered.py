"""The sync of what crash recovery validated: until a partition's recovered segments
are synced its durable point is the one it was recovered from; a failed sync keeps it
so; a reopened partition is synced again."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.logdir import recovered
from brokerd.storage.logdir.directory_state import DirectoryState
from brokerd.storage.logdir.recovered import RecoveredSync


def recovered_log(name: str, *, from_point: int | None, point: int, unsynced: int | None) -> Any:
    """A partition log as recovery leaves it (only what the sync reads)."""
    return SimpleNamespace(
        path=name,
        segments=[name],
        recovery_point=point,
        recovery=SimpleNamespace(unsynced_from=unsynced, recovery_point=from_point),
    )


@pytest.fixture
def state(tmp_path: Path) -> DirectoryState:
    return DirectoryState(
        str(tmp_path), LogConfig(), auto_create=False, default_partitions=1, clock=time.time
    )


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []

    def sync(segments: list[str], unsynced_from: int) -> None:
        if segments == ["bad"]:
            raise OSError(5, "Input/output error")
        calls.append((segments[0], unsynced_from))

    monkeypatch.setattr(recovered, "sync_recovered", sync)
    return calls


def test_the_durable_point_holds_until_the_sync(state: DirectoryState, synced: list[Any]) -> None:
    dirty = recovered_log("a", from_point=10, point=50, unsynced=10)
    clean = recovered_log("b", from_point=None, point=30, unsynced=None)
    state.put_online(("a", 0), dirty)
    state.put_online(("b", 0), clean)
    sync = RecoveredSync(state)
    assert sync.unsynced_partitions() == 1
    assert sync.durable_point(("a", 0), dirty) == 10
    assert sync.durable_point(("b", 0), clean) == 30
    assert sync.sync()
    assert synced == [("a", 10)]
    assert sync.unsynced_partitions() == 0
    assert sync.durable_point(("a", 0), dirty) == 50
    assert sync.sync() and synced == [("a", 10)]  # nothing twice


def test_a_failed_sync_keeps_the_old_point(state: DirectoryState, synced: list[Any]) -> None:
    bad = recovered_log("bad", from_point=None, point=50, unsynced=0)
    state.put_online(("bad", 0), bad)
    sync = RecoveredSync(state)
    assert not sync.sync()
    assert sync.durable_point(("bad", 0), bad) == 0
    assert sync.unsynced_partitions() == 1


def test_a_reopened_partition_is_synced_again(state: DirectoryState, synced: list[Any]) -> None:
    first = recovered_log("a", from_point=5, point=9, unsynced=5)
    state.put_online(("a", 0), first)
    sync = RecoveredSync(state)
    assert sync.sync()
    again = recovered_log("a", from_point=7, point=9, unsynced=7)
    state.put_online(("a", 0), again)
    assert sync.durable_point(("a", 0), again) == 7
    assert sync.sync()
    assert synced == [("a", 5), ("a", 7)]


def test_without_wait_a_running_pass_is_left_to_finish(
    state: DirectoryState, synced: list[Any]
) -> None:
    state.put_online(("a", 0), recovered_log("a", from_point=0, point=9, unsynced=0))
    sync = RecoveredSync(state)
    with sync.lock:
        other = threading.Thread(target=lambda: result.append(sync.sync(wait=False)))
        result: list[bool] = []
        other.start()
        other.join(10)
    assert result == [True] and synced == []
    assert sync.unsynced_partitions() == 1
