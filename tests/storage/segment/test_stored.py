"""Stored spans (bytes of a pinned segment, readable until released, even after the
file is unlinked) and the checked byte ranges per segment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.errors import StorageError
from brokerd.storage.segment.segment import Segment
from brokerd.storage.segment.stored import StoredSpan, VerifiedRanges


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[Segment]:
    seg = Segment.create(str(tmp_path), 0, 4096)
    seg.append(b"0123456789", [(0, 0, 1, 10)])
    yield seg
    seg.close()


def test_a_span_reads_its_bytes_until_released_even_after_an_unlink(segment: Segment) -> None:
    assert segment.pin()
    span = StoredSpan(segment, 2, 6)
    os.unlink(segment.log_path)
    assert span.read() == b"234567"
    assert span.read_at(1, 3) == b"345"
    assert os.pread(span.fileno(), 2, span.position) == b"23"
    with pytest.raises(ValueError):
        span.read_at(4, 3)
    span.truncate(2)
    assert span.read() == b"23"
    with pytest.raises(ValueError):
        span.truncate(3)
    span.release()
    span.release()  # idempotent: one unpin
    assert span.released and "released" in repr(span)
    for use in (span.read, span.fileno, lambda: span.read_at(0, 1)):
        with pytest.raises(StorageError, match="after release"):
            use()


def test_a_span_past_the_file_end_is_a_storage_error(segment: Segment) -> None:
    assert segment.pin()
    span = StoredSpan(segment, 8, 5)
    with pytest.raises(StorageError, match="5 bytes at 8 expected, 2 present"):
        span.read()
    span.release()


def test_ranges_merge_when_they_touch_and_cover_only_checked_bytes(segment: Segment) -> None:
    checked = VerifiedRanges()
    checked.mark(segment, 0, 10)
    checked.mark(segment, 20, 30)
    checked.mark(segment, 5, 5)  # empty: nothing
    assert checked.ranges(segment) == ((0, 10), (20, 30))
    assert checked.covers(segment, 2, 8) and not checked.covers(segment, 5, 25)
    checked.mark(segment, 10, 20)
    assert checked.ranges(segment) == ((0, 30),)
    assert checked.covers(segment, 5, 25)


def test_past_the_bound_only_the_newest_range_is_kept(tmp_path: Path, segment: Segment) -> None:
    checked = VerifiedRanges(max_ranges=2)
    for start in (0, 10, 20):
        checked.mark(segment, start, start + 5)
    assert checked.ranges(segment) == ((20, 25),)
    (tmp_path / "other").mkdir()
    other = Segment.create(str(tmp_path / "other"), 0, 4096)
    assert checked.ranges(other) == () and not checked.covers(other, 20, 25)
    other.close()
