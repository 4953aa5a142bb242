# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of the consumer-group APIs: FindCoordinator (10), JoinGroup
(11), SyncGroup (14), Heartbeat (12), LeaveGroup (13), OffsetCommit (8) and OffsetFetch
(9), and the version range brokerd answers of each (:data:`APIS`, collected by
:mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    BYTES,
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

# -- FindCoordinator (10) ------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class FindCoordinatorRequest:
    key: Annotated[str, Wire(STRING)]
    key_type: Annotated[int, Wire(INT8, 1)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class FindCoordinatorResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, 1, nullable_from=1)] = None
    node_id: Annotated[int, Wire(INT32)]
    host: Annotated[str, Wire(STRING)]
    port: Annotated[int, Wire(INT32)]


# -- JoinGroup (11) ------------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class JoinGroupProtocol:
    name: Annotated[str, Wire(STRING)]
    metadata: Annotated[bytes, Wire(BYTES)]


@wire_message
@attrs.frozen(kw_only=True)
class JoinGroupRequest:
    group_id: Annotated[str, Wire(STRING)]
    session_timeout_ms: Annotated[int, Wire(INT32)]
    #: -1 when absent (v0): Kafka then uses the session timeout.
    rebalance_timeout_ms: Annotated[int, Wire(INT32, 1)] = -1
    member_id: Annotated[str, Wire(STRING)]
    group_instance_id: Annotated[str | None, Wire(STRING, 5, nullable_from=5)] = None
    protocol_type: Annotated[str, Wire(STRING)]
    protocols: Annotated[
        tuple[JoinGroupProtocol, ...],
        Wire(Array(Struct(JoinGroupProtocol))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class JoinGroupMember:
    member_id: Annotated[str, Wire(STRING)]
    group_instance_id: Annotated[str | None, Wire(STRING, 5, nullable_from=5)] = None
    metadata: Annotated[bytes, Wire(BYTES)]


@wire_message
@attrs.frozen(kw_only=True)
class JoinGroupResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 2)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    generation_id: Annotated[int, Wire(INT32)] = -1
    protocol_name: Annotated[str, Wire(STRING)] = ""
    leader: Annotated[str, Wire(STRING)] = ""
    member_id: Annotated[str, Wire(STRING)] = ""
    members: Annotated[tuple[JoinGroupMember, ...], Wire(Array(Struct(JoinGroupMember)))] = array()


# -- SyncGroup (14) ------------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class SyncGroupAssignment:
    member_id: Annotated[str, Wire(STRING)]
    assignment: Annotated[bytes, Wire(BYTES)]


@wire_message
@attrs.frozen(kw_only=True)
class SyncGroupRequest:
    group_id: Annotated[str, Wire(STRING)]
    generation_id: Annotated[int, Wire(INT32)]
    member_id: Annotated[str, Wire(STRING)]
    group_instance_id: Annotated[str | None, Wire(STRING, 3, nullable_from=3)] = None
    assignments: Annotated[
        tuple[SyncGroupAssignment, ...],
        Wire(Array(Struct(SyncGroupAssignment))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class SyncGroupResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    assignment: Annotated[bytes, Wire(BYTES)] = b""


# -- Heartbeat (12) and LeaveGroup (13) ----------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class HeartbeatRequest:
    group_id: Annotated[str, Wire(STRING)]
    generation_id: Annotated[int, Wire(INT32)]
    member_id: Annotated[str, Wire(STRING)]
    group_instance_id: Annotated[str | None, Wire(STRING, 3, nullable_from=3)] = None


@wire_message
@attrs.frozen(kw_only=True)
class HeartbeatResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class LeaveGroupRequest:
    group_id: Annotated[str, Wire(STRING)]
    member_id: Annotated[str, Wire(STRING)]


@wire_message
@attrs.frozen(kw_only=True)
class LeaveGroupResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0


# -- OffsetCommit (8) ----------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class OffsetCommitPartition:
    partition_index: Annotated[int, Wire(INT32)]
    committed_offset: Annotated[int, Wire(INT64)]
    committed_leader_epoch: Annotated[int, Wire(INT32, 6)] = -1
    committed_metadata: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class OffsetCommitTopic:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[OffsetCommitPartition, ...],
        Wire(Array(Struct(OffsetCommitPartition))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetCommitRequest:
    group_id: Annotated[str, Wire(STRING)]
    generation_id: Annotated[int, Wire(INT32, 1)] = -1
    member_id: Annotated[str, Wire(STRING, 1)] = ""
    group_instance_id: Annotated[str | None, Wire(STRING, 7, nullable_from=7)] = None
    retention_time_ms: Annotated[int, Wire(INT64, 2, 4)] = -1
    topics: Annotated[
        tuple[OffsetCommitTopic, ...],
        Wire(Array(Struct(OffsetCommitTopic))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetCommitPartitionResponse:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class OffsetCommitTopicResponse:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[OffsetCommitPartitionResponse, ...],
        Wire(Array(Struct(OffsetCommitPartitionResponse))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetCommitResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 3)] = 0
    topics: Annotated[
        tuple[OffsetCommitTopicResponse, ...],
        Wire(Array(Struct(OffsetCommitTopicResponse))),
    ] = array()


# -- OffsetFetch (9) -----------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class OffsetFetchTopic:
    name: Annotated[str, Wire(STRING)]
    partition_indexes: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetFetchRequestGroup:
    """One group of a v8+ request."""

    group_id: Annotated[str, Wire(STRING)]
    #: None = every partition the group has committed.
    topics: Annotated[
        tuple[OffsetFetchTopic, ...] | None,
        Wire(Array(Struct(OffsetFetchTopic)), nullable_from=0),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetFetchRequest:
    #: v0-7: the one group asked about (v8+ asks through ``groups``).
    group_id: Annotated[str, Wire(STRING, 0, 7)] = ""
    #: None (v2+) = every partition the group has committed.
    topics: Annotated[
        tuple[OffsetFetchTopic, ...] | None,
        Wire(Array(Struct(OffsetFetchTopic)), 0, 7, nullable_from=2),
    ] = array()
    groups: Annotated[
        tuple[OffsetFetchRequestGroup, ...],
        Wire(Array(Struct(OffsetFetchRequestGroup)), 8),
    ] = array()
    #: v7+: partitions with a transactional commit not yet completed are answered
    #: UNSTABLE_OFFSET_COMMIT (retriable) instead of their last completed offset.
    require_stable: Annotated[bool, Wire(BOOL, 7)] = False
    FLEXIBLE_FROM: ClassVar[int | None] = 6


@wire_message
@attrs.frozen(kw_only=True)
class OffsetFetchPartitionResponse:
    partition_index: Annotated[int, Wire(INT32)]
    committed_offset: Annotated[int, Wire(INT64)] = -1
    committed_leader_epoch: Annotated[int, Wire(INT32, 5)] = -1
    metadata: Annotated[str | None, Wire(STRING, nullable_from=0)] = ""
    error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class OffsetFetchTopicResponse:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[OffsetFetchPartitionResponse, ...],
        Wire(Array(Struct(OffsetFetchPartitionResponse))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetFetchResponseGroup:
    """One group's answer (v8+)."""

    group_id: Annotated[str, Wire(STRING)]
    topics: Annotated[
        tuple[OffsetFetchTopicResponse, ...],
        Wire(Array(Struct(OffsetFetchTopicResponse))),
    ] = array()
    error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class OffsetFetchResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 3)] = 0
    topics: Annotated[
        tuple[OffsetFetchTopicResponse, ...],
        Wire(Array(Struct(OffsetFetchTopicResponse)), 0, 7),
    ] = array()
    error_code: Annotated[int, Wire(INT16, 2, 7)] = 0
    groups: Annotated[
        tuple[OffsetFetchResponseGroup, ...],
        Wire(Array(Struct(OffsetFetchResponseGroup)), 8),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 6


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse, 2, 7),
    ApiSpec(ApiKey.OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse, 1, 8),
    ApiSpec(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, FindCoordinatorResponse, 0, 2),
    ApiSpec(ApiKey.JOIN_GROUP, JoinGroupRequest, JoinGroupResponse, 0, 5),
    ApiSpec(ApiKey.HEARTBEAT, HeartbeatRequest, HeartbeatResponse, 0, 3),
    ApiSpec(ApiKey.LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse, 0, 2),
    ApiSpec(ApiKey.SYNC_GROUP, SyncGroupRequest, SyncGroupResponse, 0, 3),
)
