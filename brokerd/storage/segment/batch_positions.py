"""Where recent batches of one segment lie: a bounded in-memory record per partition log.

What it does: :class:`BatchPositions` remembers, for a run of consecutive batches of one
segment file, each batch's base offset, last offset, byte position and size, so that the
batch holding an offset (the first batch whose last offset is at or past it, as
``Segment.find_batch`` answers) is found without reading the index or a batch header.
:class:`~brokerd.storage.log.partition_log.PartitionLog` keeps two: one fed by its appends (the
tail a
caught-up consumer or a woken long poll reads) and one fed by reads walking a few headers
ahead (a consumer reading a backlog). With them a read of known bytes is answered in the
caller's thread, without a hand-off to a read pool (docs/performance.md, "Reads without
the pool hop").

The run is kept contiguous in the file (each batch starts where the previous one ends), so
the first batch of the run whose last offset is at or past an offset is the first such
batch of the segment from the run's start on: that is what makes an answer exact, also in
a compacted segment with gaps between offsets. A batch that does not continue the run
starts a new one. At most ``max_batches`` are kept; past that the older half is dropped.

What it does not do: read files, check CRCs (a caller still asks
:class:`~brokerd.storage.segment.stored.VerifiedRanges` before handing bytes out), or know the
published end (the caller bounds every answer by it). No Twisted. Threads: any; one lock.
"""

from __future__ import annotations

import bisect
import threading
from array import array

from brokerd.storage.segment.segment import Segment

__all__ = ["AHEAD_BATCHES", "TAIL_BATCHES", "BatchPositions", "Located"]

#: Appended batches remembered per partition log (the tail): enough for a consumer that
#: keeps up. Memory, measured with tracemalloc for 10,000 partitions: 3.7 MB idle, 9 MB
#: with one batch each, 33 MB with both runs full (docs/performance.md).
TAIL_BATCHES = 32
#: Batches a read remembers ahead of what it returned (a sequential reader's next ones).
AHEAD_BATCHES = 32

#: ``(position, size, base offset)`` of the batch holding an offset.
Located = tuple[int, int, int]


class BatchPositions:
    """A contiguous run of batch positions in one segment (see the module docstring)."""

    __slots__ = ("_cols", "_lock", "_max", "_segment")

    def __init__(self, max_batches: int) -> None:
        if max_batches < 2:
            raise ValueError(f"max_batches must be at least 2, got {max_batches}")
        self._max = max_batches
        self._lock = threading.Lock()
        self._segment: Segment | None = None
        # (bases, lasts, positions, sizes), allocated at the first batch: an idle
        # partition costs the empty object only.
        self._cols: tuple[array[int], array[int], array[int], array[int]] | None = None

    def __len__(self) -> int:
        cols = self._cols
        return 0 if cols is None else len(cols[0])

    @property
    def segment(self) -> Segment | None:
        return self._segment

    def add(self, segment: Segment, base: int, last: int, position: int, size: int) -> None:
        """Remember the batch at ``position`` of ``segment``: ``size`` bytes holding
        offsets ``base``..``last``. Starts a new run if it does not continue this one."""
        if size <= 0 or last < base:
            return
        with self._lock:
            cols = self._cols
            if (
                cols is None
                or segment is not self._segment
                or cols[2][-1] + cols[3][-1] != position
                or cols[1][-1] >= base
            ):
                self._segment = segment
                cols = self._cols = (array("q"), array("q"), array("q"), array("q"))
            elif len(cols[0]) >= self._max:
                half = len(cols[0]) // 2
                for column in cols:
                    del column[:half]
            bases, lasts, positions, sizes = cols
            bases.append(base)
            lasts.append(last)
            positions.append(position)
            sizes.append(size)

    def next_after(self, segment: Segment) -> tuple[int, int] | None:
        """``(position, offset)`` just past the run's last batch in ``segment``: where a
        reader learning ahead continues; None if the run is of another segment."""
        with self._lock:
            cols = self._cols
            if segment is not self._segment or cols is None:
                return None
            return cols[2][-1] + cols[3][-1], cols[1][-1] + 1

    def find(self, segment: Segment, offset: int) -> Located | None:
        """The batch of ``segment`` holding ``offset`` (the first whose last offset is at
        or past it), if this run knows it."""
        with self._lock:
            cols = self._cols
            if segment is not self._segment or cols is None:
                return None
            bases, lasts, positions, sizes = cols
            j = bisect.bisect_left(lasts, offset)
            if j == len(lasts) or (j == 0 and bases[0] > offset):
                # Past the run, or before it: an earlier batch may hold the offset.
                return None
            return positions[j], sizes[j], bases[j]

    def forget(self) -> None:
        """Drop everything (the segment was swapped, cut back or closed)."""
        with self._lock:
            self._segment = None
            self._cols = None
