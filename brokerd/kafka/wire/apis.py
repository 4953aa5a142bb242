# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of every Kafka API brokerd answers, with their versions.

Each message is an attrs frozen class whose ``FIELDS`` describe its wire layout per
version, transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``). A class whose advertised range
reaches Kafka's ``flexibleVersions`` sets ``FLEXIBLE_FROM`` (the codec then uses the
compact encodings and tagged fields from that version on); the others have none. Fields
absent at a version take the class default when decoded and are skipped when encoded.
:data:`SUPPORTED_VERSIONS` is exactly what ApiVersions advertises.

:func:`decode_request` turns a whole request frame into a :class:`Request`;
:func:`encode_response` turns a response message into a whole frame.
:func:`api_versions_fallback` is the version-0 reply to an ApiVersions request of a
version brokerd does not know.

Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Any, ClassVar

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
    Field,
    MalformedRequest,
    Reader,
    RequestHeader,
    Struct,
    encode_frame,
    encode_request_header,
    encode_struct,
    frame,
    is_flexible,
    peek_header,
    read_request_header,
    read_response_header,
    read_struct,
    response_frame,
)
from brokerd.kafka.wire.messages import acl as acl_apis
from brokerd.kafka.wire.messages import sasl as sasl_apis
from brokerd.net.frames import Frame, Records

#: Authorized-operations fields: "not provided" (Kafka's Integer.MIN_VALUE default).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

#: Advertised (and accepted) version ranges: mostly the last non-flexible version of each
#: API is the upper bound (ListGroups goes to its flexible v4, whose group states
#: librdkafka needs; the transactional APIs and InitProducerId to the flexible
#: versions the transactional clients send); the lower bounds follow what old librdkafka probes for
#: (see ``docs/kafka.md``). Produce starts at 0 only so that librdkafka < 2.11.1
#: enables compression; versions 0-2 are answered UNSUPPORTED_VERSION per partition.
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 8),
    ApiKey.FETCH: (4, 11),
    ApiKey.LIST_OFFSETS: (1, 5),
    ApiKey.METADATA: (0, 8),
    ApiKey.OFFSET_COMMIT: (2, 7),
    ApiKey.OFFSET_FETCH: (1, 5),
    ApiKey.FIND_COORDINATOR: (0, 2),
    ApiKey.JOIN_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 3),
    ApiKey.LEAVE_GROUP: (0, 2),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.API_VERSIONS: (0, 2),
    ApiKey.CREATE_TOPICS: (2, 4),
    ApiKey.DELETE_TOPICS: (1, 3),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (0, 3),
    ApiKey.ALTER_CONFIGS: (0, 1),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 0),
    # Group admin APIs (the last non-flexible versions; ListGroups to its flexible v4).
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.DESCRIBE_GROUPS: (0, 4),
    ApiKey.DELETE_GROUPS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DELETE_RECORDS: (0, 1),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 1),
    ApiKey.CREATE_PARTITIONS: (0, 1),
    # Transactions: the client versions (AddPartitionsToTxn v4+ is Kafka's
    # broker-to-broker batched form).
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 0),
    # ACLs (brokerd/kafka/wire/messages/acl.py).
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    # SASL (docs/kafka.md): SaslHandshake v0 switches to raw SASL tokens.
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}

#: Highest ApiVersions version answered in the v0 fallback's single entry.
API_VERSIONS_MAX = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]
#: The error code of the fallback (UNSUPPORTED_VERSION); kept here so the codec does not
#: depend on the error module.
_UNSUPPORTED_VERSION = 35



def _tuple(v: Any) -> Any:
    """attrs converter: keep arrays immutable (None stays None)."""
    return None if v is None else tuple(v)


def _arr(default: Any = ()) -> Any:
    return attrs.field(default=default, converter=_tuple)


# -- ApiVersions (18) ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ApiVersionsRequest:
    FIELDS: ClassVar[tuple[Field, ...]] = ()


@attrs.frozen(kw_only=True)
class ApiVersionRange:
    api_key: int
    min_version: int
    max_version: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("api_key", INT16),
        Field("min_version", INT16),
        Field("max_version", INT16),
    )


@attrs.frozen(kw_only=True)
class ApiVersionsResponse:
    error_code: int = 0
    api_keys: tuple[ApiVersionRange, ...] = _arr()
    throttle_time_ms: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("api_keys", Array(Struct(ApiVersionRange))),
        Field("throttle_time_ms", INT32, 1),
    )


# -- Metadata (3) --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MetadataRequestTopic:
    name: str
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("name", STRING),)


@attrs.frozen(kw_only=True)
class MetadataRequest:
    #: None (v1+) = all topics; empty = none (v0: empty = all).
    topics: tuple[MetadataRequestTopic, ...] | None = _arr()
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
    replica_nodes: tuple[int, ...] = _arr()
    isr_nodes: tuple[int, ...] = _arr()
    offline_replicas: tuple[int, ...] = _arr()
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
    partitions: tuple[MetadataPartition, ...] = _arr()
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
    brokers: tuple[MetadataBroker, ...] = _arr()
    cluster_id: str | None = None
    controller_id: int = -1
    topics: tuple[MetadataTopic, ...] = _arr()
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 3),
        Field("brokers", Array(Struct(MetadataBroker))),
        Field("cluster_id", STRING, 2, nullable_from=2),
        Field("controller_id", INT32, 1),
        Field("topics", Array(Struct(MetadataTopic))),
        Field("cluster_authorized_operations", INT32, 8),
    )


