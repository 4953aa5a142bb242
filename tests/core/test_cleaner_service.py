"""brokerd.core.cleaner_service: which partition a pass cleans (compacted, due, the
filthiest first), the checkpoints it keeps, its counters, and its threads' start and
stop (real partition logs in tmp_path; the pass itself is
tests/storage/cleaner/test_compactor.py's)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from brokerd.core.cleaner_service import CleanerService, CleanerSettings
from brokerd.storage.cleaner.compactor import read_checkpoint
from brokerd.storage.log.partition_log import PartitionLog

from tests.compaction_helpers import T0, compact_config, open_log, read_all, roll, write_overwrites


class _NoReactor:
    def callFromThread(self, f: Any, *a: Any, **kw: Any) -> None:
        f(*a, **kw)


def test_service_picks_due_partitions_and_checkpoints(tmp_path: Path) -> None:
    now = [T0 / 1000.0]

    class Dir:
        path = str(tmp_path)

        def __init__(self) -> None:
            self.map = {
                ("t", 0): open_log(tmp_path / "t-0"),
                ("d", 0): open_log(tmp_path / "d-0", compact_config(cleanup_policy={"delete"})),
            }

        def logs(self) -> dict[tuple[str, int], PartitionLog]:
            return self.map

    logdir = Dir()
    for log in logdir.map.values():
        write_overwrites(log, keys=10, rounds=20)
        roll(log)
    service = CleanerService(
        logdir,
        CleanerSettings(dedupe_buffer_bytes=1 << 20),
        reactor=_NoReactor(),
        wall_clock=lambda: now[0],
    )
    assert service.clean_one()
    assert service.passes == 1 and service.records_removed > 0
    points = read_checkpoint(str(tmp_path))
    assert set(points) == {("t", 0)} and points[("t", 0)] > 0
    assert not service.clean_one(), "nothing due; the delete-policy log is not compacted"
    assert len(read_all(logdir.map[("d", 0)])) > 200, "the delete-policy log is untouched"
    for log in logdir.map.values():
        log.close()


class _Dir:
    def __init__(self, path: Path, logs: dict[tuple[str, int], PartitionLog]) -> None:
        self.path = str(path)
        self.map = logs

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return self.map


def _service(logdir: _Dir, **settings: Any) -> CleanerService:
    return CleanerService(
        logdir,  # type: ignore[arg-type]
        CleanerSettings(dedupe_buffer_bytes=1 << 20, **settings),
        reactor=_NoReactor(),
        wall_clock=lambda: T0 / 1000.0,
    )


def test_the_cleaner_needs_a_thread(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        _service(_Dir(tmp_path, {}), threads=0)


def test_the_filthiest_partition_is_cleaned_first(tmp_path: Path) -> None:
    logs = {("a", 0): open_log(tmp_path / "a-0"), ("b", 0): open_log(tmp_path / "b-0")}
    for log in logs.values():
        write_overwrites(log, keys=10, rounds=20)
        roll(log)
    service = _service(_Dir(tmp_path, logs))
    assert service.clean_one() and service.clean_one()
    assert not service.clean_one()
    first = read_checkpoint(str(tmp_path))
    # New dirty data: a little on a, much on b; b is the filthier.
    write_overwrites(logs[("a", 0)], keys=10, rounds=2)
    roll(logs[("a", 0)])
    write_overwrites(logs[("b", 0)], keys=10, rounds=40)
    roll(logs[("b", 0)])
    assert service.clean_one()
    second = read_checkpoint(str(tmp_path))
    assert second[("b", 0)] > first[("b", 0)]
    assert second[("a", 0)] == first[("a", 0)]
    assert service.passes == 3
    assert service.last_pass_time == T0 / 1000.0
    assert service.records_read == service.records_kept + service.records_removed
    for log in logs.values():
        log.close()


def test_a_checkpoint_of_a_log_no_longer_open_is_dropped(tmp_path: Path) -> None:
    logs = {("a", 0): open_log(tmp_path / "a-0"), ("b", 0): open_log(tmp_path / "b-0")}
    for log in logs.values():
        write_overwrites(log, keys=10, rounds=20)
        roll(log)
    logdir = _Dir(tmp_path, logs)
    service = _service(logdir)
    assert service.clean_one()
    gone = logs.pop(("b", 0)) if ("b", 0) in read_checkpoint(str(tmp_path)) else logs.pop(("a", 0))
    assert service.clean_one()  # the other one: the gone log's checkpoint is not kept
    assert len(read_checkpoint(str(tmp_path))) == 1
    gone.close()
    for log in logs.values():
        log.close()


def test_threads_start_and_their_stop_fires_once_they_exit(tmp_path: Path) -> None:
    service = _service(_Dir(tmp_path, {}), threads=2, backoff_seconds=60.0)
    service.startService()
    assert service.running
    stopped = service.stopService()
    deadline = time.monotonic() + 10
    while not stopped.called and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stopped.called
    assert not service.running
    assert service.stopService().called  # a second stop: nothing to wait for
