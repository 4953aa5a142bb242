"""The log start offset of one partition log (``brokerd/storage/log/start.py``), on a
hand-built shared state: DeleteRecords moves it up, deletes whole segments below it, and
gives the move back when the checkpoint write fails; at open a start past the log end
restarts the log empty there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from brokerd.errors import OffsetOutOfRange, UnknownTopicOrPartition
from brokerd.storage.log.log_state import LogState
from brokerd.storage.log.start import LogStart

from tests.storage.log.log_parts import append, close, new_state, publish, roll


def three_segments(path: Path) -> LogState:
    state = new_state(path)
    append(state, [b"a", b"b"])
    roll(state)
    append(state, [b"c", b"d"])
    roll(state)
    append(state, [b"e"])
    publish(state)
    return state


def test_delete_records_moves_the_start_and_deletes_whole_segments_below(
    tmp_path: Path,
) -> None:
    state = three_segments(tmp_path / "t-0")
    start = LogStart(state)
    try:
        first = state.segments[0]
        assert start.delete_records_before(3) == 3
        assert state.log_start_offset == 3
        # The segment holding 2-3 straddles the start: it stays; the first one goes.
        assert [s.base_offset for s in state.segments] == [2, 4]
        assert not os.path.exists(first.log_path)
        # Not above the start: unchanged, answered with the start.
        assert start.delete_records_before(1) == 3
        with pytest.raises(OffsetOutOfRange):
            start.delete_records_before(6)  # past the high watermark
        with pytest.raises(OffsetOutOfRange):
            start.delete_records_before(-1)
        # Never the active segment, even when the start reaches the high watermark.
        assert start.delete_records_before(5) == 5
        assert [s.base_offset for s in state.segments] == [4]
    finally:
        close(state)
    with pytest.raises(UnknownTopicOrPartition):
        start.delete_records_before(5)


def test_a_failed_checkpoint_write_gives_the_move_back(tmp_path: Path) -> None:
    state = three_segments(tmp_path / "t-0")
    start = LogStart(state)

    def broken() -> None:
        assert state.log_start_offset == 4  # readers saw the new start first
        raise OSError("disk full")

    try:
        with pytest.raises(OSError, match="disk full"):
            start.delete_records_before(4, persist=broken)
        assert state.log_start_offset == 0 and len(state.segments) == 3
        written: list[int] = []
        start.delete_records_before(4, persist=lambda: written.append(state.log_start_offset))
        assert written == [4] and [s.base_offset for s in state.segments] == [4]
    finally:
        close(state)


def test_restore_applies_the_checkpoint_or_restarts_empty_past_the_end(
    tmp_path: Path,
) -> None:
    state = three_segments(tmp_path / "t-0")
    start = LogStart(state)
    try:
        start.restore(0)  # not above the start: nothing to do
        assert len(state.segments) == 3
        start.restore(2)
        assert state.log_start_offset == 2 and [s.base_offset for s in state.segments] == [2, 4]
        # Past the log end (a crash lost the records it points into): empty at 9.
        start.restore(9)
        assert [s.base_offset for s in state.segments] == [9]
        assert (state.log_start_offset, state.log_end_offset, state.recovery_point) == (9, 9, 9)
        assert state.visible == (9, 9, 0, 9) and not state.dirty
        assert sorted(os.listdir(tmp_path / "t-0")) == [
            f"{9:020d}.index", f"{9:020d}.log", f"{9:020d}.timeindex"
        ]
    finally:
        close(state)
