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

from typing import ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
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

# -- Transactions: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
# -- TxnOffsetCommit (28), DescribeTransactions (65), ListTransactions (66) -----------


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnTopic:
    name: str
    partitions: tuple[int, ...] = array()
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
    topics: tuple[AddPartitionsToTxnTopic, ...] = array()
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
    results_by_partition: tuple[AddPartitionsToTxnPartitionResult, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("results_by_partition", Array(Struct(AddPartitionsToTxnPartitionResult))),
    )


@attrs.frozen(kw_only=True)
class AddPartitionsToTxnResponse:
    throttle_time_ms: int = 0
    results_by_topic: tuple[AddPartitionsToTxnTopicResult, ...] = array()
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
    partitions: tuple[TxnOffsetCommitRequestPartition, ...] = array()
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
    topics: tuple[TxnOffsetCommitRequestTopic, ...] = array()
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
    partitions: tuple[TxnOffsetCommitResponsePartition, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(TxnOffsetCommitResponsePartition))),
    )


@attrs.frozen(kw_only=True)
class TxnOffsetCommitResponse:
    throttle_time_ms: int = 0
    topics: tuple[TxnOffsetCommitResponseTopic, ...] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("topics", Array(Struct(TxnOffsetCommitResponseTopic))),
    )


@attrs.frozen(kw_only=True)
class DescribeTransactionsRequest:
    transactional_ids: tuple[str, ...] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("transactional_ids", Array(STRING)),)


@attrs.frozen(kw_only=True)
class DescribeTransactionsTopicData:
    name: str
    partition_indexes: tuple[int, ...] = array()
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
    topic_partitions: tuple[DescribeTransactionsTopicData, ...] = array()
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
    transaction_states: tuple[DescribeTransactionsState, ...] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("transaction_states", Array(Struct(DescribeTransactionsState))),
    )


@attrs.frozen(kw_only=True)
class ListTransactionsRequest:
    #: Empty = every state; names compared exactly (Kafka's state names).
    state_filters: tuple[str, ...] = array()
    #: Empty = every producer id.
    producer_id_filters: tuple[int, ...] = array()
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
    unknown_state_filters: tuple[str, ...] = array()
    transaction_states: tuple[ListTransactionsState, ...] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("unknown_state_filters", Array(STRING)),
        Field("transaction_states", Array(Struct(ListTransactionsState))),
    )


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
