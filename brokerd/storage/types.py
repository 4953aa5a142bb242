"""Value types passed between the storage layer, the core and the protocols.

Plain attrs frozen classes (and :class:`FileRegion`, the protocol of stored bytes sent by
descriptor); no behaviour, no I/O.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from types import MappingProxyType
from typing import Protocol

import attrs

from brokerd.storage.topic_ids import new_topic_id


@attrs.frozen
class Record:
    """One record decoded from a RecordBatch (native fetch, tests, tools)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@attrs.frozen
class AppendInfo:
    """Where an append landed: offsets of its first and last record."""

    base_offset: int
    last_offset: int
    log_start_offset: int
    #: The time a LogAppendTime topic stamped the batches with (ms), else -1.
    log_append_time: int = -1
    #: A retry of an idempotent producer's stored batch, answered with that batch's
    #: offsets: nothing was appended (not counted, wakes no one). Not part of equality.
    duplicate: bool = attrs.field(default=False, eq=False)


class FileRegion(Protocol):
    """Bytes of an open file, sent by descriptor. Implemented by
    :class:`~brokerd.storage.segment.stored.StoredSpan`; a Protocol because the storage
    floor sits below ``segment/``."""

    position: int
    length: int

    @property
    def released(self) -> bool: ...

    def fileno(self) -> int: ...

    def read(self) -> bytes: ...

    def read_at(self, offset: int, size: int) -> bytes: ...

    def truncate(self, length: int) -> None: ...

    def release(self) -> None: ...


#: One part of a spliced frame, in wire order.
Part = bytes | FileRegion


@attrs.frozen(eq=False)
class StoredRecords:
    """A ``records`` field value sent without joining it into the frame: ``payload`` is
    the records' bytes or the file region holding them."""

    payload: Part

    @property
    def size(self) -> int:
        payload = self.payload
        return len(payload) if isinstance(payload, bytes) else payload.length


#: Stored record batches: bytes (by value), or :class:`StoredRecords` (a file region by
#: reference, or bytes to be sent as a part of their own).
Records = bytes | StoredRecords


class Isolation(enum.IntEnum):
    """Which records a read may return (Kafka's ``isolation_level`` values)."""

    #: Up to the high watermark.
    READ_UNCOMMITTED = 0
    #: Below the last stable offset, with the aborted transactions of the data.
    READ_COMMITTED = 1


class Delivery(enum.Enum):
    """The form of a read's answer."""

    #: Stored batches read and checked now, as bytes (:attr:`LogRead.records`).
    BYTES = "bytes"
    #: Stored batches, those checked before handed out by reference: a
    #: :class:`StoredRecords` of a pinned segment span the caller must release.
    REFERENCE = "reference"
    #: Decoded records (:attr:`LogRead.decoded`), committed ones only (control batches
    #: and aborted transactions' records skipped): the native fetch.
    RECORDS = "records"


def _records_are_committed(spec: ReadSpec, _attribute: object, delivery: Delivery) -> None:
    if delivery is Delivery.RECORDS and spec.isolation is not Isolation.READ_COMMITTED:
        raise ValueError("a read of decoded records reads committed records only")


@attrs.frozen
class ReadSpec:
    """How to read a partition's log: the isolation and the form of the answer. The byte
    budget is the read's own argument (it changes from partition to partition)."""

    isolation: Isolation = Isolation.READ_UNCOMMITTED
    delivery: Delivery = attrs.field(default=Delivery.BYTES, validator=_records_are_committed)
    #: Whether the isolation is read_committed (an attribute, not a property: every read
    #: asks).
    committed: bool = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "committed", self.isolation is Isolation.READ_COMMITTED)


#: A native fetch's read: decoded committed records.
COMMITTED_RECORDS = ReadSpec(Isolation.READ_COMMITTED, Delivery.RECORDS)
#: A native type-2 fetch's first read: the committed batches as stored, read and checked.
COMMITTED_BATCHES = ReadSpec(Isolation.READ_COMMITTED, Delivery.BYTES)


@attrs.frozen
class LogRead:
    """A read of a partition's log, with the partition's state at read time.

    ``records`` starts at the first byte of the batch holding the requested offset and may
    end with a partial batch when a byte limit cut it (Kafka clients expect that); it is
    empty for a read of decoded records, whose answer is ``decoded``. A ``records`` holding
    a file region must be released by whoever ends up with it.
    """

    records: Records
    high_watermark: int
    log_start_offset: int
    #: The last stable offset (docs/architecture.md, "Transactions"); the high watermark
    #: of a partition with no ongoing transaction.
    last_stable_offset: int
    #: A read_committed read's aborted transactions overlapping ``records`` (Kafka's Fetch
    #: ``aborted_transactions``); empty for other reads.
    aborted: tuple[AbortedTxn, ...] = ()
    #: A read of :attr:`Delivery.RECORDS`: the records from the requested offset on.
    decoded: tuple[Record, ...] = ()


@attrs.frozen
class AbortedTxn:
    """An aborted transaction a read_committed fetch reports: the client drops the
    records of ``producer_id`` from ``first_offset`` until that producer's ABORT marker."""

    producer_id: int
    first_offset: int


@attrs.frozen
class PartitionOffsets:
    """A partition's offsets as readers see them (published state, no I/O)."""

    log_start_offset: int
    high_watermark: int
    last_stable_offset: int


def _frozen_configs(configs: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(sorted(configs.items())))


@attrs.frozen
class TopicInfo:
    """A topic as the registry knows it.

    ``configs`` holds the topic's config *overrides* only, by Kafka name, as Kafka spells
    the values (``brokerd.storage.config.topic_config``); every other config takes the broker's
    default. ``topic_id`` is the topic's identity (``topic_ids.py``): drawn when the
    topic is created, kept by every change to it, never reused by a topic created later
    under the same name.
    """

    name: str
    partitions: int
    configs: Mapping[str, str] = attrs.field(
        factory=dict, converter=_frozen_configs, hash=False
    )
    topic_id: uuid.UUID = attrs.field(factory=new_topic_id, kw_only=True)


@attrs.frozen
class LogDirUsage:
    """A data directory for DescribeLogDirs: its absolute path, each partition's bytes
    on disk by ``(topic, partition)``, and the size and free space (for an unprivileged
    writer) of the filesystem it is on, -1 when the filesystem could not be asked."""

    path: str
    partition_sizes: Mapping[tuple[str, int], int]
    total_bytes: int = -1
    usable_bytes: int = -1
