"""Value types passed between the storage layer, the core and the protocols.

Plain attrs frozen classes; no behaviour, no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from types import MappingProxyType

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


@attrs.frozen
class ReadResult:
    """Raw log bytes for a Kafka fetch, with the partition's state at read time.

    ``data`` starts at the first byte of the batch holding the requested offset and may
    end with a partial batch when a byte limit cut it (Kafka clients expect that).
    """

    data: bytes
    high_watermark: int
    log_start_offset: int
    #: The last stable offset (docs/architecture.md, "Transactions"); the high watermark
    #: of a partition with no ongoing transaction, and the default.
    last_stable_offset: int = attrs.field(
        default=attrs.Factory(lambda self: self.high_watermark, takes_self=True)
    )
    #: A read_committed read's aborted transactions overlapping ``data`` (Kafka's Fetch
    #: ``aborted_transactions``); empty for other reads.
    aborted: tuple[AbortedTxn, ...] = ()


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
class RecordsResult:
    """Decoded records for a native fetch, with the partition's state at read time."""

    records: tuple[Record, ...]
    high_watermark: int
    log_start_offset: int


@attrs.frozen
class LogDirUsage:
    """A data directory for DescribeLogDirs: its absolute path, each partition's bytes
    on disk by ``(topic, partition)``, and the size and free space (for an unprivileged
    writer) of the filesystem it is on, -1 when the filesystem could not be asked."""

    path: str
    partition_sizes: Mapping[tuple[str, int], int]
    total_bytes: int = -1
    usable_bytes: int = -1
