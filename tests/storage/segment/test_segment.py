"""Tests for brokerd.storage.segment.segment: one segment file and its indexes, on real files.

Create, append, read at positions, sync and seal, the roll conditions PartitionLog
applies to the active segment, truncation during recovery, close/reopen, reader pins
across close and delete, and damaged tails. The only stand-ins are for a failing disk.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from brokerd.errors import StorageError
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import read_header
from brokerd.storage.segment.segment import Segment, segment_file_name

BASE = 100


def batch(base: int, count: int = 2, ts: int = 1000, size: int = 10) -> tuple[bytes, int]:
    values = [b"%08d" % (base + j) + b"x" * size for j in range(count)]
    return encode_batch(values, timestamp_ms=ts, base_offset=base), count


def append(segment: Segment, count: int = 2, ts: int = 1000, size: int = 10) -> int:
    """Append one batch at the segment's next offset; returns its position."""
    base = segment.next_offset
    data, n = batch(base, count, ts, size)
    pos = segment.size
    segment.append(data, [(base, base + n - 1, ts, len(data))])
    return pos


def filled(tmp_path: Path, batches: int = 10, interval: int = 150) -> tuple[Segment, list[int]]:
    segment = Segment.create(str(tmp_path), BASE, interval)
    positions = [append(segment, ts=1000 + 10 * i) for i in range(batches)]
    return segment, positions


def test_create_makes_three_private_files(tmp_path: Path) -> None:
    segment = Segment.create(str(tmp_path), BASE, 4096)
    names = sorted(os.listdir(tmp_path))
    assert names == [
        segment_file_name(BASE, ".index"),
        segment_file_name(BASE, ".log"),
        segment_file_name(BASE, ".timeindex"),
    ]
    assert names[1] == "00000000000000000100.log"
    for name in names:
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o600
    assert (segment.size, segment.next_offset, segment.max_timestamp) == (0, BASE, -1)
    assert segment.first_append_ms is None
    segment.close()
    with pytest.raises(StorageError, match=r"00000000000000000100\.log"):
        Segment.create(str(tmp_path), BASE, 4096)  # never over an existing segment


