# -*- test-case-name: tests.kafka.server.handlers.test_leadership -*-
"""Request and response bodies of OffsetForLeaderEpoch (23) and DescribeQuorum (55), and
the version ranges brokerd answers (:data:`APIS`, collected by
:mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. OffsetForLeaderEpoch is flexible from v4,
DescribeQuorum at every version. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    ZERO_UUID,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message

#: OffsetForLeaderEpoch's ``replica_id`` of a consumer that may see past the high
#: watermark (Kafka's "debug" consumer; the default before v3 carried the field).
DEBUG_REPLICA_ID = -2

# -- OffsetForLeaderEpoch (23) -------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class OffsetForLeaderPartition:
    partition: Annotated[int, Wire(INT32)]
    #: The epoch the client believes the leader has (-1: none; fences stale metadata).
    current_leader_epoch: Annotated[int, Wire(INT32)] = -1
    #: The epoch whose end offset is asked for.
    leader_epoch: Annotated[int, Wire(INT32)]


@wire_message
@attrs.frozen(kw_only=True)
class OffsetForLeaderTopic:
    topic: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[OffsetForLeaderPartition, ...], Wire(Array(Struct(OffsetForLeaderPartition)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetForLeaderEpochRequest:
    """v2 is the oldest Kafka 4 answers; v3 adds the replica id; v4 is flexible."""

    FLEXIBLE_FROM: ClassVar[int | None] = 4

    replica_id: Annotated[int, Wire(INT32, 3)] = DEBUG_REPLICA_ID
    topics: Annotated[
        tuple[OffsetForLeaderTopic, ...], Wire(Array(Struct(OffsetForLeaderTopic)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class EpochEndOffset:
    error_code: Annotated[int, Wire(INT16)] = 0
    partition: Annotated[int, Wire(INT32)]
    leader_epoch: Annotated[int, Wire(INT32)] = -1
    end_offset: Annotated[int, Wire(INT64)] = -1


@wire_message
@attrs.frozen(kw_only=True)
class OffsetForLeaderTopicResult:
    topic: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[EpochEndOffset, ...], Wire(Array(Struct(EpochEndOffset)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetForLeaderEpochResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 4

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    topics: Annotated[
        tuple[OffsetForLeaderTopicResult, ...], Wire(Array(Struct(OffsetForLeaderTopicResult)))
    ] = array()


# -- DescribeQuorum (55) -------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class DescribeQuorumPartition:
    partition_index: Annotated[int, Wire(INT32)]


@wire_message
@attrs.frozen(kw_only=True)
class DescribeQuorumTopic:
    topic_name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[DescribeQuorumPartition, ...], Wire(Array(Struct(DescribeQuorumPartition)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeQuorumRequest:
    """Unchanged from v0: v1 (KIP-836) and v2 (KIP-853) add to the response only."""

    FLEXIBLE_FROM: ClassVar[int | None] = 0

    topics: Annotated[
        tuple[DescribeQuorumTopic, ...], Wire(Array(Struct(DescribeQuorumTopic)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ReplicaState:
    replica_id: Annotated[int, Wire(INT32)]
    replica_directory_id: Annotated[uuid.UUID, Wire(UUID, 2)] = ZERO_UUID
    log_end_offset: Annotated[int, Wire(INT64)] = -1
    #: v1+: when the replica last fetched (-1 for the leader itself).
    last_fetch_timestamp: Annotated[int, Wire(INT64, 1)] = -1
    #: v1+: when it was last caught up (the leader: now).
    last_caught_up_timestamp: Annotated[int, Wire(INT64, 1)] = -1


@wire_message
@attrs.frozen(kw_only=True)
class DescribeQuorumPartitionData:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, 2, nullable_from=2)] = None
    leader_id: Annotated[int, Wire(INT32)] = -1
    leader_epoch: Annotated[int, Wire(INT32)] = -1
    high_watermark: Annotated[int, Wire(INT64)] = -1
    current_voters: Annotated[
        tuple[ReplicaState, ...], Wire(Array(Struct(ReplicaState)))
    ] = array()
    observers: Annotated[tuple[ReplicaState, ...], Wire(Array(Struct(ReplicaState)))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeQuorumTopicData:
    topic_name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[DescribeQuorumPartitionData, ...],
        Wire(Array(Struct(DescribeQuorumPartitionData))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class QuorumListener:
    name: Annotated[str, Wire(STRING, 2)]
    host: Annotated[str, Wire(STRING, 2)]
    port: Annotated[int, Wire(UINT16, 2)]


@wire_message
@attrs.frozen(kw_only=True)
class QuorumNode:
    node_id: Annotated[int, Wire(INT32, 2)]
    listeners: Annotated[
        tuple[QuorumListener, ...], Wire(Array(Struct(QuorumListener)), 2)
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeQuorumResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, 2, nullable_from=2)] = None
    topics: Annotated[
        tuple[DescribeQuorumTopicData, ...], Wire(Array(Struct(DescribeQuorumTopicData)))
    ] = array()
    #: v2+ (KIP-853): the voters' endpoints.
    nodes: Annotated[tuple[QuorumNode, ...], Wire(Array(Struct(QuorumNode)), 2)] = array()


OFFSET_FOR_LEADER_EPOCH = ApiSpec(
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    2,
    4,
)
DESCRIBE_QUORUM = ApiSpec(
    ApiKey.DESCRIBE_QUORUM,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    0,
    2,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (OFFSET_FOR_LEADER_EPOCH, DESCRIBE_QUORUM)
