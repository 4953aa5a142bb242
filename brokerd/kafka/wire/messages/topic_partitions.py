# -*- test-case-name: tests.kafka.wire.messages.test_topic_partitions -*-
"""Request and response bodies of DescribeTopicPartitions (75), and the version range
brokerd answers (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Every version is flexible. Its cursor is a nullable
struct, the one such field brokerd reads: :class:`NullableStruct`. Pure: no I/O, no
Twisted, no broker logic.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    INT16,
    INT32,
    STRING,
    UUID,
    ZERO_UUID,
    ApiKey,
    Array,
    MalformedRequest,
    Reader,
    Struct,
    Writer,
)
from brokerd.kafka.wire.schema import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ApiSpec,
    Wire,
    array,
    wire_message,
)

#: Kafka's default (and its broker's ``max.request.partition.size.limit``): the most
#: partitions one answer holds.
PARTITION_LIMIT = 2000


class NullableStruct(Struct):
    """A struct that may be null: one byte before it, -1 for null, 1 for present (how
    Kafka's generated code writes a nullable struct field)."""

    def read(self, r: Reader, version: int, nullable: bool) -> Any:
        marker = r.int8()
        if marker < 0:
            if not nullable:
                raise MalformedRequest("null struct where the schema forbids it")
            return None
        return super().read(r, version, nullable)

    def write(self, w: Writer, value: Any, version: int, nullable: bool) -> None:
        if value is None:
            if not nullable:
                raise ValueError("struct may not be null at this version")
            w.int8(-1)
            return
        w.int8(1)
        super().write(w, value, version, nullable)

    def min_size(self, version: int, flexible: bool = False) -> int:
        return 1


@wire_message
@attrs.frozen(kw_only=True)
class TopicPartitionsCursor:
    """Where an answer stopped (and the next request starts): a topic and partition."""

    topic_name: Annotated[str, Wire(STRING)]
    partition_index: Annotated[int, Wire(INT32)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class DescribeTopicPartitionsRequestTopic:
    name: Annotated[str, Wire(STRING)]


@wire_message
@attrs.frozen(kw_only=True)
class DescribeTopicPartitionsRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    #: Empty: every topic.
    topics: Annotated[
        tuple[DescribeTopicPartitionsRequestTopic, ...],
        Wire(Array(Struct(DescribeTopicPartitionsRequestTopic))),
    ] = array()
    response_partition_limit: Annotated[int, Wire(INT32)] = PARTITION_LIMIT
    cursor: Annotated[
        TopicPartitionsCursor | None,
        Wire(NullableStruct(TopicPartitionsCursor), nullable_from=0),
    ] = None


@wire_message
@attrs.frozen(kw_only=True)
class DescribeTopicPartitionsPartition:
    error_code: Annotated[int, Wire(INT16)] = 0
    partition_index: Annotated[int, Wire(INT32)]
    leader_id: Annotated[int, Wire(INT32)]
    leader_epoch: Annotated[int, Wire(INT32)] = -1
    replica_nodes: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()
    isr_nodes: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()
    eligible_leader_replicas: Annotated[
        tuple[int, ...] | None, Wire(Array(INT32), nullable_from=0)
    ] = array()
    last_known_elr: Annotated[
        tuple[int, ...] | None, Wire(Array(INT32), nullable_from=0)
    ] = array()
    offline_replicas: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeTopicPartitionsTopic:
    error_code: Annotated[int, Wire(INT16)] = 0
    name: Annotated[str | None, Wire(STRING, nullable_from=0)]
    topic_id: Annotated[uuid.UUID, Wire(UUID)] = ZERO_UUID
    is_internal: Annotated[bool, Wire(BOOL)] = False
    partitions: Annotated[
        tuple[DescribeTopicPartitionsPartition, ...],
        Wire(Array(Struct(DescribeTopicPartitionsPartition))),
    ] = array()
    topic_authorized_operations: Annotated[int, Wire(INT32)] = AUTHORIZED_OPERATIONS_OMITTED


@wire_message
@attrs.frozen(kw_only=True)
class DescribeTopicPartitionsResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    topics: Annotated[
        tuple[DescribeTopicPartitionsTopic, ...],
        Wire(Array(Struct(DescribeTopicPartitionsTopic))),
    ] = array()
    next_cursor: Annotated[
        TopicPartitionsCursor | None,
        Wire(NullableStruct(TopicPartitionsCursor), nullable_from=0),
    ] = None


DESCRIBE_TOPIC_PARTITIONS = ApiSpec(
    ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    0,
    0,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (DESCRIBE_TOPIC_PARTITIONS,)
