# -*- test-case-name: tests.core.test_api -*-
"""The roles of the broker core's face, each a Protocol of the operations one part of
the core offers: the topics, their administration, the writes, the reads, the long poll,
the core's side of transactions (:mod:`brokerd.core.api` joins them into ``CoreApi``),
and with them the long-poll primitive (:mod:`brokerd.core.roles.long_poll`).

A package of its own, below every part of the core and importing none: a part that
needs a role of the core (the share service needs its reads and long poll) takes it
from here, and the face above (which names that part as a role too) imports both
without a circle. Only declarations, no behaviour: see :mod:`brokerd.core.api`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from twisted.internet.defer import Deferred

from brokerd.core.roles.long_poll import AppendWatcher
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.producer_state import ActiveProducer
from brokerd.storage.types import (
    AppendInfo,
    LogDirUsage,
    LogRead,
    PartitionOffsets,
    ReadSpec,
    TopicInfo,
)

#: ``verify(topic, partition, producer_id, producer_epoch)``: returns if the producer's
#: ongoing transaction holds the partition; raises ``InvalidTxnState`` (or
#: ``InvalidProducerEpoch`` for a fenced, older epoch) otherwise.
TxnVerifier = Callable[[str, int, int, int], None]

#: ``validate(topic, records, check_keys, check_values)``: the records (key, value) of
#: one produced batch, of a topic whose ``confluent.key.schema.validation`` (check_keys)
#: or ``confluent.value.schema.validation`` (check_values) is on; raises
#: ``InvalidRecord`` naming each refused record (its index in the batch) and why.
RecordValidator = Callable[[str, Sequence[tuple[bytes | None, bytes | None]], bool, bool], None]

#: ``update(current overrides) -> new overrides`` of ``alter_topic_configs`` (None
#: values remove a key).
ConfigUpdate = Callable[[Mapping[str, str]], Mapping[str, str | None]]


class CoreTopics(Protocol):
    """The topics and partitions that exist, read without I/O. Implemented by
    :class:`~brokerd.core.broker.Broker`; a Protocol because this package sits below every
    part of the core (the module docstring says why)."""

    @property
    def auto_create_topics(self) -> bool:
        """Whether a produce or metadata request for an unknown topic creates it."""
        ...

    def topics(self) -> dict[str, TopicInfo]: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic whose ID is ``topic_id`` now; None for an ID no topic has (a
        deleted topic's, even when its name was used again)."""
        ...

    def list_topics(self) -> Deferred[list[TopicInfo]]:
        """Every topic, by name."""
        ...

    def topic_config_defaults(self) -> dict[str, str]:
        """The broker-wide default of every topic config, as config strings by name."""
        ...


class CoreTopicChanges(Protocol):
    """Topic and partition administration (durable when the Deferred fires). Implemented by
    :class:`~brokerd.core.broker.Broker`; a Protocol because this package sits below every
    part of the core (the module docstring says why)."""

    def ensure_topic(self, name: str) -> Deferred[TopicInfo]:
        """The topic's info, auto-creating it when the broker allows that."""
        ...

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> Deferred[None]:
        """Create a topic with config overrides (Kafka names and value syntax); with
        ``validate_only`` check everything and create nothing."""
        ...

    def delete_topic(self, name: str) -> Deferred[None]: ...

    def alter_topic_configs(
        self, name: str, update: ConfigUpdate, *, validate_only: bool = False
    ) -> Deferred[TopicInfo]:
        """Replace the topic's config overrides by ``update(current overrides)`` and
        apply them to its open partitions."""
        ...

    def create_partitions(self, topic: str, new_total: int) -> Deferred[TopicInfo]:
        """Grow ``topic`` to ``new_total`` partitions (empty)."""
        ...

    def delete_records(self, topic: str, partition: int, before_offset: int) -> Deferred[int]:
        """Move the partition's log start offset up to ``before_offset`` (-1: the high
        watermark); fires with the new log start offset."""
        ...


class CoreWrites(Protocol):
    """Appends, answered after the durability point of the fsync mode. Implemented by
    :class:`~brokerd.core.broker.Broker`; a Protocol because this package sits below every
    part of the core (the module docstring says why)."""

    def produce_batches(
        self, topic: str, partition: int, data: bytes, *, acks: int = -1
    ) -> Deferred[AppendInfo]:
        """Append client RecordBatches as they are, after validating them (Kafka
        Produce); a retried batch of an idempotent producer answers the stored copy's
        offsets."""
        ...

    def produce_values(
        self, topic: str, partition: int, values: Sequence[bytes | None]
    ) -> Deferred[AppendInfo]:
        """Append ``values`` as one uncompressed batch (the native produce)."""
        ...

    def init_producer_id(self) -> Deferred[int]:
        """A producer id never handed out before."""
        ...

    def set_record_validator(self, validate: RecordValidator | None) -> None:
        """Install (None: remove) the check of produces to topics with schema
        validation on (the schema registry's); without one those produces pass."""
        ...


