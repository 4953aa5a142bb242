# -*- test-case-name: tests.storage.stores.test_share_state -*-
"""Durable state of share groups (KIP-932): one journal of share-partition states.

File ``<data-dir>/share-state.log``: the journal engine's framing
(:mod:`brokerd.storage.journal.engine`, header ``BKSHRS01``), each record body starting
with its kind byte (big-endian; text is ``u16 length`` + UTF-8):

- 1, partition: ``group, topic, i32 partition, i64 start, i64 end, u8 replace,
  u32 run_count``, then per run ``i64 first, i64 last, u8 state, u16 delivery_count``.
  ``start`` is the share-partition start offset (every record below it is done), ``end``
  one past the highest offset ever acquired. With ``replace`` the runs are the whole
  in-flight window; without, they overwrite the offsets they name and entries below the
  new start are dropped. ``state`` is the record state's number (0 available, 1
  acquired, 2 acknowledged, 4 archived).
- 2, partition deleted: ``group, topic, i32 partition``.
- 3, group configs: ``group, u32 count``, then per config ``name, value`` (the whole set).
- 4, group deleted: ``group``.

The store writes a list of records with one append and one fdatasync
(:meth:`ShareStateStore.write`): its caller answers an acquisition or an acknowledgement
only after that returned, so a broker killed at any moment neither loses an
acknowledgement nor forgets a delivery count. Compaction rewrites the file as one
replacing record per partition and one configs record per group.

What it does not do: decide states (``brokerd.core.share`` does; a restart's rule that
acquired records become available again is applied there), or anything with Twisted.
Every write blocks on the disk: callers on the reactor run it in the write pool.
"""

from __future__ import annotations

import struct
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence

import attrs

from brokerd.storage.journal.engine import Journal, JournalKind
from brokerd.storage.journal.records import BodyReader, frame, iter_frames

__all__ = [
    "SHARE_STATE_FILE_NAME",
    "SHARE_STATE_NAME",
    "GroupConfigs",
    "GroupDeleted",
    "PartitionDeleted",
    "PartitionState",
    "ShareStateRecord",
    "ShareStateStore",
    "StoredPartition",
    "StoredRun",
    "decode_body",
    "encode",
]

SHARE_STATE_FILE_NAME = "share-state.log"
SHARE_STATE_NAME = "share-state journal"
#: One record's body at most (a window of 2000 runs is 38 kB; a snapshot's record the same).
MAX_RECORD_BYTES = 16 * 1024 * 1024
_COMPACT_MIN_BYTES = 1 << 20
_COMPACT_RATIO = 4

SHARE_STATE_JOURNAL = JournalKind(
    name=SHARE_STATE_NAME,
    noun="share-state journal",
    file_name=SHARE_STATE_FILE_NAME,
    magic=b"BKSHRS01",
)

_PARTITION = struct.Struct(">iqqB")
_RUN = struct.Struct(">qqBH")
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_KINDS = (1, 2, 3, 4)
#: Record states a run may have (3, ARCHIVING, is KIP-1191's: a dead letter not yet written).
_STATES = (0, 1, 2, 3, 4)


@attrs.frozen
class StoredRun:
    first: int
    last: int
    state: int
    delivery_count: int


@attrs.frozen
class PartitionState:
    group: str
    topic: str
    partition: int
    start: int
    end: int
    runs: tuple[StoredRun, ...] = ()
    replace: bool = False


@attrs.frozen
class PartitionDeleted:
    group: str
    topic: str
    partition: int


@attrs.frozen
class GroupConfigs:
    group: str
    configs: tuple[tuple[str, str], ...]


@attrs.frozen
class GroupDeleted:
    group: str


ShareStateRecord = PartitionState | PartitionDeleted | GroupConfigs | GroupDeleted


