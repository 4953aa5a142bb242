# -*- test-case-name: tests.test_kafka_protocol -*-
"""What the Kafka handlers ask of the broker core: :class:`KafkaCore`, a typed Protocol
(:class:`brokerd.core.Broker` satisfies it; tests pass fakes).

Every handler module imports it from here, and nothing else of the server, so the
handler modules and the dispatch that collects them do not import each other in a
circle. Reactor thread; failures carry ``brokerd.errors`` exceptions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from twisted.internet import defer

from brokerd.kafka.server.handlers.partitions import PartitionAdminCore
from brokerd.storage.types import AppendInfo, LogRead, ReadSpec, TopicInfo

if TYPE_CHECKING:
    from brokerd.storage.log.producer_state import ActiveProducer
    from brokerd.storage.types import PartitionOffsets


class KafkaCore(PartitionAdminCore, Protocol):
    """The part of :class:`brokerd.core.Broker` the Kafka listener uses (reactor
    thread; failures carry ``brokerd.errors`` exceptions)."""

    @property
    def auto_create_topics(self) -> bool: ...

    def topics(self) -> Mapping[str, TopicInfo]: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic with this ID now; None for an ID no topic has (no I/O)."""
        ...

    def ensure_topic(self, name: str) -> defer.Deferred[TopicInfo]: ...

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> defer.Deferred[None]: ...

    def topic_config_defaults(self) -> Mapping[str, str]: ...

    def alter_topic_configs(
        self,
        name: str,
        update: Callable[[Mapping[str, str]], Mapping[str, str | None]],
        *,
        validate_only: bool = False,
    ) -> defer.Deferred[TopicInfo]: ...

    def delete_topic(self, name: str) -> defer.Deferred[None]: ...

    def produce_batches(
        self, topic: str, partition: int, data: bytes, *, acks: int
    ) -> defer.Deferred[AppendInfo]: ...

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec
    ) -> LogRead | defer.Deferred[LogRead]:
        """From the batch holding ``offset``, by value or by reference as ``spec`` says;
        read_committed, never past the last stable offset, and ``aborted`` lists the
        aborted transactions of the data. The answer itself when it needs no file read,
        else a Deferred; a file region in it is the caller's to release."""
        ...

    def offsets(self, topic: str, partition: int) -> defer.Deferred[PartitionOffsets]:
        """Log start, high watermark and last stable offset (no I/O)."""
        ...

    def wait_for_data(
        self,
        positions: Sequence[tuple[str, int, int]],
        *,
        min_bytes: int,
        max_wait_ms: int,
        already: int = 0,
        seen: dict[tuple[str, int], int] | None = None,
    ) -> defer.Deferred[None]: ...

    def list_offsets(
        self, topic: str, partition: int, *, read_committed: bool = False
    ) -> defer.Deferred[tuple[int, int]]:
        """``(log start, high watermark)``, or the last stable offset for the latter
        with ``read_committed``."""
        ...

    def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> defer.Deferred[tuple[int, int] | None]: ...

    def max_timestamp_offset(
        self, topic: str, partition: int
    ) -> defer.Deferred[tuple[int, int] | None]:
        """``(offset, timestamp)`` of the visible record with the largest timestamp."""
        ...

    def init_producer_id(self) -> defer.Deferred[int]: ...

    def describe_producers(
        self, topic: str, partition: int
    ) -> defer.Deferred[list[tuple[ActiveProducer, int]]]:
        """Each producer of the partition with its open transaction's first offset there
        (-1: none) (DescribeProducers)."""
        ...

    def write_txn_markers(
        self,
        partitions: Sequence[tuple[str, int]],
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int = 0,
    ) -> defer.Deferred[None]:
        """One COMMIT or ABORT marker per partition (WriteTxnMarkers)."""
        ...


__all__ = ["KafkaCore"]
