"""LogDirectory: topic registry, names that must never reach the filesystem, auto-create,
delete, checkpoints, the clean-shutdown marker, and hostile directory contents."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from brokerd.errors import (
    InvalidTopic,
    StorageError,
)
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.logdir.layout import (
    CHECKPOINT_FILE,
    CLEAN_SHUTDOWN_FILE,
    REGISTRY_FILE,
    parse_partition_dir,
)
from brokerd.storage.logdir.log_directory import LogDirectory

from tests.read_specs import COMMITTED_RECORDS

HOSTILE_NAMES = ["../x", "a/b", ".", "..", "x" * 250, "a\x00b", "tópico", "", "a b", "/etc"]


def open_dir(path: Path, **kwargs: Any) -> LogDirectory:
    return LogDirectory.open(str(path), LogConfig(segment_bytes=1000), **kwargs)


def crash(ld: LogDirectory) -> None:
    """Drop the directory as a killed process would: no flush, no marker, lock released."""
    os.close(ld._lock_fd)


def snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} | {
        str(p) for p in root.parent.iterdir()
    }


def test_registry_persists_across_reopen(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("events", 3)
    ld.topic_changes.create_topic("small", 1, {"retention.bytes": "5000", "retention.ms": "60000"})
    ld.topic_changes.create_topic("forever", 1, {"retention.bytes": "-1", "retention.ms": "-1"})
    ld.get("events", 2).append_values([b"kept"], timestamp_ms=1)
    ld.close()
    ld = open_dir(tmp_path)
    topics = ld.topics()
    assert {n: t.partitions for n, t in topics.items()} == {"events": 3, "small": 1, "forever": 1}
    assert topics["small"].configs == {"retention.bytes": "5000", "retention.ms": "60000"}
    assert topics["forever"].configs == {"retention.bytes": "-1", "retention.ms": "-1"}
    assert ld.get("small", 0).config.retention_bytes == 5000
    assert ld.get("forever", 0).config.retention_ms is None
    assert ld.get("small", 0).config.segment_bytes == 1000
    plog = ld.get("events", 2)
    assert [r.value for r in plog.read(0, 100, COMMITTED_RECORDS).decoded] == [b"kept"]
    ld.close()


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_names_never_touch_the_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    ld = open_dir(tmp_path / "data")
    before = snapshot(tmp_path / "data")

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"filesystem touched for {name!r}: {args}")

    for fn in ("makedirs", "mkdir", "listdir", "scandir", "rename", "replace", "unlink"):
        monkeypatch.setattr(os, fn, forbidden)
    with pytest.raises(InvalidTopic):
        ld.get(name, 0, create=True)
    with pytest.raises(InvalidTopic):
        ld.topic_changes.create_topic(name, 1)
    with pytest.raises(InvalidTopic):
        ld.topic_changes.delete_topic(name)
    monkeypatch.undo()
    assert snapshot(tmp_path / "data") == before
    assert ld.topics() == {}
    ld.close()


def test_topics_with_dashes(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("a-b-c", 12)
    ld.topic_changes.create_topic("a-b", 2)
    ld.topic_changes.create_topic("x-1", 1)
    names = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert "a-b-c-11" in names and "a-b-1" in names and "x-1-0" in names
    assert parse_partition_dir("a-b-c-11") == ("a-b-c", 11)
    assert parse_partition_dir("x-1-0") == ("x-1", 0)
    assert parse_partition_dir("nodash") is None
    assert parse_partition_dir("bad name-0") is None
    ld.get("a-b-c", 11).append_values([b"v"], timestamp_ms=1)
    ld.close()
    # Without the registry, the topics are rediscovered from the directory names.
    (tmp_path / REGISTRY_FILE).unlink()
    ld = open_dir(tmp_path)
    assert {n: t.partitions for n, t in ld.topics().items()} == {"a-b-c": 12, "a-b": 2, "x-1": 1}
    assert ld.get("a-b-c", 11).log_end_offset == 1
    ld.close()


def test_clean_marker_and_checkpoint(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    assert ld.was_clean  # a new directory had no shutdown, so not an unclean one
    plog = ld.get("t", 0, create=True)
    for i in range(50):
        plog.append_values([b"%d" % i * 30], timestamp_ms=i)
    ld.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    lines = (tmp_path / CHECKPOINT_FILE).read_text().splitlines()
    assert lines == ["0", "1", "t 0 50"]
    ld = open_dir(tmp_path)
    assert ld.was_clean
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    plog = ld.get("t", 0)
    assert plog.recovery.clean and plog.recovery.batches_validated == 0
    # More data, a flush and a checkpoint, then a crash.
    plog.append_values([b"late"], timestamp_ms=99)
    plog.flush()
    ld.checkpoint()
    assert (tmp_path / CHECKPOINT_FILE).read_text().splitlines()[2] == "t 0 51"
    crash(ld)
    ld = open_dir(tmp_path)
    assert not ld.was_clean
    plog = ld.get("t", 0)
    stats = plog.recovery
    assert not stats.clean
    # Only the segment holding the recovery point was rescanned.
    assert stats.segments_validated == 1 < stats.segments
    assert plog.log_end_offset == 51
    ld.close()


def test_unreadable_checkpoint_means_full_recovery(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    plog = ld.get("t", 0, create=True)
    for i in range(30):
        plog.append_values([b"x" * 40], timestamp_ms=i)
    plog.flush()
    ld.checkpoint()
    crash(ld)
    (tmp_path / CHECKPOINT_FILE).write_text("0\n7\nt 0 nonsense\n")
    ld = open_dir(tmp_path)
    stats = ld.get("t", 0).recovery
    assert stats.segments_validated == stats.segments > 1
    assert ld.get("t", 0).log_end_offset == 30
    ld.close()


def test_killed_process_recovers(tmp_path: Path) -> None:
    """A real process that appends, flushes, and dies without closing."""
    script = f"""
