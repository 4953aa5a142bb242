# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of the partition admin APIs: DeleteRecords (21),
DescribeLogDirs (35) and CreatePartitions (37), and the version range brokerd answers of
each (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.registry`).

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
    partitions: tuple[DeleteRecordsPartition, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(DeleteRecordsPartition))),
    )


@attrs.frozen(kw_only=True)
class DeleteRecordsRequest:
    topics: tuple[DeleteRecordsTopic, ...] = array()
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
    partitions: tuple[DeleteRecordsPartitionResult, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(DeleteRecordsPartitionResult))),
    )


@attrs.frozen(kw_only=True)
class DeleteRecordsResponse:
    throttle_time_ms: int = 0
    topics: tuple[DeleteRecordsTopicResult, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("topics", Array(Struct(DeleteRecordsTopicResult))),
    )


# -- DescribeLogDirs (35) ------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DescribableLogDirTopic:
    topic: str
    partitions: tuple[int, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topic", STRING),
        Field("partitions", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class DescribeLogDirsRequest:
    #: None = every topic.
    topics: tuple[DescribableLogDirTopic, ...] | None = array(None)
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
    partitions: tuple[DescribeLogDirsPartition, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(DescribeLogDirsPartition))),
    )


@attrs.frozen(kw_only=True)
class DescribeLogDirsResult:
    error_code: int = 0
    log_dir: str = ""
    topics: tuple[DescribeLogDirsTopic, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("log_dir", STRING),
        Field("topics", Array(Struct(DescribeLogDirsTopic))),
    )


@attrs.frozen(kw_only=True)
class DescribeLogDirsResponse:
    throttle_time_ms: int = 0
    results: tuple[DescribeLogDirsResult, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Struct(DescribeLogDirsResult))),
    )


# -- CreatePartitions (37) -----------------------------------------------------------


@attrs.frozen(kw_only=True)
class CreatePartitionsAssignment:
    broker_ids: tuple[int, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("broker_ids", Array(INT32)),)


@attrs.frozen(kw_only=True)
class CreatePartitionsTopic:
    name: str
    #: The new total partition count.
    count: int
    #: One entry per new partition, or None to let the broker place them.
    assignments: tuple[CreatePartitionsAssignment, ...] | None = array(None)
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("count", INT32),
        Field("assignments", Array(Struct(CreatePartitionsAssignment)), nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class CreatePartitionsRequest:
    topics: tuple[CreatePartitionsTopic, ...] = array()
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
    results: tuple[CreatePartitionsTopicResult, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Struct(CreatePartitionsTopicResult))),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.DELETE_RECORDS, DeleteRecordsRequest, DeleteRecordsResponse, 0, 1),
    ApiSpec(ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest, DescribeLogDirsResponse, 0, 1),
    ApiSpec(ApiKey.CREATE_PARTITIONS, CreatePartitionsRequest, CreatePartitionsResponse, 0, 1),
)
