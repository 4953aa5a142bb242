# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of Metadata (3), and the version range brokerd answers of each
(:data:`APIS`, collected by :mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    INT16,
    INT32,
    STRING,
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
    name: Annotated[str, Wire(STRING)]


@wire_message
@attrs.frozen(kw_only=True)
class MetadataRequest:
    #: None (v1+) = all topics; empty = none (v0: empty = all).
    topics: Annotated[
        tuple[MetadataRequestTopic, ...] | None,
        Wire(Array(Struct(MetadataRequestTopic)), nullable_from=1),
    ] = array()
    allow_auto_topic_creation: Annotated[bool, Wire(BOOL, 4)] = True
    include_cluster_authorized_operations: Annotated[bool, Wire(BOOL, 8)] = False
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
    name: Annotated[str, Wire(STRING)]
    is_internal: Annotated[bool, Wire(BOOL, 1)] = False
    partitions: Annotated[
        tuple[MetadataPartition, ...],
        Wire(Array(Struct(MetadataPartition))),
    ] = array()
    topic_authorized_operations: Annotated[int, Wire(INT32, 8)] = AUTHORIZED_OPERATIONS_OMITTED


@wire_message
@attrs.frozen(kw_only=True)
class MetadataResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 3)] = 0
    brokers: Annotated[tuple[MetadataBroker, ...], Wire(Array(Struct(MetadataBroker)))] = array()
    cluster_id: Annotated[str | None, Wire(STRING, 2, nullable_from=2)] = None
    controller_id: Annotated[int, Wire(INT32, 1)] = -1
    topics: Annotated[tuple[MetadataTopic, ...], Wire(Array(Struct(MetadataTopic)))] = array()
    cluster_authorized_operations: Annotated[int, Wire(INT32, 8)] = AUTHORIZED_OPERATIONS_OMITTED


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.METADATA, MetadataRequest, MetadataResponse, 0, 8),
)