import os
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.config.log_config import LogConfig
ld = LogDirectory.open({str(tmp_path)!r}, LogConfig(segment_bytes=1000))
log = ld.get("k", 0, create=True)
for i in range(40):
    log.append_values([b"rec-%d" % i], timestamp_ms=i)
    if i == 19:
        log.flush()
        ld.checkpoint()
# A torn write of a last batch, then death.
fd = os.open(log.segments[-1].log_path, os.O_WRONLY | os.O_APPEND)
os.write(fd, b"\\x00" * 8 + b"\\x00\\x00\\x01\\x00" + b"partial")
os._exit(9)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 9, proc.stderr
    ld = open_dir(tmp_path)
    assert not ld.was_clean
    plog = ld.get("k", 0)
    assert plog.recovery.bytes_truncated == 19
    values = [r.value for r in plog.read(0, 10**6, COMMITTED_RECORDS).decoded]
    assert values == [b"rec-%d" % i for i in range(40)]
    ld.close()


def test_second_broker_refused(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    with pytest.raises(StorageError, match="in use"):
        open_dir(tmp_path)
    ld.close()
    open_dir(tmp_path).close()


def test_symlinks_never_followed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    ld = open_dir(data)
    ld.topic_changes.create_topic("ok", 1)
    ld.topic_changes.create_topic("evil", 2)
    ld.close()
    evil = data / "evil-1"
    for p in evil.iterdir():
        p.unlink()
    evil.rmdir()
    evil.symlink_to(outside)
    (data / CLEAN_SHUTDOWN_FILE).unlink()
    ld = open_dir(data)
    assert ("evil", 1) in ld.offline
    with pytest.raises(StorageError, match="offline"):
        ld.get("evil", 1)
    ld.get("evil", 0)
    ld.get("ok", 0)
    ld.close()
    assert not (data / CLEAN_SHUTDOWN_FILE).exists()  # an offline partition: not clean
    ld = open_dir(data)
    ld.topic_changes.delete_topic("evil")
    ld.close()
    assert sorted(p.name for p in outside.iterdir()) == ["precious"]
    assert (outside / "precious").read_text() == "keep me"


def test_unrelated_files_ignored(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("t", 1)
    ld.close()
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "nodash").mkdir()
    (tmp_path / "stray-7").mkdir()  # a partition-like directory of no registered topic
    ld = open_dir(tmp_path)
    assert set(ld.topics()) == {"t"}
    ld.close()
    assert (tmp_path / "notes.txt").read_text() == "hello"
    assert (tmp_path / "nodash").is_dir() and (tmp_path / "stray-7").is_dir()


def test_corrupt_registry_refused(tmp_path: Path) -> None:
    open_dir(tmp_path).close()
    for text in (
        "{",
        '{"version": 1, "topics": {"../x": {"partitions": 1}}}',
        '{"version": 1, "topics": {"t": {"partitions": 0}}}',
        '{"version": 9}',
    ):
        (tmp_path / REGISTRY_FILE).write_text(text)
        with pytest.raises(StorageError, match="registry"):
            open_dir(tmp_path)


def test_retention_over_all_partitions(tmp_path: Path) -> None:
    ld = LogDirectory.open(str(tmp_path), LogConfig(segment_bytes=200))
    ld.topic_changes.create_topic("short", 2, {"retention.bytes": "300"})
    ld.topic_changes.create_topic("long", 1)
    for topic, partition in (("short", 0), ("short", 1), ("long", 0)):
        plog = ld.get(topic, partition)
        for i in range(20):
            plog.append_values([b"z" * 80], timestamp_ms=i)
        plog.publish()
    assert ld.enforce_retention() > 0
    assert ld.get("short", 0).log_start_offset > 0
    assert ld.get("long", 0).log_start_offset == 0
    ld.close()


def test_directory_permissions(tmp_path: Path) -> None:
    ld = open_dir(tmp_path / "data")
    ld.topic_changes.create_topic("t", 1)
    ld.close()
    assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "data" / "t-0").stat().st_mode & 0o777 == 0o700
    for p in (tmp_path / "data" / "t-0").iterdir():
        assert p.stat().st_mode & 0o077 == 0, p
    assert (tmp_path / "data" / REGISTRY_FILE).stat().st_mode & 0o077 == 0
