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

from typing import ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BYTES,
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

# -- FindCoordinator (10) ------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FindCoordinatorRequest:
    key: str
    key_type: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("key", STRING),
        Field("key_type", INT8, 1),
    )


@attrs.frozen(kw_only=True)
class FindCoordinatorResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    node_id: int
    host: str
    port: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("error_code", INT16),
        Field("error_message", STRING, 1, nullable_from=1),
        Field("node_id", INT32),
        Field("host", STRING),
        Field("port", INT32),
    )


# -- JoinGroup (11) ------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class JoinGroupProtocol:
    name: str
    metadata: bytes
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("metadata", BYTES),
    )


@attrs.frozen(kw_only=True)
class JoinGroupRequest:
    group_id: str
    session_timeout_ms: int
    #: -1 when absent (v0): Kafka then uses the session timeout.
    rebalance_timeout_ms: int = -1
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str
    protocols: tuple[JoinGroupProtocol, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("group_id", STRING),
        Field("session_timeout_ms", INT32),
        Field("rebalance_timeout_ms", INT32, 1),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, 5, nullable_from=5),
        Field("protocol_type", STRING),
        Field("protocols", Array(Struct(JoinGroupProtocol))),
    )


@attrs.frozen(kw_only=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None = None
    metadata: bytes
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("member_id", STRING),
        Field("group_instance_id", STRING, 5, nullable_from=5),
        Field("metadata", BYTES),
    )


@attrs.frozen(kw_only=True)
class JoinGroupResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    generation_id: int = -1
    protocol_name: str = ""
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinGroupMember, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 2),
        Field("error_code", INT16),
        Field("generation_id", INT32),
        Field("protocol_name", STRING),
        Field("leader", STRING),
        Field("member_id", STRING),
        Field("members", Array(Struct(JoinGroupMember))),
    )


# -- SyncGroup (14) ------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SyncGroupAssignment:
    member_id: str
    assignment: bytes
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("member_id", STRING),
        Field("assignment", BYTES),
    )


@attrs.frozen(kw_only=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    assignments: tuple[SyncGroupAssignment, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("group_id", STRING),
        Field("generation_id", INT32),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, 3, nullable_from=3),
        Field("assignments", Array(Struct(SyncGroupAssignment))),
    )


@attrs.frozen(kw_only=True)
class SyncGroupResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    assignment: bytes = b""
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("error_code", INT16),
        Field("assignment", BYTES),
    )


# -- Heartbeat (12) and LeaveGroup (13) ----------------------------------------------


@attrs.frozen(kw_only=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("group_id", STRING),
        Field("generation_id", INT32),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, 3, nullable_from=3),
    )


@attrs.frozen(kw_only=True)
class HeartbeatResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class LeaveGroupRequest:
    group_id: str
    member_id: str
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("group_id", STRING),
        Field("member_id", STRING),
    )


@attrs.frozen(kw_only=True)
class LeaveGroupResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("error_code", INT16),
    )


# -- OffsetCommit (8) ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OffsetCommitPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("committed_offset", INT64),
        Field("committed_leader_epoch", INT32, 6),
        Field("committed_metadata", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class OffsetCommitTopic:
    name: str
    partitions: tuple[OffsetCommitPartition, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(OffsetCommitPartition))),
    )


@attrs.frozen(kw_only=True)
class OffsetCommitRequest:
    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = -1
    topics: tuple[OffsetCommitTopic, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("group_id", STRING),
        Field("generation_id", INT32, 1),
        Field("member_id", STRING, 1),
        Field("group_instance_id", STRING, 7, nullable_from=7),
        Field("retention_time_ms", INT64, 2, 4),
        Field("topics", Array(Struct(OffsetCommitTopic))),
    )


@attrs.frozen(kw_only=True)
class OffsetCommitPartitionResponse:
    partition_index: int
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class OffsetCommitTopicResponse:
    name: str
    partitions: tuple[OffsetCommitPartitionResponse, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(OffsetCommitPartitionResponse))),
    )


@attrs.frozen(kw_only=True)
class OffsetCommitResponse:
    throttle_time_ms: int = 0
    topics: tuple[OffsetCommitTopicResponse, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 3),
        Field("topics", Array(Struct(OffsetCommitTopicResponse))),
    )


# -- OffsetFetch (9) -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OffsetFetchTopic:
    name: str
    partition_indexes: tuple[int, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partition_indexes", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class OffsetFetchRequest:
    group_id: str
    #: None (v2+) = every partition the group has committed.
    topics: tuple[OffsetFetchTopic, ...] | None = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("group_id", STRING),
        Field("topics", Array(Struct(OffsetFetchTopic)), nullable_from=2),
    )


@attrs.frozen(kw_only=True)
class OffsetFetchPartitionResponse:
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("committed_offset", INT64),
        Field("committed_leader_epoch", INT32, 5),
        Field("metadata", STRING, nullable_from=0),
        Field("error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class OffsetFetchTopicResponse:
    name: str
    partitions: tuple[OffsetFetchPartitionResponse, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(OffsetFetchPartitionResponse))),
    )


@attrs.frozen(kw_only=True)
class OffsetFetchResponse:
    throttle_time_ms: int = 0
    topics: tuple[OffsetFetchTopicResponse, ...] = array()
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 3),
        Field("topics", Array(Struct(OffsetFetchTopicResponse))),
        Field("error_code", INT16, 2),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse, 2, 7),
    ApiSpec(ApiKey.OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse, 1, 5),
    ApiSpec(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, FindCoordinatorResponse, 0, 2),
    ApiSpec(ApiKey.JOIN_GROUP, JoinGroupRequest, JoinGroupResponse, 0, 5),
    ApiSpec(ApiKey.HEARTBEAT, HeartbeatRequest, HeartbeatResponse, 0, 3),
    ApiSpec(ApiKey.LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse, 0, 2),
    ApiSpec(ApiKey.SYNC_GROUP, SyncGroupRequest, SyncGroupResponse, 0, 3),
)
