# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of ListOffsets (2), and the version range brokerd answers of
each (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    ApiKey,
    Array,
    Field,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, array

# -- ListOffsets (2) -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ListOffsetsPartition:
    partition_index: int
    current_leader_epoch: int = -1
    timestamp: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("current_leader_epoch", INT32, 4),
        Field("timestamp", INT64),
    )


@attrs.frozen(kw_only=True)
class ListOffsetsTopic:
    name: str
    partitions: tuple[ListOffsetsPartition, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(ListOffsetsPartition))),
    )


@attrs.frozen(kw_only=True)
class ListOffsetsRequest:
    replica_id: int = -1
    isolation_level: int = 0
    topics: tuple[ListOffsetsTopic, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("replica_id", INT32),
        Field("isolation_level", INT8, 2),
        Field("topics", Array(Struct(ListOffsetsTopic))),
    )


@attrs.frozen(kw_only=True)
class ListOffsetsPartitionResponse:
    partition_index: int
    error_code: int = 0
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("error_code", INT16),
        Field("timestamp", INT64),
        Field("offset", INT64),
        Field("leader_epoch", INT32, 4),
    )


@attrs.frozen(kw_only=True)
class ListOffsetsTopicResponse:
    name: str
    partitions: tuple[ListOffsetsPartitionResponse, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(ListOffsetsPartitionResponse))),
    )


@attrs.frozen(kw_only=True)
class ListOffsetsResponse:
    throttle_time_ms: int = 0
    topics: tuple[ListOffsetsTopicResponse, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 2),
        Field("topics", Array(Struct(ListOffsetsTopicResponse))),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse, 1, 5),
)
