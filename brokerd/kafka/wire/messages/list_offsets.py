# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of ListOffsets (2), and the version range brokerd answers of
each (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message

# -- ListOffsets (2) -----------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class ListOffsetsPartition:
    partition_index: Annotated[int, Wire(INT32)]
    current_leader_epoch: Annotated[int, Wire(INT32, 4)] = -1
    timestamp: Annotated[int, Wire(INT64)]


@wire_message
@attrs.frozen(kw_only=True)
class ListOffsetsTopic:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[ListOffsetsPartition, ...],
        Wire(Array(Struct(ListOffsetsPartition))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ListOffsetsRequest:
    replica_id: Annotated[int, Wire(INT32)] = -1
    isolation_level: Annotated[int, Wire(INT8, 2)] = 0
    topics: Annotated[tuple[ListOffsetsTopic, ...], Wire(Array(Struct(ListOffsetsTopic)))] = array()
    #: v10+: how long to wait for a lookup in remote (tiered) storage. brokerd has none,
    #: so every lookup answers at once.
    timeout_ms: Annotated[int, Wire(INT32, 10)] = 0
    FLEXIBLE_FROM: ClassVar[int | None] = 6


@wire_message
@attrs.frozen(kw_only=True)
class ListOffsetsPartitionResponse:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0
    timestamp: Annotated[int, Wire(INT64)] = -1
    offset: Annotated[int, Wire(INT64)] = -1
    leader_epoch: Annotated[int, Wire(INT32, 4)] = -1


@wire_message
@attrs.frozen(kw_only=True)
class ListOffsetsTopicResponse:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[ListOffsetsPartitionResponse, ...],
        Wire(Array(Struct(ListOffsetsPartitionResponse))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ListOffsetsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 2)] = 0
    topics: Annotated[
        tuple[ListOffsetsTopicResponse, ...],
        Wire(Array(Struct(ListOffsetsTopicResponse))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 6


# v7-v11 each add a special timestamp (the handler refuses one below its version).
LIST_OFFSETS = ApiSpec(ApiKey.LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse, 1, 11)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (LIST_OFFSETS,)
