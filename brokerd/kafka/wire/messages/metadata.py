# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of Metadata (3), and the version range brokerd answers of each
(:data:`APIS`, collected by :mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    INT16,
    INT32,
    STRING,
    ApiKey,
    Array,
    Field,
    Struct,
)
from brokerd.kafka.wire.schema import AUTHORIZED_OPERATIONS_OMITTED, ApiSpec, array

# -- Metadata (3) --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MetadataRequestTopic:
    name: str
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("name", STRING),)


@attrs.frozen(kw_only=True)
class MetadataRequest:
    #: None (v1+) = all topics; empty = none (v0: empty = all).
    topics: tuple[MetadataRequestTopic, ...] | None = array()
    allow_auto_topic_creation: bool = True
    include_cluster_authorized_operations: bool = False
    include_topic_authorized_operations: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topics", Array(Struct(MetadataRequestTopic)), nullable_from=1),
        Field("allow_auto_topic_creation", BOOL, 4),
        Field("include_cluster_authorized_operations", BOOL, 8),
        Field("include_topic_authorized_operations", BOOL, 8),
    )


@attrs.frozen(kw_only=True)
class MetadataBroker:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("node_id", INT32),
        Field("host", STRING),
        Field("port", INT32),
        Field("rack", STRING, 1, nullable_from=1),
    )


@attrs.frozen(kw_only=True)
class MetadataPartition:
    error_code: int = 0
    partition_index: int
    leader_id: int
    leader_epoch: int = -1
    replica_nodes: tuple[int, ...] = array()
    isr_nodes: tuple[int, ...] = array()
    offline_replicas: tuple[int, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("partition_index", INT32),
        Field("leader_id", INT32),
        Field("leader_epoch", INT32, 7),
        Field("replica_nodes", Array(INT32)),
        Field("isr_nodes", Array(INT32)),
        Field("offline_replicas", Array(INT32), 5),
    )


@attrs.frozen(kw_only=True)
class MetadataTopic:
    error_code: int = 0
    name: str
    is_internal: bool = False
    partitions: tuple[MetadataPartition, ...] = array()
    topic_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("name", STRING),
        Field("is_internal", BOOL, 1),
        Field("partitions", Array(Struct(MetadataPartition))),
        Field("topic_authorized_operations", INT32, 8),
    )


@attrs.frozen(kw_only=True)
class MetadataResponse:
    throttle_time_ms: int = 0
    brokers: tuple[MetadataBroker, ...] = array()
    cluster_id: str | None = None
    controller_id: int = -1
    topics: tuple[MetadataTopic, ...] = array()
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 3),
        Field("brokers", Array(Struct(MetadataBroker))),
        Field("cluster_id", STRING, 2, nullable_from=2),
        Field("controller_id", INT32, 1),
        Field("topics", Array(Struct(MetadataTopic))),
        Field("cluster_authorized_operations", INT32, 8),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.METADATA, MetadataRequest, MetadataResponse, 0, 8),
)
