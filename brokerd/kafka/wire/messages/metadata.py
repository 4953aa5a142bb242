# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of Metadata (3), and the version range brokerd answers of each
(:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
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
    Struct,
)
from brokerd.kafka.wire.schema import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ApiSpec,
    Wire,
    array,
    wire_message,
)

# -- Metadata (3) --------------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class MetadataRequestTopic:
    #: v10+; the topic is named by this ID when it is not zero (v12+: the name is then
    #: null, v10 and v11 may not use it).
    topic_id: Annotated[uuid.UUID, Wire(UUID, 10)] = ZERO_UUID
    name: Annotated[str | None, Wire(STRING, nullable_from=10)]


@wire_message
@attrs.frozen(kw_only=True)
class MetadataRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 9

    #: None (v1+) = all topics; empty = none (v0: empty = all).
    topics: Annotated[
        tuple[MetadataRequestTopic, ...] | None,
        Wire(Array(Struct(MetadataRequestTopic)), nullable_from=1),
    ] = array()
    allow_auto_topic_creation: Annotated[bool, Wire(BOOL, 4)] = True
    #: v8-10 only: v11+ asks DescribeCluster instead.
    include_cluster_authorized_operations: Annotated[bool, Wire(BOOL, 8, 10)] = False
    include_topic_authorized_operations: Annotated[bool, Wire(BOOL, 8)] = False


@wire_message
@attrs.frozen(kw_only=True)
class MetadataBroker:
    node_id: Annotated[int, Wire(INT32)]
    host: Annotated[str, Wire(STRING)]
    port: Annotated[int, Wire(INT32)]
    rack: Annotated[str | None, Wire(STRING, 1, nullable_from=1)] = None


@wire_message
@attrs.frozen(kw_only=True)
class MetadataPartition:
    error_code: Annotated[int, Wire(INT16)] = 0
    partition_index: Annotated[int, Wire(INT32)]
    leader_id: Annotated[int, Wire(INT32)]
    leader_epoch: Annotated[int, Wire(INT32, 7)] = -1
    replica_nodes: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()
    isr_nodes: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()
    offline_replicas: Annotated[tuple[int, ...], Wire(Array(INT32), 5)] = array()


@wire_message
@attrs.frozen(kw_only=True)
class MetadataTopic:
    error_code: Annotated[int, Wire(INT16)] = 0
    #: Null (v12+) only for an ID asked for that no topic has.
    name: Annotated[str | None, Wire(STRING, nullable_from=12)]
    #: v10+; zero for a topic asked for by a name no topic has.
    topic_id: Annotated[uuid.UUID, Wire(UUID, 10)] = ZERO_UUID
    is_internal: Annotated[bool, Wire(BOOL, 1)] = False
    partitions: Annotated[
        tuple[MetadataPartition, ...],
        Wire(Array(Struct(MetadataPartition))),
    ] = array()
    topic_authorized_operations: Annotated[int, Wire(INT32, 8)] = AUTHORIZED_OPERATIONS_OMITTED


@wire_message
@attrs.frozen(kw_only=True)
class MetadataResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 9

    throttle_time_ms: Annotated[int, Wire(INT32, 3)] = 0
    brokers: Annotated[tuple[MetadataBroker, ...], Wire(Array(Struct(MetadataBroker)))] = array()
    cluster_id: Annotated[str | None, Wire(STRING, 2, nullable_from=2)] = None
    controller_id: Annotated[int, Wire(INT32, 1)] = -1
    topics: Annotated[tuple[MetadataTopic, ...], Wire(Array(Struct(MetadataTopic)))] = array()
    cluster_authorized_operations: Annotated[int, Wire(INT32, 8, 10)] = (
        AUTHORIZED_OPERATIONS_OMITTED
    )
    #: v13+: an error of the whole request (a per-topic error stays in its topic).
    error_code: Annotated[int, Wire(INT16, 13)] = 0


# librdkafka asks for every topic at v9+ with a four-byte placeholder where the
# topic array's count goes (a varint 0, null, then three zero bytes it never
# shrinks), so its request runs three bytes past the body's end; Kafka's reader
# stops at the body's end and never sees them.
METADATA = ApiSpec(
    ApiKey.METADATA, MetadataRequest, MetadataResponse, 0, 13,
    trailing_bytes_ignored=True,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (METADATA,)
