"""A partition log's zero-copy read for the Kafka fetch.

:class:`StoredReadMixin` is part of :class:`~brokerd.storage.log.PartitionLog` (one
concern per module): :meth:`StoredReadMixin.read_stored` answers like
``PartitionLog.read`` but hands out bytes that passed their check before by reference
(a :class:`~brokerd.storage.stored.StoredSpan` holding its segment's pin), so the
listener can send them with ``os.sendfile`` (docs/performance.md).

What it does not do: send anything, or decide which bytes were checked (appends and
reads mark ``verified``; ``reads.stored_from`` consults it). No Twisted. Threads: any
reader thread, like ``read``.
"""

from __future__ import annotations

from typing import Protocol

from brokerd.storage.reads import stored_from
from brokerd.storage.segment import Segment
from brokerd.storage.stored import StoredRead, VerifiedRanges
from brokerd.storage.types import ReadResult

__all__ = ["StoredReadMixin"]


class _StoredState(Protocol):
    """The parts of :class:`~brokerd.storage.log.PartitionLog` the mixin uses."""

    verified: VerifiedRanges
    _any_aborted: bool

    def _locate(
        self, offset: int
    ) -> tuple[int, int, int, int, tuple[Segment, ...], int, int]: ...

    def _out_of_range(self, offset: int, high_watermark: int) -> Exception: ...

    def read(self, offset: int, max_bytes: int, *, read_committed: bool = False) -> ReadResult: ...


class StoredReadMixin:
    """The Kafka fetch's read by reference (see the module docstring)."""

    def read_stored(
        self: _StoredState, offset: int, max_bytes: int, *, read_committed: bool = False
    ) -> StoredRead:
        """:meth:`read`'s answer with the bytes by reference where they were checked
        before (a :class:`~brokerd.storage.stored.StoredSpan` holding its segment's pin:
        the caller releases it), else read and checked now (and remembered as checked).

        A read_committed read of a partition with an open or aborted transaction cuts
        or annotates its data by batch headers: it is served by :meth:`read` (bytes).
        """
        hw, vbase, vpos, start, segments, i, lso = self._locate(offset)
        if read_committed and (lso < hw or self._any_aborted):
            r = self.read(offset, max_bytes, read_committed=True)
            return StoredRead(
                r.data, None, r.high_watermark, r.log_start_offset, r.last_stable_offset,
                r.aborted,
            )
        if offset >= (lso if read_committed else hw):
            return StoredRead(b"", None, hw, start, lso)
        found = stored_from(
            segments, i, vbase, vpos, offset, max_bytes, self.verified,
            lambda: self._out_of_range(offset, hw),
        )
        if isinstance(found, bytes):
            return StoredRead(found, None, hw, start, lso)
        return StoredRead(b"", found, hw, start, lso)
