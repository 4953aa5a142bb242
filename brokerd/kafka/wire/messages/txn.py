# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of the transaction APIs: AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), TxnOffsetCommit (28), DescribeTransactions (65) and
ListTransactions (66), and the version range brokerd answers of each (:data:`APIS`,
collected by :mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    INT16,
    INT32,
    INT64,
    STRING,
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
class AddPartitionsToTxnRequest:
    """Versions 0-3, the client form (Kafka's ``V3AndBelow*`` fields); v4+ batches
    several transactions for broker-to-broker verification and is not advertised."""

    transactional_id: Annotated[str, Wire(STRING)]
    producer_id: Annotated[int, Wire(INT64)]
    producer_epoch: Annotated[int, Wire(INT16)]
    topics: Annotated[
        tuple[AddPartitionsToTxnTopic, ...],
        Wire(Array(Struct(AddPartitionsToTxnTopic))),
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
class AddPartitionsToTxnResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    results_by_topic: Annotated[
        tuple[AddPartitionsToTxnTopicResult, ...],
        Wire(Array(Struct(AddPartitionsToTxnTopicResult))),
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
    name: Annotated[str, Wire(STRING)]
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
    name: Annotated[str, Wire(STRING)]
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


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    # The client versions (v4+ is Kafka's broker-to-broker batched form).
    ApiSpec(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        0,
        3,
    ),
    ApiSpec(ApiKey.ADD_OFFSETS_TO_TXN, AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 3),
    ApiSpec(ApiKey.END_TXN, EndTxnRequest, EndTxnResponse, 0, 3),
    ApiSpec(ApiKey.TXN_OFFSET_COMMIT, TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 3),
    ApiSpec(
        ApiKey.DESCRIBE_TRANSACTIONS,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        0,
        0,
    ),
    ApiSpec(ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest, ListTransactionsResponse, 0, 0),
)
