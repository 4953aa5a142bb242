"""Which old segments retention deletes: by size, by age, never above the high
watermark, stopping at the first segment it keeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.retention import retention_limits, segments_to_delete


@attrs.frozen
class FakeSegment:
    base_offset: int
    next_offset: int
    size: int
    newest_ms: float

    def newest_time_ms(self) -> float:
        return self.newest_ms


def log(*specs: tuple[int, int, float]) -> list[Any]:
    """Segments from ``(records, size, newest_ms)``, offsets consecutive from 0."""
    segments, base = [], 0
    for records, size, newest in specs:
        segments.append(FakeSegment(base, base + records, size, newest))
        base += records
    return segments


def delete(
    segments: Sequence[Any], hw: int, by_bytes: int | None, by_ms: int | None, now: float
) -> int:
    return segments_to_delete(segments, hw, by_bytes, by_ms, now)


def test_size_retention_deletes_oldest_segments_while_the_rest_is_over_the_limit() -> None:
    segments = log((10, 100, 0), (10, 100, 0), (10, 100, 0), (0, 0, 0))
    assert delete(segments, 30, 100, None, 0) == 2
    assert delete(segments, 30, 200, None, 0) == 1
    assert delete(segments, 30, 201, None, 0) == 0


def test_time_retention_stops_at_the_first_segment_not_expired() -> None:
    segments = log((10, 1, 100), (10, 1, 900), (10, 1, 100), (0, 0, 0))
    assert delete(segments, 30, None, 500, 1000) == 1
    assert delete(segments, 30, None, 50, 1000) == 3


def test_nothing_at_or_above_the_high_watermark_goes() -> None:
    segments = log((10, 1, 0), (10, 1, 0), (10, 1, 0), (0, 0, 0))
    assert delete(segments, 15, None, 1, 1000) == 1
    assert delete(segments, 20, None, 1, 1000) == 2


def test_an_expired_active_segment_goes_but_an_empty_one_never_does() -> None:
    assert delete(log((10, 1, 0), (5, 1, 0)), 15, None, 1, 1000) == 2
    assert delete(log((10, 1, 0), (5, 1, 0)), 14, None, 1, 1000) == 1
    assert delete(log((10, 1, 0), (0, 0, 0)), 10, 0, 1, 1000) == 1


def test_limits_apply_only_under_a_delete_policy() -> None:
    config = LogConfig(retention_bytes=10, retention_ms=20, cleanup_policy={"compact"})
    assert retention_limits(config) == (None, None)
    both = attrs.evolve(config, cleanup_policy={"compact", "delete"})
    assert retention_limits(both) == (10, 20)
