"""The shared state of a partition log's parts (``brokerd/storage/log/log_state.py``): where a
read starts, the failure latch, and the segment list readers load without a lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.errors import OffsetOutOfRange, StorageError, UnknownTopicOrPartition

from tests.storage.log.log_parts import append, close, new_state, publish, roll


def test_locate_finds_the_segment_in_one_snapshot_of_the_published_state(
    tmp_path: Path,
) -> None:
    state = new_state(tmp_path / "t-0")
    try:
        append(state, [b"a", b"b"])
        second = roll(state)
        append(state, [b"c"])
        publish(state, lso=1)
        at = state.locate(2)
        assert at.segments == state.segments and at.segments[at.segment_index] is second
        assert (at.offset, at.high_watermark, at.log_start_offset) == (2, 3, 0)
        assert (at.active_base, at.active_size) == (2, second.size)
        assert at.last_stable_offset == 1
        assert state.locate(1).segment_index == 0
        # The high watermark itself is a valid place to start (nothing to read there).
        assert state.locate(3).offset == 3
    finally:
        close(state)


def test_locate_refuses_offsets_outside_the_published_range(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    try:
        append(state, [b"a", b"b", b"c"])
        with pytest.raises(OffsetOutOfRange):
            state.locate(1)  # written, not published
        publish(state)
        state.raise_log_start(2)
        for bad in (-1, 0, 1, 4):
            with pytest.raises(OffsetOutOfRange):
                state.locate(bad)
        # The LSO is never below the log start.
        assert state.locate(2).last_stable_offset == 3
        publish(state, lso=1)
        assert state.locate(2).last_stable_offset == 2
    finally:
        close(state)
    with pytest.raises(UnknownTopicOrPartition):
        state.locate(2)


def test_the_failure_latch_refuses_writes_for_good(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    try:
        state.check_writable()
        error = state.fail("disk gone")
        assert isinstance(error, StorageError) and "disk gone" in str(error)
        with pytest.raises(StorageError, match="refuses appends: disk gone"):
            state.check_writable()
    finally:
        close(state)
    with pytest.raises(UnknownTopicOrPartition):
        state.check_writable()


def test_a_new_segment_list_forgets_the_positions_of_segments_gone(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    try:
        first = state.segments[0]
        position, size = append(state, [b"a"])
        state.tail.add(first, 0, 0, position, size)
        state.ahead.add(first, 0, 0, position, size)
        second = roll(state)
        assert state.tail.segment is first  # still a segment of the log
        assert state.segview == ((first, second), (0, 1))
        state.set_segments([second])
        assert state.tail.segment is None and state.ahead.segment is None
        assert state.segview == ((second,), (1,)) and state.segments == (second,)
        first.close()
    finally:
        close(state)


def test_the_mutators_keep_the_published_tuple_and_the_log_start_consistent(
    tmp_path: Path,
) -> None:
    state = new_state(tmp_path / "t-0")
    try:
        append(state, [b"a", b"b", b"c"])
        assert state.high_watermark == 0 and state.log_end_offset == 3
        # The one high-watermark writer publishes the log end, the active segment's
        # size and the stable offset the transactions part answers for that end.
        assert state.publish(lambda end: end - 1) == 3
        active = state.segments[-1]
        assert state.visible == (3, active.base_offset, active.size, 2)
        # An empty roll shows the new segment and keeps what was published.
        new = roll(state)
        state.show_rolled()
        assert state.visible == (3, new.base_offset, 0, 2)
        # The log start only rises; a failed DeleteRecords puts it back unless
        # something moved it further meanwhile.
        assert state.raise_log_start(2) == 0 and state.log_start_offset == 2
        assert state.raise_log_start(1) == 2 and state.log_start_offset == 2
        assert state.last_stable_offset == 2
        state.undo_log_start(2, 0)
        assert state.log_start_offset == 0
        state.raise_log_start(3)
        state.undo_log_start(2, 0)
        assert state.log_start_offset == 3
        assert state.last_stable_offset == 3  # never below the log start
    finally:
        close(state)
