"""Transactions in one partition log: markers, the last stable offset, aborted lists.

:class:`PartitionTxns` is the part of :class:`~brokerd.storage.log.partition_log.PartitionLog`
that handles transactions, on the :class:`~brokerd.storage.log.log_state.LogState` it shares
with the log's other parts. Under the log's write lock it keeps the ongoing transactions of
the log's producer state (``producers.ongoing``) up to date as batches are appended
(headers only), appends transaction markers (which fence their producer,
:meth:`append_marker`), records aborted transactions in the active segment's
``.txnindex``, and hands :meth:`PartitionLog.publish` the LSO (:meth:`stable_end`) to
publish together with the high watermark, so a reader never sees a high watermark and an
LSO from different moments.

Reads: :meth:`aborted_txns` is a read_committed fetch's aborted list (from every
segment's index in memory); :meth:`committed_filter` is what the native read path skips
(control batches, aborted transactions' batches) and where it stops (the LSO).

Open: :meth:`recover` rebuilds the ongoing transactions (and aborted entries a crash
lost) from the producer-state snapshot's transaction part and a replay of the batch
headers after it. A partition whose segments have no ``.txnindex`` file never held a
transactional batch (the log creates the file, durably, before the segment's first such
batch is written): it is not replayed. Without a usable snapshot the replay starts at the
first segment with that file, so an ongoing transaction is never forgotten.

What it does not do: decide which producer may write (the core's verifier and
``log/producer_state.py``), anything with Twisted.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from typing import Protocol

from brokerd.errors import CorruptBatch, StorageError
from brokerd.storage.fileio import fsync_dir
from brokerd.storage.log.log_state import LogState
from brokerd.storage.log.producer_state import ProducerStateManager, read_txn_snapshot
from brokerd.storage.record.control import MAX_MARKER_BYTES, encode_marker, parse_marker
from brokerd.storage.record.header import BatchHeader
from brokerd.storage.segment.segment import BatchInfo, Segment
from brokerd.storage.segment.txn_index import AbortedEntry
from brokerd.storage.types import AbortedTxn, AppendInfo

__all__ = ["CommittedFilter", "PartitionTxns", "WriteBatches"]

log = logging.getLogger("brokerd.storage")


class CommittedFilter:
    """What a committed-only (native) read skips: control batches, and batches of a
    producer inside one of its aborted ranges ``[first, marker)``; ``stop`` is the LSO."""

    __slots__ = ("_aborted", "stop")

    def __init__(self, stop: int, aborted: Sequence[AbortedEntry]) -> None:
        self.stop = stop
        self._aborted: dict[int, list[tuple[int, int]]] = {}
        for entry in aborted:
            self._aborted.setdefault(entry.producer_id, []).append(
                (entry.first_offset, entry.last_offset)
            )

    def skips(self, control: bool, producer_id: int, base_offset: int) -> bool:
        """For a transactional batch: True if a committed reader must not see it."""
        if control:
            return True
        ranges = self._aborted.get(producer_id)
        return ranges is not None and any(first <= base_offset < last for first, last in ranges)


class WriteBatches(Protocol):
    """The log's write of encoded batches (``PartitionLog._write``): stores ``data``
    holding ``batches`` (``count`` offsets) in the active segment, rolling it first if
    needed; ``transactional`` makes sure the segment has its ``.txnindex`` first."""

    def __call__(
        self,
        data: bytes | bytearray,
        batches: list[BatchInfo],
        count: int,
        *,
        transactional: bool = False,
    ) -> AppendInfo: ...


class PartitionTxns:
    """Transactions of one partition log (see the module docstring).

    :param write: the log's write of encoded batches, for the markers.
    """

    def __init__(
        self, state: LogState, write: WriteBatches, producers: ProducerStateManager
    ) -> None:
        self._state = state
        self._write = write
        #: Its ``ongoing`` transactions are the ones this part keeps up to date.
        self._producers = producers
        segments = state.segments
        #: Whether any segment has a ``.txnindex`` (else committed reads skip nothing).
        self.transactional = any(s.txnindex.exists for s in segments)
        #: Whether any transaction was ever aborted here (else no index needs reading).
        self.any_aborted = any(len(s.txnindex) for s in segments)

    # --- writer side (under the write lock) -------------------------------------------

    def ensure_txn_file(self, segment: Segment) -> None:
        """Create ``segment``'s ``.txnindex`` durably before its first transactional
        batch is written: its presence is what start-up replays from."""
        if segment.txnindex.exists:
            return
        segment.txnindex.create()
        path = self._state.path
        try:
            fsync_dir(path)
        except OSError as exc:
            raise StorageError(f"cannot fsync {path}: {exc}") from exc
        self.transactional = True

    def begin_txns(self, begun: Sequence[tuple[int, int]]) -> None:
        for producer_id, offset in begun:
            self._producers.ongoing.begin(producer_id, offset)

    def stable_end(self, end: int) -> int:
        """The LSO to publish with the high watermark ``end``."""
        return self._producers.ongoing.stable_end(end)

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int,
        timestamp_ms: int,
    ) -> AppendInfo:
        """Append a COMMIT or ABORT marker for ``producer_id``, ending its ongoing
        transaction (an aborted one is recorded in the active segment's ``.txnindex``).
        A marker for a producer with no ongoing transaction is appended all the same.
        The marker fences the producer here: its epoch becomes at least
        ``producer_epoch``, so a zombie's later produce is refused."""
        state = self._state
        with state.write_lock:
            state.check_writable()
            self._producers.fence(producer_id, producer_epoch)
            base = state.log_end_offset
            data = encode_marker(
                producer_id,
                producer_epoch,
                commit=commit,
                coordinator_epoch=coordinator_epoch,
                timestamp_ms=timestamp_ms,
                base_offset=base,
            )
            info = self._write(data, [(base, base, timestamp_ms, len(data))], 1, transactional=True)
            entry = self._producers.ongoing.end(producer_id, base, commit=commit)
            if entry is not None:
                try:
                    state.segments[-1].txnindex.append(entry)
                except StorageError as exc:
                    raise state.fail(f"cannot record an aborted transaction: {exc}") from exc
                self.any_aborted = True
            return info

    def txn_snapshot(self) -> tuple[int, dict[int, int]]:
        """``(log end offset, ongoing transactions)`` at one moment (blocks on the write
        lock: call it in the write pool)."""
        with self._state.write_lock:
            return self._state.log_end_offset, self._producers.ongoing.ongoing

    # --- reader side (no lock; the LSO itself is LogState's) -----------------------------

    def _aborted_entries(self, fetch_offset: int, upper: int) -> list[AbortedEntry]:
        out: list[AbortedEntry] = []
        if not self.any_aborted:
            return out
        segments, bases = self._state.segview
        i = max(0, bisect.bisect_right(bases, fetch_offset) - 1)
        for segment in segments[i:]:
            segment.txnindex.collect(fetch_offset, upper, out)
        return out

    def aborted_txns(self, fetch_offset: int, upper: int) -> tuple[AbortedTxn, ...]:
        """Aborted transactions whose ABORT marker is at or after ``fetch_offset`` and
        whose first offset is below ``upper`` (the end of the data a fetch returns)."""
        entries = self._aborted_entries(fetch_offset, upper)
        return tuple(AbortedTxn(e.producer_id, e.first_offset) for e in entries)

    def committed_filter(self, offset: int, lso: int) -> CommittedFilter | None:
        """The filter of a committed-only read from ``offset``, None when the partition
        never held a transactional batch (then there is nothing to skip)."""
        if not self.transactional:
            return None
        return CommittedFilter(lso, self._aborted_entries(offset, lso))

    # --- open ----------------------------------------------------------------------------

    def recover(self) -> None:
        """Rebuild the ongoing transactions at open (see the module docstring)."""
        state = self._state
        segments = state.segments
        first = next((s for s in segments if s.txnindex.exists), None)
        if first is None:
            return
        start = max(first.base_offset, state.log_start_offset)
        snapshot = read_txn_snapshot(state.path)
        if snapshot is not None and state.log_start_offset <= snapshot[0] <= state.log_end_offset:
            end, ongoing = snapshot
            self._producers.ongoing.restore(
                (pid, max(first_offset, state.log_start_offset))
                for pid, first_offset in ongoing.items()
                if first_offset < end
            )
            start = max(start, end)
        self._replay(start)
        state.publish(self.stable_end)

    def _replay(self, start: int) -> None:
        """Feed the tracker every transactional batch from ``start`` on; re-record aborted
        entries the ``.txnindex`` files lost. A damaged segment is replayed up to its
        damage (reads of the damage fail anyway) and the replay goes on with the next one."""
        segments = self._state.segments
        i = max(0, bisect.bisect_right([s.base_offset for s in segments], start) - 1)
        for segment in segments[i:]:
            try:
                self._replay_segment(segment, start)
            except StorageError as exc:
                log.error("%s: transaction replay stopped at damage: %s", segment.log_path, exc)

    def _replay_segment(self, segment: Segment, start: int) -> None:
        found = segment.scan.find_batch(start, segment.size)
        if found is None:
            return
        for pos, header in segment.scan.headers_from(found[0], segment.size):
            if not header.is_transactional or header.producer_id < 0:
                continue
            if not header.is_control:
                self._producers.ongoing.begin(header.producer_id, header.base_offset)
                continue
            entry = self._producers.ongoing.end(
                header.producer_id, header.base_offset, commit=_is_commit(segment, pos, header)
            )
            if entry is not None and not segment.txnindex.has_marker(entry.last_offset):
                log.warning("%s: re-recording aborted transaction %s", segment.log_path, entry)
                _record(segment, entry)
                self.any_aborted = True


def _record(segment: Segment, entry: AbortedEntry) -> None:
    """Insert a lost entry in marker order (the file is rewritten if it is not last)."""
    index = segment.txnindex
    if not len(index) or index.entries[-1].last_offset < entry.last_offset:
        index.append(entry)
        return
    entries = sorted([*index.entries, entry], key=lambda e: e.last_offset)
    index.delete()
    index.load(segment.base_offset, segment.next_offset)
    for e in entries:
        index.append(e)
    index.sync()
    try:
        fsync_dir(segment.directory)
    except OSError as exc:
        raise StorageError(f"cannot fsync {segment.directory}: {exc}") from exc


def _is_commit(segment: Segment, pos: int, header: BatchHeader) -> bool:
    """The type of the marker at ``pos``. A damaged marker counts as an ABORT: a reader
    then drops that transaction's records rather than serving uncommitted ones."""
    if header.size > MAX_MARKER_BYTES:
        return False
    try:
        return parse_marker(segment.pread(pos, header.size)).commit
    except (CorruptBatch, StorageError) as exc:
        log.error("%s: unreadable marker at byte %d: %s", segment.log_path, pos, exc)
        return False
