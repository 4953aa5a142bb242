"""Retention and cleaned-segment swaps of one partition log
(``brokerd/storage/log/maintenance.py``), on a hand-built shared state."""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from brokerd.errors import StorageError
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.log_state import LogState
from brokerd.storage.log.maintenance import LogMaintenance
from brokerd.storage.segment.segment import Segment

from tests.storage.log.log_parts import append, close, new_state, publish, roll


def maintenance_of(state: LogState) -> LogMaintenance:
    """The maintenance part, rolling as the hand-built log rolls."""
    return LogMaintenance(state, lambda: roll(state))


def test_retention_by_bytes_deletes_a_prefix(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    maintenance = maintenance_of(state)
    try:
        assert maintenance.enforce_retention() == 0  # no limit configured
        for i in range(3):
            append(state, [b"%d" % i * 100])
            roll(state)
        append(state, [b"last"])
        publish(state)
        sizes = [s.size for s in state.segments]
        state.reconfigure(attrs.evolve(state.config, retention_bytes=sizes[-1] + sizes[-2]))
        doomed = state.segments[0]
        assert maintenance.enforce_retention() == 2
        assert [s.base_offset for s in state.segments] == [2, 3]
        assert state.log_start_offset == 2 and not os.path.exists(doomed.log_path)
        # retention.bytes=0: as in Kafka, every segment goes, the active one after a roll.
        state.reconfigure(attrs.evolve(state.config, retention_bytes=0))
        assert maintenance.enforce_retention() == 2
        assert [(s.base_offset, s.size) for s in state.segments] == [(4, 0)]
        assert state.log_start_offset == state.log_end_offset == 4
    finally:
        close(state)
    assert maintenance.enforce_retention() == 0  # closed: nothing


def test_retention_by_time_uses_the_clock_or_now(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0", LogConfig(retention_ms=1000))
    maintenance = maintenance_of(state)
    try:
        append(state, [b"old"], timestamp_ms=1_000)
        roll(state)
        append(state, [b"new"], timestamp_ms=10_000)
        publish(state)
        assert maintenance.enforce_retention(now=1.5) == 0
        assert maintenance.enforce_retention(now=2.5) == 1
        assert [s.base_offset for s in state.segments] == [1]
    finally:
        close(state)


def test_expired_active_segment_is_rolled_then_deleted(tmp_path: Path) -> None:
    """A quiet log whose every record is past retention.ms: Kafka rolls a new empty
    active segment at the log end offset and deletes the old one."""
    state = new_state(tmp_path / "t-0", LogConfig(retention_ms=3000))
    maintenance = maintenance_of(state)
    try:
        append(state, [b"a", b"b"], timestamp_ms=1_000)
        append(state, [b"c", b"d", b"e"], timestamp_ms=1_200)
        publish(state, lso=3)  # an open transaction from offset 3 holds the LSO
        old = state.segments[0]
        assert maintenance.enforce_retention(now=4.1) == 0  # 1,200 is not yet 3 s old
        assert state.segments == (old,)
        assert maintenance.enforce_retention(now=4.3) == 1
        (active,) = state.segments
        assert (active.base_offset, active.size) == (5, 0)
        assert state.log_start_offset == state.log_end_offset == 5
        # Published as the empty active segment; the high watermark and LSO stay.
        assert state.visible == (5, 5, 0, 3)
        assert not os.path.exists(old.log_path) and os.path.exists(active.log_path)
        # Nothing more to delete in an empty log, and no further roll.
        assert maintenance.enforce_retention(now=100.0) == 0
        assert state.segments == (active,)
    finally:
        close(state)


def test_a_failed_roll_still_deletes_the_sealed_segments(tmp_path: Path) -> None:
    """The new segment cannot be created (a full disk): the expired sealed segments go
    all the same, the active one stays for a later pass."""
    state = new_state(tmp_path / "t-0", LogConfig(retention_ms=3000))

    def full_disk() -> Segment:
        raise StorageError("cannot create segment: [Errno 28] No space left on device")

    maintenance = LogMaintenance(state, full_disk)
    try:
        append(state, [b"a"], timestamp_ms=1_000)
        roll(state)
        append(state, [b"b"], timestamp_ms=1_000)
        publish(state)
        active = state.segments[-1]
        assert maintenance.enforce_retention(now=100.0) == 1
        assert state.segments == (active,) and state.log_start_offset == 1
    finally:
        close(state)


def test_expired_active_segment_with_unpublished_records_stays(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0", LogConfig(retention_ms=3000))
    maintenance = maintenance_of(state)
    try:
        append(state, [b"a"], timestamp_ms=1_000)
        publish(state)
        append(state, [b"b"], timestamp_ms=1_000)  # not published: above the high watermark
        (active,) = state.segments
        assert maintenance.enforce_retention(now=100.0) == 0
        assert state.segments == (active,) and state.log_start_offset == 0
    finally:
        close(state)


def test_expired_active_segment_of_a_compact_topic_stays(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0", LogConfig(retention_ms=3000, cleanup_policy={"compact"}))
    maintenance = maintenance_of(state)
    try:
        append(state, [b"a"], timestamp_ms=1_000)
        publish(state)
        assert maintenance.enforce_retention(now=100.0) == 0
        both = frozenset({"compact", "delete"})
        state.reconfigure(attrs.evolve(state.config, cleanup_policy=both))
        assert maintenance.enforce_retention(now=100.0) == 1
        assert [s.base_offset for s in state.segments] == [1]
    finally:
        close(state)


def test_cleanable_end_is_below_the_lso_and_the_recovery_point(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    maintenance = maintenance_of(state)
    try:
        append(state, [b"a", b"b", b"c"])
        publish(state, lso=2)
        state.flushed(3)
        assert maintenance.cleanable_end == 2
        state.flushed(1)
        assert maintenance.cleanable_end == 1
    finally:
        close(state)


def test_replace_segment_swaps_only_sealed_segments_of_this_log(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    maintenance = maintenance_of(state)
    try:
        append(state, [b"a"])
        roll(state)
        append(state, [b"b"])
        roll(state)
        append(state, [b"c"])
        publish(state)
        first, second, active = state.segments
        stranger = Segment.create(str(tmp_path), 0, 4096)
        assert not maintenance.replace_segment(stranger, None)
        assert not maintenance.replace_segment(active, None)  # the active one: never
        assert not maintenance.replace_segment(first, None)  # holds the log start
        # Every record of the second one removed: it goes, its offsets become a gap.
        assert maintenance.replace_segment(second, None)
        assert state.segments == (first, active) and not os.path.exists(second.log_path)
        stranger.close()
    finally:
        close(state)
