"""A partition log's zero-copy read for the Kafka fetch, and reads answered from memory.

:class:`StoredReadMixin` is part of :class:`~brokerd.storage.log.partition_log.PartitionLog` (one
concern per module): :meth:`StoredReadMixin.read_stored` answers like
``PartitionLog.read`` but hands out bytes that passed their check before by reference
(a :class:`~brokerd.storage.segment.stored.StoredSpan` holding its segment's pin), so the
listener can send them with ``os.sendfile`` (docs/performance.md).

The log remembers where its recent batches lie (:mod:`brokerd.storage.segment.batch_positions`):
the ones it appended (the tail) and a few a read found ahead of what it returned. With
them :meth:`StoredReadMixin.read_stored_known` answers a Kafka fetch without reading the
index or a header, and :meth:`StoredReadMixin.read_records_known` decodes just-appended
records (a page-cache read of at most :data:`KNOWN_DECODE_BYTES`) for a native fetch: the
broker core calls both in its reactor thread, and goes to the read pool only when they
return None (docs/performance.md, "Reads without the pool hop").

What it does not do: send anything, or decide which bytes were checked (appends and
reads mark ``verified``; ``reads.stored_from`` consults it). No Twisted. Threads: any
reader thread, like ``read``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from brokerd.storage.log.txns import CommittedFilter
from brokerd.storage.segment.batch_positions import AHEAD_BATCHES, TAIL_BATCHES, BatchPositions
from brokerd.storage.segment.batch_reads import MAX_STORED_BATCH_BYTES, decode_from, stored_from
from brokerd.storage.segment.segment import BatchInfo, Segment
from brokerd.storage.segment.stored import StoredRead, StoredSpan, VerifiedRanges
from brokerd.storage.types import ReadResult, Record, RecordsResult

__all__ = ["KNOWN_DECODE_BYTES", "StoredReadMixin"]

#: A native read from memory decodes at most this many bytes from the batch holding its
#: offset to the published end (one pread of bytes just appended, so in the page cache);
#: a longer read is a backlog, served by the read pool.
KNOWN_DECODE_BYTES = 256 * 1024


class _StoredState(Protocol):
    """The parts of :class:`~brokerd.storage.log.partition_log.PartitionLog` the mixin uses."""

    verified: VerifiedRanges
    _any_aborted: bool
    _tail: BatchPositions
    _ahead: BatchPositions

    def _locate(
        self, offset: int
    ) -> tuple[int, int, int, int, tuple[Segment, ...], int, int]: ...

    def _out_of_range(self, offset: int, high_watermark: int) -> Exception: ...

    def read(self, offset: int, max_bytes: int, *, read_committed: bool = False) -> ReadResult: ...

    def committed_filter(self, offset: int, lso: int) -> CommittedFilter | None: ...


class StoredReadMixin:
    """The Kafka fetch's read by reference, and reads from memory (see the module
    docstring)."""

    _tail: BatchPositions
    _ahead: BatchPositions

    def _init_positions(self) -> None:
        self._tail = BatchPositions(TAIL_BATCHES)
        self._ahead = BatchPositions(AHEAD_BATCHES)

    def _remember_appended(
        self: _StoredState, segment: Segment, start: int, batches: Sequence[BatchInfo]
    ) -> None:
        """Record where the batches just appended at byte ``start`` lie (writer thread)."""
        pos = start
        for base, last, _max_timestamp, size in batches:
            self._tail.add(segment, base, last, pos, size)
            pos += size

    def _forget_positions(self: _StoredState, segments: Sequence[Segment]) -> None:
        """The segment list changed: forget runs of segments no longer in it."""
        for known in (self._tail, self._ahead):
            gone = known.segment
            if gone is not None and all(s is not gone for s in segments):
                known.forget()

    def read_stored(
        self: _StoredState, offset: int, max_bytes: int, *, read_committed: bool = False
    ) -> StoredRead:
        """:meth:`read`'s answer with the bytes by reference where they were checked
        before (a :class:`~brokerd.storage.segment.stored.StoredSpan` holding its segment's pin:
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
            lambda: self._out_of_range(offset, hw), self._ahead,
        )
        if isinstance(found, bytes):
            return StoredRead(found, None, hw, start, lso)
        return StoredRead(b"", found, hw, start, lso)

    def read_stored_known(
        self: _StoredState, offset: int, max_bytes: int, *, read_committed: bool = False
    ) -> StoredRead | None:
        """:meth:`read_stored`'s answer when it needs no file read: the batch holding
        ``offset`` is in a remembered run and the bytes to send were checked before (or
        there is nothing to read). None otherwise: then :meth:`read_stored` must run,
        in a reader thread. Pinning the segment may reopen its descriptor."""
        hw, vbase, vpos, start, segments, i, lso = self._locate(offset)
        if read_committed and (lso < hw or self._any_aborted):
            return None
        if offset >= (lso if read_committed else hw):
            return StoredRead(b"", None, hw, start, lso)
        segment = segments[i]
        if segment.base_offset > vbase:
            return None
        limit = vpos if segment.base_offset == vbase else segment.size
        found = self._tail.find(segment, offset) or self._ahead.find(segment, offset)
        if found is None:
            return None
        pos, first, _base = found
        if pos >= limit or first > MAX_STORED_BATCH_BYTES:
            return None
        size = min(limit - pos, max(first, max_bytes))
        if not self.verified.covers(segment, pos, pos + size) or not segment.pin():
            return None
        return StoredRead(b"", StoredSpan(segment, pos, size), hw, start, lso)

    def read_records_known(
        self: _StoredState, offset: int, max_value_bytes: int
    ) -> RecordsResult | None:
        """``read_records``' answer for just-appended records: the batch holding
        ``offset`` is in the appended run, in the active segment, at most
        :data:`KNOWN_DECODE_BYTES` before the published end, and no transaction was
        aborted (so skipping needs no index read). None otherwise (read in a reader
        thread). The bytes are read (from the page cache) and checked as they decode."""
        hw, vbase, vpos, start, segments, i, lso = self._locate(offset)
        if offset >= lso:
            return RecordsResult((), hw, start)
        segment = segments[i]
        if segment.base_offset != vbase or self._any_aborted:
            return None
        found = self._tail.find(segment, offset)
        if found is None:
            return None
        pos, _first, base = found
        if not 0 < vpos - pos <= KNOWN_DECODE_BYTES or not segment.pin():
            return None
        out: list[Record] = []
        try:
            decode_from(
                segment, pos, base, vpos, offset, max_value_bytes, out, 0,
                self.committed_filter(offset, lso),
            )
        finally:
            segment.unpin()
        return RecordsResult(tuple(out), hw, start)
