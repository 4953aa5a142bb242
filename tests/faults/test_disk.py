"""A full disk and a partition that cannot be opened: recovery keeps intact data
readable when an index cannot be written, offline partitions come back on their own,
topics can be deleted whatever state their partitions are in, and append errors are
logged at a bounded rate. The full disk is a real 2 MiB tmpfs (skipped when mount is not
permitted); the transient open failure is an injected failing disk."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.errors import StorageError
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir import offline as logdir_offline
from brokerd.storage.logdir.log_directory import LogDirectory

from tests.read_specs import COMMITTED_RECORDS
from tests.tmpfs import mounted_tmpfs

CONFIG = LogConfig(index_interval_bytes=256)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path, "2m") as mnt:
        yield mnt


def crash(directory: LogDirectory) -> None:
    """What kill -9 leaves: no flush of indexes, no marker, the lock released."""
    for plog in directory.logs().values():
        for segment in plog.segments:
            segment.close()
    os.close(directory._lock_fd)


def fill(disk: Path) -> None:
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0")
    finally:
        os.close(fd)


def test_disk_full_after_crash(tiny_disk: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tiny_disk / "data"
    directory = LogDirectory.open(str(data), CONFIG)
    directory.topic_changes.create_topic("t", 1)
    plog = directory.get("t", 0)
    # Timestamps of now: 1970's would make the reopened segment due to roll by age
    # (segment.ms, 7 days), and the roll, not the append, would meet the full disk.
    now_ms = int(time.time() * 1000)
    for i in range(100):
        plog.append_values([b"v%04d" % i + b"x" * 500], timestamp_ms=now_ms + i)
    plog.flush()
    plog.publish()
    crash(directory)
    fill(tiny_disk)

    directory = LogDirectory.open(str(data), CONFIG)
    try:
        assert directory.offline == {}
        plog = directory.get("t", 0)
        assert plog.high_watermark == 100
        values = [r.value for r in plog.read(0, 10**6, COMMITTED_RECORDS).decoded]
        assert values == [b"v%04d" % i + b"x" * 500 for i in range(100)]
        assert "indexes kept in memory" in caplog.text
        # Appends fail (ENOSPC), logged once per partition per window, with a count.
        caplog.clear()
        for _ in range(5):
            with pytest.raises(StorageError, match="No space left"):
                plog.append_values([b"y" * 100_000], timestamp_ms=now_ms)
        lines = [r for r in caplog.records if "append failed" in r.getMessage()]
        assert len(lines) == 1
        # Deleting the topic works on a full disk.
        directory.topic_changes.delete_topic("t")
        assert "t" not in directory.topics()
        assert not (data / "t-0").exists()
    finally:
        directory.close()


def test_offline_partition_comes_back_with_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    directory = LogDirectory.open(str(tmp_path), CONFIG, clock=lambda: now[0])
    directory.topic_changes.create_topic("t", 2)
    directory.get("t", 1).append_values([b"kept"], timestamp_ms=1)
    directory.close()

    real_open = PartitionLog.open
    failing = [True]

    def flaky_open(path: str, config: LogConfig, **kw: object) -> PartitionLog:
        if failing[0] and path.endswith("t-1"):
            raise StorageError(f"cannot write index {path}/x.index: [Errno 28] No space")
        return real_open(path, config, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(PartitionLog, "open", flaky_open)
    directory = LogDirectory.open(str(tmp_path), CONFIG, clock=lambda: now[0])
    try:
        assert ("t", 1) in directory.offline
        with pytest.raises(StorageError, match="offline"):
            directory.get("t", 1)
        first = logdir_offline.OFFLINE_RETRY_FIRST_SECONDS
        assert directory.retry_offline(now[0] + first / 2) == 0  # not due yet
        assert directory.retry_offline(now[0] + first) == 0  # due, still failing
        assert directory.retry_offline(now[0] + first + first) == 0  # backoff doubled
        failing[0] = False
        assert directory.retry_offline(now[0] + 3 * first) == 1
        assert directory.offline == {}
        assert directory.get("t", 1).read(0, 100, COMMITTED_RECORDS).decoded[0].value == b"kept"
        # An offline partition's topic can be deleted.
        failing[0] = True
        directory.close()
        directory = LogDirectory.open(str(tmp_path), CONFIG, clock=lambda: now[0])
        assert ("t", 1) in directory.offline
        directory.topic_changes.delete_topic("t")
        assert directory.offline == {} and "t" not in directory.topics()
    finally:
        directory.close()
