"""brokerd.core.producers: when a partition's producer snapshot is due, and writing the
due ones in one job (failures logged, not raised)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from twisted.internet import defer

from brokerd.core.producers import ProducerSnapshots, write_snapshots
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.producer_state import SnapshotEntry, read_snapshot

from tests.deferreds import result_of


class _Log:
    """A partition log's snapshot face: its path, producers and the snapshot taken."""

    def __init__(self, path: Path, end: int, producers: dict[int, SnapshotEntry]) -> None:
        self.path = str(path)
        self.end = end
        self.producers = producers

    def producer_snapshot(self) -> tuple[int, dict[int, SnapshotEntry], tuple[int, dict[int, int]]]:
        return self.end, self.producers, (self.end, {})


def _snapshots(log: _Log) -> ProducerSnapshots:
    return ProducerSnapshots(cast(PartitionLog, log))


def _run(f: Callable[..., Any], *args: Any) -> defer.Deferred[Any]:
    return defer.maybeDeferred(f, *args)


_ENTRY: SnapshotEntry = {"epoch": 0, "batches": [[0, 0, 0, 0]]}


def test_due_only_with_producers_and_a_moved_end(tmp_path: Path) -> None:
    empty = _snapshots(_Log(tmp_path, 5, {}))
    assert not empty.snapshot_due(5)
    some = _snapshots(_Log(tmp_path, 5, {7: _ENTRY}))
    assert some.snapshot_end == -1
    assert some.snapshot_due(5)
    some.snapshot_end = 5
    assert not some.snapshot_due(5)
    assert some.snapshot_due(6)


def test_write_snapshots_writes_files_and_records_the_end(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    due = [_snapshots(_Log(a, 3, {1: _ENTRY})), _snapshots(_Log(b, 9, {2: _ENTRY}))]
    result_of(write_snapshots(due, _run))
    assert [s.snapshot_end for s in due] == [3, 9]
    read_a = read_snapshot(str(a))
    assert read_a is not None and read_a[0] == 3 and set(read_a[1]) == {1}
    read_b = read_snapshot(str(b))
    assert read_b is not None and read_b[0] == 9 and set(read_b[1]) == {2}


def test_a_failed_write_is_not_raised_and_leaves_the_others(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.mkdir()
    missing = _snapshots(_Log(tmp_path / "missing", 4, {1: _ENTRY}))
    written = _snapshots(_Log(good, 4, {1: _ENTRY}))
    result_of(write_snapshots([missing, written], _run))
    assert missing.snapshot_end == -1
    assert written.snapshot_end == 4
    assert missing.snapshot_due(4)
