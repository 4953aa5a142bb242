# -*- test-case-name: tests.kafka.server.test_offsets_topic -*-
"""``__consumer_offsets`` as readable logs, in Kafka's record format, derived from the
offsets journal.

brokerd's offsets journal (:mod:`brokerd.storage.stores.offsets`) stays the source of
truth; this module keeps, beside it, the 50 partitions of ``__consumer_offsets`` as Kafka
would have written them, so that tools that decode the topic themselves (lag monitors
such as Burrow) can consume it with an ordinary consumer. Each write the journal made
durable becomes one record batch per partition it touches (one append per commit batch,
not per offset), in Kafka's schemas:

* an offset commit: key version 1 (group, topic, partition), value version 3 (offset,
  leader epoch, metadata, commit timestamp);
* a classic group's membership: key version 2 (group), value version 3 (protocol type,
  generation, protocol, leader, state timestamp, members);
* a deleted offset, group or topic: the key with a null value (a tombstone).

A group's records go to partition ``abs(hashCode(group id)) % 50`` (Java's String
hashCode), as Kafka places them, so a tool that looks for a group's partition finds it.

The logs live in memory and are bounded as a compacted topic is: once a partition holds
more than :data:`COMPACT_MIN_BYTES` and twice its live records, it is rewritten keeping
only the latest record of each key (each keeps its offset; tombstones go). At start they
are seeded with the journal's live state (one record per committed offset and per stored
group), what a compacted ``__consumer_offsets`` holds. Offsets never go back: each run
of the broker numbers its records from ``run << 40`` (:func:`next_run`, a counter in the
data directory written once at start, never on the commit path), and the log start
offset stays 0, as a compacted topic's does. So a reader that resumes across a restart
from where it stopped reads on from the first record of the new run (the live state
again, then what follows), never records under offsets it already read, and never an
OFFSET_OUT_OF_RANGE.

Thread-safety: :meth:`OffsetsTopicLog.journal_written` is called from the journal's
writer thread, reads from the reactor; one short lock guards the logs.
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
import time
from collections.abc import Iterable, Sequence

from brokerd.storage.fileio import atomic_write, read_file
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.stores.offsets_format import (
    Committed,
    Decoded,
    GroupDeletion,
    GroupUpdate,
    OffsetDeletion,
    StoredGroup,
)

#: Kafka's ``offsets.topic.num.partitions`` default.
PARTITIONS = 50
#: A partition is compacted only once it holds at least this many bytes ...
COMPACT_MIN_BYTES = 1 << 20
#: ... and this many times the bytes of its live records.
COMPACT_RATIO = 2

#: Each run of the broker numbers its records from ``run << RUN_SHIFT``: room for 2**40
#: records per run and 2**23 runs within Kafka's int64 offsets.
RUN_SHIFT = 40
#: The run counter's file in the data directory (not a ``<topic>-<n>`` name).
RUN_FILE_NAME = "consumer-offsets-topic.run"

_OFFSET_KEY_VERSION = 1
_OFFSET_VALUE_VERSION = 3
_GROUP_KEY_VERSION = 2
_GROUP_VALUE_VERSION = 3


def partition_for(group_id: str, partitions: int = PARTITIONS) -> int:
    """The partition Kafka puts ``group_id``'s records in: abs(Java hashCode) % count."""
    h = 0
    # Java hashes UTF-16 code units.
    data = group_id.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 (h & 0x7fffffff).
    return (h & 0x7FFFFFFF if h == -(1 << 31) else abs(h)) % partitions


def next_run(data_dir: str) -> int:
    """This run's number: the counter in ``data_dir`` (0 when there is none), which is
    then durably moved on by one. Blocking; called once at start."""
    path = os.path.join(data_dir, RUN_FILE_NAME)
    raw = read_file(path)
    try:
        run = int(raw.decode("ascii")) if raw else 0
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"{path} holds no run number") from None
    if not 0 <= run < 1 << (63 - RUN_SHIFT):
        raise ValueError(f"{path} holds run {run}, out of range")
    atomic_write(path, str(run + 1).encode("ascii"))
    return run


