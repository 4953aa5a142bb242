"""Fast restart after a crash, and what it must not cost: the recovered segments are
synced later (the recovery point holds until then), validation streams batches larger
than its read buffer, index files are rewritten only when they differ, and partitions
are opened by several threads (the policy is in brokerd/storage/log/loader.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from brokerd.errors import StorageError
from brokerd.storage.checkpoints import parse_checkpoint
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.layout import CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import CRC_START
from brokerd.storage.segment import resync

from tests.read_specs import COMMITTED_RECORDS

CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=300)


def crash(directory: LogDirectory) -> None:
    """What a kill -9 leaves: files as written, no clean marker, the checkpoint as last
    written. Only the descriptors are given back (the test process lives on)."""
    for plog in directory.logs().values():
        for segment in plog.segments:
            segment.close()
    os.close(directory._lock_fd)


def checkpoint_during_a_sync_pass(directory: LogDirectory) -> None:
    """A checkpoint written while another thread's sync pass holds the sync lock (it
    does not wait for that pass)."""
    with directory._recovered.lock:
        worker = threading.Thread(target=directory.checkpoint)
        worker.start()
        worker.join(10)
        assert not worker.is_alive()


def points(path: Path) -> dict[tuple[str, int], int]:
    return parse_checkpoint((path / CHECKPOINT_FILE).read_bytes())


def values(plog: PartitionLog) -> list[bytes | None]:
    out: list[bytes | None] = []
    offset = plog.log_start_offset
    while offset < plog.high_watermark:
        records = plog.read(offset, 10**6, COMMITTED_RECORDS).decoded
        assert records
        out += [r.value for r in records]
        offset = records[-1].offset + 1
    return out


def fill(directory: LogDirectory, topic: str, partitions: int, batches: int) -> None:
    for p in range(partitions):
        plog = directory.get(topic, p)
        for i in range(batches):
            plog.append_values([b"%s-%d-%d" % (topic.encode(), p, i) * 20], timestamp_ms=i)
        plog.publish()


@pytest.fixture
def crashed(tmp_path: Path) -> Path:
    """A data directory whose broker was killed after writing, never having synced: the
    checkpoint says 0 everywhere."""
    directory = LogDirectory.open(str(tmp_path), CONFIG)
    directory.topic_changes.create_topic("t", 3)
    directory.checkpoint()
    fill(directory, "t", 3, 40)
    crash(directory)
    return tmp_path


def test_recovered_segments_synced_later_checkpoint_holds_until_then(crashed: Path) -> None:
    directory = LogDirectory.open(str(crashed), CONFIG)
    assert not directory.was_clean
    assert directory.unsynced_partitions() == 3
    for plog in directory.logs().values():
        assert plog.recovery.segments_validated == len(plog.segments) > 1
        assert plog.recovery.unsynced_from == 0
        assert len(values(plog)) == 40
    # Nothing synced yet: a checkpoint now must not claim the recovered bytes durable.
    # checkpoint() syncs first unless a sync pass is running; hold one to see the point.
    checkpoint_during_a_sync_pass(directory)
    assert points(crashed) == {("t", p): 0 for p in range(3)}
    assert directory.sync_recovered()
    assert directory.unsynced_partitions() == 0
    directory.checkpoint()
    ends = {key: plog.log_end_offset for key, plog in directory.logs().items()}
    assert points(crashed) == ends
    directory.close()
    assert (crashed / CLEAN_SHUTDOWN_FILE).exists()


def test_second_crash_before_the_sync_validates_again_and_keeps_everything(
    crashed: Path,
) -> None:
    directory = LogDirectory.open(str(crashed), CONFIG)
    # Appends (and their flushes) after recovery do not move the durable point past
    # the unsynced recovered segments.
    plog = directory.get("t", 0)
    plog.append_values([b"after"], timestamp_ms=99)
    plog.flush()
    plog.publish()
    assert plog.recovery_point == plog.log_end_offset
    checkpoint_during_a_sync_pass(directory)
    assert points(crashed)[("t", 0)] == 0
    crash(directory)
    # A torn tail on partition 1 since: still cut, the rest kept.
    seg = sorted((crashed / "t-1").glob("*.log"))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x01\x00torn")
    again = LogDirectory.open(str(crashed), CONFIG)
    assert again.get("t", 0).recovery.segments_validated == len(again.get("t", 0).segments)
    assert values(again.get("t", 0))[-1] == b"after"
    assert len(values(again.get("t", 0))) == 41
    assert again.get("t", 1).recovery.bytes_truncated == 16
    assert len(values(again.get("t", 1))) == 40
    again.close()


def test_close_syncs_recovered_segments_before_the_clean_marker(
    crashed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = LogDirectory.open(str(crashed), CONFIG)
    synced: list[str] = []
    real = os.fdatasync

    def recording(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fdatasync", recording)
    directory.close()
    monkeypatch.undo()
    logs = {str(p) for p in crashed.glob("t-*/*.log")}
    assert logs <= set(synced)
    assert (crashed / CLEAN_SHUTDOWN_FILE).exists()
    assert set(points(crashed).values()) == {40}
    clean = LogDirectory.open(str(crashed), CONFIG)
    assert clean.was_clean and clean.unsynced_partitions() == 0
    assert all(len(values(plog)) == 40 for plog in clean.logs().values())
    clean.close()


def test_failed_sync_of_recovered_segments_keeps_point_and_marks_unclean(
    crashed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = LogDirectory.open(str(crashed), CONFIG)

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    assert not directory.sync_recovered()
    assert directory.unsynced_partitions() == 3
    directory.checkpoint()
    assert set(points(crashed).values()) == {0}
    monkeypatch.undo()
    # A failed fsync may have lost pages: this start stays unclean whatever follows.
    monkeypatch.setattr(os, "fdatasync", failing)
    directory.close()
    monkeypatch.undo()
    assert not (crashed / CLEAN_SHUTDOWN_FILE).exists()
    again = LogDirectory.open(str(crashed), CONFIG)
    assert not again.was_clean
    assert all(len(values(plog)) == 40 for plog in again.logs().values())
    again.close()


def test_sync_skips_segments_deleted_since(crashed: Path) -> None:
    directory = LogDirectory.open(str(crashed), CONFIG)
    plog = directory.get("t", 2)
    doomed = plog.segments[0]
    doomed.delete()
    assert directory.sync_recovered()
    assert directory.unsynced_partitions() == 0
    directory.close()


def big_batch(base: int, size: int) -> bytes:
    return bytes(encode_batch([os.urandom(size)], timestamp_ms=1, base_offset=base))


def test_batches_larger_than_the_read_buffer(tmp_path: Path) -> None:
    """Batches spanning several reads are checked whole; damage in a middle read of one
    is found and the log is cut there."""
    size = resync.RECOVERY_CHUNK * 3 + 1234
    config = LogConfig(segment_bytes=64 * 1024 * 1024, index_interval_bytes=4096)
    plog = PartitionLog.open(str(tmp_path), config, recovery_point=None)
    for _ in range(4):
        plog.append_values([os.urandom(size)], timestamp_ms=5)
    plog.append_values([b"small"] * 3, timestamp_ms=6)
    positions = [pos for pos, _ in plog.segments[0].scan.headers_from(0, plog.segments[0].size)]
    plog.close()
    ok = PartitionLog.open(str(tmp_path), config, recovery_point=0)
    assert ok.recovery.batches_validated == 5 and ok.recovery.bytes_truncated == 0
    assert ok.log_end_offset == 7
    ok.close()
    log_file = sorted(tmp_path.glob("*.log"))[0]
    file_size = os.path.getsize(log_file)
    # A byte in the third batch, two reads past its header.
    at = positions[2] + CRC_START + 2 * resync.RECOVERY_CHUNK + 17
    with open(log_file, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))
    cut = PartitionLog.open(str(tmp_path), config, recovery_point=0)
    assert cut.log_end_offset == 2
    assert cut.recovery.bytes_truncated == file_size - positions[2]
    assert os.path.getsize(log_file) == positions[2]
    assert "CRC-32C mismatch" in (cut.recovery.first_problem or "")
    cut.close()


def test_batch_running_past_the_end_of_the_file(tmp_path: Path) -> None:
    size = resync.RECOVERY_CHUNK * 2
    config = LogConfig(segment_bytes=64 * 1024 * 1024)
    plog = PartitionLog.open(str(tmp_path), config, recovery_point=None)
    plog.append_values([b"first"], timestamp_ms=1)
    plog.append_values([os.urandom(size)], timestamp_ms=2)
    plog.close()
    log_file = sorted(tmp_path.glob("*.log"))[0]
    full = os.path.getsize(log_file)
    os.truncate(log_file, full - 1000)
    again = PartitionLog.open(str(tmp_path), config, recovery_point=0)
    assert again.log_end_offset == 1
    assert "incomplete batch" in (again.recovery.first_problem or "")
    assert values(again) == [b"first"]
    again.close()


def test_index_file_that_differs_is_rewritten(tmp_path: Path) -> None:
    plog = PartitionLog.open(str(tmp_path), CONFIG, recovery_point=None)
    for i in range(30):
        plog.append_values([b"v%d" % i * 10], timestamp_ms=i)
    plog.close()
    first = sorted(tmp_path.glob("*.index"))[0]
    expected = first.read_bytes()
    assert len(expected) >= 16
    # Longer (stale entries after a truncation) and garbled: rewritten to the log's.
    first.write_bytes(expected[:-8] + b"\x7f\xff\xff\xff\x7f\xff\xff\xff" + b"junkjunk")
    fixed = PartitionLog.open(str(tmp_path), CONFIG, recovery_point=0)
    fixed.close()
    assert first.read_bytes() == expected
    # Shorter: completed.
    first.write_bytes(expected[:8])
    again = PartitionLog.open(str(tmp_path), CONFIG, recovery_point=0)
    again.close()
    assert first.read_bytes() == expected


def test_unchanged_index_file_is_not_written(tmp_path: Path) -> None:
    plog = PartitionLog.open(str(tmp_path), CONFIG, recovery_point=None)
    for i in range(30):
        plog.append_values([b"v%d" % i * 10], timestamp_ms=i)
    plog.close()
    indexes = sorted(tmp_path.glob("*.index")) + sorted(tmp_path.glob("*.timeindex"))
    old = 1_000_000_000 * 10**9
    for path in indexes:
        os.utime(path, ns=(old, old))
    again = PartitionLog.open(str(tmp_path), CONFIG, recovery_point=0)
    assert again.recovery.segments_validated == len(again.segments)
    again.close()
    # Every segment was validated and its indexes rebuilt; none differed, none written
    # (close persists the active segment's, which are equal too: nothing appended).
    assert [os.stat(p).st_mtime_ns for p in indexes] == [old] * len(indexes)


def test_many_partitions_opened_in_parallel_one_offline(tmp_path: Path) -> None:
    directory = LogDirectory.open(str(tmp_path), CONFIG)
    directory.topic_changes.create_topic("a", 20)
    fill(directory, "a", 20, 5)
    crash(directory)
    # One partition directory unreadable as a directory: that one goes offline only.
    bad = tmp_path / "a-7"
    for child in bad.iterdir():
        child.unlink()
    bad.rmdir()
    bad.write_bytes(b"not a directory")
    again = LogDirectory.open(str(tmp_path), CONFIG)
    try:
        assert set(again.offline) == {("a", 7)}
        for p in range(20):
            if p != 7:
                assert values(again.get("a", p)) == [b"a-%d-%d" % (p, i) * 20 for i in range(5)]
        with pytest.raises(StorageError):
            again.get("a", 7)
    finally:
        again.close()
