"""Retention and cleaned-segment swaps of one partition log
(``brokerd/storage/log/maintenance.py``), on a hand-built shared state."""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.maintenance import LogMaintenance
from brokerd.storage.segment.segment import Segment

from tests.storage.log.log_parts import append, close, new_state, publish, roll


def test_retention_by_bytes_deletes_a_prefix_never_the_active_segment(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    maintenance = LogMaintenance(state)
    try:
        assert maintenance.enforce_retention() == 0  # no limit configured
        for i in range(3):
            append(state, [b"%d" % i * 100])
            roll(state)
        append(state, [b"last"])
        publish(state)
        sizes = [s.size for s in state.segments]
        state.config = attrs.evolve(state.config, retention_bytes=sizes[-1] + sizes[-2])
        doomed = state.segments[0]
        assert maintenance.enforce_retention() == 2
        assert [s.base_offset for s in state.segments] == [2, 3]
        assert state.log_start_offset == 2 and not os.path.exists(doomed.log_path)
        state.config = attrs.evolve(state.config, retention_bytes=0)
        assert maintenance.enforce_retention() == 1
        assert [s.base_offset for s in state.segments] == [3]
    finally:
        close(state)
    assert maintenance.enforce_retention() == 0  # closed: nothing


def test_retention_by_time_uses_the_clock_or_now(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0", LogConfig(retention_ms=1000))
    maintenance = LogMaintenance(state)
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


def test_cleanable_end_is_below_the_lso_and_the_recovery_point(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    maintenance = LogMaintenance(state)
    try:
        append(state, [b"a", b"b", b"c"])
        publish(state, lso=2)
        state.recovery_point = 3
        assert maintenance.cleanable_end == 2
        state.recovery_point = 1
        assert maintenance.cleanable_end == 1
    finally:
        close(state)


def test_replace_segment_swaps_only_sealed_segments_of_this_log(tmp_path: Path) -> None:
    state = new_state(tmp_path / "t-0")
    maintenance = LogMaintenance(state)
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
