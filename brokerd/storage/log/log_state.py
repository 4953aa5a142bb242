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

Its fields are read-only outside it: the parts change the offsets, the published tuple
and the latches through its few mutators, each keeping one invariant
(:meth:`LogState.publish` is the one writer of the high watermark and LSO, as Kafka's
``UnifiedLog`` has one; the log start only rises, but for a failed DeleteRecords' undo).

Threads: the writer side changes it under ``write_lock``; the segment list is swapped under
``seg_lock`` (and ``swap_lock`` for deletions and cleaned-segment swaps); readers take no
lock, and read ``segview`` and ``visible`` once each.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Final

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
    """One partition log's shared state (see the module docstring).

    The offsets, the published tuple, the config and the failed and closed latches are
    read-only properties; they change only through the mutators below, each of which
    keeps one invariant (the callers hold the lock its docstring names).
    """

    def __init__(
        self, path: str, config: LogConfig, clock: Callable[[], float], segments: list[Segment]
    ) -> None:
        self.path: Final = path
        self._config = config
        self.clock: Final = clock
        self.write_lock: Final = threading.Lock()
        self.seg_lock: Final = threading.Lock()
        # Held while segments are deleted or swapped for cleaned copies (retention, the
        # cleaner, close): never by appends or reads.
        self.swap_lock: Final = threading.Lock()
        #: Batches the log appended (the tail) and a few a read found ahead of what it
        #: returned: what a read from memory finds its batch in.
        self.tail: Final = BatchPositions(TAIL_BATCHES)
        self.ahead: Final = BatchPositions(AHEAD_BATCHES)
        self._segview: tuple[tuple[Segment, ...], tuple[int, ...]] = ((), ())
        self.set_segments(segments)
        active = segments[-1]
        self._log_start_offset: int = segments[0].base_offset
        end = active.next_offset
        self._log_end_offset: int = end
        self._recovery_point: int = end
        self._visible: tuple[int, int, int, int] = (end, active.base_offset, active.size, end)
        #: Segments written since the last flush, by base offset (the writer side's,
        #: under ``write_lock``).
        self.dirty: Final[dict[int, Segment]] = {}
        self._failure: str | None = None
        self._closed = False
        #: Byte ranges whose batches passed their check: what a fetch may send unread.
        self.verified: Final = VerifiedRanges()

    # --- read-only views ------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def segview(self) -> tuple[tuple[Segment, ...], tuple[int, ...]]:
        """The segments and their base offsets, one consistent pair (readers load it once)."""
        return self._segview

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self._segview[0]

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign."""
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is on stable storage."""
        return self._recovery_point

    @property
    def visible(self) -> tuple[int, int, int, int]:
        """Published together: (high watermark, active segment's base, its size, LSO)."""
        return self._visible

    @property
    def high_watermark(self) -> int:
        return self._visible[0]

    @property
    def last_stable_offset(self) -> int:
        """The published LSO, never below the log start (DeleteRecords may pass it)."""
        return max(self._visible[3], self._log_start_offset)

    @property
    def failure(self) -> str | None:
        return self._failure

    @property
    def closed(self) -> bool:
        return self._closed

    # --- the segment list -----------------------------------------------------------------

    def set_segments(self, segments: Sequence[Segment]) -> None:
        """Install a new segment list (under ``seg_lock``, or before readers exist)."""
        # Readers load segview once; the pair must stay consistent.
        self._segview = (tuple(segments), tuple(s.base_offset for s in segments))
        for known in (self.tail, self.ahead):
            gone = known.segment
            if gone is not None and all(s is not gone for s in self._segview[0]):
                known.forget()

    # --- the writer side ------------------------------------------------------------------

    def reconfigure(self, config: LogConfig) -> None:
        """Use ``config`` from now on (under ``write_lock``)."""
        self._config = config

    def appended(self, segment: Segment, count: int) -> None:
        """``count`` offsets were written to ``segment`` (under ``write_lock``): it is
        dirty until the next flush, and the log end moves past them."""
        self.dirty[segment.base_offset] = segment
        self._log_end_offset += count

    def flushed(self, target: int) -> None:
        """Everything below ``target`` is on stable storage (under ``write_lock``)."""
        self._recovery_point = target

    def publish(self, stable_end: Callable[[int], int]) -> int:
        """The one writer of the high watermark: make everything appended visible, with
        the LSO ``stable_end(log end)`` (under ``write_lock``). Returns the high
        watermark."""
        active = self._segview[0][-1]
        end = self._log_end_offset
        self._visible = (end, active.base_offset, active.size, stable_end(end))
        return end

    def show_rolled(self) -> None:
        """Readers see the new, empty active segment; the high watermark and LSO stay (an
        empty roll appends nothing). Under ``write_lock``, after :meth:`set_segments`."""
        hw, _base, _size, lso = self._visible
        self._visible = (hw, self._segview[0][-1].base_offset, 0, lso)

    def restart_at(self, offset: int, fresh: Segment) -> tuple[Segment, ...]:
        """Replace every segment by the empty ``fresh`` one at ``offset``: the log starts,
        ends, is flushed and is published there (under ``write_lock`` and ``seg_lock``).
        Returns the segments it replaced."""
        doomed = self._segview[0]
        self.set_segments([fresh])
        self._log_start_offset = self._log_end_offset = self._recovery_point = offset
        self._visible = (offset, offset, 0, offset)
        self.dirty.clear()
        return doomed

    def check_writable(self) -> None:
        if self._closed:
            raise UnknownTopicOrPartition(f"partition log {self.path} is closed")
        if self._failure is not None:
            raise StorageError(f"partition {self.path} refuses appends: {self._failure}")

    def fail(self, reason: str) -> StorageError:
        """Latch the partition failed for good; the error to raise."""
        self._failure = reason
        log.error("partition %s failed: %s", self.path, reason)
        return StorageError(f"partition {self.path} failed: {reason}")

    def close(self) -> None:
        """Latch the log closed (under ``swap_lock``): reads and appends refuse from now."""
        self._closed = True

    # --- the log start --------------------------------------------------------------------

    def raise_log_start(self, offset: int) -> int:
        """Move the log start up to ``offset`` unless it is there already (under
        ``seg_lock``, or before readers exist); returns the start before."""
        previous = self._log_start_offset
        if offset > previous:
            self._log_start_offset = offset
        return previous

    def undo_log_start(self, moved_to: int, previous: int) -> None:
        """Put the log start back to ``previous`` unless something moved it past
        ``moved_to`` meanwhile (under ``seg_lock``): a failed DeleteRecords."""
        if self._log_start_offset == moved_to:
            self._log_start_offset = previous

    # --- the reader side ------------------------------------------------------------------

    def out_of_range(self, offset: int, high_watermark: int) -> Exception:
        if self._closed:
            return UnknownTopicOrPartition(f"partition log {self.path} is closed")
        return OffsetOutOfRange(offset, self._log_start_offset, high_watermark)

    def locate(self, offset: int) -> Located:
        """Validate ``offset`` against the published state and find its segment."""
        visible = self._visible
        segments, bases = self._segview
        start = self._log_start_offset
        hw = visible[0]
        if self._closed or offset < start or offset > hw:
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