def test_append_and_read_at_positions(tmp_path: Path) -> None:
    segment, positions = filled(tmp_path)
    assert segment.next_offset == BASE + 20
    assert segment.max_timestamp == 1090
    assert segment.size == os.path.getsize(segment.log_path)
    for i, pos in enumerate(positions):
        header = read_header(segment.pread(pos, 61))
        assert header.base_offset == BASE + 2 * i
    # Every offset finds its batch, through the index and the header scan.
    for offset in range(BASE, BASE + 20):
        found = segment.scan.find_batch(offset, segment.size)
        assert found is not None
        assert found[0] == positions[(offset - BASE) // 2]
        assert found[1].base_offset <= offset <= found[1].last_offset
    # Below the base: the first batch; past the end or the limit: none.
    assert segment.scan.find_batch(0, segment.size) == (0, read_header(segment.pread(0, 61)))
    assert segment.scan.find_batch(BASE + 20, segment.size) is None
    assert segment.scan.find_batch(BASE + 10, positions[5]) is None
    # pread at the end returns what is there.
    assert segment.pread(segment.size - 3, 10) == segment.pread(segment.size - 3, 3)
    assert segment.pread(segment.size, 10) == b""
    headers = list(segment.scan.headers_from(positions[3], segment.size, BASE + 6))
    assert [pos for pos, _ in headers] == positions[3:]
    segment.close()


def test_find_timestamp(tmp_path: Path) -> None:
    segment, positions = filled(tmp_path)
    for i, pos in enumerate(positions):
        found = segment.scan.find_timestamp(1000 + 10 * i, segment.size)
        assert found is not None and found[0] == pos
        found = segment.scan.find_timestamp(1000 + 10 * i - 5, segment.size)
        assert found is not None and found[0] == pos
    assert segment.scan.find_timestamp(0, segment.size) == (0, read_header(segment.pread(0, 61)))
    assert segment.scan.find_timestamp(1091, segment.size) is None
    assert segment.scan.find_timestamp(1050, positions[5]) is None
    segment.close()


def test_sync_seal_and_persist_indexes(tmp_path: Path) -> None:
    segment, _ = filled(tmp_path)
    assert len(segment.index) > 0
    segment.sync()
    segment.persist_indexes(sync=False)
    assert os.path.getsize(segment.index.path) == 8 * len(segment.index)
    append(segment)
    segment.seal()
    assert os.path.getsize(segment.index.path) == 8 * len(segment.index)
    assert os.path.getsize(segment.timeindex.path) == 12 * len(segment.timeindex)
    segment.close()


def test_failed_sync_propagates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    segment, _ = filled(tmp_path, batches=2)

    def eio(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", eio)
    with pytest.raises(OSError):
        segment.sync()
    monkeypatch.undo()
    segment.close()


def test_failed_write_cuts_back_and_leaves_the_segment_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment, _ = filled(tmp_path, batches=3)
    size, next_offset, entries = segment.size, segment.next_offset, len(segment.index)
    real = os.pwrite

    def half_then_enospc(fd: int, data: bytes, pos: int) -> int:
        if len(data) > 20:
            return real(fd, bytes(data)[:20], pos)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", half_then_enospc)
    with pytest.raises(StorageError, match=r"00000000000000000100\.log"):
        append(segment)
    monkeypatch.undo()
    assert (segment.size, segment.next_offset, len(segment.index)) == (size, next_offset, entries)
    assert os.path.getsize(segment.log_path) == size
    append(segment)  # the next append lands where the failed one would have
    assert segment.scan.find_batch(next_offset, segment.size) is not None
    segment.close()


def test_close_and_reopen_loads_from_the_indexes(tmp_path: Path) -> None:
    segment, positions = filled(tmp_path)
    segment.seal()
    state = (segment.size, segment.next_offset, segment.max_timestamp, len(segment.index))
    segment.close()
    again = Segment.open(str(tmp_path), BASE, 150)
    assert again.load()
    assert (again.size, again.next_offset, again.max_timestamp, len(again.index)) == state
    # After a restart the segment's age counts from its first batch's timestamp.
    assert again.first_append_ms == 1000.0
    found = again.scan.find_batch(BASE + 13, again.size)
    assert found is not None and found[0] == positions[6]
    # The next append indexes at the same interval as before the restart.
    append(again)
    assert again.next_offset == BASE + 22
    again.close()


def test_reopen_with_unpersisted_index_tail_walks_the_tail(tmp_path: Path) -> None:
    segment, _ = filled(tmp_path)
    segment.persist_indexes(sync=True)
    for _ in range(5):
        append(segment, ts=5000)
    segment.close()  # the last entries never reached the index file
    again = Segment.open(str(tmp_path), BASE, 150)
    assert again.load()
    assert (again.next_offset, again.max_timestamp) == (BASE + 30, 5000)
    again.close()


def test_pinned_reader_outlives_close_and_delete(tmp_path: Path) -> None:
    segment, positions = filled(tmp_path, batches=3)
    assert segment.pin()
    segment.delete()
    assert not os.path.exists(segment.log_path)
    assert not os.path.exists(segment.index.path)
    assert not segment.pin()  # no new readers
    # The pinned reader still reads through the open fd.
    assert read_header(segment.pread(positions[2], 61)).base_offset == BASE + 4
    segment.unpin()
    with pytest.raises(StorageError):
        segment.pread(0, 61)  # the fd is closed now
    segment.close()  # idempotent


def test_recover_truncates_a_torn_tail(tmp_path: Path) -> None:
    segment, _ = filled(tmp_path)
    good = segment.size
    segment.close()
    data, _ = batch(BASE + 20)
    with open(tmp_path / segment_file_name(BASE, ".log"), "ab") as f:
        f.write(data[: len(data) // 2])

    again = Segment.open(str(tmp_path), BASE, 150)
    assert not again.load()  # the tail does not end on a batch boundary
    outcome = again.recover()
    assert outcome.batches == 10
    assert outcome.truncated == len(data) // 2
    assert outcome.reason is not None and f"byte {good}" in outcome.reason
    assert (again.size, again.next_offset) == (good, BASE + 20)
    assert os.path.getsize(again.log_path) == good
    append(again)
    again.close()
    third = Segment.open(str(tmp_path), BASE, 150)
    assert third.load() and third.next_offset == BASE + 22
    third.close()


def test_recover_cuts_at_a_corrupt_batch_in_the_middle(tmp_path: Path) -> None:
    segment, positions = filled(tmp_path)
    segment.close()
    with open(tmp_path / segment_file_name(BASE, ".log"), "r+b") as f:
        f.seek(positions[4] + 70)  # inside the records: only the CRC notices
        f.write(b"\xff")
    again = Segment.open(str(tmp_path), BASE, 150)
    outcome = again.recover()
    assert outcome.batches == 4
    assert outcome.reason is not None and "CRC" in outcome.reason
    assert (again.size, again.next_offset) == (positions[4], BASE + 8)
    again.close()


def test_recover_without_truncate_keeps_the_damage(tmp_path: Path) -> None:
    segment, positions = filled(tmp_path)
    size = segment.size
    segment.close()
    with open(tmp_path / segment_file_name(BASE, ".log"), "r+b") as f:
        f.seek(positions[6] + 70)
        f.write(b"\xff")
    again = Segment.open(str(tmp_path), BASE, 150)
    outcome = again.recover(truncate=False)
    assert (outcome.batches, outcome.truncated) == (6, 0)
    assert again.size == size == os.path.getsize(again.log_path)
    assert again.next_offset == BASE + 12
    # Before the damage reads work; the damaged batch itself is found by its header (its
    # CRC is the read path's business).
    assert again.scan.find_batch(BASE + 3, again.size) is not None
    again.close()


def test_damaged_tail_makes_lookups_fail_loudly(tmp_path: Path) -> None:
    segment, positions = filled(tmp_path, batches=4, interval=1 << 20)
    segment.close()
    with open(tmp_path / segment_file_name(BASE, ".log"), "r+b") as f:
        f.seek(positions[2] + 8)  # batch_length of the third batch
        f.write(b"\x00\x00\x00\x01")
    again = Segment.open(str(tmp_path), BASE, 1 << 20)
    assert not again.load()
    assert again.scan.find_batch(BASE + 1, again.size) is not None  # before the damage
    with pytest.raises(StorageError, match="damaged batch at byte"):
        again.scan.find_batch(BASE + 5, again.size)
    again.close()


def test_bad_index_entry_costs_a_rescan_not_the_read(tmp_path: Path) -> None:
    segment, positions = filled(tmp_path)
    segment.seal()
    segment.close()
    # A sane-looking index whose second entry points into the middle of a batch.
    index = tmp_path / segment_file_name(BASE, ".index")
    raw = bytearray(index.read_bytes())
    pos = int.from_bytes(raw[12:16], "big")
    raw[12:16] = (pos + 1).to_bytes(4, "big")
    index.write_bytes(bytes(raw))
    again = Segment.open(str(tmp_path), BASE, 150)
    assert again.load()
    for offset in range(BASE, BASE + 20):
        found = again.scan.find_batch(offset, again.size)
        assert found is not None and found[0] == positions[(offset - BASE) // 2]
    again.close()


def test_newest_time_falls_back_to_the_file_mtime(tmp_path: Path) -> None:
    segment = Segment.create(str(tmp_path), BASE, 4096)
    os.utime(segment.log_path, (1_600_000_000, 1_600_000_000))
    assert segment.newest_time_ms() == 1_600_000_000_000.0
    append(segment, ts=1234)
    assert segment.newest_time_ms() == 1234.0
    segment.close()


# --- roll conditions (PartitionLog decides; these pin them down at segment level) ---------


def test_roll_by_size_at_the_exact_boundary(tmp_path: Path) -> None:
    one = len(encode_batch([b"a" * 20], timestamp_ms=0))
    plog = PartitionLog.open(str(tmp_path), LogConfig(segment_bytes=2 * one), recovery_point=None)
    plog.append_values([b"a" * 20], timestamp_ms=0)
    plog.append_values([b"b" * 20], timestamp_ms=0)  # exactly full: no roll yet
    assert plog.segment_bases == (0,)
    plog.append_values([b"c" * 20], timestamp_ms=0)
    assert plog.segment_bases == (0, 2)
    # A batch larger than segment_bytes still goes into an empty active segment.
    plog.append_values([b"d" * 500], timestamp_ms=0)
    assert plog.segment_bases == (0, 2, 3)
    plog.append_values([b"e" * 20], timestamp_ms=0)
    assert plog.segment_bases == (0, 2, 3, 4)
    plog.close()


def test_roll_by_age_counts_from_the_first_batch_after_a_restart(tmp_path: Path) -> None:
    now = [2_000.0]
    config = LogConfig(segment_ms=60_000)
    plog = PartitionLog.open(str(tmp_path), config, recovery_point=None, clock=lambda: now[0])
    plog.append_values([b"old"], timestamp_ms=1_000_000)  # record time 1000 s
    plog.close()
    # Reopened: the active segment's age counts from its first batch's timestamp.
    again = PartitionLog.open(str(tmp_path), config, recovery_point=None, clock=lambda: now[0])
    now[0] = 1_059.0
    again.append_values([b"young"], timestamp_ms=0)
    assert again.segment_bases == (0,)
    now[0] = 1_060.0
    again.append_values([b"rolls"], timestamp_ms=0)
    assert again.segment_bases == (0, 2)
    again.close()
