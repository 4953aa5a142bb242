"""Partition directories: new partitions opened durably (stale crash leftovers removed
first, nothing left behind on failure) and a topic's directories removed without
following symlinks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from brokerd.errors import StorageError
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir import partition_dirs
from brokerd.storage.logdir.directory_state import DirectoryState
from brokerd.storage.logdir.partition_dirs import PartitionDirs, close_all
from brokerd.storage.types import TopicInfo


def dirs(path: Path) -> PartitionDirs:
    state = DirectoryState(
        str(path), LogConfig(), auto_create=False, default_partitions=1, clock=time.time
    )
    return PartitionDirs(state)


def test_new_partitions_open_empty_after_stale_leftovers_go(tmp_path: Path) -> None:
    (tmp_path / "t-1").mkdir()
    (tmp_path / "t-1" / "00000000000000000000.log").write_bytes(b"garbage of a crash")
    (tmp_path / "t-2").write_bytes(b"a file in the way")
    logs = dirs(tmp_path).open_new(TopicInfo("t", 3), 1, 3)
    try:
        assert [log.log_end_offset for log in logs] == [0, 0]
        assert (tmp_path / "t-1").is_dir() and (tmp_path / "t-2").is_dir()
        assert not (tmp_path / "t-0").exists()
    finally:
        close_all(logs)


def test_a_failed_open_closes_and_removes_what_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[str] = []
    real_open = PartitionLog.open

    def open_first_only(path: str, *args: Any, **kwargs: Any) -> PartitionLog:
        if path.endswith("-1"):
            raise OSError(28, "No space left on device")
        plog = real_open(path, *args, **kwargs)
        real_close = plog.close

        def close() -> None:
            closed.append(path)
            real_close()

        plog.close = close  # type: ignore[method-assign]
        return plog

    monkeypatch.setattr(partition_dirs.PartitionLog, "open", open_first_only)
    with pytest.raises(StorageError, match="cannot create partitions of 't'"):
        dirs(tmp_path).open_new(TopicInfo("t", 2), 0, 2)
    assert list(tmp_path.iterdir()) == []
    assert closed == [str(tmp_path / "t-0")]


def test_remove_unlinks_symlinks_without_following_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"keep")
    parts = dirs(data)
    close_all(parts.open_new(TopicInfo("t", 2), 0, 1))
    (data / "t-1").symlink_to(outside)
    parts.remove("t", 2)
    assert list(data.iterdir()) == []
    assert (outside / "keep").read_bytes() == b"keep"


def test_close_all_skips_missing_logs_and_swallows_errors() -> None:
    class Broken:
        closed = 0

        def close(self) -> None:
            Broken.closed += 1
            raise OSError("already gone")

    close_all([None, Broken(), Broken()])  # type: ignore[list-item]
    assert Broken.closed == 2