class CoreReads(Protocol):
    """Reads of one partition; an offset out of range fails with ``OffsetOutOfRange``.
    Implemented by :class:`~brokerd.core.fetcher.Fetcher`; a Protocol because this package
    sits below every part of the core (the module docstring says why)."""

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec
    ) -> LogRead | Deferred[LogRead]:
        """The one read of a partition's log, from the batch holding ``offset``: bytes by
        value or by reference (a span the caller must release, for ``os.sendfile``) or
        decoded records, as ``spec`` says; read_committed never past the last stable
        offset, with the aborted transactions of the data. The answer itself when memory
        holds it, else a Deferred from the read pool."""
        ...

    def offsets(self, topic: str, partition: int) -> Deferred[PartitionOffsets]:
        """Log start offset, high watermark and last stable offset (no I/O)."""
        ...

    def open_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log if it is open, else None (no I/O, opens nothing): its
        offsets, read this way, cost no Deferred (a fetch session's look at each of
        its partitions per poll)."""
        ...

    def list_offsets(
        self, topic: str, partition: int, *, read_committed: bool = False
    ) -> Deferred[tuple[int, int]]:
        """``(log start, high watermark)``, or the last stable offset for the latter
        with ``read_committed`` (no I/O)."""
        ...

    def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> Deferred[tuple[int, int] | None]:
        """``(offset, timestamp)`` of the first record at or after ``timestamp_ms``."""
        ...

    def max_timestamp_offset(
        self, topic: str, partition: int
    ) -> Deferred[tuple[int, int] | None]:
        """``(offset, timestamp)`` of the record with the largest timestamp, or None."""
        ...


class CoreLongPoll(Protocol):
    """Waiting for appends: the park step of a Kafka Fetch, and the native long poll.
    Implemented by :class:`~brokerd.core.broker.Broker`; a Protocol because this package
    sits below every part of the core (the module docstring says why)."""

    def wait_for_data(
        self,
        positions: Sequence[tuple[str, int, int]],
        *,
        min_bytes: int,
        max_wait_ms: int,
        already: int = 0,
        seen: dict[tuple[str, int], int] | None = None,
    ) -> Deferred[None]:
        """Fire once ``min_bytes`` (counting ``already``) are appended past
        ``positions`` or ``max_wait_ms`` passes; at once if a ``seen`` high watermark
        moved. Cancelling it removes every trace."""
        ...

    def wait_records(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_value_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
    ) -> Deferred[LogRead]:
        """A native long-poll fetch: :func:`long_poll` over :meth:`CoreReads.read` of
        decoded committed records."""
        ...


class CoreLogDir(Protocol):
    """The data directory's side of the core (its service, ``core.storage``): what is open,
    what could not be, and the space used (no I/O). Implemented by
    :class:`~brokerd.core.services.LogDirectoryService`; a Protocol because this package
    sits below every part of the core (the module docstring says why)."""

    def open_logs(self) -> Mapping[tuple[str, int], PartitionLog]:
        """Every open partition's log: the operator views read its offsets and sizes."""
        ...

    def offline_partitions(self) -> Mapping[tuple[str, int], str]:
        """The partitions that could not be opened, with the reason."""
        ...

    def describe_log_dirs(self) -> LogDirUsage:
        """The data directory's path, each open partition's size, the filesystem's size
        and free space (no file I/O)."""
        ...


class CoreAppendWatches(Protocol):
    """Standing interests in partitions' appends (the core's waiters, ``core.waiters``).
    Implemented by :class:`~brokerd.core.waiters.WaiterRegistry`; a Protocol because this
    package sits below every part of the core (the module docstring says why)."""

    def watch(self, key: tuple[str, int], watcher: AppendWatcher) -> None:
        """Tell ``watcher`` of every append to ``key`` (and of its deletion) until
        :meth:`unwatch`: a fetch session's standing interest, so a parked
        session fetch is not registered partition by partition on every poll."""
        ...

    def unwatch(self, key: tuple[str, int], watcher: AppendWatcher) -> None: ...


class CoreTransactions(Protocol):
    """The core's side of transactions. Implemented by
    :class:`~brokerd.core.txn_markers.TxnMarkers`; a Protocol because this package sits
    below every part of the core (the module docstring says why)."""

    def write_txn_markers(
        self,
        partitions: Sequence[tuple[str, int]],
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int = 0,
    ) -> Deferred[None]:
        """One COMMIT or ABORT marker per partition, fsynced; partitions that no longer
        exist are skipped (WriteTxnMarkers, and the coordinator's completion)."""
        ...

    def set_txn_verifier(self, verify: TxnVerifier | None) -> None:
        """Install (or with None remove) the check run before a transactional produce
        is admitted (without one, transactional batches are refused)."""
        ...

    def describe_producers(
        self, topic: str, partition: int
    ) -> Deferred[list[tuple[ActiveProducer, int]]]:
        """Each producer of the partition with its open transaction's first offset
        there (-1: none) (DescribeProducers)."""
        ...


class HoldsReads(Protocol):
    """Whatever holds the core's reads role (the core, and the faces built on it)."""

    @property
    def reads(self) -> CoreReads:
        """The reads of partitions (the core's ``Fetcher``)."""
        ...


__all__ = [
    "ConfigUpdate",
    "CoreAppendWatches",
    "CoreLogDir",
    "CoreLongPoll",
    "CoreReads",
    "CoreTopicChanges",
    "CoreTopics",
    "CoreTransactions",
    "CoreWrites",
    "HoldsReads",
    "RecordValidator",
    "TxnVerifier",
]