# -- Produce (0) ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ProducePartitionData:
    index: int
    records: bytes | None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("index", INT32),
        Field("records", BYTES, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class ProduceTopicData:
    name: str
    partition_data: tuple[ProducePartitionData, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partition_data", Array(Struct(ProducePartitionData))),
    )


@attrs.frozen(kw_only=True)
class ProduceRequest:
    transactional_id: str | None = None
    acks: int
    timeout_ms: int
    topic_data: tuple[ProduceTopicData, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("transactional_id", STRING, 3, nullable_from=3),
        Field("acks", INT16),
        Field("timeout_ms", INT32),
        Field("topic_data", Array(Struct(ProduceTopicData))),
    )


@attrs.frozen(kw_only=True)
class BatchIndexAndErrorMessage:
    batch_index: int
    batch_index_error_message: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("batch_index", INT32),
        Field("batch_index_error_message", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class ProducePartitionResponse:
    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: tuple[BatchIndexAndErrorMessage, ...] = _arr()
    error_message: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("index", INT32),
        Field("error_code", INT16),
        Field("base_offset", INT64),
        Field("log_append_time_ms", INT64, 2),
        Field("log_start_offset", INT64, 5),
        Field("record_errors", Array(Struct(BatchIndexAndErrorMessage)), 8),
        Field("error_message", STRING, 8, nullable_from=8),
    )


@attrs.frozen(kw_only=True)
class ProduceTopicResponse:
    name: str
    partition_responses: tuple[ProducePartitionResponse, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partition_responses", Array(Struct(ProducePartitionResponse))),
    )


@attrs.frozen(kw_only=True)
class ProduceResponse:
    responses: tuple[ProduceTopicResponse, ...] = _arr()
    throttle_time_ms: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("responses", Array(Struct(ProduceTopicResponse))),
        Field("throttle_time_ms", INT32, 1),
    )


# -- Fetch (1) -----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FetchPartition:
    partition: int
    current_leader_epoch: int = -1
    fetch_offset: int
    log_start_offset: int = -1
    partition_max_bytes: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition", INT32),
        Field("current_leader_epoch", INT32, 9),
        Field("fetch_offset", INT64),
        Field("log_start_offset", INT64, 5),
        Field("partition_max_bytes", INT32),
    )


@attrs.frozen(kw_only=True)
class FetchTopic:
    topic: str
    partitions: tuple[FetchPartition, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topic", STRING),
        Field("partitions", Array(Struct(FetchPartition))),
    )


@attrs.frozen(kw_only=True)
class ForgottenTopic:
    topic: str
    partitions: tuple[int, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topic", STRING),
        Field("partitions", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class FetchRequest:
    replica_id: int = -1
    max_wait_ms: int
    min_bytes: int
    max_bytes: int = 0x7FFFFFFF
    isolation_level: int = 0
    session_id: int = 0
    session_epoch: int = -1
    topics: tuple[FetchTopic, ...] = _arr()
    forgotten_topics_data: tuple[ForgottenTopic, ...] = _arr()
    rack_id: str = ""
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("replica_id", INT32),
        Field("max_wait_ms", INT32),
        Field("min_bytes", INT32),
        Field("max_bytes", INT32, 3),
        Field("isolation_level", INT8, 4),
        Field("session_id", INT32, 7),
        Field("session_epoch", INT32, 7),
        Field("topics", Array(Struct(FetchTopic))),
        Field("forgotten_topics_data", Array(Struct(ForgottenTopic)), 7),
        Field("rack_id", STRING, 11),
    )


@attrs.frozen(kw_only=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("producer_id", INT64),
        Field("first_offset", INT64),
    )


@attrs.frozen(kw_only=True)
class FetchPartitionResponse:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: tuple[AbortedTransaction, ...] | None = _arr(None)
    preferred_read_replica: int = -1
    #: Stored batches: bytes, or :class:`~brokerd.net.frames.StoredRecords` (sent
    #: without being joined into the frame).
    records: Records | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("error_code", INT16),
        Field("high_watermark", INT64),
        Field("last_stable_offset", INT64, 4),
        Field("log_start_offset", INT64, 5),
        Field("aborted_transactions", Array(Struct(AbortedTransaction)), 4, nullable_from=4),
        Field("preferred_read_replica", INT32, 11),
        Field("records", BYTES, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class FetchTopicResponse:
    topic: str
    partitions: tuple[FetchPartitionResponse, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topic", STRING),
        Field("partitions", Array(Struct(FetchPartitionResponse))),
    )


@attrs.frozen(kw_only=True)
class FetchResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    session_id: int = 0
    responses: tuple[FetchTopicResponse, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("error_code", INT16, 7),
        Field("session_id", INT32, 7),
        Field("responses", Array(Struct(FetchTopicResponse))),
    )


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
    partitions: tuple[ListOffsetsPartition, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(ListOffsetsPartition))),
    )


@attrs.frozen(kw_only=True)
class ListOffsetsRequest:
    replica_id: int = -1
    isolation_level: int = 0
    topics: tuple[ListOffsetsTopic, ...] = _arr()
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
    partitions: tuple[ListOffsetsPartitionResponse, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(ListOffsetsPartitionResponse))),
    )


