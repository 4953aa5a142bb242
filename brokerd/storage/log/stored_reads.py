"""A partition log's reads of its stored batches: one read call, its forms and its fast path.

:class:`StoredReads` is the part of :class:`~brokerd.storage.log.partition_log.PartitionLog`
that answers :meth:`StoredReads.read`, on the
:class:`~brokerd.storage.log.log_state.LogState` it shares with the log's other parts. A
:class:`~brokerd.storage.types.ReadSpec` says the isolation and the form of the answer
(:class:`~brokerd.storage.types.Delivery`): raw batches as bytes (read and checked now),
raw batches by reference (bytes that passed their check before handed out as a
:class:`~brokerd.storage.segment.stored.StoredSpan` holding its segment's pin, so the listener
can send them with ``os.sendfile``, docs/performance.md), or decoded committed records (the
native fetch). Every form answers a :class:`~brokerd.storage.types.LogRead`.

``memory_only`` asks for the answer only when it needs no index or header read: the log
remembers where its recent batches lie (:mod:`brokerd.storage.segment.batch_positions`): the
ones it appended (the tail) and a few a read found ahead of what it returned. With them a
read by reference needs no file read at all, and a decoding read of just-appended records
one page-cache read of at most :data:`KNOWN_DECODE_BYTES`. The broker core asks so in its
reactor thread, and goes to the read pool only when the answer is None (docs/performance.md,
"Reads without the pool hop"). A read of bytes from memory answers only when there is
nothing to read.

What it does not do: send anything, or decide which bytes were checked (appends and
reads mark ``verified``; ``batch_reads.stored_from`` consults it). No Twisted. Threads: any
reader thread; :meth:`StoredReads.remember_appended` in the writer's.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.storage.log.log_state import LogState
from brokerd.storage.log.txns import PartitionTxns
from brokerd.storage.segment.batch_reads import (
    MAX_STORED_BATCH_BYTES,
    Located,
    batches_end,
    cut_at_offset,
    decode_from,
    published_segments,
    read_raw,
    records_from,
    stored_from,
)
from brokerd.storage.segment.segment import BatchInfo, Segment
from brokerd.storage.segment.stored import StoredSpan
from brokerd.storage.types import (
    AbortedTxn,
    Delivery,
    LogRead,
    ReadSpec,
    Record,
    StoredRecords,
)

__all__ = ["KNOWN_DECODE_BYTES", "StoredReads"]

#: A native read from memory decodes at most this many bytes from the batch holding its
#: offset to the published end (one pread of bytes just appended, so in the page cache);
#: a longer read is a backlog, served by the read pool.
KNOWN_DECODE_BYTES = 256 * 1024


class StoredReads:
    """The reads of one partition log (see the module docstring).

    :param txns: the log's transactions: aborted lists and what a committed read skips.
    """

    def __init__(self, state: LogState, txns: PartitionTxns) -> None:
        self._state = state
        self._txns = txns

    def remember_appended(
        self, segment: Segment, start: int, batches: Sequence[BatchInfo]
    ) -> None:
        """Record where the batches just appended at byte ``start`` lie (writer thread)."""
        tail = self._state.tail
        pos = start
        for base, last, _max_timestamp, size in batches:
            tail.add(segment, base, last, pos, size)
            pos += size

    def read(
        self, offset: int, max_bytes: int, spec: ReadSpec, *, memory_only: bool = False
    ) -> LogRead | None:
        """The log from ``offset``, as ``spec`` says; None only for ``memory_only`` when
        memory does not hold the answer (then read again without it, in a reader thread).

        Raw batches (:attr:`Delivery.BYTES`, :attr:`Delivery.REFERENCE`) start with the
        batch holding ``offset``: at least one whole batch when one exists past it (even
        if larger than ``max_bytes``), else cut at ``max_bytes`` (the last batch may be
        partial); never past the high watermark; may stop at a segment end. Read
        committed, never a batch at or past the LSO (an offset in [LSO, high watermark]
        gives nothing), with the aborted transactions overlapping the data.

        Decoded records (:attr:`Delivery.RECORDS`) start at exactly ``offset``; their
        values total at most ``max_bytes``, but at least one record is returned if any
        exists past ``offset``; they continue across segments and stop at the LSO.
        Control records and aborted transactions' records are skipped (their offsets are
        gaps). Null values stay None.

        ``offset`` equal to the high watermark gives nothing; outside [log start, high
        watermark] raises :class:`OffsetOutOfRange`. Damage raises :class:`StorageError`.
        """
        at = self._state.locate(offset)
        delivery = spec.delivery
        if delivery is Delivery.REFERENCE:
            if memory_only:
                return self._by_reference_from_memory(at, max_bytes, spec.committed)
            return self._by_reference(at, max_bytes, spec.committed)
        if delivery is Delivery.RECORDS:
            if memory_only:
                return self._records_from_memory(at, max_bytes)
            return self._records(at, max_bytes)
        if memory_only:
            end = at.last_stable_offset if spec.committed else at.high_watermark
            return _nothing(at) if offset >= end else None
        return self._bytes(at, max_bytes, spec.committed)

    # --- raw batches ----------------------------------------------------------------------

    def _bytes(self, at: Located, max_bytes: int, committed: bool) -> LogRead:
        hw, start, lso, offset = (
            at.high_watermark, at.log_start_offset, at.last_stable_offset, at.offset
        )
        end = lso if committed else hw
        data = b""
        if offset < end:
            data = self._raw(at, max_bytes)
        if not committed:
            return LogRead(data, hw, start, lso)
        if lso < hw:
            data = cut_at_offset(data, lso)
        aborted: tuple[AbortedTxn, ...] = ()
        if data and self._txns.any_aborted:
            aborted = self._txns.aborted_txns(offset, batches_end(data, lso))
        return LogRead(data, hw, start, lso, aborted)

    def _raw(self, at: Located, max_bytes: int) -> bytes:
        for segment, limit in published_segments(at):
            if not segment.pin():
                raise self._state.out_of_range(at.offset, at.high_watermark)
            try:
                found = segment.scan.find_batch(at.offset, limit)
                if found is not None:
                    return read_raw(segment, found[0], found[1], limit, max_bytes)
            finally:
                segment.unpin()
        return b""

    def _by_reference(self, at: Located, max_bytes: int, committed: bool) -> LogRead:
        """The raw read with the bytes by reference where they were checked before, else
        read and checked now (and remembered as checked).

        A read_committed read of a partition with an open or aborted transaction cuts
        or annotates its data by batch headers: it is answered by value.
        """
        hw, lso = at.high_watermark, at.last_stable_offset
        if committed and (lso < hw or self._txns.any_aborted):
            return self._bytes(at, max_bytes, True)
        if at.offset >= (lso if committed else hw):
            return _nothing(at)
        state = self._state
        found = stored_from(
            at, max_bytes, state.verified,
            lambda: state.out_of_range(at.offset, hw), state.ahead,
        )
        if isinstance(found, bytes):
            return _nothing(at)
        return LogRead(StoredRecords(found), hw, at.log_start_offset, lso)

    def _by_reference_from_memory(
        self, at: Located, max_bytes: int, committed: bool
    ) -> LogRead | None:
        """:meth:`_by_reference`'s answer when it needs no file read: the batch holding the
        offset is in a remembered run and the bytes to send were checked before (or there
        is nothing to read). None otherwise. Pinning the segment may reopen its
        descriptor."""
        # Unpacked at once (a named tuple is a tuple): this is the hot path of a consumer
        # that keeps up.
        offset, hw, vbase, vpos, start, segments, i, lso = at
        if committed and (lso < hw or self._txns.any_aborted):
            return None
        if offset >= (lso if committed else hw):
            return LogRead(b"", hw, start, lso)
        segment = segments[i]
        if segment.base_offset > vbase:
            return None
        limit = vpos if segment.base_offset == vbase else segment.size
        state = self._state
        found = state.tail.find(segment, offset) or state.ahead.find(segment, offset)
        if found is None:
            return None
        pos, first, _base = found
        if pos >= limit or first > MAX_STORED_BATCH_BYTES:
            return None
        size = min(limit - pos, max(first, max_bytes))
        if not state.verified.covers(segment, pos, pos + size) or not segment.pin():
            return None
        return LogRead(StoredRecords(StoredSpan(segment, pos, size)), hw, start, lso)

    # --- decoded records ------------------------------------------------------------------

    def _records(self, at: Located, max_value_bytes: int) -> LogRead:
        lso = at.last_stable_offset
        if at.offset >= lso:
            return _nothing(at)
        out = records_from(
            at, max_value_bytes, self._state.out_of_range,
            self._txns.committed_filter(at.offset, lso),
        )
        return LogRead(
            b"", at.high_watermark, at.log_start_offset, lso, decoded=tuple(out)
        )

    def _records_from_memory(self, at: Located, max_value_bytes: int) -> LogRead | None:
        """:meth:`_records`' answer for just-appended records: the batch holding the
        offset is in the appended run, in the active segment, at most
        :data:`KNOWN_DECODE_BYTES` before the published end, and no transaction was
        aborted (so skipping needs no index read). None otherwise. The bytes are read
        (from the page cache) and checked as they decode."""
        lso, offset, vpos = at.last_stable_offset, at.offset, at.active_size
        if offset >= lso:
            return _nothing(at)
        segment = at.segments[at.segment_index]
        if segment.base_offset != at.active_base or self._txns.any_aborted:
            return None
        found = self._state.tail.find(segment, offset)
        if found is None:
            return None
        pos, _first, base = found
        if not 0 < vpos - pos <= KNOWN_DECODE_BYTES or not segment.pin():
            return None
        out: list[Record] = []
        try:
            decode_from(
                segment, pos, base, vpos, offset, max_value_bytes, out, 0,
                self._txns.committed_filter(offset, lso),
            )
        finally:
            segment.unpin()
        return LogRead(
            b"", at.high_watermark, at.log_start_offset, lso, decoded=tuple(out)
        )


def _nothing(at: Located) -> LogRead:
    """The answer of a read with nothing to return."""
    return LogRead(b"", at.high_watermark, at.log_start_offset, at.last_stable_offset)