def _string(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    return struct.pack(">h", len(raw)) + raw


def _nullable(text: str | None) -> bytes:
    return b"\xff\xff" if text is None else _string(text)


def _bytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    """Kafka's OffsetCommitKey, version 1."""
    return (
        struct.pack(">h", _OFFSET_KEY_VERSION) + _string(group_id) + _string(topic)
        + struct.pack(">i", partition)
    )


def offset_value(value: Committed) -> bytes:
    """Kafka's OffsetCommitValue, version 3."""
    return (
        struct.pack(">hqi", _OFFSET_VALUE_VERSION, value.offset, value.leader_epoch)
        + _string(value.metadata or "")
        + struct.pack(">q", value.timestamp_ms)
    )


def group_key(group_id: str) -> bytes:
    """Kafka's GroupMetadataKey, version 2."""
    return struct.pack(">h", _GROUP_KEY_VERSION) + _string(group_id)


def group_value(group: StoredGroup, now_ms: int) -> bytes:
    """Kafka's GroupMetadataValue, version 3."""
    parts = [
        struct.pack(">h", _GROUP_VALUE_VERSION),
        _string(group.protocol_type),
        struct.pack(">i", group.generation),
        _nullable(group.protocol_name or None),
        _nullable(group.leader_id or None),
        struct.pack(">q", now_ms),
        struct.pack(">i", len(group.members)),
    ]
    for m in group.members:
        parts += [
            _string(m.member_id), _nullable(m.group_instance_id), _string(m.client_id),
            _string(m.client_host),
            struct.pack(">ii", m.rebalance_timeout_ms, m.session_timeout_ms),
            _bytes(m.metadata), _bytes(m.assignment),
        ]
    return b"".join(parts)


class _Partition:
    """One partition's batches, and the latest record of each key (for compaction)."""

    def __init__(self, first_offset: int) -> None:
        #: ``(last offset, base offset, batch)`` in offset order.
        self.batches: list[tuple[int, int, bytes]] = []
        self.lasts: list[int] = []
        self.next_offset = first_offset
        self.size = 0
        #: key -> (offset, value) of its latest record; tombstones are None values.
        self.latest: dict[bytes, tuple[int, bytes | None]] = {}
        #: group -> the offset keys it has live here (for a group deletion's tombstones).
        self.group_keys: dict[str, dict[tuple[str, int], bytes]] = {}

    def append(self, records: Sequence[tuple[bytes, bytes | None]], now_ms: int) -> None:
        base = self.next_offset
        batch = encode_batch(
            [v for _, v in records], keys=[k for k, _ in records],
            timestamp_ms=now_ms, base_offset=base,
        )
        self._add(base, base + len(records) - 1, batch)
        for i, (key, value) in enumerate(records):
            self.latest[key] = (base + i, value)
        self.next_offset = base + len(records)
        self._compact_if_due(now_ms)

    def _add(self, base: int, last: int, batch: bytes) -> None:
        self.batches.append((last, base, batch))
        self.lasts.append(last)
        self.size += len(batch)

    def _compact_if_due(self, now_ms: int) -> None:
        if self.size < COMPACT_MIN_BYTES:
            return
        live = [(o, k, v) for k, (o, v) in self.latest.items() if v is not None]
        live_bytes = sum(len(k) + len(v or b"") + 80 for _, k, v in live)
        if self.size < COMPACT_RATIO * live_bytes:
            return
        live.sort()
        self.batches, self.lasts, self.size = [], [], 0
        self.latest = {k: (o, v) for o, k, v in live}
        for offset, key, value in live:
            self._add(offset, offset, encode_batch(
                [value], keys=[key], timestamp_ms=now_ms, base_offset=offset,
            ))

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset``; at least one, then up to
        ``max_bytes``."""
        i = bisect.bisect_left(self.lasts, offset)
        out: list[bytes] = []
        size = 0
        while i < len(self.batches):
            batch = self.batches[i][2]
            if out and size + len(batch) > max_bytes:
                break
            out.append(batch)
            size += len(batch)
            i += 1
        return b"".join(out)


class OffsetsTopicLog:
    """The partitions of ``__consumer_offsets``, kept in step with the offsets journal.

    :param partitions: the topic's partition count.
    :param run: this run of the broker (:func:`next_run`); its records are numbered from
        ``run << RUN_SHIFT``.
    """

    def __init__(self, partitions: int = PARTITIONS, run: int = 0) -> None:
        self.partitions = partitions
        self._lock = threading.Lock()
        self._parts = [_Partition(run << RUN_SHIFT) for _ in range(partitions)]

    def seed(
        self,
        committed: Iterable[tuple[str, Sequence[tuple[str, int, Committed]]]],
        groups: Iterable[tuple[str, StoredGroup]],
        now_ms: int | None = None,
    ) -> None:
        """Start from the journal's live state: each group's offsets, then its
        membership (what a compacted ``__consumer_offsets`` would hold)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        changes: list[Decoded] = [(g, list(rows)) for g, rows in committed]
        changes += [GroupUpdate(g, value) for g, value in groups]
        self.journal_written(changes, now)

    def journal_written(self, changes: Sequence[Decoded], now_ms: int | None = None) -> None:
        """The journal made ``changes`` durable (in this order): append their records,
        one batch per partition touched."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
            for change in changes:
                self._records(change, now, pending)
            for p, records in pending.items():
                if records:
                    self._parts[p].append(records, now)

    def _records(
        self, change: Decoded, now_ms: int, pending: dict[int, list[tuple[bytes, bytes | None]]]
    ) -> None:
        if isinstance(change, tuple):
            group, rows = change
            if group is None or isinstance(rows, str):
                # A deleted topic: every group's offsets of it go.
                deleted = rows if isinstance(rows, str) else ""
                for p, part in enumerate(self._parts):
                    for g, keys in list(part.group_keys.items()):
                        for tp in sorted(tp for tp in keys if tp[0] == deleted):
                            pending.setdefault(p, []).append((keys.pop(tp), None))
                        if not keys:
                            del part.group_keys[g]
                return
            p = partition_for(group, self.partitions)
            keys = self._parts[p].group_keys.setdefault(group, {})
            for topic, partition, value in rows:
                key = offset_key(group, topic, partition)
                keys[topic, partition] = key
                pending.setdefault(p, []).append((key, offset_value(value)))
        elif isinstance(change, GroupUpdate):
            if change.value is not None:
                p = partition_for(change.group_id, self.partitions)
                pending.setdefault(p, []).append(
                    (group_key(change.group_id), group_value(change.value, now_ms))
                )
        elif isinstance(change, GroupDeletion):
            p = partition_for(change.group_id, self.partitions)
            keys = self._parts[p].group_keys.pop(change.group_id, {})
            out = pending.setdefault(p, [])
            out += [(keys[tp], None) for tp in sorted(keys)]
            out.append((group_key(change.group_id), None))
        elif isinstance(change, OffsetDeletion):
            p = partition_for(change.group_id, self.partitions)
            keys = self._parts[p].group_keys.get(change.group_id, {})
            for topic, partition in change.partitions:
                keys.pop((topic, partition), None)
                key = offset_key(change.group_id, topic, partition)
                pending.setdefault(p, []).append((key, None))
            if not keys:
                self._parts[p].group_keys.pop(change.group_id, None)
        # Consumer-protocol group state and group configs have no record here.

    def bounds(self, partition: int) -> tuple[int, int] | None:
        """``(log start offset, high watermark)`` of ``partition``; None if no such."""
        if not 0 <= partition < self.partitions:
            return None
        with self._lock:
            return 0, self._parts[partition].next_offset

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes | None:
        """Batches of ``partition`` from ``offset`` (b"" at the end); None if the
        offset is out of range."""
        with self._lock:
            part = self._parts[partition]
            if not 0 <= offset <= part.next_offset:
                return None
            return part.read(offset, max_bytes)


__all__ = [
    "COMPACT_MIN_BYTES",
    "PARTITIONS",
    "RUN_FILE_NAME",
    "RUN_SHIFT",
    "OffsetsTopicLog",
    "group_key",
    "group_value",
    "next_run",
    "offset_key",
    "offset_value",
    "partition_for",
]
