"""Durable journal of the transaction coordinator's state: one record per change.

File ``<data-dir>/transactions.log``: an 8-byte magic (``BKTXNL01``), then records, each
``u32 body_length, u32 crc32(body), body`` (big-endian; CRC-32 as :func:`zlib.crc32`).
A record holds one transactional id's *whole* state, so the last record of an id wins
and replay needs no earlier one. Bodies, by their first byte:

- 1, state: ``u16 id_len, id, i64 producer_id, i16 producer_epoch, i64 last_producer_id,
  i16 last_producer_epoch, i32 timeout_ms, u8 state, i64 start_time_ms,
  i64 last_update_ms, u32 partition_count``, then per partition ``u16 topic_len, topic,
  i32 partition``, then ``u32 group_count`` and per group ``u16 group_len, group,
  u32 count`` and per offset ``u16 topic_len, topic, i32 partition, i64 offset,
  i32 leader_epoch, i32 metadata_len (-1 = null), metadata``;
- 2, tombstone: ``u16 id_len, id``: the id is forgotten.

``state`` indexes :data:`STORED_STATES`. Text is UTF-8 with ``surrogatepass``.

:class:`TxnLog` replays the file on open, truncates a torn or corrupt tail (a write that
never completed was never acknowledged), appends each change with one write and an
fsync before returning (a failed write fails only that change; a failed fsync takes the
log offline until :meth:`TxnLog.retry_reopen` replays it from disk: ``journal/faults.py``),
and compacts the file (every live id's latest record written to
a temporary file, fsync, rename, directory fsync) once it is mostly superseded records.

What this module does not do: no Twisted, no threads (every write blocks: callers on the
reactor run it in a worker thread), no state-machine rules (``brokerd.kafka.txn.state``
checks transitions; this module stores whatever state name it is given from
:data:`STORED_STATES`).
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import attrs

from brokerd.storage.journal.engine import Journal, JournalKind
from brokerd.storage.journal.records import BodyReader, frame, iter_frames

__all__ = [
    "COMPACT_MIN_BYTES",
    "COMPACT_RATIO",
    "MAGIC",
    "MAX_RECORD_BYTES",
    "MAX_TRANSACTIONAL_ID_BYTES",
    "STORED_STATES",
    "TXN_LOG_FILE_NAME",
    "TXN_LOG_NAME",
    "StoredOffset",
    "StoredTxn",
    "TxnLog",
    "decode_body",
    "encode_state",
    "encode_tombstone",
    "iter_records",
]

TXN_LOG_FILE_NAME = "transactions.log"
#: What the log is called in its log lines and in ``/readyz``.
TXN_LOG_NAME = "transaction log"
MAGIC = b"BKTXNL01"
#: A record claiming more than this is a torn or overwritten header, not a record.
MAX_RECORD_BYTES = 64 << 20
#: Kafka's strings are int16-length-prefixed: no transactional id is longer.
MAX_TRANSACTIONAL_ID_BYTES = 32767
#: Compact when the file is at least this big and this many times the live records.
COMPACT_MIN_BYTES = 1 << 20
COMPACT_RATIO = 4
#: The state names a record may hold, by their code on disk.
STORED_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
)

_STATE, _TOMBSTONE = 1, 2
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_FIXED = struct.Struct(">qhqhiBqq")
_OFFSET = struct.Struct(">iqii")  # partition, offset, leader epoch, metadata length
_MIN_PARTITION = _U16.size + _I32.size
_MIN_GROUP = _U16.size + _U32.size
_MIN_OFFSET = _U16.size + _OFFSET.size
_INT16 = (-(2**15), 2**15 - 1)
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


@attrs.frozen
class StoredOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@attrs.frozen
class StoredTxn:
    """One transactional id's whole state as a record holds it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    last_producer_id: int
    last_producer_epoch: int
    timeout_ms: int
    state: str
    partitions: tuple[tuple[str, int], ...] = ()
    offsets: tuple[tuple[str, tuple[StoredOffset, ...]], ...] = ()
    start_time_ms: int = -1
    last_update_ms: int = -1