@attrs.define
class StoredPartition:
    """A share-partition as the journal has it: start, end and the window's records as
    runs (``(first, last, state, delivery_count)``, in offset order, none overlapping;
    an offset no run holds has no record). A record's runs overwrite the offsets they
    name, so the work of replaying one grows with its runs, not the records they hold."""

    start: int
    end: int
    spans: list[tuple[int, int, int, int]] = attrs.Factory(list)

    @property
    def entries(self) -> dict[int, tuple[int, int]]:
        """Offset -> (state, count), one entry per record (for tests and tools)."""
        return {
            o: (state, count)
            for first, last, state, count in self.spans
            for o in range(first, last + 1)
        }

    def runs(self) -> tuple[StoredRun, ...]:
        """The window as runs, neighbours of the same state and count joined."""
        out: list[list[int]] = []
        for first, last, state, count in self.spans:
            if out and out[-1][1] + 1 == first and out[-1][2] == state and out[-1][3] == count:
                out[-1][1] = last
            else:
                out.append([first, last, state, count])
        return tuple(StoredRun(*r) for r in out)

    def put(self, first: int, last: int, state: int, count: int) -> None:
        """Offsets ``first..last`` are in ``state`` with ``count`` now."""
        spans = self.spans
        i = bisect_left(spans, first, key=_span_last)
        j = i
        new = []
        while j < len(spans) and spans[j][0] <= last:
            j += 1
        if i < j:
            lo, hi = spans[i], spans[j - 1]
            if lo[0] < first:
                new.append((lo[0], first - 1, lo[2], lo[3]))
            new.append((first, last, state, count))
            if hi[1] > last:
                new.append((last + 1, hi[1], hi[2], hi[3]))
        else:
            new.append((first, last, state, count))
        spans[i:j] = new

    def cut(self, start: int) -> None:
        """Forget the offsets below ``start``."""
        spans = self.spans
        i = bisect_left(spans, start, key=_span_last)
        if i < len(spans) and spans[i][0] < start:
            _, last, state, count = spans[i]
            spans[i] = (start, last, state, count)
        del spans[:i]


def _span_last(span: tuple[int, int, int, int]) -> int:
    return span[1]


def _text(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) > 0xFFFF:
        raise ValueError("share-state text longer than 65535 bytes")
    return _U16.pack(len(raw)) + raw


def _read_text(r: BodyReader) -> str:
    (n,) = r.unpack(_U16)
    return r.take(n).decode("utf-8", "surrogatepass")


def encode(record: ShareStateRecord) -> bytes:
    """One framed record."""
    if isinstance(record, PartitionState):
        parts = [
            b"\x01", _text(record.group), _text(record.topic),
            _PARTITION.pack(record.partition, record.start, record.end, int(record.replace)),
            _U32.pack(len(record.runs)),
        ]
        parts.extend(
            _RUN.pack(r.first, r.last, r.state, min(r.delivery_count, 0xFFFF))
            for r in record.runs
        )
        body = b"".join(parts)
    elif isinstance(record, PartitionDeleted):
        body = b"\x02" + _text(record.group) + _text(record.topic) + _I32.pack(record.partition)
    elif isinstance(record, GroupConfigs):
        body = b"".join(
            [b"\x03", _text(record.group), _U32.pack(len(record.configs))]
            + [_text(k) + _text(v) for k, v in record.configs]
        )
    else:
        body = b"\x04" + _text(record.group)
    return frame(body, MAX_RECORD_BYTES, "share-state")


def decode_body(body: bytes) -> ShareStateRecord:
    """:raises ValueError: the body is not a record of this journal."""
    r = BodyReader(body)
    kind = r.take(1)[0]
    record: ShareStateRecord
    if kind == 1:
        group, topic = _read_text(r), _read_text(r)
        partition, start, end, replace = r.unpack(_PARTITION)
        runs = []
        for _ in range(r.count(_RUN.size)):
            first, last, state, count = r.unpack(_RUN)
            if state not in _STATES or last < first:
                raise ValueError("bad share-state run")
            runs.append(StoredRun(first, last, state, count))
        record = PartitionState(group, topic, partition, start, end, tuple(runs), bool(replace))
    elif kind == 2:
        group, topic = _read_text(r), _read_text(r)
        (partition,) = r.unpack(_I32)
        record = PartitionDeleted(group, topic, partition)
    elif kind == 3:
        group = _read_text(r)
        n = r.count(4)
        record = GroupConfigs(group, tuple((_read_text(r), _read_text(r)) for _ in range(n)))
    elif kind == 4:
        record = GroupDeleted(_read_text(r))
    else:
        raise ValueError(f"unknown share-state record kind {kind}")
    if not r.done():
        raise ValueError("share-state record has trailing bytes")
    return record


