"""BatchPositions: a bounded, contiguous run of batch positions answering like
``Segment.find_batch`` for the offsets it knows, and nothing for the others."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.storage.segment.batch_positions import BatchPositions
from brokerd.storage.segment.segment import Segment


def segment(tmp_path: Path, base: int = 0) -> Segment:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return Segment.create(str(tmp_path), base, 4096)


def test_finds_the_batch_holding_an_offset_and_nothing_outside_the_run(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    run = BatchPositions(8)
    # Batches of offsets 10-14, 15-15, 20-29 (a gap: compacted), at bytes 100, 300, 400.
    run.add(seg, 10, 14, 100, 200)
    run.add(seg, 15, 15, 300, 100)
    run.add(seg, 20, 29, 400, 50)
    assert len(run) == 3
    assert run.find(seg, 10) == (100, 200, 10)
    assert run.find(seg, 14) == (100, 200, 10)
    assert run.find(seg, 15) == (300, 100, 15)
    # In the gap: the first batch whose last offset is at or past it, as find_batch says.
    assert run.find(seg, 17) == (400, 50, 20)
    assert run.find(seg, 29) == (400, 50, 20)
    assert run.find(seg, 30) is None  # past the run: not known
    assert run.find(seg, 9) is None  # before it: an earlier batch may hold it
    assert run.next_after(seg) == (450, 30)
    other = segment(tmp_path / "other", 100)
    assert run.find(other, 12) is None and run.next_after(other) is None
    seg.close()
    other.close()


def test_a_batch_that_does_not_continue_the_run_starts_a_new_one(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    run = BatchPositions(8)
    run.add(seg, 0, 4, 0, 100)
    run.add(seg, 5, 9, 100, 100)
    run.add(seg, 20, 24, 500, 100)  # a hole in the file between: not contiguous
    assert len(run) == 1
    assert run.find(seg, 5) is None and run.find(seg, 20) == (500, 100, 20)
    run.add(seg, 22, 30, 600, 10)  # offsets going backwards: not a continuation either
    assert len(run) == 1 and run.find(seg, 22) == (600, 10, 22)
    other = segment(tmp_path / "other", 100)
    run.add(other, 100, 100, 0, 70)  # another segment: starts over
    assert run.segment is other and run.find(seg, 30) is None
    run.add(other, 101, 101, 60, 70)  # zero or negative sizes are ignored, overlaps restart
    assert len(run) == 1 and run.find(other, 101) == (60, 70, 101)
    run.add(other, 102, 101, 130, 5)
    run.add(other, 102, 102, 130, 0)
    assert len(run) == 1
    run.forget()
    assert len(run) == 0 and run.segment is None and run.find(other, 101) is None
    seg.close()
    other.close()


def test_the_run_stays_bounded_dropping_its_older_half(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    run = BatchPositions(16)
    for i in range(1000):
        run.add(seg, i, i, i * 10, 10)
        assert len(run) <= 16
    kept = len(run)
    assert 8 < kept <= 16
    first = 1000 - kept
    assert run.find(seg, 999) == (9990, 10, 999)
    assert run.find(seg, first) == (first * 10, 10, first)
    assert run.find(seg, first - 1) is None
    with pytest.raises(ValueError):
        BatchPositions(1)
    seg.close()
