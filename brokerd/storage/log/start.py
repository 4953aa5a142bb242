"""Moving a partition's log start offset: Kafka's DeleteRecords, and its restoration at open.

:class:`LogStartMixin` is part of :class:`~brokerd.storage.log.partition_log.PartitionLog` (kept
in its
own module, one concern per module). It moves ``log_start_offset`` up, never down; reads
below the start then raise :class:`OffsetOutOfRange`, whole segments that end at or below
it are deleted (never the active one), and a segment straddling it stays. At open it
applies a start offset read from the checkpoint, and when a crash lost the records the
checkpoint points into (the start is past the log end), it restarts the log empty at
that offset, as Kafka does.

What it does not do: write or read the ``log-start-offset-checkpoint`` file (the log
directory does, through ``persist`` and :mod:`brokerd.storage.checkpoints`), check the
topic's cleanup policy, or anything with Twisted.

Threads: :meth:`LogStartMixin.delete_records_before` may run in any write-pool thread
beside the partition's writer and readers: it changes the segment list under the
swap and segment locks, as retention does, and readers pinning a deleted segment finish their read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from brokerd.errors import OffsetOutOfRange, UnknownTopicOrPartition
from brokerd.storage.fileio import fsync_dir
from brokerd.storage.segment.segment import Segment

if TYPE_CHECKING:
    from brokerd.storage.config.log_config import LogConfig

__all__ = ["LogStartMixin"]

log = logging.getLogger("brokerd.storage")


class _LogState(Protocol):
    """The parts of :class:`~brokerd.storage.log.partition_log.PartitionLog` the mixin works on."""

    path: str
    config: LogConfig
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    _closed: bool
    _write_lock: threading.Lock
    _seg_lock: threading.Lock
    _swap_lock: threading.Lock
    _segments: tuple[Segment, ...]
    _visible: tuple[int, int, int, int]
    _dirty: dict[int, Segment]

    def _set_segments(self, segments: Sequence[Segment]) -> None: ...


class LogStartMixin:
    """DeleteRecords on one partition log (see the module docstring)."""

    def delete_records_before(
        self: _LogState, offset: int, *, persist: Callable[[], None] | None = None
    ) -> int:
        """Move the log start offset up to ``offset``; return the start afterwards
        (unchanged when ``offset`` is not above it, as Kafka answers).

        ``offset`` above the high watermark, or negative, raises
        :class:`OffsetOutOfRange`. Readers see the new start at once; ``persist`` (the
        log directory's checkpoint write) runs next, and if it fails the start moves back
        and its error is raised. Then every whole segment below the start is deleted.
        """
        with self._seg_lock:
            if self._closed:
                raise UnknownTopicOrPartition(f"partition log {self.path} is closed")
            hw = self._visible[0]
            previous = self.log_start_offset
            if offset < 0 or offset > hw:
                raise OffsetOutOfRange(offset, previous, hw)
            if offset <= previous:
                return previous
            self.log_start_offset = offset
        if persist is not None:
            try:
                persist()
            except BaseException:
                with self._seg_lock:
                    # Unless a concurrent DeleteRecords moved it further meanwhile.
                    if self.log_start_offset == offset:
                        self.log_start_offset = previous
                raise
        _delete_below_start(self)
        return offset

    def restore_log_start(self: _LogState, offset: int) -> None:
        """At open, before any reader or writer: apply ``offset`` from the checkpoint."""
        if offset <= self.log_start_offset:
            return
        if offset <= self.log_end_offset:
            self.log_start_offset = offset
            _delete_below_start(self)
            return
        log.warning(
            "%s: log start offset %d is past the log end %d (records lost in a crash); "
            "the log restarts empty there",
            self.path,
            offset,
            self.log_end_offset,
        )
        # Created before the old segments go: a crash in between leaves a segment that
        # does not follow its predecessor, which recovery deletes, and this runs again.
        fresh = Segment.create(self.path, offset, self.config.index_interval_bytes)
        with self._write_lock, self._seg_lock:
            doomed = self._segments
            self._set_segments([fresh])
            self.log_start_offset = self.log_end_offset = self.recovery_point = offset
            self._visible = (offset, offset, 0, offset)
            self._dirty.clear()
        for segment in doomed:
            segment.delete()
        _sync_dir(self.path, "restoring the log start")


def _delete_below_start(plog: _LogState) -> int:
    """Delete the whole segments that end at or below the log start offset. Under the
    swap lock, as retention: a segment the cleaner is swapping is deleted after the swap
    (never while its cleaned copy is being renamed over its file)."""
    with plog._swap_lock:
        with plog._seg_lock:
            if plog._closed:
                return 0
            segments = plog._segments
            start = plog.log_start_offset
            count = 0
            while count < len(segments) - 1 and segments[count + 1].base_offset <= start:
                count += 1
            if not count:
                return 0
            doomed = segments[:count]
            plog._set_segments(segments[count:])
        for segment in doomed:
            segment.delete()
    _sync_dir(plog.path, "deleting records")
    return count


def _sync_dir(path: str, what: str) -> None:
    try:
        fsync_dir(path)
    except OSError as exc:
        log.warning("cannot fsync %s after %s: %s", path, what, exc)