PartitionKey = tuple[str, str, int]


class _View:
    """The journal's replayed state."""

    def __init__(self) -> None:
        self.partitions: dict[PartitionKey, StoredPartition] = {}
        self.configs: dict[str, dict[str, str]] = {}

    def replay(self, data: bytes, pos: int, magic: bytes) -> int:
        for body, _start, end in iter_frames(data, pos, MAX_RECORD_BYTES):
            try:
                record = decode_body(body)
            except ValueError:
                break
            self.apply(record)
            pos = end
        return pos

    def apply(self, record: ShareStateRecord) -> None:
        if isinstance(record, PartitionState):
            key = (record.group, record.topic, record.partition)
            part = self.partitions.get(key)
            if part is None or record.replace:
                part = self.partitions[key] = StoredPartition(record.start, record.end)
            part.start, part.end = record.start, max(record.end, record.start)
            for run in record.runs:
                part.put(run.first, run.last, run.state, run.delivery_count)
            part.cut(part.start)
        elif isinstance(record, PartitionDeleted):
            self.partitions.pop((record.group, record.topic, record.partition), None)
        elif isinstance(record, GroupConfigs):
            if record.configs:
                self.configs[record.group] = dict(record.configs)
            else:
                self.configs.pop(record.group, None)
        else:
            self.configs.pop(record.group, None)
            for key in [k for k in self.partitions if k[0] == record.group]:
                del self.partitions[key]

    def records(self) -> list[ShareStateRecord]:
        out: list[ShareStateRecord] = [
            PartitionState(g, t, p, part.start, part.end, part.runs(), replace=True)
            for (g, t, p), part in sorted(self.partitions.items())
        ]
        out.extend(
            GroupConfigs(group, tuple(sorted(configs.items())))
            for group, configs in sorted(self.configs.items())
        )
        return out

    def snapshot(self) -> bytes:
        return b"".join(encode(r) for r in self.records())

    def live_bytes(self) -> int:
        return len(self.snapshot())


class ShareStateStore:
    """The share-state journal (see the module docstring). Thread-safe; blocking."""

    def __init__(self, journal: Journal[_View]) -> None:
        self.journal = journal
        self._lock = threading.Lock()
        self._reopens = 0

    @classmethod
    def open(cls, path: str, *, clock: Callable[[], float] = time.time) -> ShareStateStore:
        """Open (creating) the journal at ``path`` (a file, or the data directory)."""
        return cls(
            Journal.open(
                path, SHARE_STATE_JOURNAL, _View(), clock=clock,
                compact_min_bytes=_COMPACT_MIN_BYTES, compact_ratio=_COMPACT_RATIO,
            )
        )

    @property
    def path(self) -> str:
        return self.journal.path

    def partitions(self) -> dict[PartitionKey, StoredPartition]:
        """What the journal holds, as replayed (a copy)."""
        with self._lock:
            return {
                k: StoredPartition(v.start, v.end, list(v.spans))
                for k, v in self.journal.state.partitions.items()
            }

    def group_configs(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {g: dict(c) for g, c in self.journal.state.configs.items()}

    def write(self, records: Sequence[ShareStateRecord]) -> None:
        """Append ``records`` with one write and one fdatasync.

        :raises StorageError: nothing was stored (after a failed sync the store is
            offline until :meth:`retry_reopen`).
        """
        if not records:
            return
        data = b"".join(encode(r) for r in records)
        with self._lock:
            self.journal.append(data)
            for record in records:
                self.journal.state.apply(record)
            self.journal.compact_if_due()

    def close(self) -> None:
        with self._lock:
            self.journal.close()

    # -- faults and reopening (the broker's store recovery polls these) -----------------

    @property
    def reopens(self) -> int:
        """How many times the journal was reopened from disk: each time, its view was
        replayed from the file, which may hold a write whose sync failed."""
        return self._reopens

    def retry_reopen(self, now: float | None = None) -> bool:
        with self._lock:
            return self.journal.reopen_if_due(now, _View, self._adopted)

    def _adopted(self, _fresh: _View) -> None:
        self._reopens += 1


def configs_record(group: str, configs: Mapping[str, str]) -> GroupConfigs:
    return GroupConfigs(group, tuple(sorted(configs.items())))


__all__ += ["configs_record"]
