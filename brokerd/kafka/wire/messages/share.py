# -*- test-case-name: tests.kafka.server.handlers.test_share_clients -*-
"""Request and response bodies of the share group APIs (KIP-932): ShareGroupHeartbeat
(76), ShareGroupDescribe (77), ShareFetch (78) and ShareAcknowledge (79), and the version
range brokerd answers of each (:data:`APIS`, collected by
:mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka 4.2's JSON message schemas; the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Every version is flexible. The heartbeat answer's
Assignment is a nullable struct (an int8 marker, -1 for null, 1 before a present one:
:data:`NullableStruct`). Pure: no I/O, no Twisted, no broker logic.
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
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.messages.consumer_groups import (
    DescribedAssignment,
    HeartbeatAssignment,
)
from brokerd.kafka.wire.messages.topic_partitions import NullableStruct
from brokerd.kafka.wire.schema import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ApiSpec,
    Wire,
    array,
    wire_message,
)

# -- ShareGroupHeartbeat (76) ----------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class ShareGroupHeartbeatRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    group_id: Annotated[str, Wire(STRING)]
    member_id: Annotated[str, Wire(STRING)]
    #: 0 to join, -1 to leave, else the member's current epoch.
    member_epoch: Annotated[int, Wire(INT32)]
    rack_id: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    #: None: unchanged since the last heartbeat.
    subscribed_topic_names: Annotated[
        tuple[str, ...] | None, Wire(Array(STRING), nullable_from=0)
    ] = array(None)


@wire_message
@attrs.frozen(kw_only=True)
class ShareGroupHeartbeatResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    member_id: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    member_epoch: Annotated[int, Wire(INT32)] = 0
    heartbeat_interval_ms: Annotated[int, Wire(INT32)] = 0
    assignment: Annotated[
        HeartbeatAssignment | None, Wire(NullableStruct(HeartbeatAssignment), nullable_from=0)
    ] = None


# -- ShareGroupDescribe (77) -----------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class ShareGroupDescribeRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    group_ids: Annotated[tuple[str, ...], Wire(Array(STRING))] = array()
    include_authorized_operations: Annotated[bool, Wire(BOOL)] = False


@wire_message
@attrs.frozen(kw_only=True)
class ShareGroupMember:
    member_id: Annotated[str, Wire(STRING)]
    rack_id: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    member_epoch: Annotated[int, Wire(INT32)] = 0
    client_id: Annotated[str, Wire(STRING)] = ""
    client_host: Annotated[str, Wire(STRING)] = ""
    subscribed_topic_names: Annotated[tuple[str, ...], Wire(Array(STRING))] = array()
    assignment: Annotated[DescribedAssignment, Wire(Struct(DescribedAssignment))] = attrs.Factory(
        DescribedAssignment
    )


@wire_message
@attrs.frozen(kw_only=True)
class ShareDescribedGroup:
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    group_id: Annotated[str, Wire(STRING)]
    group_state: Annotated[str, Wire(STRING)] = ""
    group_epoch: Annotated[int, Wire(INT32)] = 0
    assignment_epoch: Annotated[int, Wire(INT32)] = 0
    assignor_name: Annotated[str, Wire(STRING)] = ""
    members: Annotated[tuple[ShareGroupMember, ...], Wire(Array(Struct(ShareGroupMember)))] = (
        array()
    )
    authorized_operations: Annotated[int, Wire(INT32)] = AUTHORIZED_OPERATIONS_OMITTED


@wire_message
@attrs.frozen(kw_only=True)
class ShareGroupDescribeResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    groups: Annotated[tuple[ShareDescribedGroup, ...], Wire(Array(Struct(ShareDescribedGroup)))] = (
        array()
    )


# -- ShareFetch (78) and ShareAcknowledge (79) -----------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class AcknowledgementBatch:
    first_offset: Annotated[int, Wire(INT64)]
    last_offset: Annotated[int, Wire(INT64)]
    #: 0 gap, 1 accept, 2 release, 3 reject (4 renew, v2): one for the whole range or
    #: one per offset.
    acknowledge_types: Annotated[tuple[int, ...], Wire(Array(INT8))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ShareFetchPartition:
    partition_index: Annotated[int, Wire(INT32)]
    acknowledgement_batches: Annotated[
        tuple[AcknowledgementBatch, ...], Wire(Array(Struct(AcknowledgementBatch)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ShareFetchTopic:
    topic_id: Annotated[uuid.UUID, Wire(UUID)]
    partitions: Annotated[
        tuple[ShareFetchPartition, ...], Wire(Array(Struct(ShareFetchPartition)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ShareForgottenTopic:
    topic_id: Annotated[uuid.UUID, Wire(UUID)]
    partitions: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ShareFetchRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    group_id: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    member_id: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    share_session_epoch: Annotated[int, Wire(INT32)] = 0
    max_wait_ms: Annotated[int, Wire(INT32)] = 0
    min_bytes: Annotated[int, Wire(INT32)] = 0
    max_bytes: Annotated[int, Wire(INT32)] = 0x7FFFFFFF
    max_records: Annotated[int, Wire(INT32, 1)] = 500
    batch_size: Annotated[int, Wire(INT32, 1)] = 500
    share_acquire_mode: Annotated[int, Wire(INT8, 2)] = 0
    is_renew_ack: Annotated[bool, Wire(BOOL, 2)] = False
    topics: Annotated[tuple[ShareFetchTopic, ...], Wire(Array(Struct(ShareFetchTopic)))] = array()
    forgotten_topics_data: Annotated[
        tuple[ShareForgottenTopic, ...], Wire(Array(Struct(ShareForgottenTopic)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class LeaderIdAndEpoch:
    leader_id: Annotated[int, Wire(INT32)] = -1
    leader_epoch: Annotated[int, Wire(INT32)] = -1


@wire_message
@attrs.frozen(kw_only=True)
class AcquiredRecords:
    first_offset: Annotated[int, Wire(INT64)]
    last_offset: Annotated[int, Wire(INT64)]
    delivery_count: Annotated[int, Wire(INT16)]


@wire_message
@attrs.frozen(kw_only=True)
class ShareFetchPartitionData:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    acknowledge_error_code: Annotated[int, Wire(INT16)] = 0
    acknowledge_error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    current_leader: Annotated[LeaderIdAndEpoch, Wire(Struct(LeaderIdAndEpoch))] = attrs.Factory(
        LeaderIdAndEpoch
    )
    records: Annotated[bytes, Wire(BYTES)] = b""
    acquired_records: Annotated[
        tuple[AcquiredRecords, ...], Wire(Array(Struct(AcquiredRecords)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ShareFetchTopicResponse:
    topic_id: Annotated[uuid.UUID, Wire(UUID)]
    partitions: Annotated[
        tuple[ShareFetchPartitionData, ...], Wire(Array(Struct(ShareFetchPartitionData)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class NodeEndpoint:
    node_id: Annotated[int, Wire(INT32)]
    host: Annotated[str, Wire(STRING)]
    port: Annotated[int, Wire(INT32)]
    rack: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class ShareFetchResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    acquisition_lock_timeout_ms: Annotated[int, Wire(INT32, 1)] = 0
    responses: Annotated[
        tuple[ShareFetchTopicResponse, ...], Wire(Array(Struct(ShareFetchTopicResponse)))
    ] = array()
    node_endpoints: Annotated[tuple[NodeEndpoint, ...], Wire(Array(Struct(NodeEndpoint)))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ShareAcknowledgeRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    group_id: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    member_id: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    share_session_epoch: Annotated[int, Wire(INT32)] = 0
    is_renew_ack: Annotated[bool, Wire(BOOL, 2)] = False
    topics: Annotated[tuple[ShareFetchTopic, ...], Wire(Array(Struct(ShareFetchTopic)))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ShareAcknowledgePartitionData:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    current_leader: Annotated[LeaderIdAndEpoch, Wire(Struct(LeaderIdAndEpoch))] = attrs.Factory(
        LeaderIdAndEpoch
    )


@wire_message
@attrs.frozen(kw_only=True)
class ShareAcknowledgeTopicResponse:
    topic_id: Annotated[uuid.UUID, Wire(UUID)]
    partitions: Annotated[
        tuple[ShareAcknowledgePartitionData, ...],
        Wire(Array(Struct(ShareAcknowledgePartitionData))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ShareAcknowledgeResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    acquisition_lock_timeout_ms: Annotated[int, Wire(INT32, 2)] = 0
    responses: Annotated[
        tuple[ShareAcknowledgeTopicResponse, ...],
        Wire(Array(Struct(ShareAcknowledgeTopicResponse))),
    ] = array()
    node_endpoints: Annotated[tuple[NodeEndpoint, ...], Wire(Array(Struct(NodeEndpoint)))] = array()


SHARE_GROUP_HEARTBEAT = ApiSpec(
    ApiKey.SHARE_GROUP_HEARTBEAT, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, 1, 1
)
SHARE_GROUP_DESCRIBE = ApiSpec(
    ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest, ShareGroupDescribeResponse, 1, 1
)
SHARE_FETCH = ApiSpec(ApiKey.SHARE_FETCH, ShareFetchRequest, ShareFetchResponse, 1, 2)
SHARE_ACKNOWLEDGE = ApiSpec(
    ApiKey.SHARE_ACKNOWLEDGE,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    1,
    2,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (
    SHARE_GROUP_HEARTBEAT,
    SHARE_GROUP_DESCRIBE,
    SHARE_FETCH,
    SHARE_ACKNOWLEDGE,
)
