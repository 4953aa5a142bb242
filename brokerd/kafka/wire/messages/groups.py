# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of the consumer-group APIs: FindCoordinator (10), JoinGroup
(11), SyncGroup (14), Heartbeat (12), LeaveGroup (13), OffsetCommit (8) and OffsetFetch
(9), and the version range brokerd answers of each (:data:`APIS`, collected by
:mod:`brokerd.kafka.wire.requests.registry`).

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
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    ZERO_UUID,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message

# -- FindCoordinator (10) ------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class FindCoordinatorRequest:
    #: v0-3: the one key asked about (v4+ asks through ``coordinator_keys``).
    key: Annotated[str, Wire(STRING, 0, 3)] = ""
    #: 0 = a group, 1 = a transactional id, 2 (v6+) = a share-group partition.
    key_type: Annotated[int, Wire(INT8, 1)] = 0
    coordinator_keys: Annotated[tuple[str, ...], Wire(Array(STRING), 4)] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 3


@wire_message
@attrs.frozen(kw_only=True)
class Coordinator:
    """One key's answer (v4+)."""

    key: Annotated[str, Wire(STRING)]
    node_id: Annotated[int, Wire(INT32)] = -1
    host: Annotated[str, Wire(STRING)] = ""
    port: Annotated[int, Wire(INT32)] = -1
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class FindCoordinatorResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    error_code: Annotated[int, Wire(INT16, 0, 3)] = 0
    error_message: Annotated[str | None, Wire(STRING, 1, 3, nullable_from=1)] = None
    node_id: Annotated[int, Wire(INT32, 0, 3)] = -1
    host: Annotated[str, Wire(STRING, 0, 3)] = ""
    port: Annotated[int, Wire(INT32, 0, 3)] = -1
    coordinators: Annotated[
        tuple[Coordinator, ...], Wire(Array(Struct(Coordinator)), 4)
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 3


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
    #: v8+: why the member (re-)joins (KIP-800); logged, not acted on.
    reason: Annotated[str | None, Wire(STRING, 8, nullable_from=8)] = None
    FLEXIBLE_FROM: ClassVar[int | None] = 6


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
    #: v7+: the group's protocol type (KIP-559); null in an error answer.
    protocol_type: Annotated[str | None, Wire(STRING, 7, nullable_from=7)] = None
    #: Null from v7 where there is none (an error answer).
    protocol_name: Annotated[str | None, Wire(STRING, nullable_from=7)] = ""
    leader: Annotated[str, Wire(STRING)] = ""
    #: v9+: the leader already has this generation's assignment (a static leader that
    #: re-joined a Stable group) and must not compute a new one.
    skip_assignment: Annotated[bool, Wire(BOOL, 9)] = False
    member_id: Annotated[str, Wire(STRING)] = ""
    members: Annotated[tuple[JoinGroupMember, ...], Wire(Array(Struct(JoinGroupMember)))] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 6


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
    #: v5+ (KIP-559): must be given, and match the group's (INCONSISTENT_GROUP_PROTOCOL).
    protocol_type: Annotated[str | None, Wire(STRING, 5, nullable_from=5)] = None
    protocol_name: Annotated[str | None, Wire(STRING, 5, nullable_from=5)] = None
    assignments: Annotated[
        tuple[SyncGroupAssignment, ...],
        Wire(Array(Struct(SyncGroupAssignment))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 4


@wire_message
@attrs.frozen(kw_only=True)
class SyncGroupResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    #: v5+: the group's protocol type and name (null in an error answer).
    protocol_type: Annotated[str | None, Wire(STRING, 5, nullable_from=5)] = None
    protocol_name: Annotated[str | None, Wire(STRING, 5, nullable_from=5)] = None
    assignment: Annotated[bytes, Wire(BYTES)] = b""
    FLEXIBLE_FROM: ClassVar[int | None] = 4


# -- Heartbeat (12) and LeaveGroup (13) ----------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class HeartbeatRequest:
    group_id: Annotated[str, Wire(STRING)]
    generation_id: Annotated[int, Wire(INT32)]
    member_id: Annotated[str, Wire(STRING)]
    group_instance_id: Annotated[str | None, Wire(STRING, 3, nullable_from=3)] = None
    FLEXIBLE_FROM: ClassVar[int | None] = 4


@wire_message
@attrs.frozen(kw_only=True)
class HeartbeatResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    FLEXIBLE_FROM: ClassVar[int | None] = 4


@wire_message
@attrs.frozen(kw_only=True)
class LeavingMember:
    """One member a v3+ LeaveGroup removes: by member id, or (an operator's removal) by
    group instance id with an empty member id."""

    member_id: Annotated[str, Wire(STRING)] = ""
    group_instance_id: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    #: v5+: why it leaves (KIP-800); logged, not acted on.
    reason: Annotated[str | None, Wire(STRING, 5, nullable_from=5)] = None


@wire_message
@attrs.frozen(kw_only=True)
class LeaveGroupRequest:
    group_id: Annotated[str, Wire(STRING)]
    #: v0-2: the one member leaving (v3+ names them in ``members``).
    member_id: Annotated[str, Wire(STRING, 0, 2)] = ""
    members: Annotated[tuple[LeavingMember, ...], Wire(Array(Struct(LeavingMember)), 3)] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 4


@wire_message
@attrs.frozen(kw_only=True)
class LeftMember:
    """One leaving member's answer (v3+)."""

    member_id: Annotated[str, Wire(STRING)] = ""
    group_instance_id: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class LeaveGroupResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    members: Annotated[tuple[LeftMember, ...], Wire(Array(Struct(LeftMember)), 3)] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 4


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
    #: v0-9: the topic by name; v10+ by ID (the handler fills ``name`` from it).
    name: Annotated[str, Wire(STRING, 0, 9)] = ""
    topic_id: Annotated[uuid.UUID, Wire(UUID, 10)] = ZERO_UUID
    partitions: Annotated[
        tuple[OffsetCommitPartition, ...],
        Wire(Array(Struct(OffsetCommitPartition))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetCommitRequest:
    group_id: Annotated[str, Wire(STRING)]
    #: Kafka's GenerationIdOrMemberEpoch: a classic group's generation, or (v9+) a
    #: consumer-protocol group's member epoch.
    generation_id: Annotated[int, Wire(INT32, 1)] = -1
    member_id: Annotated[str, Wire(STRING, 1)] = ""
    group_instance_id: Annotated[str | None, Wire(STRING, 7, nullable_from=7)] = None
    retention_time_ms: Annotated[int, Wire(INT64, 2, 4)] = -1
    topics: Annotated[
        tuple[OffsetCommitTopic, ...],
        Wire(Array(Struct(OffsetCommitTopic))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 8


@wire_message
@attrs.frozen(kw_only=True)
class OffsetCommitPartitionResponse:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class OffsetCommitTopicResponse:
    name: Annotated[str, Wire(STRING, 0, 9)] = ""
    topic_id: Annotated[uuid.UUID, Wire(UUID, 10)] = ZERO_UUID
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
    FLEXIBLE_FROM: ClassVar[int | None] = 8


# -- OffsetFetch (9) -----------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class OffsetFetchTopic:
    #: v0-9: the topic by name; v10+ by ID (the handler fills ``name`` from it).
    name: Annotated[str, Wire(STRING, 0, 9)] = ""
    topic_id: Annotated[uuid.UUID, Wire(UUID, 10)] = ZERO_UUID
    partition_indexes: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetFetchRequestGroup:
    """One group of a v8+ request."""

    group_id: Annotated[str, Wire(STRING)]
    #: v9+ (KIP-848): a consumer group's member id and epoch (checked when the epoch is
    #: given); a classic group does not check them, as Kafka does not.
    member_id: Annotated[str | None, Wire(STRING, 9, nullable_from=9)] = None
    member_epoch: Annotated[int, Wire(INT32, 9)] = -1
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
    name: Annotated[str, Wire(STRING, 0, 9)] = ""
    topic_id: Annotated[uuid.UUID, Wire(UUID, 10)] = ZERO_UUID
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


OFFSET_COMMIT = ApiSpec(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse, 2, 10)
OFFSET_FETCH = ApiSpec(ApiKey.OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse, 1, 10)
FIND_COORDINATOR = ApiSpec(
    ApiKey.FIND_COORDINATOR,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    0,
    6,
)
JOIN_GROUP = ApiSpec(ApiKey.JOIN_GROUP, JoinGroupRequest, JoinGroupResponse, 0, 9)
HEARTBEAT = ApiSpec(ApiKey.HEARTBEAT, HeartbeatRequest, HeartbeatResponse, 0, 4)
LEAVE_GROUP = ApiSpec(ApiKey.LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse, 0, 5)
SYNC_GROUP = ApiSpec(ApiKey.SYNC_GROUP, SyncGroupRequest, SyncGroupResponse, 0, 5)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (
    OFFSET_COMMIT,
    OFFSET_FETCH,
    FIND_COORDINATOR,
    JOIN_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    SYNC_GROUP,
)
