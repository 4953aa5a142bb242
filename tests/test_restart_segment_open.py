"""A segment opened at start reads its first batch's timestamp (its age, for segment_ms
rolling) only when asked, not at open; on real files."""

from __future__ import annotations

from pathlib import Path

from brokerd.storage.batch import encode_batch
from brokerd.storage.segment import Segment

BASE = 7


def _closed_segment(directory: Path, first_ts: int) -> None:
    segment = Segment.create(str(directory), BASE, 4096)
    for i, ts in enumerate((first_ts, first_ts + 50)):
        base = segment.next_offset
        data = encode_batch([b"v%d" % i], timestamp_ms=ts, base_offset=base)
        segment.append(data, [(base, base, ts, len(data))])
    segment.close()


def test_age_read_on_first_use(tmp_path: Path) -> None:
    _closed_segment(tmp_path, 5000)
    segment = Segment.open(str(tmp_path), BASE, 4096)
    try:
        assert segment.load()
        assert segment.first_append_ms == 5000.0
        assert segment.first_append_ms == 5000.0
    finally:
        segment.close()


def test_a_value_set_before_the_read_wins(tmp_path: Path) -> None:
    """The writer stamping the segment (as an append to an empty one does) is not
    overwritten by a read left pending from the open."""
    _closed_segment(tmp_path, 5000)
    segment = Segment.open(str(tmp_path), BASE, 4096)
    try:
        assert segment.load()
        segment.first_append_ms = 123.0
        assert segment.first_append_ms == 123.0
    finally:
        segment.close()


def test_a_batch_without_timestamp_leaves_the_age_unknown(tmp_path: Path) -> None:
    _closed_segment(tmp_path, -1)
    segment = Segment.open(str(tmp_path), BASE, 4096)
    try:
        assert segment.load()
        assert segment.first_append_ms is None
    finally:
        segment.close()


def test_an_empty_segment_has_no_age(tmp_path: Path) -> None:
    Segment.create(str(tmp_path), BASE, 4096).close()
    segment = Segment.open(str(tmp_path), BASE, 4096)
    try:
        assert segment.load()
        assert segment.first_append_ms is None
    finally:
        segment.close()
