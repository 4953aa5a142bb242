"""Moving a partition's log start offset: Kafka's DeleteRecords, and its restoration at open.

:class:`LogStart` is the part of :class:`~brokerd.storage.log.partition_log.PartitionLog` that
moves ``log_start_offset`` (in the :class:`~brokerd.storage.log.log_state.LogState` it
shares with the log's other parts) up, never down; reads
below the start then raise :class:`OffsetOutOfRange`, whole segments that end at or below
it are deleted (never the active one), and a segment straddling it stays. At open it
applies a start offset read from the checkpoint, and when a crash lost the records the
checkpoint points into (the start is past the log end), it restarts the log empty at
that offset, as Kafka does.

What it does not do: write or read the ``log-start-offset-checkpoint`` file (the log
directory does, through ``persist`` and :mod:`brokerd.storage.checkpoints`), check the
topic's cleanup policy, or anything with Twisted.

Threads: :meth:`LogStart.delete_records_before` may run in any write-pool thread
beside the partition's writer and readers: it changes the segment list under the
swap and segment locks, as retention does, and readers pinning a deleted segment finish their read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from brokerd.errors import OffsetOutOfRange, UnknownTopicOrPartition
from brokerd.storage.fileio import fsync_dir
from brokerd.storage.log.log_state import LogState
from brokerd.storage.segment.segment import Segment

__all__ = ["LogStart"]

log = logging.getLogger("brokerd.storage")


class LogStart:
    """DeleteRecords on one partition log (see the module docstring)."""

    def __init__(self, state: LogState) -> None:
        self._state = state

    def delete_records_before(
        self, offset: int, *, persist: Callable[[], None] | None = None
    ) -> int:
        """Move the log start offset up to ``offset``; return the start afterwards
        (unchanged when ``offset`` is not above it, as Kafka answers).

        ``offset`` above the high watermark, or negative, raises
        :class:`OffsetOutOfRange`. Readers see the new start at once; ``persist`` (the
        log directory's checkpoint write) runs next, and if it fails the start moves back
        and its error is raised. Then every whole segment below the start is deleted.
        """
        state = self._state
        with state.seg_lock:
            if state.closed:
                raise UnknownTopicOrPartition(f"partition log {state.path} is closed")
            hw = state.high_watermark
            previous = state.log_start_offset
            if offset < 0 or offset > hw:
                raise OffsetOutOfRange(offset, previous, hw)
            if offset <= previous:
                return previous
            state.raise_log_start(offset)
        if persist is not None:
            try:
                persist()
            except BaseException:
                with state.seg_lock:
                    # Unless a concurrent DeleteRecords moved it further meanwhile.
                    state.undo_log_start(offset, previous)
                raise
        self._delete_below_start()
        return offset

    def restore(self, offset: int) -> None:
        """At open, before any reader or writer: apply ``offset`` from the checkpoint."""
        state = self._state
        if offset <= state.log_start_offset:
            return
        if offset <= state.log_end_offset:
            state.raise_log_start(offset)
            self._delete_below_start()
            return
        log.warning(
            "%s: log start offset %d is past the log end %d (records lost in a crash); "
            "the log restarts empty there",
            state.path,
            offset,
            state.log_end_offset,
        )
        # Created before the old segments go: a crash in between leaves a segment that
        # does not follow its predecessor, which recovery deletes, and this runs again.
        fresh = Segment.create(state.path, offset, state.config.index_interval_bytes)
        with state.write_lock, state.seg_lock:
            doomed = state.restart_at(offset, fresh)
        for segment in doomed:
            segment.delete()
        _sync_dir(state.path, "restoring the log start")

    def _delete_below_start(self) -> int:
        """Delete the whole segments that end at or below the log start offset. Under the
        swap lock, as retention: a segment the cleaner is swapping is deleted after the
        swap (never while its cleaned copy is being renamed over its file)."""
        state = self._state
        with state.swap_lock:
            with state.seg_lock:
                if state.closed:
                    return 0
                segments = state.segments
                start = state.log_start_offset
                count = 0
                while count < len(segments) - 1 and segments[count + 1].base_offset <= start:
                    count += 1
                if not count:
                    return 0
                doomed = segments[:count]
                state.set_segments(segments[count:])
            for segment in doomed:
                segment.delete()
        _sync_dir(state.path, "deleting records")
        return count


def _sync_dir(path: str, what: str) -> None:
    try:
        fsync_dir(path)
    except OSError as exc:
        log.warning("cannot fsync %s after %s: %s", path, what, exc)
