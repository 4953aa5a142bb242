"""Tests for brokerd.storage.segment.index: the sparse offset and time indexes of a segment.

Real files in tmp_path: append and look up at every boundary, persist incrementally,
rewrite shorter (truncate), reload with the sanity checks, rebuild a missing or garbled
file through the segment, and the sparse interval at which a segment adds entries.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from brokerd.errors import StorageError
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.segment.index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE, OffsetIndex, TimeIndex
from brokerd.storage.segment.segment import Segment

ENTRIES = [(0, 0), (10, 100), (20, 250)]


def offset_index(tmp_path: Path, entries: list[tuple[int, int]] = ENTRIES) -> OffsetIndex:
    index = OffsetIndex(str(tmp_path / "00000000000000000000.index"))
    for rel, pos in entries:
        index.append(rel, pos)
    return index


def time_index(tmp_path: Path, entries: list[tuple[int, int]]) -> TimeIndex:
    index = TimeIndex(str(tmp_path / "00000000000000000000.timeindex"))
    for ts, rel in entries:
        index.append(ts, rel)
    return index


# --- offset index --------------------------------------------------------------------------


def test_lookup_at_every_boundary(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    assert len(index) == 3
    assert index.lookup(-1) is None
    assert index.lookup(0) == (0, 0)
    assert index.lookup(9) == (0, 0)
    assert index.lookup(10) == (10, 100)
    assert index.lookup(19) == (10, 100)
    assert index.lookup(20) == (20, 250)
    assert index.lookup(2**31 - 1) == (20, 250)
    assert index.entry(1) == (10, 100)
    assert index.last() == (20, 250)


def test_empty_index(tmp_path: Path) -> None:
    index = offset_index(tmp_path, [])
    assert len(index) == 0
    assert index.lookup(0) is None
    assert index.last() is None
    index.persist(sync=True)
    assert os.path.getsize(index.path) == 0
    again = OffsetIndex(index.path)
    assert again.load(log_size=0)
    assert len(again) == 0


def test_persist_writes_big_endian_entries_and_reloads(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.persist(sync=True)
    raw = Path(index.path).read_bytes()
    assert raw == b"".join(struct.pack(">ii", rel, pos) for rel, pos in ENTRIES)
    assert os.stat(index.path).st_mode & 0o777 == 0o600
    index.close()

    again = OffsetIndex(index.path)
    assert again.load(log_size=251)
    assert [again.entry(i) for i in range(len(again))] == ENTRIES
    assert again.lookup(15) == (10, 100)


def test_persist_appends_only_new_entries(tmp_path: Path) -> None:
    index = offset_index(tmp_path, ENTRIES[:2])
    index.persist(sync=False)
    # Overwrite the persisted bytes on disk: a second persist must not rewrite them.
    Path(index.path).write_bytes(b"\xee" * (2 * OFFSET_ENTRY_SIZE))
    index.append(*ENTRIES[2])
    index.persist(sync=False)
    raw = Path(index.path).read_bytes()
    assert raw[: 2 * OFFSET_ENTRY_SIZE] == b"\xee" * (2 * OFFSET_ENTRY_SIZE)
    assert raw[2 * OFFSET_ENTRY_SIZE :] == struct.pack(">ii", *ENTRIES[2])
    index.persist(sync=True)  # nothing new: the file is unchanged
    assert Path(index.path).read_bytes() == raw
    index.close()


def test_rewrite_truncates_to_the_entries_in_memory(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.persist(sync=False)
    index.clear()
    assert len(index) == 0
    index.append(0, 0)
    index.rewrite()
    assert Path(index.path).read_bytes() == struct.pack(">ii", 0, 0)
    index.close()


@pytest.mark.parametrize(
    ("entries", "log_size"),
    [
        ([(0, 0), (10, 100), (20, 250)], 250),  # last position not inside the log
        ([(0, 0), (10, 100), (10, 250)], 1000),  # relative offsets not increasing
        ([(0, 0), (10, 100), (20, 100)], 1000),  # positions not increasing
        ([(-5, 0)], 1000),  # negative relative offset
        ([(0, -1)], 1000),  # negative position
    ],
)
def test_load_refuses_an_insane_file(
    tmp_path: Path, entries: list[tuple[int, int]], log_size: int
) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(b"".join(struct.pack(">ii", rel, pos) for rel, pos in entries))
    index = OffsetIndex(str(path))
    assert not index.load(log_size=log_size)
    assert len(index) == 0  # the caller rebuilds from an empty index


def test_load_refuses_a_torn_or_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(str(path))
    assert not index.load(log_size=1000)
    path.write_bytes(struct.pack(">ii", 0, 0) + b"\x00\x00\x00")
    assert not index.load(log_size=1000)


def test_symlinked_index_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(struct.pack(">ii", 0, 0))
    link = tmp_path / "00000000000000000000.index"
    link.symlink_to(target)
    index = OffsetIndex(str(link))
    assert not index.load(log_size=1000)
    index.append(0, 0)
    with pytest.raises(StorageError, match=r"00000000000000000000\.index"):
        index.persist(sync=False)
    assert target.read_bytes() == struct.pack(">ii", 0, 0)


def test_unlink_closes_and_removes(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.persist(sync=False)
    index.unlink()
    assert not os.path.exists(index.path)
    index.unlink()  # already gone: no error


# --- time index ----------------------------------------------------------------------------


def test_last_before_at_every_boundary(tmp_path: Path) -> None:
    index = time_index(tmp_path, [(100, 0), (200, 10), (200, 20), (300, 30)])
    assert index.last_before(50) is None
    assert index.last_before(100) is None
    assert index.last_before(101) == 0
    assert index.last_before(200) == 0
    assert index.last_before(201) == 2
    assert index.last_before(300) == 2
    assert index.last_before(301) == 3
    assert index.entry(3) == (300, 30)
    assert time_index(tmp_path, []).last_before(0) is None


def test_time_index_persist_and_reload_against_the_offset_index(tmp_path: Path) -> None:
    offsets = offset_index(tmp_path)
    times = time_index(tmp_path, [(-1, 0), (500, 10), (500, 20)])
    times.persist(sync=True)
    raw = Path(times.path).read_bytes()
    assert len(raw) == 3 * TIME_ENTRY_SIZE
    assert raw[TIME_ENTRY_SIZE : 2 * TIME_ENTRY_SIZE] == struct.pack(">qi", 500, 10)
    times.close()

    again = TimeIndex(times.path)
    assert again.load(offsets=offsets)
    assert [again.entry(i) for i in range(len(again))] == [(-1, 0), (500, 10), (500, 20)]


@pytest.mark.parametrize(
    "entries",
    [
        [(100, 0), (200, 10)],  # fewer entries than the offset index
        [(100, 0), (200, 11), (300, 20)],  # relative offset differs from the offset index
        [(100, 0), (50, 10), (300, 20)],  # timestamps decrease
    ],
)
def test_time_index_load_refuses_a_mismatch(tmp_path: Path, entries: list[tuple[int, int]]) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries))
    index = TimeIndex(str(path))
    assert not index.load(offsets=offset_index(tmp_path))
    assert len(index) == 0


def test_time_index_load_refuses_a_torn_or_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    index = TimeIndex(str(path))
    assert not index.load(offsets=offset_index(tmp_path, []))
    path.write_bytes(b"\x00" * (TIME_ENTRY_SIZE - 1))
    assert not index.load(offsets=offset_index(tmp_path, []))


# --- the segment's use: sparse interval and rebuild ------------------------------------------


def append_batches(segment: Segment, count: int, *, values: int = 3, ts: int = 1000) -> None:
    """``count`` batches of ``values`` records, all of one size, timestamps ts, ts+1, ..."""
    for i in range(count):
        base = segment.next_offset
        data = encode_batch(
            [b"value-%04d-%d" % (i, j) for j in range(values)],
            timestamp_ms=ts + i,
            base_offset=base,
        )
        segment.append(data, [(base, base + values - 1, ts + i, len(data))])


def test_entries_follow_the_sparse_interval(tmp_path: Path) -> None:
    segment = Segment.create(str(tmp_path), 0, index_interval=200)
    batch_size = len(encode_batch([b"value-0000-0"] * 3, timestamp_ms=0))
    append_batches(segment, 20)
    entries = [segment.index.entry(i) for i in range(len(segment.index))]
    # An entry is added once more than index_interval bytes of log follow the previous
    # one (or the segment start): every ceil((200 + 1) / batch_size) batches.
    step = -(-(200 + 1) // batch_size)
    assert entries == [(3 * k * step, k * step * batch_size) for k in range(1, len(entries) + 1)]
    assert len(entries) == (20 - 1) // step
    # Each time entry holds the newest timestamp before its offset entry's batch.
    for i, (rel, _pos) in enumerate(entries):
        assert segment.timeindex.entry(i) == (1000 + rel // 3 - 1, rel)
    segment.close()


def test_interval_larger_than_the_segment_gives_no_entries(tmp_path: Path) -> None:
    segment = Segment.create(str(tmp_path), 0, index_interval=1 << 20)
    append_batches(segment, 20)
    assert len(segment.index) == 0
    assert segment.scan.find_batch(59, segment.size) is not None
    segment.close()


def _sealed_segment(tmp_path: Path) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    segment = Segment.create(str(tmp_path), 0, index_interval=100)
    append_batches(segment, 30)
    segment.seal()
    offsets = [segment.index.entry(i) for i in range(len(segment.index))]
    times = [segment.timeindex.entry(i) for i in range(len(segment.timeindex))]
    assert offsets
    segment.close()
    return offsets, times


@pytest.mark.parametrize(
    "damage",
    ["missing index", "missing timeindex", "garbled index", "garbled timeindex", "torn index"],
)
def test_missing_or_garbled_index_is_rebuilt_identically(tmp_path: Path, damage: str) -> None:
    offsets, times = _sealed_segment(tmp_path)
    kind = damage.split()[1]
    path = tmp_path / f"00000000000000000000.{kind}"
    raw = path.read_bytes()
    if damage.startswith("missing"):
        path.unlink()
    elif damage.startswith("torn"):
        path.write_bytes(raw[:-3])
    else:
        # Swap the first two entries: still the right size, but not increasing.
        size = OFFSET_ENTRY_SIZE if kind == "index" else TIME_ENTRY_SIZE
        path.write_bytes(raw[size : 2 * size] + raw[:size] + raw[2 * size :])

    segment = Segment.open(str(tmp_path), 0, index_interval=100)
    assert not segment.load()
    outcome = segment.recover()
    assert (outcome.batches, outcome.truncated, outcome.reason) == (30, 0, None)
    assert [segment.index.entry(i) for i in range(len(segment.index))] == offsets
    assert [segment.timeindex.entry(i) for i in range(len(segment.timeindex))] == times
    segment.close()
    # The rebuilt files are on disk: the next open trusts them.
    again = Segment.open(str(tmp_path), 0, index_interval=100)
    assert again.load()
    assert again.next_offset == 90
    again.close()
