"""Lookups in one segment's ``.log``: walking batch headers from a position, finding the
batch holding an offset or the first batch at or after a timestamp (index bisect, then a
short scan of headers), and the quarantined regions such a walk steps over.

:class:`SegmentScan` is held by its :class:`~brokerd.storage.segment.segment.Segment` as
``segment.scan``. What it does not do: open, pin or write the file (``segment/segment.py`` does;
reads go through its ``pread``), or check CRCs (``segment/batch_reads.py`` does for what it
returns). No Twisted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from brokerd.errors import CorruptStoredBatch, StorageError
from brokerd.storage.record.header import BATCH_HEADER_SIZE, BatchHeader, check_header, read_header
from brokerd.storage.segment.resync import Damage

if TYPE_CHECKING:
    from brokerd.storage.segment.segment import Segment

__all__ = ["SCAN_CHUNK", "SegmentScan"]

#: Bytes read at a time when walking batch headers: about two index intervals, so a lookup
#: usually costs one pread.
SCAN_CHUNK = 8 * 1024


class SegmentScan:
    """Header walks and lookups over one segment's ``.log`` and indexes.

    A segment holds one as its ``scan``; it reads the segment's current indexes and
    quarantined regions on every call, so it never goes stale when they change.
    """

    def __init__(self, segment: Segment) -> None:
        self._segment = segment

    def damage_at(self, offset: int) -> Damage | None:
        """The quarantined region holding ``offset``, if any."""
        for damage in self._segment.damaged:
            if damage.first_offset <= offset < damage.next_offset:
                return damage
        return None

    def headers_from(
        self, pos: int, limit: int, expected: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` of the batches from ``pos`` (a batch start) to
        ``limit`` (a batch end). With ``expected``, the batch at ``pos`` must start at or
        after that offset and each next batch after the previous one (the base offset is
        not under the CRC, so this is what catches a damaged one; a compacted segment has
        gaps between batches, so "after", not "right after").

        Raises :class:`StorageError` if a header is invalid, offsets are not contiguous or
        a batch runs past ``limit``: there is damage the lookup must not silently skip.
        """
        segment = self._segment
        buf = b""
        buf_start = pos
        skips = {d.start: d for d in segment.damaged}
        while pos < limit:
            skip = skips.get(pos)
            if skip is not None:
                # Quarantined at recovery: the batches after it are valid.
                pos, expected = skip.end, skip.next_offset
                continue
            if pos + BATCH_HEADER_SIZE > buf_start + len(buf):
                buf_start = pos
                buf = segment.pread(pos, min(SCAN_CHUNK, limit - pos))
                if len(buf) < BATCH_HEADER_SIZE:
                    raise CorruptStoredBatch(
                        f"{segment.log_path}: incomplete batch header at byte {pos}"
                    )
            header = read_header(buf, pos - buf_start)
            reason = check_header(header, stored=True)
            if reason is None and pos + header.size > limit:
                reason = f"batch of {header.size} bytes runs past byte {limit}"
            if reason is None and expected is not None and header.base_offset < expected:
                reason = f"base offset {header.base_offset}, expected {expected} or more"
            if reason is not None:
                raise CorruptStoredBatch(
                    f"{segment.log_path}: damaged batch at byte {pos}: {reason}"
                )
            yield pos, header
            pos += header.size
            expected = header.last_offset + 1

    def _start(self, entry: tuple[int, int] | None, limit: int) -> tuple[int, int]:
        """Scan start ``(position, base offset)`` for an index entry (segment start if none)."""
        base = self._segment.base_offset
        if entry is None or entry[1] >= limit:
            return 0, base
        return entry[1], base + entry[0]

    def find_batch(self, offset: int, limit: int) -> tuple[int, BatchHeader] | None:
        """The first batch before ``limit`` whose last offset is >= ``offset``, or None.

        If the scan from the index entry meets damage, it is retried from the segment
        start: a damaged index entry costs time, not availability. An offset in a
        quarantined region raises :class:`CorruptStoredBatch` naming file and bytes.
        """
        segment = self._segment
        damage = self.damage_at(offset)
        if damage is not None:
            raise CorruptStoredBatch(
                f"{segment.log_path}: offsets {damage.first_offset}..{damage.next_offset - 1} "
                f"are in a damaged region (bytes {damage.start}..{damage.end}, "
                f"{damage.reason}), quarantined at recovery"
            )
        pos, base = self._start(segment.index.lookup(offset - segment.base_offset), limit)
        try:
            return self._first(pos, base, limit, lambda h: h.last_offset >= offset)
        except StorageError:
            if pos == 0:
                raise
            return self._first(0, segment.base_offset, limit, lambda h: h.last_offset >= offset)

    def find_timestamp(self, timestamp: int, limit: int) -> tuple[int, BatchHeader] | None:
        """The first batch before ``limit`` whose max timestamp is >= ``timestamp``."""
        segment = self._segment
        i = segment.timeindex.last_before(timestamp)
        entry = segment.index.entry(i) if i is not None else None
        if entry is not None and entry[1] >= limit:
            return None
        pos, base = self._start(entry, limit)

        def wanted(header: BatchHeader) -> bool:
            return header.max_timestamp >= timestamp

        try:
            return self._first(pos, base, limit, wanted)
        except StorageError:
            if pos == 0:
                raise
            return self._first(0, segment.base_offset, limit, wanted)

    def _first(
        self, pos: int, base: int, limit: int, wanted: Callable[[BatchHeader], bool]
    ) -> tuple[int, BatchHeader] | None:
        for hpos, header in self.headers_from(pos, limit, base):
            if wanted(header):
                return hpos, header
        return None
