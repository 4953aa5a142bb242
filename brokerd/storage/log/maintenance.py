"""Retention and cleaned-segment swaps of one partition log.

:class:`LogMaintenanceMixin` is part of :class:`~brokerd.storage.log.partition_log.PartitionLog`
(one
concern per module): deleting whole old segments by ``retention.bytes``/``retention.ms``
(a segment's ``.txnindex`` goes with it), and swapping a segment for the copy the log
cleaner wrote (the copy keeps the base offset, so the segment's ``.txnindex`` file,
which the swap does not touch, stays with it and is read back by the new segment).

What it does not do: choose what to delete or keep (``log/retention.py``, ``cleaner/compactor.py``),
anything with Twisted. Threads: see ``log/partition_log.py``; both run under the swap lock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from brokerd.storage.fileio import fsync_dir
from brokerd.storage.log.loader import install_cleaned
from brokerd.storage.log.retention import retention_limits, segments_to_delete
from brokerd.storage.segment.segment import Segment

if TYPE_CHECKING:
    from brokerd.storage.config.log_config import LogConfig

__all__ = ["LogMaintenanceMixin"]

log = logging.getLogger("brokerd.storage")


class _MaintState(Protocol):
    """The parts of :class:`~brokerd.storage.log.partition_log.PartitionLog` the mixin works on."""

    path: str
    config: LogConfig
    log_start_offset: int
    recovery_point: int
    _closed: bool
    _clock: Callable[[], float]
    _seg_lock: threading.Lock
    _swap_lock: threading.Lock
    _segments: tuple[Segment, ...]
    _visible: tuple[int, int, int, int]

    def _set_segments(self, segments: Sequence[Segment]) -> None: ...


class LogMaintenanceMixin:
    """Retention and cleaned-segment swaps (see the module docstring)."""

    # --- retention ----------------------------------------------------------------------

    def enforce_retention(self: _MaintState, now: float | None = None) -> int:
        """Delete whole old segments by ``retention_bytes`` and ``retention_ms``.

        ``now`` is in seconds (the injected clock when None). Never deletes the active
        segment or unpublished data; only a prefix of the log goes, and the log start
        offset moves to the first remaining segment. Returns the number of segments
        deleted.
        """
        cfg = self.config
        retention_bytes, retention_ms = retention_limits(cfg)
        if retention_bytes is None and retention_ms is None:
            return 0
        now_ms = (self._clock() if now is None else now) * 1000.0
        with self._swap_lock:
            with self._seg_lock:
                if self._closed:
                    return 0
                segments = self._segments
                count = segments_to_delete(
                    segments, self._visible[0], retention_bytes, retention_ms, now_ms
                )
                if not count:
                    return 0
                doomed, remaining = segments[:count], segments[count:]
                # DeleteRecords may have moved the start inside the first remaining segment.
                self.log_start_offset = max(self.log_start_offset, remaining[0].base_offset)
                self._set_segments(remaining)
            for segment in doomed:
                segment.delete()
        try:
            fsync_dir(self.path)
        except OSError as exc:
            log.warning("cannot fsync %s after retention: %s", self.path, exc)
        return len(doomed)

    # --- compaction (the cleaner's side, docs/compaction.md) -----------------------------

    @property
    def cleanable_end(self: _MaintState) -> int:
        """Offsets below this are published, flushed and stable (below the LSO: an open
        transaction's records may still be aborted): the cleaner may rewrite them."""
        return min(self._visible[3], self.recovery_point)

    def replace_segment(
        self: _MaintState,
        old: Segment,
        cleaned: str | None,
        hook: Callable[[str], None] | None = None,
    ) -> bool:
        """Swap the fsynced cleaned copy ``cleaned`` in for the sealed segment ``old``, or
        with None delete ``old`` (every record in it was removed; never the first
        segment, which holds the log start). False, changing nothing, if ``old`` is no
        longer a sealed segment of this log (retention deleted it, the log closed) or if
        deleting it but it became the first (DeleteRecords or retention ran meanwhile)."""
        with self._swap_lock:
            if self._closed or not any(s is old for s in self._segments[:-1]):
                return False
            if cleaned is None and old is self._segments[0]:
                return False
            new = None
            if cleaned is not None:
                interval = self.config.index_interval_bytes
                new = install_cleaned(self.path, old, cleaned, interval, hook)
            with self._seg_lock:
                kept = (new if s is old else s for s in self._segments)
                self._set_segments([s for s in kept if s is not None])
            if new is None:
                old.delete()
                with contextlib.suppress(OSError):
                    fsync_dir(self.path)
            else:
                old.close()
            return True
