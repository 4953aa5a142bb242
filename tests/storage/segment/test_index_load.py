"""Loading a large time index at open: the whole-array split gives exactly what
unpacking entry by entry gives, and still refuses what it refused; on real files."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from brokerd.storage.segment.index import OffsetIndex, TimeIndex

COUNT = 20_000


def _files(tmp_path: Path, times: list[tuple[int, int]]) -> tuple[OffsetIndex, Path]:
    offsets = OffsetIndex(str(tmp_path / "00000000000000000000.index"))
    for i, (_, rel) in enumerate(times):
        offsets.append(rel, i * 100)
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(b"".join(struct.pack(">qi", ts, rel) for ts, rel in times))
    return offsets, path


def _entries(rng: random.Random) -> list[tuple[int, int]]:
    """Non-decreasing timestamps from negative to past 2**32 (every byte of the 8 used),
    strictly increasing relative offsets up to near 2**31."""
    ts = sorted(rng.randrange(-(2**40), 2**62) for _ in range(COUNT))
    ts[0] = -1
    rels = sorted(rng.sample(range(2**31 - 1), COUNT))
    return list(zip(ts, rels, strict=True))


def test_large_index_loads_every_entry_exactly(tmp_path: Path) -> None:
    times = _entries(random.Random(7))
    offsets, path = _files(tmp_path, times)
    index = TimeIndex(str(path))
    assert index.load(offsets=offsets)
    assert len(index) == COUNT
    assert [index.entry(i) for i in range(COUNT)] == times


def test_large_index_with_one_decrease_near_the_end_is_refused(tmp_path: Path) -> None:
    times = _entries(random.Random(8))
    ts = times[-2][0]
    times[-1] = (ts - 1, times[-1][1])
    offsets, path = _files(tmp_path, times)
    index = TimeIndex(str(path))
    assert not index.load(offsets=offsets)
    assert len(index) == 0


def test_large_index_with_one_offset_off_by_one_is_refused(tmp_path: Path) -> None:
    times = _entries(random.Random(9))
    offsets, path = _files(tmp_path, times)
    ts, rel = times[COUNT // 2]
    raw = bytearray(path.read_bytes())
    struct.pack_into(">qi", raw, (COUNT // 2) * 12, ts, rel + 1)
    path.write_bytes(bytes(raw))
    index = TimeIndex(str(path))
    assert not index.load(offsets=offsets)
