"""Stored bytes handed out by reference, and which stored bytes have passed their CRC check.

What it does: :class:`StoredSpan` names a byte range of one segment file and holds the
segment's read pin for as long as the span lives, so the file stays open (and its bytes
readable, even after retention or compaction unlinked it) until :meth:`StoredSpan.release`;
the Kafka fetch path sends such a span to the socket with ``os.sendfile`` instead of
reading it (docs/performance.md); a read answers it as the payload of a
:class:`~brokerd.storage.types.StoredRecords`. :class:`VerifiedRanges` remembers, per
segment, the byte ranges whose batches have been checked (CRC-32C, header, offsets), so a
span is handed out only for checked bytes: a range is marked when the log appends batches
it has validated itself and when a read checked what it read.

What it does not do: read or check bytes (``segment/batch_reads.py``), choose segments
(``log/partition_log.py``), or send anything (``brokerd/net/sendfile.py``). No Twisted.
"""

from __future__ import annotations

import threading
import weakref

from brokerd.errors import StorageError
from brokerd.storage.segment.segment import Segment

__all__ = ["MAX_VERIFIED_RANGES", "StoredSpan", "VerifiedRanges"]

#: Disjoint checked ranges remembered per segment. Sequential appends and reads merge
#: into one range; readers at many scattered positions could make many, and past this
#: bound the older ones are forgotten (they are checked again when next read).
MAX_VERIFIED_RANGES = 64


class StoredSpan:
    """``length`` bytes at ``position`` of a pinned segment's log file.

    The creator passes in a pin it took (``segment.pin()``); the span owns it from then
    on and gives it back in :meth:`release` (idempotent). Reactor-thread code releases it
    once the bytes are sent or the answer holding them is dropped.
    """

    __slots__ = ("_released", "_segment", "length", "position")

    def __init__(self, segment: Segment, position: int, length: int) -> None:
        self._segment = segment
        self.position = position
        self.length = length
        self._released = False

    @property
    def path(self) -> str:
        return self._segment.log_path

    @property
    def released(self) -> bool:
        return self._released

    def fileno(self) -> int:
        """The segment file's descriptor, valid until :meth:`release`."""
        if self._released:
            raise StorageError(f"{self.path}: stored span used after release")
        # The pin this span holds keeps the descriptor open: neither the descriptor
        # budget nor retention closes a pinned segment's file.
        return self._segment.pinned_fd()

    def read(self) -> bytes:
        """The bytes themselves (for transports that cannot take a file descriptor)."""
        if self._released:
            raise StorageError(f"{self.path}: stored span used after release")
        data = self._segment.pread(self.position, self.length)
        if len(data) != self.length:
            raise StorageError(
                f"{self.path}: {self.length} bytes at {self.position} expected, "
                f"{len(data)} present"
            )
        return data

    def read_at(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset`` within the span (a bounded piece of it, for a
        transport that must see the bytes: TLS)."""
        if self._released:
            raise StorageError(f"{self.path}: stored span used after release")
        if offset < 0 or size < 0 or offset + size > self.length:
            raise ValueError(f"[{offset}, +{size}) is not within a span of {self.length} bytes")
        data = self._segment.pread(self.position + offset, size)
        if len(data) != size:
            raise StorageError(
                f"{self.path}: {size} bytes at {self.position + offset} expected, "
                f"{len(data)} present"
            )
        return data

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` bytes (a fetch cut at its byte budget)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot cut a span of {self.length} bytes to {length}")
        self.length = length

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._segment.unpin()

    def __repr__(self) -> str:
        state = " released" if self._released else ""
        return f"<StoredSpan {self.path} [{self.position}, +{self.length}){state}>"


class VerifiedRanges:
    """Checked byte ranges ``[start, end)`` per segment (any thread).

    Keyed weakly by the segment object: a segment swapped for its cleaned copy or deleted
    takes its ranges with it, and a new segment object starts with nothing checked.
    Ranges cover whole batches only, so a range covering a read's first and last byte
    covers every batch the read touches.
    """

    def __init__(self, max_ranges: int = MAX_VERIFIED_RANGES) -> None:
        self._max = max_ranges
        self._lock = threading.Lock()
        self._ranges: weakref.WeakKeyDictionary[Segment, list[tuple[int, int]]] = (
            weakref.WeakKeyDictionary()
        )

    def mark(self, segment: Segment, start: int, end: int) -> None:
        """Record ``[start, end)`` of ``segment`` as checked (merging touching ranges)."""
        if end <= start:
            return
        with self._lock:
            kept: list[tuple[int, int]] = []
            for s, e in self._ranges.get(segment, ()):
                if e < start or s > end:
                    kept.append((s, e))
                else:
                    start, end = min(s, start), max(e, end)
            kept.append((start, end))
            kept.sort()
            if len(kept) > self._max:
                kept = [(start, end)]
            self._ranges[segment] = kept

    def covers(self, segment: Segment, start: int, end: int) -> bool:
        """Whether every byte of ``[start, end)`` of ``segment`` has been checked."""
        with self._lock:
            return any(s <= start and end <= e for s, e in self._ranges.get(segment, ()))

    def ranges(self, segment: Segment) -> tuple[tuple[int, int], ...]:
        with self._lock:
            return tuple(self._ranges.get(segment, ()))