@attrs.frozen(kw_only=True)
class ListOffsetsResponse:
    throttle_time_ms: int = 0
    topics: tuple[ListOffsetsTopicResponse, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 2),
        Field("topics", Array(Struct(ListOffsetsTopicResponse))),
    )


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
    protocols: tuple[JoinGroupProtocol, ...] = _arr()
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
    members: tuple[JoinGroupMember, ...] = _arr()
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
    assignments: tuple[SyncGroupAssignment, ...] = _arr()
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
    partitions: tuple[OffsetCommitPartition, ...] = _arr()
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
    topics: tuple[OffsetCommitTopic, ...] = _arr()
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
    partitions: tuple[OffsetCommitPartitionResponse, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(OffsetCommitPartitionResponse))),
    )


@attrs.frozen(kw_only=True)
class OffsetCommitResponse:
    throttle_time_ms: int = 0
    topics: tuple[OffsetCommitTopicResponse, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 3),
        Field("topics", Array(Struct(OffsetCommitTopicResponse))),
    )


# -- OffsetFetch (9) -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OffsetFetchTopic:
    name: str
    partition_indexes: tuple[int, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partition_indexes", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class OffsetFetchRequest:
    group_id: str
    #: None (v2+) = every partition the group has committed.
    topics: tuple[OffsetFetchTopic, ...] | None = _arr()
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
    partitions: tuple[OffsetFetchPartitionResponse, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(OffsetFetchPartitionResponse))),
    )


@attrs.frozen(kw_only=True)
class OffsetFetchResponse:
    throttle_time_ms: int = 0
    topics: tuple[OffsetFetchTopicResponse, ...] = _arr()
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 3),
        Field("topics", Array(Struct(OffsetFetchTopicResponse))),
        Field("error_code", INT16, 2),
    )


# -- CreateTopics (19) ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CreatableReplicaAssignment:
    partition_index: int
    broker_ids: tuple[int, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("broker_ids", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class CreatableTopicConfig:
    name: str
    value: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("value", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[CreatableReplicaAssignment, ...] = _arr()
    configs: tuple[CreatableTopicConfig, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("num_partitions", INT32),
        Field("replication_factor", INT16),
        Field("assignments", Array(Struct(CreatableReplicaAssignment))),
        Field("configs", Array(Struct(CreatableTopicConfig))),
    )


@attrs.frozen(kw_only=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...] = _arr()
    timeout_ms: int = 60_000
    validate_only: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topics", Array(Struct(CreatableTopic))),
        Field("timeout_ms", INT32),
        Field("validate_only", BOOL, 1),
    )


@attrs.frozen(kw_only=True)
class CreatableTopicResult:
    name: str
    error_code: int = 0
    error_message: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("error_code", INT16),
        Field("error_message", STRING, 1, nullable_from=1),
    )


@attrs.frozen(kw_only=True)
class CreateTopicsResponse:
    throttle_time_ms: int = 0
    topics: tuple[CreatableTopicResult, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 2),
        Field("topics", Array(Struct(CreatableTopicResult))),
    )


# -- DeleteTopics (20) ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DeleteTopicsRequest:
    topic_names: tuple[str, ...] = _arr()
    timeout_ms: int = 60_000
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topic_names", Array(STRING)),
        Field("timeout_ms", INT32),
    )


@attrs.frozen(kw_only=True)
class DeletableTopicResult:
    name: str
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class DeleteTopicsResponse:
    throttle_time_ms: int = 0
    responses: tuple[DeletableTopicResult, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("responses", Array(Struct(DeletableTopicResult))),
    )


# -- InitProducerId (22) -------------------------------------------------------------


@attrs.frozen(kw_only=True)
class InitProducerIdRequest:
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    #: v3+ (KIP-360): the producer's current id and epoch, -1 when it has none.
    producer_id: int = -1
    producer_epoch: int = -1
    FLEXIBLE_FROM: ClassVar[int | None] = 2
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("transactional_id", STRING, nullable_from=0),
        Field("transaction_timeout_ms", INT32),
        Field("producer_id", INT64, 3),
        Field("producer_epoch", INT16, 3),
    )


@attrs.frozen(kw_only=True)
class InitProducerIdResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    FLEXIBLE_FROM: ClassVar[int | None] = 2
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
    )


