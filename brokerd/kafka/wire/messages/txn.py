# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of the transaction APIs: AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28),
DescribeTransactions (65) and ListTransactions (66), and the version range brokerd
answers of each (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

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

# -- Transactions: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
# -- TxnOffsetCommit (28), DescribeTransactions (65), ListTransactions (66) -----------


@wire_message
@attrs.frozen(kw_only=True)
class AddPartitionsToTxnTopic:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class AddPartitionsToTxnTransaction:
    """One transaction of a v4+ (broker-to-broker, batched) request."""

    transactional_id: Annotated[str, Wire(STRING)]
    producer_id: Annotated[int, Wire(INT64)]
    producer_epoch: Annotated[int, Wire(INT16)]
    #: True: only answer whether each partition is already in the transaction.
    verify_only: Annotated[bool, Wire(BOOL)] = False
    topics: Annotated[
        tuple[AddPartitionsToTxnTopic, ...],
        Wire(Array(Struct(AddPartitionsToTxnTopic))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class AddPartitionsToTxnRequest:
    """Versions 0-3 are the client form (Kafka's ``V3AndBelow*`` fields, one
    transaction); v4+ is the form brokers send a coordinator: several transactions,
    each optionally verify-only (:class:`AddPartitionsToTxnTransaction`)."""

    #: v4+.
    transactions: Annotated[
        tuple[AddPartitionsToTxnTransaction, ...],
        Wire(Array(Struct(AddPartitionsToTxnTransaction)), 4),
    ] = array()
    transactional_id: Annotated[str, Wire(STRING, 0, 3)] = ""
    producer_id: Annotated[int, Wire(INT64, 0, 3)] = -1
    producer_epoch: Annotated[int, Wire(INT16, 0, 3)] = -1
    topics: Annotated[
        tuple[AddPartitionsToTxnTopic, ...],
        Wire(Array(Struct(AddPartitionsToTxnTopic)), 0, 3),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 3


@wire_message
@attrs.frozen(kw_only=True)
class AddPartitionsToTxnPartitionResult:
    partition_index: Annotated[int, Wire(INT32)]
    partition_error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class AddPartitionsToTxnTopicResult:
    name: Annotated[str, Wire(STRING)]
    results_by_partition: Annotated[
        tuple[AddPartitionsToTxnPartitionResult, ...],
        Wire(Array(Struct(AddPartitionsToTxnPartitionResult))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class AddPartitionsToTxnResult:
    """One transaction's answer in a v4+ response."""

    transactional_id: Annotated[str, Wire(STRING)]
    topic_results: Annotated[
        tuple[AddPartitionsToTxnTopicResult, ...],
        Wire(Array(Struct(AddPartitionsToTxnTopicResult))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class AddPartitionsToTxnResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    #: v4+: an error for the whole request (CLUSTER_AUTHORIZATION_FAILED).
    error_code: Annotated[int, Wire(INT16, 4)] = 0
    results_by_transaction: Annotated[
        tuple[AddPartitionsToTxnResult, ...],
        Wire(Array(Struct(AddPartitionsToTxnResult)), 4),
    ] = array()
    #: v0-3.
    results_by_topic: Annotated[
        tuple[AddPartitionsToTxnTopicResult, ...],
        Wire(Array(Struct(AddPartitionsToTxnTopicResult)), 0, 3),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 3


@wire_message
@attrs.frozen(kw_only=True)
class AddOffsetsToTxnRequest:
    transactional_id: Annotated[str, Wire(STRING)]
    producer_id: Annotated[int, Wire(INT64)]
    producer_epoch: Annotated[int, Wire(INT16)]
    group_id: Annotated[str, Wire(STRING)]
    FLEXIBLE_FROM: ClassVar[int | None] = 3


@wire_message
@attrs.frozen(kw_only=True)
class AddOffsetsToTxnResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    FLEXIBLE_FROM: ClassVar[int | None] = 3


@wire_message
@attrs.frozen(kw_only=True)
class EndTxnRequest:
    transactional_id: Annotated[str, Wire(STRING)]
    producer_id: Annotated[int, Wire(INT64)]
    producer_epoch: Annotated[int, Wire(INT16)]
    committed: Annotated[bool, Wire(BOOL)]
    FLEXIBLE_FROM: ClassVar[int | None] = 3


@wire_message
@attrs.frozen(kw_only=True)
class EndTxnResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    #: v5+ (KIP-890 part 2): the producer id and epoch the next transaction uses.
    producer_id: Annotated[int, Wire(INT64, 5)] = -1
    producer_epoch: Annotated[int, Wire(INT16, 5)] = -1
    FLEXIBLE_FROM: ClassVar[int | None] = 3


@wire_message
@attrs.frozen(kw_only=True)
class TxnOffsetCommitRequestPartition:
    partition_index: Annotated[int, Wire(INT32)]
    committed_offset: Annotated[int, Wire(INT64)]
    committed_leader_epoch: Annotated[int, Wire(INT32, 2)] = -1
    committed_metadata: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class TxnOffsetCommitRequestTopic:
    #: v0-5: the topic by name; v6+ (KIP-1319) by ID (the handler fills ``name`` from it).
    name: Annotated[str, Wire(STRING, 0, 5)] = ""
    topic_id: Annotated[uuid.UUID, Wire(UUID, 6)] = ZERO_UUID
    partitions: Annotated[
        tuple[TxnOffsetCommitRequestPartition, ...],
        Wire(Array(Struct(TxnOffsetCommitRequestPartition))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class TxnOffsetCommitRequest:
    transactional_id: Annotated[str, Wire(STRING)]
    group_id: Annotated[str, Wire(STRING)]
    producer_id: Annotated[int, Wire(INT64)]
    producer_epoch: Annotated[int, Wire(INT16)]
    #: v3+ (KIP-447): the consumer's group generation, member and instance id.
    generation_id: Annotated[int, Wire(INT32, 3)] = -1
    member_id: Annotated[str, Wire(STRING, 3)] = ""
    group_instance_id: Annotated[str | None, Wire(STRING, 3, nullable_from=3)] = None
    topics: Annotated[
        tuple[TxnOffsetCommitRequestTopic, ...],
        Wire(Array(Struct(TxnOffsetCommitRequestTopic))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 3


@wire_message
@attrs.frozen(kw_only=True)
class TxnOffsetCommitResponsePartition:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class TxnOffsetCommitResponseTopic:
    name: Annotated[str, Wire(STRING, 0, 5)] = ""
    topic_id: Annotated[uuid.UUID, Wire(UUID, 6)] = ZERO_UUID
    partitions: Annotated[
        tuple[TxnOffsetCommitResponsePartition, ...],
        Wire(Array(Struct(TxnOffsetCommitResponsePartition))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class TxnOffsetCommitResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    topics: Annotated[
        tuple[TxnOffsetCommitResponseTopic, ...],
        Wire(Array(Struct(TxnOffsetCommitResponseTopic))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 3


@wire_message
@attrs.frozen(kw_only=True)
class DescribeTransactionsRequest:
    transactional_ids: Annotated[tuple[str, ...], Wire(Array(STRING))] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 0


@wire_message
@attrs.frozen(kw_only=True)
class DescribeTransactionsTopicData:
    name: Annotated[str, Wire(STRING)]
    partition_indexes: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeTransactionsState:
    error_code: Annotated[int, Wire(INT16)] = 0
    transactional_id: Annotated[str, Wire(STRING)]
    transaction_state: Annotated[str, Wire(STRING)] = ""
    transaction_timeout_ms: Annotated[int, Wire(INT32)] = 0
    transaction_start_time_ms: Annotated[int, Wire(INT64)] = -1
    producer_id: Annotated[int, Wire(INT64)] = -1
    #: An ``int16``, as Kafka's 4.x clients read it (an early schema said ``int32``).
    producer_epoch: Annotated[int, Wire(INT16)] = -1
    topic_partitions: Annotated[
        tuple[DescribeTransactionsTopicData, ...],
        Wire(Array(Struct(DescribeTransactionsTopicData))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeTransactionsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    transaction_states: Annotated[
        tuple[DescribeTransactionsState, ...],
        Wire(Array(Struct(DescribeTransactionsState))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 0


@wire_message
@attrs.frozen(kw_only=True)
class ListTransactionsRequest:
    #: Empty = every state; names compared exactly (Kafka's state names).
    state_filters: Annotated[tuple[str, ...], Wire(Array(STRING))] = array()
    #: Empty = every producer id.
    producer_id_filters: Annotated[tuple[int, ...], Wire(Array(INT64))] = array()
    #: v1+: only transactions running longer than this many ms; negative = all.
    duration_filter: Annotated[int, Wire(INT64, 1)] = -1
    #: v2+: only transactional ids this regular expression matches; null or empty = all.
    transactional_id_pattern: Annotated[str | None, Wire(STRING, 2, nullable_from=2)] = None
    FLEXIBLE_FROM: ClassVar[int | None] = 0


@wire_message
@attrs.frozen(kw_only=True)
class ListTransactionsState:
    transactional_id: Annotated[str, Wire(STRING)]
    producer_id: Annotated[int, Wire(INT64)]
    transaction_state: Annotated[str, Wire(STRING)]


@wire_message
@attrs.frozen(kw_only=True)
class ListTransactionsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    #: States named in the request's filter that brokerd does not know (Kafka's field).
    unknown_state_filters: Annotated[tuple[str, ...], Wire(Array(STRING))] = array()
    transaction_states: Annotated[
        tuple[ListTransactionsState, ...],
        Wire(Array(Struct(ListTransactionsState))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 0


@wire_message
@attrs.frozen(kw_only=True)
class WritableTxnMarkerTopic:
    name: Annotated[str, Wire(STRING)]
    partition_indexes: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class WritableTxnMarker:
    producer_id: Annotated[int, Wire(INT64)]
    producer_epoch: Annotated[int, Wire(INT16)]
    #: True = COMMIT, False = ABORT.
    transaction_result: Annotated[bool, Wire(BOOL)]
    topics: Annotated[
        tuple[WritableTxnMarkerTopic, ...], Wire(Array(Struct(WritableTxnMarkerTopic)))
    ] = array()
    coordinator_epoch: Annotated[int, Wire(INT32)] = 0
    #: v2+ (KIP-1228): the transaction version the marker ends (0/1 classic, 2 = KIP-890
    #: part 2).
    transaction_version: Annotated[int, Wire(INT8, 2)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class WriteTxnMarkersRequest:
    markers: Annotated[
        tuple[WritableTxnMarker, ...], Wire(Array(Struct(WritableTxnMarker)))
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 1


@wire_message
@attrs.frozen(kw_only=True)
class WritableTxnMarkerPartitionResult:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class WritableTxnMarkerTopicResult:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[WritableTxnMarkerPartitionResult, ...],
        Wire(Array(Struct(WritableTxnMarkerPartitionResult))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class WritableTxnMarkerResult:
    producer_id: Annotated[int, Wire(INT64)]
    topics: Annotated[
        tuple[WritableTxnMarkerTopicResult, ...],
        Wire(Array(Struct(WritableTxnMarkerTopicResult))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class WriteTxnMarkersResponse:
    markers: Annotated[
        tuple[WritableTxnMarkerResult, ...], Wire(Array(Struct(WritableTxnMarkerResult)))
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 1


# v0-3 the client form, v4-5 the brokers' batched form with VerifyOnly (v5 only adds
# TRANSACTION_ABORTABLE to the codes a client knows; brokerd never answers it).
ADD_PARTITIONS_TO_TXN = ApiSpec(
    ApiKey.ADD_PARTITIONS_TO_TXN,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    0,
    5,
)
# v4 only adds TRANSACTION_ABORTABLE.
ADD_OFFSETS_TO_TXN = ApiSpec(
    ApiKey.ADD_OFFSETS_TO_TXN,
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    0,
    4,
)
# v4 only adds TRANSACTION_ABORTABLE; v5 (KIP-890 part 2) bumps the producer epoch
# at every end and answers the id and epoch to use next.
END_TXN = ApiSpec(ApiKey.END_TXN, EndTxnRequest, EndTxnResponse, 0, 5)
# v4 only adds TRANSACTION_ABORTABLE; v5 (KIP-890 part 2) also adds the group to the
# transaction, as AddOffsetsToTxn does.
TXN_OFFSET_COMMIT = ApiSpec(
    ApiKey.TXN_OFFSET_COMMIT,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    0,
    6,
)
DESCRIBE_TRANSACTIONS = ApiSpec(
    ApiKey.DESCRIBE_TRANSACTIONS,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    0,
    0,
)
LIST_TRANSACTIONS = ApiSpec(
    ApiKey.LIST_TRANSACTIONS,
    ListTransactionsRequest,
    ListTransactionsResponse,
    0,
    2,
)
# Version 1 is Kafka 4.0's baseline; v2 adds each marker's transaction version.
WRITE_TXN_MARKERS = ApiSpec(
    ApiKey.WRITE_TXN_MARKERS,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
    1,
    2,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (
    ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    TXN_OFFSET_COMMIT,
    DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
    WRITE_TXN_MARKERS,
)
