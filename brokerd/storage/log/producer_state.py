"""Idempotent producers' state of one partition, and its snapshot file.

Kafka keeps, per partition, each producer id's epoch and its last few batches' sequence
ranges, so that a batch retried after a lost answer is not appended twice; it snapshots
that state to disk and replays the log from the snapshot on start-up. This module is that
state for brokerd:

- :class:`ProducerStateManager` is one partition's state, as Kafka's class of that name:
  the producer table and the ongoing transactions (``ongoing``, a
  :class:`~brokerd.storage.log.ongoing_txns.TxnTracker`). The log holds one and uses it
  under its write lock: :meth:`~ProducerStateManager.prepare_update` checks an append's
  producer id, epoch and sequence range (the stored twin's offsets of a retry, or a
  :class:`ProducerAppendInfo` to complete), :meth:`~ProducerStateManager.update` records
  it once appended, :meth:`~ProducerStateManager.fence` applies a transaction marker;
  :meth:`~ProducerStateManager.replay` takes batch headers read back from the log, and
  :meth:`~ProducerStateManager.snapshot` / :meth:`~ProducerStateManager.restore` turn
  the table into or rebuild it from the snapshot file's content.
- :func:`write_snapshot` / :func:`read_snapshot` store that content as a small JSON file,
  ``producer-state.json``, in the partition's directory, replaced atomically. Format 2
  also stores the partition's ongoing transactions (producer id -> first offset) as of
  the log end ``txn_end`` when it was taken (:func:`read_txn_snapshot`; the log reads
  that part at open, ``log/txns.py``); format 1 (no transactions) is still read.
- :func:`load_table` rebuilds a partition's table at start-up: the snapshot, then the
  batch headers appended after it.

It is pure and blocking: no Twisted, no threads, no Deferreds, and no lock of its own (the
log's write lock orders every change). A missing, unreadable or malformed snapshot reads
as ``None`` (the caller replays more of the log), never as an error that stops the
broker.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import attrs

from brokerd.errors import InvalidProducerEpoch, OutOfOrderSequence
from brokerd.storage.fileio import atomic_write
from brokerd.storage.log.ongoing_txns import TxnTracker
from brokerd.storage.record.header import BatchHeader
from brokerd.storage.types import AppendInfo

if TYPE_CHECKING:
    from brokerd.storage.log.partition_log import PartitionLog

SNAPSHOT_NAME = "producer-state.json"
#: Snapshots are small (a few batches per producer id); refuse to parse a larger file.
MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024
#: How many recent batches per producer id are remembered to answer retried duplicates;
#: Kafka keeps five because a producer has at most five batches in flight.
PRODUCER_BATCH_MEMORY = 5
_FORMAT = 2
_FORMATS = (1, 2)


class SnapshotEntry(TypedDict):
    """One producer id in the snapshot file: its epoch, its recent batches as
    ``[first_seq, last_seq, base_offset, last_offset]``, and how many of the first of
    them belong to transactions that have ended (``closed``, absent meaning 0); for
    DescribeProducers, its last batch's max timestamp (``ts``) and whether a marker of
    it was seen (``marked``). Readers ignore keys they do not know."""

    epoch: int
    batches: Sequence[Sequence[int]]
    closed: NotRequired[int]
    #: Max timestamp of the producer's last batch (absent: unknown).
    ts: NotRequired[int]
    #: A transaction marker of the producer was seen (absent: false).
    marked: NotRequired[bool]


@attrs.define(eq=False)
class ProducerBatch:
    """One remembered batch of an idempotent producer, with the offsets it was written
    at (``result``: what a retry of it is answered). Compared by identity."""

    producer_id: int
    epoch: int
    first_seq: int
    last_seq: int
    result: AppendInfo
    #: A transaction marker of this producer followed the batch: its transaction has
    #: ended, so the same sequence range again is not a retry of it.
    closed: bool = False


@attrs.define
class _Producer:
    epoch: int
    batches: deque[ProducerBatch]
    #: Known only from a transaction marker (no batch of it was seen): any sequence is
    #: accepted next, as for an unknown producer.
    open_sequence: bool = False
    #: Max timestamp of its last batch, -1 before one; DescribeProducers reports it.
    last_timestamp: int = -1
    #: A transaction marker of it was seen.
    marked: bool = False


@attrs.frozen
class ActiveProducer:
    """One producer id of a partition as DescribeProducers reports it."""

    producer_id: int
    epoch: int
    #: Last sequence of its last remembered batch, -1 when none is remembered.
    last_sequence: int
    last_timestamp: int
    #: A transaction marker of this producer was seen (it is transactional).
    marked: bool


def _sequence_range(headers: Sequence[BatchHeader]) -> tuple[int, int]:
    first, last = headers[0], headers[-1]
    return first.base_sequence, last.base_sequence + last.last_offset_delta


@attrs.frozen
class ProducerAppendInfo:
    """An append :meth:`ProducerStateManager.prepare_update` admitted: its batches'
    headers (one producer's), recorded by :meth:`ProducerStateManager.update` once they
    are in the log."""

    headers: tuple[BatchHeader, ...]


class ProducerStateManager:
    """One partition's producers (epoch and last few batches each) and its ongoing
    transactions (see the module docstring)."""

    def __init__(self, *, batch_memory: int = PRODUCER_BATCH_MEMORY) -> None:
        self._memory = batch_memory
        self._producers: dict[int, _Producer] = {}
        #: Producer id -> first offset of its ongoing transaction, and the LSO.
        self.ongoing = TxnTracker()

    def __bool__(self) -> bool:
        return bool(self._producers)

    def active(self) -> list[ActiveProducer]:
        """Every producer id the table holds, in id order."""
        return [
            ActiveProducer(
                pid,
                state.epoch,
                state.batches[-1].last_seq if state.batches else -1,
                state.last_timestamp,
                state.marked,
            )
            for pid, state in sorted(self._producers.items())
        ]

    def _new(self, producer_id: int, epoch: int) -> _Producer:
        entry = self._producers[producer_id] = _Producer(epoch, deque(maxlen=self._memory))
        return entry

    def check(self, headers: Sequence[BatchHeader]) -> ProducerBatch | None:
        """Kafka's idempotence rules for one produce of ``headers`` (one producer's
        batches): the stored twin of a retry, or None for a batch to append. Raises
        :class:`InvalidProducerEpoch` or :class:`OutOfOrderSequence`."""
        pid, epoch = headers[0].producer_id, headers[0].producer_epoch
        first_seq, last_seq = _sequence_range(headers)
        state = self._producers.get(pid)
        if state is None:
            # Unknown producer (new, or its state was lost in a restart): accept from
            # any sequence, as Kafka does once a producer's history has been deleted.
            return None
        if epoch < state.epoch:
            raise InvalidProducerEpoch(f"producer {pid} epoch {epoch} < {state.epoch}")
        if epoch > state.epoch:
            if first_seq != 0:
                raise OutOfOrderSequence(
                    f"producer {pid} new epoch {epoch} must start at sequence 0"
                )
            return None
        for batch in state.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                if batch.closed:
                    # A client never retries a batch of a transaction it has ended; this
                    # is a new batch reusing sequences without an epoch bump. Answering
                    # it as a duplicate would drop it silently from a transaction that
                    # may then commit; an error makes the client abort instead.
                    raise OutOfOrderSequence(
                        f"producer {pid}: sequences {first_seq}..{last_seq} belong to a "
                        "transaction that has ended"
                    )
                return batch
        if state.open_sequence and not state.batches:
            return None
        expected = state.batches[-1].last_seq + 1 if state.batches else 0
        if first_seq != expected:
            raise OutOfOrderSequence(
                f"producer {pid}: expected sequence {expected}, got {first_seq}"
            )
        return None

    def prepare_update(self, headers: Sequence[BatchHeader]) -> ProducerAppendInfo | AppendInfo:
        """Check an append of ``headers`` (one producer's batches): the offsets of the
        stored twin of a retry (append nothing), or what :meth:`update` records after the
        append. Raises what :meth:`check` raises."""
        duplicate = self.check(headers)
        if duplicate is None:
            return ProducerAppendInfo(tuple(headers))
        return duplicate.result

    def update(self, info: ProducerAppendInfo, appended: AppendInfo) -> None:
        """Record the admitted append ``info`` as written at ``appended``."""
        self.remember(info.headers, appended)

    def remember(self, headers: Sequence[BatchHeader], appended: AppendInfo) -> ProducerBatch:
        """Record a batch written at ``appended``; a newer epoch replaces the old
        history. Only written batches are remembered: one whose append failed is not
        there, so its retry is appended."""
        pid, epoch = headers[0].producer_id, headers[0].producer_epoch
        state = self._producers.get(pid)
        if state is None or epoch > state.epoch:
            state = self._new(pid, epoch)
        first_seq, last_seq = _sequence_range(headers)
        batch = ProducerBatch(pid, epoch, first_seq, last_seq, appended)
        state.batches.append(batch)
        state.last_timestamp = headers[-1].max_timestamp
        return batch

    def fence(self, producer_id: int, epoch: int) -> None:
        """A transaction marker of ``producer_id`` with ``epoch``: the producer's epoch
        becomes at least ``epoch`` (an older one is then refused). A newer epoch drops the
        remembered batches (the producer restarts at sequence 0 in it)."""
        state = self._producers.get(producer_id)
        if state is None:
            state = self._new(producer_id, epoch)
            state.open_sequence = True
        elif epoch > state.epoch:
            last_timestamp = state.last_timestamp
            state = self._new(producer_id, epoch)
            state.last_timestamp = last_timestamp
        else:
            for batch in state.batches:
                batch.closed = True
        state.marked = True

    def replay(self, headers: Iterable[BatchHeader], *, log_start_offset: int) -> None:
        """Remember batches read back from the log (already written: offsets known),
        skipping those of non-idempotent producers and those already remembered."""
        for header in headers:
            if header.producer_id < 0:
                continue
            if header.is_control:
                self.fence(header.producer_id, header.producer_epoch)
                continue
            known = self._producers.get(header.producer_id)
            last_seq = header.base_sequence + header.last_offset_delta
            if known is not None and any(
                b.first_seq == header.base_sequence and b.last_seq == last_seq
                for b in known.batches
            ):
                continue
            self.remember(
                [header], AppendInfo(header.base_offset, header.last_offset, log_start_offset)
            )

    def snapshot(self) -> dict[int, SnapshotEntry]:
        """The table in the snapshot file's form."""
        out: dict[int, SnapshotEntry] = {}
        for pid, state in self._producers.items():
            entry: SnapshotEntry = {
                "epoch": state.epoch,
                "batches": [
                    [b.first_seq, b.last_seq, b.result.base_offset, b.result.last_offset]
                    for b in state.batches
                ],
            }
            # Closed batches are a prefix: a marker closes every batch remembered so far.
            closed = sum(1 for b in state.batches if b.closed)
            if closed:
                entry["closed"] = closed
            if state.last_timestamp >= 0:
                entry["ts"] = state.last_timestamp
            if state.marked:
                entry["marked"] = True
            out[pid] = entry
        return out

    def restore(
        self,
        producers: Mapping[int, SnapshotEntry],
        *,
        log_start_offset: int,
        log_end_offset: int,
    ) -> None:
        """Load a snapshot's producers, keeping only batches the log still holds (a crash
        may have cut the log below what the snapshot saw)."""
        for pid, entry in producers.items():
            state = self._new(pid, entry["epoch"])
            state.last_timestamp = entry.get("ts", -1)
            state.marked = entry.get("marked", False)
            closed = entry.get("closed", 0)
            for i, (first_seq, last_seq, base, last) in enumerate(entry["batches"]):
                if log_start_offset <= base and last < log_end_offset:
                    batch = ProducerBatch(
                        pid, entry["epoch"], first_seq, last_seq,
                        AppendInfo(base, last, log_start_offset),
                    )
                    batch.closed = i < closed
                    state.batches.append(batch)
            # No batch left to continue from (a producer known from a transaction marker
            # only, or whose batches the log no longer holds): any sequence is accepted
            # next, as for an unknown producer, while the epoch still fences.
            state.open_sequence = not state.batches


def load_table(log: PartitionLog, table: ProducerStateManager) -> None:
    """Fill ``table`` with a partition's producer state at start-up: its snapshot, then
    the batch headers appended after it. Without a snapshot only the active segment is
    replayed, so older history is forgotten (a producer unknown to the broker is
    accepted from any sequence). Raises what reading the log raises, leaving in
    ``table`` what was loaded until then."""
    start = log.segment_bases[-1]
    snapshot = read_snapshot(log.path)
    if snapshot is not None:
        end, producers = snapshot
        table.restore(
            producers, log_start_offset=log.log_start_offset, log_end_offset=log.log_end_offset
        )
        start = min(end, log.log_end_offset)
    table.replay(log.batch_headers(start), log_start_offset=log.log_start_offset)


def write_snapshot(
    directory: str,
    end_offset: int,
    producers: Mapping[int, SnapshotEntry],
    txns: tuple[int, Mapping[int, int]] | None = None,
) -> None:
    """Atomically replace the directory's snapshot of the state covering the log below
    ``end_offset``; ``txns`` is ``(txn_end, ongoing)``, the ongoing transactions of the
    log below ``txn_end`` (None: none, as of ``end_offset``)."""
    txn_end, ongoing = txns if txns is not None else (end_offset, {})
    data = json.dumps(
        {
            "format": _FORMAT,
            "end_offset": end_offset,
            "producers": producers,
            "txn_end": txn_end,
            "ongoing": {str(pid): first for pid, first in ongoing.items()},
        },
        separators=(",", ":"),
    ).encode()
    atomic_write(os.path.join(directory, SNAPSHOT_NAME), data)


def _read_doc(directory: str) -> dict[str, Any] | None:
    """The snapshot's JSON document (its values are checked by the callers)."""
    path = os.path.join(directory, SNAPSHOT_NAME)
    try:
        if os.path.getsize(path) > MAX_SNAPSHOT_BYTES:
            return None
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") not in _FORMATS:
        return None
    return doc


def read_txn_snapshot(directory: str) -> tuple[int, dict[int, int]] | None:
    """``(txn_end, ongoing transactions)`` from the directory's snapshot, or None if
    there is no usable format-2 snapshot."""
    doc = _read_doc(directory)
    if doc is None or doc.get("format") != 2:
        return None
    try:
        txn_end = doc["txn_end"]
        raw = doc["ongoing"]
        if not isinstance(txn_end, int) or not isinstance(raw, dict):
            return None
        ongoing = {int(pid): int(first) for pid, first in raw.items()}
        if any(pid < 0 or first < 0 for pid, first in ongoing.items()):
            return None
        return txn_end, ongoing
    except (KeyError, TypeError, ValueError):
        return None


def read_snapshot(directory: str) -> tuple[int, dict[int, SnapshotEntry]] | None:
    """``(end_offset, producers)`` from the directory's snapshot, or None if there is
    no usable one."""
    doc = _read_doc(directory)
    if doc is None:
        return None
    try:
        if not isinstance(doc.get("end_offset"), int) or not isinstance(
            doc.get("producers"), dict
        ):
            return None
        producers: dict[int, SnapshotEntry] = {}
        for pid, entry in doc["producers"].items():
            epoch = entry["epoch"]
            batches = [tuple(int(x) for x in b) for b in entry["batches"]]
            if not isinstance(epoch, int) or any(len(b) != 4 for b in batches):
                return None
            closed = entry.get("closed", 0)
            if not isinstance(closed, int) or not 0 <= closed <= len(batches):
                return None
            producers[int(pid)] = {"epoch": epoch, "batches": batches}
            if closed:
                producers[int(pid)]["closed"] = closed
            # Informational only (DescribeProducers): a bad value is dropped, not fatal.
            ts = entry.get("ts")
            if isinstance(ts, int) and not isinstance(ts, bool):
                producers[int(pid)]["ts"] = ts
            if entry.get("marked") is True:
                producers[int(pid)]["marked"] = True
        end_offset: int = doc["end_offset"]
        return end_offset, producers
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