# -- Transactions: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
# -- TxnOffsetCommit (28), DescribeTransactions (65), ListTransactions (66) -----------


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnTopic:
    name: str
    partitions: tuple[int, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnRequest:
    """Versions 0-3, the client form (Kafka's ``V3AndBelow*`` fields); v4+ batches
    several transactions for broker-to-broker verification and is not advertised."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: tuple[AddPartitionsToTxnTopic, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("topics", Array(Struct(AddPartitionsToTxnTopic))),
    )


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnPartitionResult:
    partition_index: int
    partition_error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("partition_error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnTopicResult:
    name: str
    results_by_partition: tuple[AddPartitionsToTxnPartitionResult, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("results_by_partition", Array(Struct(AddPartitionsToTxnPartitionResult))),
    )


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnResponse:
    throttle_time_ms: int = 0
    results_by_topic: tuple[AddPartitionsToTxnTopicResult, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("results_by_topic", Array(Struct(AddPartitionsToTxnTopicResult))),
    )


@attrs.frozen(kw_only=True)
class AddOffsetsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("group_id", STRING),
    )


@attrs.frozen(kw_only=True)
class AddOffsetsToTxnResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("committed", BOOL),
    )


@attrs.frozen(kw_only=True)
class EndTxnResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class TxnOffsetCommitRequestPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("committed_offset", INT64),
        Field("committed_leader_epoch", INT32, 2),
        Field("committed_metadata", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class TxnOffsetCommitRequestTopic:
    name: str
    partitions: tuple[TxnOffsetCommitRequestPartition, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(TxnOffsetCommitRequestPartition))),
    )


@attrs.frozen(kw_only=True)
class TxnOffsetCommitRequest:
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    #: v3+ (KIP-447): the consumer's group generation, member and instance id.
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    topics: tuple[TxnOffsetCommitRequestTopic, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("transactional_id", STRING),
        Field("group_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("generation_id", INT32, 3),
        Field("member_id", STRING, 3),
        Field("group_instance_id", STRING, 3, nullable_from=3),
        Field("topics", Array(Struct(TxnOffsetCommitRequestTopic))),
    )


@attrs.frozen(kw_only=True)
class TxnOffsetCommitResponsePartition:
    partition_index: int
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class TxnOffsetCommitResponseTopic:
    name: str
    partitions: tuple[TxnOffsetCommitResponsePartition, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(TxnOffsetCommitResponsePartition))),
    )


@attrs.frozen(kw_only=True)
class TxnOffsetCommitResponse:
    throttle_time_ms: int = 0
    topics: tuple[TxnOffsetCommitResponseTopic, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("topics", Array(Struct(TxnOffsetCommitResponseTopic))),
    )


@attrs.frozen(kw_only=True)
class DescribeTransactionsRequest:
    transactional_ids: tuple[str, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("transactional_ids", Array(STRING)),)


@attrs.frozen(kw_only=True)
class DescribeTransactionsTopicData:
    name: str
    partition_indexes: tuple[int, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partition_indexes", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class DescribeTransactionsState:
    error_code: int = 0
    transactional_id: str
    transaction_state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    producer_id: int = -1
    #: An ``int32`` on the wire here (an ``int16`` everywhere else), as Kafka's schema has.
    producer_epoch: int = -1
    topic_partitions: tuple[DescribeTransactionsTopicData, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("transactional_id", STRING),
        Field("transaction_state", STRING),
        Field("transaction_timeout_ms", INT32),
        Field("transaction_start_time_ms", INT64),
        Field("producer_id", INT64),
        Field("producer_epoch", INT32),
        Field("topic_partitions", Array(Struct(DescribeTransactionsTopicData))),
    )


@attrs.frozen(kw_only=True)
class DescribeTransactionsResponse:
    throttle_time_ms: int = 0
    transaction_states: tuple[DescribeTransactionsState, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("transaction_states", Array(Struct(DescribeTransactionsState))),
    )


@attrs.frozen(kw_only=True)
class ListTransactionsRequest:
    #: Empty = every state; names compared exactly (Kafka's state names).
    state_filters: tuple[str, ...] = _arr()
    #: Empty = every producer id.
    producer_id_filters: tuple[int, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("state_filters", Array(STRING)),
        Field("producer_id_filters", Array(INT64)),
    )


@attrs.frozen(kw_only=True)
class ListTransactionsState:
    transactional_id: str
    producer_id: int
    transaction_state: str
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("transaction_state", STRING),
    )


@attrs.frozen(kw_only=True)
class ListTransactionsResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    #: States named in the request's filter that brokerd does not know (Kafka's field).
    unknown_state_filters: tuple[str, ...] = _arr()
    transaction_states: tuple[ListTransactionsState, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("unknown_state_filters", Array(STRING)),
        Field("transaction_states", Array(Struct(ListTransactionsState))),
    )


# -- Group admin: ListGroups (16), DescribeGroups (15), DeleteGroups (42),
# -- OffsetDelete (47) ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ListGroupsRequest:
    #: v4+: list only groups in these states (case-insensitive); empty = every group.
    states_filter: tuple[str, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("states_filter", Array(STRING), 4),)


@attrs.frozen(kw_only=True)
class ListedGroup:
    group_id: str
    protocol_type: str = ""
    group_state: str = ""  # v4+
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("group_id", STRING),
        Field("protocol_type", STRING),
        Field("group_state", STRING, 4),
    )


@attrs.frozen(kw_only=True)
class ListGroupsResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    groups: tuple[ListedGroup, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("error_code", INT16),
        Field("groups", Array(Struct(ListedGroup))),
    )


@attrs.frozen(kw_only=True)
class DescribeGroupsRequest:
    groups: tuple[str, ...] = _arr()
    include_authorized_operations: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("groups", Array(STRING)),
        Field("include_authorized_operations", BOOL, 3),
    )


@attrs.frozen(kw_only=True)
class DescribedGroupMember:
    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    member_metadata: bytes = b""
    member_assignment: bytes = b""
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("member_id", STRING),
        Field("group_instance_id", STRING, 4, nullable_from=4),
        Field("client_id", STRING),
        Field("client_host", STRING),
        Field("member_metadata", BYTES),
        Field("member_assignment", BYTES),
    )


@attrs.frozen(kw_only=True)
class DescribedGroup:
    error_code: int = 0
    group_id: str
    group_state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedGroupMember, ...] = _arr()
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("group_id", STRING),
        Field("group_state", STRING),
        Field("protocol_type", STRING),
        Field("protocol_data", STRING),
        Field("members", Array(Struct(DescribedGroupMember))),
        Field("authorized_operations", INT32, 3),
    )


@attrs.frozen(kw_only=True)
class DescribeGroupsResponse:
    throttle_time_ms: int = 0
    groups: tuple[DescribedGroup, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("groups", Array(Struct(DescribedGroup))),
    )


@attrs.frozen(kw_only=True)
class DeleteGroupsRequest:
    groups_names: tuple[str, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("groups_names", Array(STRING)),)


@attrs.frozen(kw_only=True)
class DeletableGroupResult:
    group_id: str
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("group_id", STRING),
        Field("error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class DeleteGroupsResponse:
    throttle_time_ms: int = 0
    results: tuple[DeletableGroupResult, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Struct(DeletableGroupResult))),
    )


@attrs.frozen(kw_only=True)
class OffsetDeleteRequestTopic:
    name: str
    partitions: tuple[int, ...] = _arr()
    # Kafka's schema nests {PartitionIndex}; one int32 per element is the same bytes.
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[OffsetDeleteRequestTopic, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("group_id", STRING),
        Field("topics", Array(Struct(OffsetDeleteRequestTopic))),
    )


@attrs.frozen(kw_only=True)
class OffsetDeleteResponsePartition:
    partition_index: int
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class OffsetDeleteResponseTopic:
    name: str
    partitions: tuple[OffsetDeleteResponsePartition, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(OffsetDeleteResponsePartition))),
    )


@attrs.frozen(kw_only=True)
class OffsetDeleteResponse:
    error_code: int = 0
    throttle_time_ms: int = 0
    topics: tuple[OffsetDeleteResponseTopic, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("throttle_time_ms", INT32),
        Field("topics", Array(Struct(OffsetDeleteResponseTopic))),
    )


# -- DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44) ----------


@attrs.frozen(kw_only=True)
class DescribeConfigsResource:
    resource_type: int
    resource_name: str
    #: None = every config of the resource.
    configuration_keys: tuple[str, ...] | None = _arr(None)
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("configuration_keys", Array(STRING), nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsRequest:
    resources: tuple[DescribeConfigsResource, ...] = _arr()
    include_synonyms: bool = False
    include_documentation: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resources", Array(Struct(DescribeConfigsResource))),
        Field("include_synonyms", BOOL, 1),
        Field("include_documentation", BOOL, 3),
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsSynonym:
    name: str
    value: str | None = None
    source: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("value", STRING, nullable_from=0),
        Field("source", INT8),
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsResourceResult:
    name: str
    value: str | None = None
    read_only: bool = False
    #: v0 only (v1+ carry ``config_source`` instead).
    is_default: bool = False
    config_source: int = -1
    is_sensitive: bool = False
    synonyms: tuple[DescribeConfigsSynonym, ...] = _arr()
    config_type: int = 0
    documentation: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("value", STRING, nullable_from=0),
        Field("read_only", BOOL),
        Field("is_default", BOOL, 0, 0),
        Field("config_source", INT8, 1),
        Field("is_sensitive", BOOL),
        Field("synonyms", Array(Struct(DescribeConfigsSynonym)), 1),
        Field("config_type", INT8, 3),
        Field("documentation", STRING, 3, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsResult:
    error_code: int = 0
    error_message: str | None = None
    resource_type: int
    resource_name: str
    configs: tuple[DescribeConfigsResourceResult, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("configs", Array(Struct(DescribeConfigsResourceResult))),
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsResponse:
    throttle_time_ms: int = 0
    results: tuple[DescribeConfigsResult, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Struct(DescribeConfigsResult))),
    )


@attrs.frozen(kw_only=True)
class AlterableConfig:
    name: str
    value: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("value", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("configs", Array(Struct(AlterableConfig))),
    )


@attrs.frozen(kw_only=True)
class AlterConfigsRequest:
    resources: tuple[AlterConfigsResource, ...] = _arr()
    validate_only: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resources", Array(Struct(AlterConfigsResource))),
        Field("validate_only", BOOL),
    )


@attrs.frozen(kw_only=True)
class AlterConfigsResourceResponse:
    error_code: int = 0
    error_message: str | None = None
    resource_type: int
    resource_name: str
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
        Field("resource_type", INT8),
        Field("resource_name", STRING),
    )


@attrs.frozen(kw_only=True)
class AlterConfigsResponse:
    """The answer to AlterConfigs and to IncrementalAlterConfigs (same layout)."""

    throttle_time_ms: int = 0
    responses: tuple[AlterConfigsResourceResponse, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("responses", Array(Struct(AlterConfigsResourceResponse))),
    )


@attrs.frozen(kw_only=True)
class IncrementalAlterableConfig:
    name: str
    config_operation: int
    value: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("config_operation", INT8),
        Field("value", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[IncrementalAlterableConfig, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("configs", Array(Struct(IncrementalAlterableConfig))),
    )


@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsRequest:
    resources: tuple[IncrementalAlterConfigsResource, ...] = _arr()
    validate_only: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resources", Array(Struct(IncrementalAlterConfigsResource))),
        Field("validate_only", BOOL),
    )


# -- DeleteRecords (21) --------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DeleteRecordsPartition:
    partition_index: int
    #: Delete every record below this offset; -1 = up to the high watermark.
    offset: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("offset", INT64),
    )


@attrs.frozen(kw_only=True)
class DeleteRecordsTopic:
    name: str
    partitions: tuple[DeleteRecordsPartition, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(DeleteRecordsPartition))),
    )


@attrs.frozen(kw_only=True)
class DeleteRecordsRequest:
    topics: tuple[DeleteRecordsTopic, ...] = _arr()
    timeout_ms: int = 60_000
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topics", Array(Struct(DeleteRecordsTopic))),
        Field("timeout_ms", INT32),
    )


@attrs.frozen(kw_only=True)
class DeleteRecordsPartitionResult:
    partition_index: int
    #: The log start offset afterwards; -1 with an error.
    low_watermark: int = -1
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("low_watermark", INT64),
        Field("error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class DeleteRecordsTopicResult:
    name: str
    partitions: tuple[DeleteRecordsPartitionResult, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(DeleteRecordsPartitionResult))),
    )


@attrs.frozen(kw_only=True)
class DeleteRecordsResponse:
    throttle_time_ms: int = 0
    topics: tuple[DeleteRecordsTopicResult, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("topics", Array(Struct(DeleteRecordsTopicResult))),
    )


# -- DescribeLogDirs (35) ------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DescribableLogDirTopic:
    topic: str
    partitions: tuple[int, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topic", STRING),
        Field("partitions", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class DescribeLogDirsRequest:
    #: None = every topic.
    topics: tuple[DescribableLogDirTopic, ...] | None = _arr(None)
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topics", Array(Struct(DescribableLogDirTopic)), nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class DescribeLogDirsPartition:
    partition_index: int
    partition_size: int = 0
    offset_lag: int = 0
    is_future_key: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("partition_size", INT64),
        Field("offset_lag", INT64),
        Field("is_future_key", BOOL),
    )


@attrs.frozen(kw_only=True)
class DescribeLogDirsTopic:
    name: str
    partitions: tuple[DescribeLogDirsPartition, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(DescribeLogDirsPartition))),
    )


@attrs.frozen(kw_only=True)
class DescribeLogDirsResult:
    error_code: int = 0
    log_dir: str = ""
    topics: tuple[DescribeLogDirsTopic, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("log_dir", STRING),
        Field("topics", Array(Struct(DescribeLogDirsTopic))),
    )


@attrs.frozen(kw_only=True)
class DescribeLogDirsResponse:
    throttle_time_ms: int = 0
    results: tuple[DescribeLogDirsResult, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Struct(DescribeLogDirsResult))),
    )


# -- CreatePartitions (37) -----------------------------------------------------------


@attrs.frozen(kw_only=True)
class CreatePartitionsAssignment:
    broker_ids: tuple[int, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("broker_ids", Array(INT32)),)


@attrs.frozen(kw_only=True)
class CreatePartitionsTopic:
    name: str
    #: The new total partition count.
    count: int
    #: One entry per new partition, or None to let the broker place them.
    assignments: tuple[CreatePartitionsAssignment, ...] | None = _arr(None)
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("count", INT32),
        Field("assignments", Array(Struct(CreatePartitionsAssignment)), nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class CreatePartitionsRequest:
    topics: tuple[CreatePartitionsTopic, ...] = _arr()
    timeout_ms: int = 60_000
    validate_only: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topics", Array(Struct(CreatePartitionsTopic))),
        Field("timeout_ms", INT32),
        Field("validate_only", BOOL),
    )


@attrs.frozen(kw_only=True)
class CreatePartitionsTopicResult:
    name: str
    error_code: int = 0
    error_message: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class CreatePartitionsResponse:
    throttle_time_ms: int = 0
    results: tuple[CreatePartitionsTopicResult, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Struct(CreatePartitionsTopicResult))),
    )


# -- registry ------------------------------------------------------------------------

#: Request body class of each API.
REQUEST_TYPES: dict[ApiKey, type[Any]] = {
    ApiKey.PRODUCE: ProduceRequest,
    ApiKey.FETCH: FetchRequest,
    ApiKey.LIST_OFFSETS: ListOffsetsRequest,
    ApiKey.METADATA: MetadataRequest,
    ApiKey.OFFSET_COMMIT: OffsetCommitRequest,
    ApiKey.OFFSET_FETCH: OffsetFetchRequest,
    ApiKey.FIND_COORDINATOR: FindCoordinatorRequest,
    ApiKey.JOIN_GROUP: JoinGroupRequest,
    ApiKey.HEARTBEAT: HeartbeatRequest,
    ApiKey.LEAVE_GROUP: LeaveGroupRequest,
    ApiKey.SYNC_GROUP: SyncGroupRequest,
    ApiKey.API_VERSIONS: ApiVersionsRequest,
    ApiKey.CREATE_TOPICS: CreateTopicsRequest,
    ApiKey.DELETE_TOPICS: DeleteTopicsRequest,
    ApiKey.INIT_PRODUCER_ID: InitProducerIdRequest,
    ApiKey.DESCRIBE_CONFIGS: DescribeConfigsRequest,
    ApiKey.ALTER_CONFIGS: AlterConfigsRequest,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: IncrementalAlterConfigsRequest,
    ApiKey.LIST_GROUPS: ListGroupsRequest,
    ApiKey.DESCRIBE_GROUPS: DescribeGroupsRequest,
    ApiKey.DELETE_GROUPS: DeleteGroupsRequest,
    ApiKey.OFFSET_DELETE: OffsetDeleteRequest,
    ApiKey.DELETE_RECORDS: DeleteRecordsRequest,
    ApiKey.DESCRIBE_LOG_DIRS: DescribeLogDirsRequest,
    ApiKey.CREATE_PARTITIONS: CreatePartitionsRequest,
    ApiKey.ADD_PARTITIONS_TO_TXN: AddPartitionsToTxnRequest,
    ApiKey.ADD_OFFSETS_TO_TXN: AddOffsetsToTxnRequest,
    ApiKey.END_TXN: EndTxnRequest,
    ApiKey.TXN_OFFSET_COMMIT: TxnOffsetCommitRequest,
    ApiKey.DESCRIBE_TRANSACTIONS: DescribeTransactionsRequest,
    ApiKey.LIST_TRANSACTIONS: ListTransactionsRequest,
    # ACLs.
    ApiKey.DESCRIBE_ACLS: acl_apis.DescribeAclsRequest,
    ApiKey.CREATE_ACLS: acl_apis.CreateAclsRequest,
    ApiKey.DELETE_ACLS: acl_apis.DeleteAclsRequest,
    ApiKey.SASL_HANDSHAKE: sasl_apis.SaslHandshakeRequest,
    ApiKey.SASL_AUTHENTICATE: sasl_apis.SaslAuthenticateRequest,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: sasl_apis.DescribeUserScramCredentialsRequest,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: sasl_apis.AlterUserScramCredentialsRequest,
}

#: Response body class of each API.
RESPONSE_TYPES: dict[ApiKey, type[Any]] = {
    ApiKey.PRODUCE: ProduceResponse,
    ApiKey.FETCH: FetchResponse,
    ApiKey.LIST_OFFSETS: ListOffsetsResponse,
    ApiKey.METADATA: MetadataResponse,
    ApiKey.OFFSET_COMMIT: OffsetCommitResponse,
    ApiKey.OFFSET_FETCH: OffsetFetchResponse,
    ApiKey.FIND_COORDINATOR: FindCoordinatorResponse,
    ApiKey.JOIN_GROUP: JoinGroupResponse,
    ApiKey.HEARTBEAT: HeartbeatResponse,
    ApiKey.LEAVE_GROUP: LeaveGroupResponse,
    ApiKey.SYNC_GROUP: SyncGroupResponse,
    ApiKey.API_VERSIONS: ApiVersionsResponse,
    ApiKey.CREATE_TOPICS: CreateTopicsResponse,
    ApiKey.DELETE_TOPICS: DeleteTopicsResponse,
    ApiKey.INIT_PRODUCER_ID: InitProducerIdResponse,
    ApiKey.DESCRIBE_CONFIGS: DescribeConfigsResponse,
    ApiKey.ALTER_CONFIGS: AlterConfigsResponse,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: AlterConfigsResponse,
    ApiKey.LIST_GROUPS: ListGroupsResponse,
    ApiKey.DESCRIBE_GROUPS: DescribeGroupsResponse,
    ApiKey.DELETE_GROUPS: DeleteGroupsResponse,
    ApiKey.OFFSET_DELETE: OffsetDeleteResponse,
    ApiKey.DELETE_RECORDS: DeleteRecordsResponse,
    ApiKey.DESCRIBE_LOG_DIRS: DescribeLogDirsResponse,
    ApiKey.CREATE_PARTITIONS: CreatePartitionsResponse,
    ApiKey.ADD_PARTITIONS_TO_TXN: AddPartitionsToTxnResponse,
    ApiKey.ADD_OFFSETS_TO_TXN: AddOffsetsToTxnResponse,
    ApiKey.END_TXN: EndTxnResponse,
    ApiKey.TXN_OFFSET_COMMIT: TxnOffsetCommitResponse,
    ApiKey.DESCRIBE_TRANSACTIONS: DescribeTransactionsResponse,
    ApiKey.LIST_TRANSACTIONS: ListTransactionsResponse,
    # ACLs.
    ApiKey.DESCRIBE_ACLS: acl_apis.DescribeAclsResponse,
    ApiKey.CREATE_ACLS: acl_apis.CreateAclsResponse,
    ApiKey.DELETE_ACLS: acl_apis.DeleteAclsResponse,
    ApiKey.SASL_HANDSHAKE: sasl_apis.SaslHandshakeResponse,
    ApiKey.SASL_AUTHENTICATE: sasl_apis.SaslAuthenticateResponse,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: sasl_apis.DescribeUserScramCredentialsResponse,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: sasl_apis.AlterUserScramCredentialsResponse,
}

#: Requests whose bytes after the body are ignored, as Kafka ignores them (its readers
#: never check for the end): librdkafka 2.x ends AlterUserScramCredentials with one
#: tagged-fields byte too many.
TRAILING_BYTES_IGNORED = frozenset({ApiKey.ALTER_USER_SCRAM_CREDENTIALS})

_KEY_OF_RESPONSE: dict[type[Any], ApiKey] = {cls: key for key, cls in RESPONSE_TYPES.items()}


# -- top level -----------------------------------------------------------------------


class UnknownApiKey(MalformedRequest):
    """An API key brokerd does not implement (Kafka closes the connection)."""

    def __init__(self, api_key: int, correlation_id: int) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key
        self.correlation_id = correlation_id


class UnsupportedVersion(MalformedRequest):
    """A known API at a version outside the advertised range."""

    def __init__(self, api_key: ApiKey, api_version: int, correlation_id: int) -> None:
        lo, hi = SUPPORTED_VERSIONS[api_key]
        super().__init__(
            f"{api_key.name} version {api_version} is not supported (supported {lo}-{hi})"
        )
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


@attrs.frozen
class Request:
    """A decoded request: its header and its body (an instance of a REQUEST_TYPES class)."""

    header: RequestHeader
    body: Any

    @property
    def api_key(self) -> ApiKey:
        return ApiKey(self.header.api_key)

    @property
    def api_version(self) -> int:
        return self.header.api_version


def request_header_flexible(api_key: ApiKey, api_version: int) -> bool:
    """Whether the request uses header v2 (every flexible request version does)."""
    return is_flexible(REQUEST_TYPES[api_key], api_version)


def response_header_flexible(api_key: ApiKey, api_version: int) -> bool:
    """Whether the response uses header v1: flexible response versions do, except
    ApiVersions, whose response header is always v0 (a client that does not yet know the
    broker's versions must be able to read it)."""
    if api_key is ApiKey.API_VERSIONS:
        return False
    return is_flexible(RESPONSE_TYPES[api_key], api_version)


def is_supported(api_key: int, api_version: int) -> bool:
    try:
        lo, hi = SUPPORTED_VERSIONS[ApiKey(api_key)]
    except ValueError:
        return False
    return lo <= api_version <= hi


def decode_request(payload: bytes) -> Request:
    """Decode a whole request frame payload (everything after the size).

    :raises UnsupportedVersion: a known key at an unsupported version. For ApiVersions
        the caller answers :func:`api_versions_fallback`; for the rest Kafka closes.
    :raises UnknownApiKey: a key brokerd does not implement.
    :raises MalformedRequest: a header or body that does not parse, or trailing bytes.
    """
    key, version, correlation = peek_header(payload)
    try:
        api = ApiKey(key)
    except ValueError:
        raise UnknownApiKey(key, correlation) from None
    if not is_supported(api, version):
        # Checked before reading further: an ApiVersions v3+ header is flexible (it
        # carries tagged fields) and must not be parsed as header v1.
        raise UnsupportedVersion(api, version, correlation)
    flexible = request_header_flexible(api, version)
    header, start = read_request_header(payload, flexible)
    r = Reader(payload, start, flexible=flexible)
    body = read_struct(REQUEST_TYPES[api], r, version)
    if api not in TRAILING_BYTES_IGNORED:
        r.expect_end()
    return Request(header, body)


def encode_response(correlation_id: int, api_version: int, body: Any) -> Frame:
    """A whole response frame (size, header v0 or v1, body) for ``body`` at
    ``api_version``: a :class:`~brokerd.net.frames.SplicedFrame` when the body holds
    :class:`~brokerd.net.frames.StoredRecords` (a Fetch response), else bytes."""
    key = _KEY_OF_RESPONSE.get(type(body))
    if key is None:
        raise TypeError(f"{type(body).__name__} is not a response message")
    flexible_header = response_header_flexible(key, api_version)
    return response_frame(correlation_id, encode_frame(body, api_version), flexible_header)


def api_versions_response(api_version: int) -> ApiVersionsResponse:
    """The normal ApiVersions answer: every supported API and its range."""
    return ApiVersionsResponse(
        error_code=0,
        api_keys=tuple(
            ApiVersionRange(api_key=int(k), min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
        ),
    )


def api_versions_fallback(correlation_id: int) -> bytes:
    """The reply to an ApiVersions request of an unsupported version, as Kafka sends it:
    response header v0 and a **version 0** body with UNSUPPORTED_VERSION and one entry,
    ApiVersions itself (the client then retries within that range)."""
    body = ApiVersionsResponse(
        error_code=_UNSUPPORTED_VERSION,
        api_keys=(
            ApiVersionRange(
                api_key=int(ApiKey.API_VERSIONS), min_version=0, max_version=API_VERSIONS_MAX
            ),
        ),
    )
    return response_frame(correlation_id, encode_struct(body, 0))


# -- client side (tests, tools) ------------------------------------------------------


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """A whole request frame; the inverse of :func:`decode_request` (tests, tools)."""
    flexible = request_header_flexible(ApiKey(header.api_key), header.api_version)
    return frame(
        encode_request_header(header, flexible) + encode_struct(body, header.api_version)
    )


def decode_response(api_key: ApiKey, api_version: int, payload: bytes) -> tuple[int, Any]:
    """``(correlation_id, body)`` from a response frame payload (tests, tools)."""
    correlation, start = read_response_header(
        payload, response_header_flexible(api_key, api_version)
    )
    cls = RESPONSE_TYPES[api_key]
    r = Reader(payload, start, flexible=is_flexible(cls, api_version))
    body = read_struct(cls, r, api_version)
    r.expect_end()
    return correlation, body