def _enc(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _short_text(text: str, what: str, limit: int = 2**16 - 1) -> bytes:
    raw = _enc(text)
    if len(raw) > limit:
        raise ValueError(f"{what} longer than {limit} bytes")
    return _U16.pack(len(raw)) + raw


def _frame(body: bytes) -> bytes:
    return frame(body, MAX_RECORD_BYTES, "transaction")


def _check_range(value: int, bounds: tuple[int, int], what: str) -> None:
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{what} {value} out of range")


def encode_state(txn: StoredTxn) -> bytes:
    """The framed record of ``txn``. Raises ValueError, writing nothing, if a field is
    outside what the format carries."""
    if txn.state not in STORED_STATES:
        raise ValueError(f"state {txn.state!r} is not stored")
    for value, bounds, what in (
        (txn.producer_id, _INT64, "producer id"),
        (txn.last_producer_id, _INT64, "last producer id"),
        (txn.producer_epoch, _INT16, "producer epoch"),
        (txn.last_producer_epoch, _INT16, "last producer epoch"),
        (txn.timeout_ms, _INT32, "timeout"),
        (txn.start_time_ms, _INT64, "start time"),
        (txn.last_update_ms, _INT64, "update time"),
    ):
        _check_range(value, bounds, what)
    parts = [
        _U8.pack(_STATE),
        _short_text(txn.transactional_id, "transactional id", MAX_TRANSACTIONAL_ID_BYTES),
        _FIXED.pack(
            txn.producer_id,
            txn.producer_epoch,
            txn.last_producer_id,
            txn.last_producer_epoch,
            txn.timeout_ms,
            STORED_STATES.index(txn.state),
            txn.start_time_ms,
            txn.last_update_ms,
        ),
        _U32.pack(len(txn.partitions)),
    ]
    for topic, partition in txn.partitions:
        _check_range(partition, _INT32, "partition")
        parts += [_short_text(topic, "topic"), _I32.pack(partition)]
    parts.append(_U32.pack(len(txn.offsets)))
    for group, entries in txn.offsets:
        parts += [_short_text(group, "group id"), _U32.pack(len(entries))]
        for o in entries:
            _check_range(o.partition, _INT32, "partition")
            _check_range(o.offset, _INT64, "offset")
            _check_range(o.leader_epoch, _INT32, "leader epoch")
            meta = None if o.metadata is None else _enc(o.metadata)
            if meta is not None and len(meta) > _INT32[1]:
                raise ValueError("offset metadata too long")
            parts.append(_short_text(o.topic, "topic"))
            parts.append(
                _OFFSET.pack(
                    o.partition, o.offset, o.leader_epoch, -1 if meta is None else len(meta)
                )
            )
            if meta is not None:
                parts.append(meta)
    return _frame(b"".join(parts))


def encode_tombstone(transactional_id: str) -> bytes:
    return _frame(
        _U8.pack(_TOMBSTONE)
        + _short_text(transactional_id, "transactional id", MAX_TRANSACTIONAL_ID_BYTES)
    )


class _Reader(BodyReader):
    def text(self) -> str:
        (length,) = self.unpack(_U16)
        return self.take(length).decode("utf-8", "surrogatepass")


def decode_body(body: bytes) -> StoredTxn | str:
    """A state record's :class:`StoredTxn`, or a tombstone's transactional id. Raises
    ValueError (or UnicodeDecodeError) on a malformed body."""
    reader = _Reader(body)
    (kind,) = reader.unpack(_U8)
    tid = reader.text()
    if kind == _TOMBSTONE:
        if not reader.done():
            raise ValueError("trailing bytes")
        return tid
    if kind != _STATE:
        raise ValueError(f"unknown record kind {kind}")
    pid, epoch, last_pid, last_epoch, timeout, state, start, update = reader.unpack(_FIXED)
    if state >= len(STORED_STATES):
        raise ValueError(f"unknown state code {state}")
    partitions = []
    for _ in range(reader.count(_MIN_PARTITION)):
        topic = reader.text()
        (partition,) = reader.unpack(_I32)
        partitions.append((topic, partition))
    groups = []
    for _ in range(reader.count(_MIN_GROUP)):
        group = reader.text()
        entries = []
        for _ in range(reader.count(_MIN_OFFSET)):
            topic = reader.text()
            partition, offset, leader_epoch, meta_len = reader.unpack(_OFFSET)
            meta = None if meta_len < 0 else reader.take(meta_len).decode("utf-8", "surrogatepass")
            entries.append(StoredOffset(topic, partition, offset, leader_epoch, meta))
        groups.append((group, tuple(entries)))
    if not reader.done():
        raise ValueError("trailing bytes")
    return StoredTxn(
        tid, pid, epoch, last_pid, last_epoch, timeout, STORED_STATES[state],
        tuple(partitions), tuple(groups), start, update,
    )  # fmt: skip


def iter_records(data: bytes, pos: int) -> Iterator[tuple[StoredTxn | str, int, int]]:
    """Decode the records of ``data`` from ``pos``: ``(record, start, end)`` each. Stops
    at the first record that is incomplete, claims more than :data:`MAX_RECORD_BYTES`
    (checked before anything is sliced), fails its CRC or does not decode."""
    for body, start, end in iter_frames(data, pos, MAX_RECORD_BYTES):
        try:
            decoded = decode_body(body)
        except (ValueError, struct.error):
            return
        yield decoded, start, end


#: The transaction log, as the journal engine knows it.
TXN_JOURNAL = JournalKind(
    name=TXN_LOG_NAME, noun="transaction log", file_name=TXN_LOG_FILE_NAME, magic=MAGIC
)


class _TxnView:
    """The latest stored state of every live transactional id, as replayed."""

    def __init__(self) -> None:
        self.txns: dict[str, StoredTxn] = {}
        #: Framed size of each live id's latest record (the compaction estimate).
        self.sizes: dict[str, int] = {}
        self._live = 0

    def replay(self, data: bytes, pos: int, magic: bytes) -> int:
        for record, start, end in iter_records(data, pos):
            self.apply(record, end - start)
            pos = end
        return pos

    def live_bytes(self) -> int:
        return self._live

    def snapshot(self) -> bytes:
        return b"".join(encode_state(t) for _, t in sorted(self.txns.items()))

    def apply(self, record: StoredTxn | str, size: int) -> None:
        tid = record if isinstance(record, str) else record.transactional_id
        self._live -= self.sizes.pop(tid, 0)
        if isinstance(record, str):
            self.txns.pop(tid, None)
        else:
            self.txns[tid] = record
            self.sizes[tid] = size
            self._live += size


class TxnLog:
    """The transaction state journal plus the latest state of every live id in memory.

    Create with :meth:`open`. Thread-safe: one lock serialises writes and compaction;
    :meth:`transactions` may be called from any thread.
    """

    def __init__(self, journal: Journal[_TxnView]) -> None:
        # Use open(); the constructor only stores what open() prepared.
        #: The journal file (its engine: sizes, compactions, faults).
        self.journal = journal
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        path: str,
        *,
        clock: Callable[[], float] = time.time,
        compact_min_bytes: int = COMPACT_MIN_BYTES,
        compact_ratio: int = COMPACT_RATIO,
    ) -> TxnLog:
        """Open (creating if needed) the journal at ``path`` (or :data:`TXN_LOG_FILE_NAME`
        in the directory ``path``) and replay it. ``clock`` (seconds) times the fault
        log's window and the reopen backoff.

        :raises StorageError: the file is not a transaction journal, or I/O failed.
        """
        return cls(Journal.open(
            path, TXN_JOURNAL, _TxnView(), clock=clock, compact_min_bytes=compact_min_bytes,
            compact_ratio=compact_ratio,
        ))

    @property
    def path(self) -> str:
        return self.journal.path

    # -- reads --------------------------------------------------------------------------

    def transactions(self) -> dict[str, StoredTxn]:
        """The latest stored state of every live transactional id."""
        with self._lock:
            return dict(self.journal.state.txns)

    @property
    def size(self) -> int:
        return self.journal.size

    # -- writes (blocking) --------------------------------------------------------------

    def write(self, put: Sequence[StoredTxn] = (), delete: Sequence[str] = ()) -> None:
        """Durably record new states (``put``) and forget ids (``delete``): one write and
        one fsync; the changes are visible once it returns.

        :raises ValueError: a value the format cannot carry (nothing is written).
        :raises StorageError: the write failed and nothing was stored; the next write
            tries again (a full disk may get space back). After a failed fsync it is a
            :class:`~brokerd.storage.journal.faults.StoreOffline`: the kernel may have
            dropped the data, so the log refuses writes until :meth:`retry_reopen` has
            reopened it from disk.
        """
        self.write_records((*put, *delete))

    def write_records(self, records: Sequence[StoredTxn | str]) -> None:
        """:meth:`write` of changes in their order: a :class:`StoredTxn` is a new state,
        a string an id to forget (one write and one fsync for them all)."""
        encoded: list[tuple[StoredTxn | str, bytes]] = [
            (r, encode_tombstone(r) if isinstance(r, str) else encode_state(r)) for r in records
        ]
        if not encoded:
            return
        with self._lock:
            self.journal.append(b"".join(raw for _, raw in encoded))
            for record, raw in encoded:
                self.journal.state.apply(record, len(raw))
            self.journal.compact_if_due()

    def close(self) -> None:
        """Close the file; every write that returned is already durable."""
        with self._lock:
            self.journal.close()

    # -- faults and reopening -----------------------------------------------------------





    def retry_reopen(self, now: float | None = None) -> bool:
        """Reopen an offline log from disk if its retry is due (replay the file, cut a
        torn tail, sync file and directory); True if it is back online. Blocking."""
        with self._lock:
            return self.journal.reopen_if_due(now, _TxnView, lambda view: None)
