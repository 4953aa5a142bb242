# -*- test-case-name: tests.storage.log.test_ongoing_txns -*-
"""One partition's ongoing transactions and its last stable offset (pure, no I/O).

A producer's transaction on a partition begins with its first transactional data batch
and ends with the control batch (marker) the coordinator appends for it. Until then its
records are *unstable*: the last stable offset (LSO) is the smallest first offset of an
ongoing transaction, or the high watermark when there is none, and a read_committed
reader never reads at or past it. An ABORT marker for an ongoing transaction yields an
:class:`AbortedEntry` (the aborted-transaction index keeps it, ``segment/txn_index.py``); a COMMIT
marker, or a marker for a producer with no ongoing transaction, yields nothing.

:class:`TxnTracker` looks at batch headers only (never at records), so it costs nothing
per record; the log updates it under its write lock as batches are appended, and the
producer-state replay (``producer_state.load_table``) feeds it the headers of the log's
tail at start-up. What it does not do: read or write files, or decide on visibility (the
log publishes the LSO together with the high watermark).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from brokerd.storage.record.header import BatchHeader
from brokerd.storage.segment.txn_index import AbortedEntry

__all__ = ["TxnTracker"]


class TxnTracker:
    """Ongoing transactions of one partition: producer id -> first offset."""

    __slots__ = ("_ongoing",)

    def __init__(self, ongoing: Mapping[int, int] | None = None) -> None:
        self._ongoing: dict[int, int] = dict(ongoing or {})

    def __bool__(self) -> bool:
        return bool(self._ongoing)

    @property
    def ongoing(self) -> dict[int, int]:
        """A copy of producer id -> first offset of its ongoing transaction."""
        return dict(self._ongoing)

    def first_unstable(self) -> int | None:
        """The smallest first offset of an ongoing transaction, None if there is none."""
        return min(self._ongoing.values()) if self._ongoing else None

    def stable_end(self, end: int) -> int:
        """The LSO for a log whose data ends (exclusive) at ``end``."""
        first = self.first_unstable()
        return end if first is None or first > end else first

    def begin(self, producer_id: int, offset: int) -> None:
        """A transactional data batch of ``producer_id`` at ``offset``: begins its
        transaction unless one is ongoing already."""
        self._ongoing.setdefault(producer_id, offset)

    def end(self, producer_id: int, marker_offset: int, *, commit: bool) -> AbortedEntry | None:
        """The marker of ``producer_id`` at ``marker_offset``: ends its ongoing
        transaction; an aborted one is returned as an :class:`AbortedEntry`."""
        first = self._ongoing.pop(producer_id, None)
        if first is None or commit:
            return None
        # The LSO right after the marker (Kafka's rule for the index entry).
        return AbortedEntry(producer_id, first, marker_offset, self.stable_end(marker_offset + 1))

    def observe(self, header: BatchHeader, commit: bool | None = None) -> AbortedEntry | None:
        """Apply one stored batch (its base offset set): data batches of transactional
        producers begin transactions, markers end them (``commit`` is the marker's type;
        None for a data batch). Non-transactional batches change nothing."""
        if not header.is_transactional or header.producer_id < 0:
            return None
        if header.is_control:
            return self.end(header.producer_id, header.base_offset, commit=bool(commit))
        self.begin(header.producer_id, header.base_offset)
        return None

    def forget_below(self, offset: int) -> None:
        """Clamp first offsets to ``offset`` (the log start moved past them)."""
        for pid, first in self._ongoing.items():
            if first < offset:
                self._ongoing[pid] = offset

    def restore(self, ongoing: Iterable[tuple[int, int]]) -> None:
        """Replace the state with ``(producer id, first offset)`` pairs (a snapshot)."""
        self._ongoing = dict(ongoing)
