"""Retention and cleaned-segment swaps of one partition log.

:class:`LogMaintenance` is the part of :class:`~brokerd.storage.log.partition_log.PartitionLog`
(working on the :class:`~brokerd.storage.log.log_state.LogState` it shares with the log's
other parts) that deletes whole old segments by ``retention.bytes``/``retention.ms``
(a segment's ``.txnindex`` goes with it; when every record of the log is expired, the
active segment too, after rolling a new empty one at the log end offset, as Kafka does),
and swapping a segment for the copy the log
cleaner wrote (the copy keeps the base offset, so the segment's ``.txnindex`` file,
which the swap does not touch, stays with it and is read back by the new segment).

What it does not do: choose what to delete or keep (``log/retention.py``, ``cleaner/compactor.py``),
roll a segment itself (the log's writer side does, through the ``roll`` it is given), or
anything with Twisted. Threads: see ``log/partition_log.py``; deletions and swaps run under
the swap lock, and the roll before a deletion under the write lock, taken before the swap
lock (as ``close`` takes them), never inside it.

Crash safety of a roll then a delete: the new segment's files are created and the
directory fsynced before any old segment is unlinked, so a crash at any point leaves
either the old segments with an empty one after them (the next pass deletes the old
ones) or fewer of the old ones (deleted oldest first: a prefix), never a log whose end
offset went back.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from brokerd.errors import StorageError
from brokerd.storage.fileio import fsync_dir
from brokerd.storage.log.loader import install_cleaned
from brokerd.storage.log.log_state import LogState
from brokerd.storage.log.retention import retention_limits, segments_to_delete
from brokerd.storage.segment.segment import Segment

__all__ = ["LogMaintenance"]

log = logging.getLogger("brokerd.storage")


class LogMaintenance:
    """Retention and cleaned-segment swaps (see the module docstring)."""

    def __init__(self, state: LogState, roll: Callable[[], Segment]) -> None:
        self._state = state
        #: Seals the active segment and makes a new empty one at the log end offset,
        #: the log's own roll (called under the write lock).
        self._roll = roll

    # --- retention ----------------------------------------------------------------------

    def enforce_retention(self, now: float | None = None) -> int:
        """Delete whole old segments by ``retention_bytes`` and ``retention_ms``.

        ``now`` is in seconds (the injected clock when None). Never deletes unpublished
        data; only a prefix of the log goes, and the log start offset moves to the first
        remaining segment. When the active segment is deletable too (every record of the
        log expired), a new empty active segment is rolled at the log end offset first:
        the log end offset is kept and the log start offset becomes it. Returns the
        number of segments deleted.
        """
        state = self._state
        retention_bytes, retention_ms = retention_limits(state.config)
        if retention_bytes is None and retention_ms is None:
            return 0
        now_ms = (state.clock() if now is None else now) * 1000.0

        def deletable() -> int:
            return segments_to_delete(
                state.segments, state.visible[0], retention_bytes, retention_ms, now_ms
            )

        if deletable() == len(state.segments):
            try:
                self._roll_expired_active(deletable)
            except StorageError as exc:
                # The sealed segments still go (a full disk is when their space matters
                # most); the active one waits for a pass whose roll succeeds.
                log.warning("%s: cannot roll the expired active segment: %s", state.path, exc)
        with state.swap_lock:
            with state.seg_lock:
                if state.closed:
                    return 0
                segments = state.segments
                # The active segment stays (an append may have come before the roll).
                count = min(deletable(), len(segments) - 1)
                if not count:
                    return 0
                doomed, remaining = segments[:count], segments[count:]
                # DeleteRecords may have moved the start inside the first remaining segment.
                state.raise_log_start(remaining[0].base_offset)
                state.set_segments(remaining)
            for segment in doomed:
                segment.delete()
        try:
            fsync_dir(state.path)
        except OSError as exc:
            log.warning("cannot fsync %s after retention: %s", state.path, exc)
        return len(doomed)

    def _roll_expired_active(self, deletable: Callable[[], int]) -> None:
        """Roll a new empty active segment at the log end offset, so that retention can
        delete the old active one, unless an append since made the log not wholly
        deletable. A failed or closed partition is not rolled (no new files)."""
        state = self._state
        with state.write_lock:
            if state.closed or state.failure is not None:
                return
            if deletable() != len(state.segments):
                return
            self._roll()
            state.show_rolled()

    # --- compaction (the cleaner's side, docs/compaction.md) -----------------------------

    @property
    def cleanable_end(self) -> int:
        """Offsets below this are published, flushed and stable (below the LSO: an open
        transaction's records may still be aborted): the cleaner may rewrite them."""
        return min(self._state.visible[3], self._state.recovery_point)

    def replace_segment(
        self,
        old: Segment,
        cleaned: str | None,
        hook: Callable[[str], None] | None = None,
    ) -> bool:
        """Swap the fsynced cleaned copy ``cleaned`` in for the sealed segment ``old``, or
        with None delete ``old`` (every record in it was removed; never the first
        segment, which holds the log start). False, changing nothing, if ``old`` is no
        longer a sealed segment of this log (retention deleted it, the log closed) or if
        deleting it but it became the first (DeleteRecords or retention ran meanwhile)."""
        state = self._state
        with state.swap_lock:
            if state.closed or not any(s is old for s in state.segments[:-1]):
                return False
            if cleaned is None and old is state.segments[0]:
                return False
            new = None
            if cleaned is not None:
                interval = state.config.index_interval_bytes
                new = install_cleaned(state.path, old, cleaned, interval, hook)
            with state.seg_lock:
                kept = (new if s is old else s for s in state.segments)
                state.set_segments([s for s in kept if s is not None])
            if new is None:
                old.delete()
                with contextlib.suppress(OSError):
                    fsync_dir(state.path)
            else:
                old.close()
            return True
