"""The state one partition log's parts share: segments, offsets, locks, what is published.

What it does: :class:`LogState` holds what :class:`~brokerd.storage.log.partition_log.
PartitionLog` and its parts (the log start in ``start.py``, retention and segment swaps in
``maintenance.py``, transactions in ``txns.py``, the reads in ``stored_reads.py``) work on
together: the segment list (an immutable snapshot readers load without a lock), the log
start and end offsets and the recovery point, the published ``(high watermark, active
segment, its size, LSO)`` tuple, the segments written since the last flush, the three locks,
the failure latch, the byte ranges checked already (``verified``) and the batch positions
the log remembers (``tail``, ``ahead``). :meth:`LogState.locate` checks a read's offset
against the published state and answers a
:class:`~brokerd.storage.segment.batch_reads.Located` snapshot, which every read path starts
from.

What it does not do: read or write segments, decide retention or transactions (the parts
do), or anything with Twisted. It is Kafka's ``LocalLog`` and ``LogSegments`` state without
their behaviour: the parts bring that.

Threads: the writer side changes it under ``write_lock``; the segment list is swapped under
``seg_lock`` (and ``swap_lock`` for deletions and cleaned-segment swaps); readers take no
lock, and read ``segview`` and ``visible`` once each.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Sequence

from brokerd.errors import OffsetOutOfRange, StorageError, UnknownTopicOrPartition
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.segment.batch_positions import AHEAD_BATCHES, TAIL_BATCHES, BatchPositions
from brokerd.storage.segment.batch_reads import Located
from brokerd.storage.segment.segment import Segment
from brokerd.storage.segment.stored import VerifiedRanges

__all__ = ["LogState"]

log = logging.getLogger("brokerd.storage")

_new_tuple = tuple.__new__


class LogState:
    """One partition log's shared state (see the module docstring)."""

    def __init__(
        self, path: str, config: LogConfig, clock: Callable[[], float], segments: list[Segment]
    ) -> None:
        self.path = path
        self.config = config
        self.clock = clock
        self.write_lock = threading.Lock()
        self.seg_lock = threading.Lock()
        # Held while segments are deleted or swapped for cleaned copies (retention, the
        # cleaner, close): never by appends or reads.
        self.swap_lock = threading.Lock()
        #: Batches the log appended (the tail) and a few a read found ahead of what it
        #: returned: what a read from memory finds its batch in.
        self.tail = BatchPositions(TAIL_BATCHES)
        self.ahead = BatchPositions(AHEAD_BATCHES)
        self.segview: tuple[tuple[Segment, ...], tuple[int, ...]] = ((), ())
        self.segments: tuple[Segment, ...] = ()
        self.set_segments(segments)
        active = segments[-1]
        self.log_start_offset: int = segments[0].base_offset
        #: The next offset to assign.
        self.log_end_offset: int = active.next_offset
        #: Everything below this offset is on stable storage.
        self.recovery_point: int = active.next_offset
        end = active.next_offset
        #: Published together: (high watermark, active segment's base, its size, LSO).
        self.visible: tuple[int, int, int, int] = (end, active.base_offset, active.size, end)
        #: Segments written since the last flush, by base offset.
        self.dirty: dict[int, Segment] = {}
        self.failure: str | None = None
        self.closed = False
        #: Byte ranges whose batches passed their check: what a fetch may send unread.
        self.verified = VerifiedRanges()

    def set_segments(self, segments: Sequence[Segment]) -> None:
        """Install a new segment list (under ``seg_lock``, or before readers exist)."""
        # Readers load segview once; the pair must stay consistent.
        self.segview = (tuple(segments), tuple(s.base_offset for s in segments))
        self.segments = self.segview[0]
        for known in (self.tail, self.ahead):
            gone = known.segment
            if gone is not None and all(s is not gone for s in self.segments):
                known.forget()

    # --- the writer side ------------------------------------------------------------------

    def check_writable(self) -> None:
        if self.closed:
            raise UnknownTopicOrPartition(f"partition log {self.path} is closed")
        if self.failure is not None:
            raise StorageError(f"partition {self.path} refuses appends: {self.failure}")

    def fail(self, reason: str) -> StorageError:
        """Latch the partition failed for good; the error to raise."""
        self.failure = reason
        log.error("partition %s failed: %s", self.path, reason)
        return StorageError(f"partition {self.path} failed: {reason}")

    # --- the reader side ------------------------------------------------------------------

    def out_of_range(self, offset: int, high_watermark: int) -> Exception:
        if self.closed:
            return UnknownTopicOrPartition(f"partition log {self.path} is closed")
        return OffsetOutOfRange(offset, self.log_start_offset, high_watermark)

    def locate(self, offset: int) -> Located:
        """Validate ``offset`` against the published state and find its segment."""
        visible = self.visible
        segments, bases = self.segview
        start = self.log_start_offset
        hw = visible[0]
        if self.closed or offset < start or offset > hw:
            raise self.out_of_range(offset, hw)
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            raise self.out_of_range(offset, hw)
        # tuple.__new__ rather than Located(...): the named tuple without its Python-level
        # constructor, which every read would pay for.
        return _new_tuple(
            Located,
            (offset, hw, visible[1], visible[2], start, segments, i, max(visible[3], start)),
        )
