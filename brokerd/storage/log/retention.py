"""Which old segments retention deletes: a pure function over the segment list.

Retention deletes whole segments, oldest first, while the partition stays over
``retention_bytes`` without the segment, or while the segment's newest record (its file
mtime if no record carries a timestamp) is older than ``retention_ms``; it stops at the
first segment that is not deletable, as Kafka's ``UnifiedLog.deleteOldSegments`` does.
Nothing readers cannot see yet goes: a segment is deletable only when everything in it
is below the high watermark. The active (last) segment is deletable too once it holds
records and all of them are expired: a quiet topic's data then goes as in Kafka, whose
retention rolls a new empty active segment at the log end offset first
(``LogMaintenance.enforce_retention`` does that roll). Only a prefix of the log goes, so
the log start offset simply moves to the first remaining segment. As in Kafka, time and
size retention apply only to topics whose ``cleanup.policy`` includes ``delete``
(:func:`retention_limits`): a compact-only topic keeps its old segments for the cleaner.

What this module does not do: roll, delete files, move the log start offset or lock
anything (``PartitionLog.enforce_retention`` does), or decide when retention runs (the
broker core's timer). No Twisted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from brokerd.storage.segment.segment import Segment

if TYPE_CHECKING:
    from brokerd.storage.config.log_config import LogConfig

__all__ = ["retention_limits", "segments_to_delete"]


def retention_limits(config: LogConfig) -> tuple[int | None, int | None]:
    """``(retention_bytes, retention_ms)`` that apply under the config's cleanup policy:
    both None (no deletion by retention) unless the policy includes ``delete``."""
    if "delete" not in config.cleanup_policy:
        return None, None
    return config.retention_bytes, config.retention_ms


def segments_to_delete(
    segments: Sequence[Segment],
    high_watermark: int,
    retention_bytes: int | None,
    retention_ms: int | None,
    now_ms: float,
) -> int:
    """How many segments from the start of ``segments`` retention deletes (None: no
    limit of that kind). ``len(segments)`` when the active segment goes too: the caller
    must roll first, since a log always keeps one segment."""
    total = sum(s.size for s in segments)
    count = 0
    while count < len(segments):
        segment = segments[count]
        last = count == len(segments) - 1
        if last and segment.size == 0:
            break  # an empty active segment: nothing to delete
        # The offset after the segment: its successor's base, or the log end.
        end = segment.next_offset if last else segments[count + 1].base_offset
        if end > high_watermark:
            break
        by_size = retention_bytes is not None and total - segment.size >= retention_bytes
        by_time = retention_ms is not None and segment.newest_time_ms() < now_ms - retention_ms
        if not (by_size or by_time):
            break
        total -= segment.size
        count += 1
    return count
