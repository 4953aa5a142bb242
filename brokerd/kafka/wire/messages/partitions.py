# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of the partition admin APIs: DeleteRecords (21),
DescribeLogDirs (35) and CreatePartitions (37), and the version range brokerd answers of
each (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

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

# -- DeleteRecords (21) --------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class DeleteRecordsPartition:
    partition_index: Annotated[int, Wire(INT32)]
    #: Delete every record below this offset; -1 = up to the high watermark.
    offset: Annotated[int, Wire(INT64)]


@wire_message
@attrs.frozen(kw_only=True)
class DeleteRecordsTopic:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[DeleteRecordsPartition, ...],
        Wire(Array(Struct(DeleteRecordsPartition))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DeleteRecordsRequest:
    topics: Annotated[
        tuple[DeleteRecordsTopic, ...],
        Wire(Array(Struct(DeleteRecordsTopic))),
    ] = array()
    timeout_ms: Annotated[int, Wire(INT32)] = 60_000
    FLEXIBLE_FROM: ClassVar[int | None] = 2


@wire_message
@attrs.frozen(kw_only=True)
class DeleteRecordsPartitionResult:
    partition_index: Annotated[int, Wire(INT32)]
    #: The log start offset afterwards; -1 with an error.
    low_watermark: Annotated[int, Wire(INT64)] = -1
    error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class DeleteRecordsTopicResult:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[DeleteRecordsPartitionResult, ...],
        Wire(Array(Struct(DeleteRecordsPartitionResult))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DeleteRecordsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    topics: Annotated[
        tuple[DeleteRecordsTopicResult, ...],
        Wire(Array(Struct(DeleteRecordsTopicResult))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 2


# -- DescribeLogDirs (35) ------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class DescribableLogDirTopic:
    topic: Annotated[str, Wire(STRING)]
    partitions: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeLogDirsRequest:
    #: None = every topic.
    topics: Annotated[
        tuple[DescribableLogDirTopic, ...] | None,
        Wire(Array(Struct(DescribableLogDirTopic)), nullable_from=0),
    ] = array(None)
    FLEXIBLE_FROM: ClassVar[int | None] = 2


@wire_message
@attrs.frozen(kw_only=True)
class DescribeLogDirsPartition:
    partition_index: Annotated[int, Wire(INT32)]
    partition_size: Annotated[int, Wire(INT64)] = 0
    offset_lag: Annotated[int, Wire(INT64)] = 0
    is_future_key: Annotated[bool, Wire(BOOL)] = False


@wire_message
@attrs.frozen(kw_only=True)
class DescribeLogDirsTopic:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[DescribeLogDirsPartition, ...],
        Wire(Array(Struct(DescribeLogDirsPartition))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeLogDirsResult:
    error_code: Annotated[int, Wire(INT16)] = 0
    log_dir: Annotated[str, Wire(STRING)] = ""
    topics: Annotated[
        tuple[DescribeLogDirsTopic, ...],
        Wire(Array(Struct(DescribeLogDirsTopic))),
    ] = array()
    #: v4+: the size and free space of the volume the directory is on (-1 = unknown).
    total_bytes: Annotated[int, Wire(INT64, 4)] = -1
    usable_bytes: Annotated[int, Wire(INT64, 4)] = -1
    #: v5+: whether new partitions are kept off the directory (KIP-1066); brokerd never
    #: cordons its one data directory.
    is_cordoned: Annotated[bool, Wire(BOOL, 5)] = False


@wire_message
@attrs.frozen(kw_only=True)
class DescribeLogDirsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    #: v3+: an error for the whole request (before v3 a refusal is an empty answer).
    error_code: Annotated[int, Wire(INT16, 3)] = 0
    results: Annotated[
        tuple[DescribeLogDirsResult, ...],
        Wire(Array(Struct(DescribeLogDirsResult))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 2


# -- CreatePartitions (37) -----------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class CreatePartitionsAssignment:
    broker_ids: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class CreatePartitionsTopic:
    name: Annotated[str, Wire(STRING)]
    #: The new total partition count.
    count: Annotated[int, Wire(INT32)]
    #: One entry per new partition, or None to let the broker place them.
    assignments: Annotated[
        tuple[CreatePartitionsAssignment, ...] | None,
        Wire(Array(Struct(CreatePartitionsAssignment)), nullable_from=0),
    ] = array(None)


@wire_message
@attrs.frozen(kw_only=True)
class CreatePartitionsRequest:
    topics: Annotated[
        tuple[CreatePartitionsTopic, ...],
        Wire(Array(Struct(CreatePartitionsTopic))),
    ] = array()
    timeout_ms: Annotated[int, Wire(INT32)] = 60_000
    validate_only: Annotated[bool, Wire(BOOL)] = False
    FLEXIBLE_FROM: ClassVar[int | None] = 2


@wire_message
@attrs.frozen(kw_only=True)
class CreatePartitionsTopicResult:
    name: Annotated[str, Wire(STRING)]
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class CreatePartitionsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    results: Annotated[
        tuple[CreatePartitionsTopicResult, ...],
        Wire(Array(Struct(CreatePartitionsTopicResult))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 2


DELETE_RECORDS = ApiSpec(ApiKey.DELETE_RECORDS, DeleteRecordsRequest, DeleteRecordsResponse, 0, 2)
# v0 was removed in Kafka 4.0 (v1 is the same layout).
DESCRIBE_LOG_DIRS = ApiSpec(
    ApiKey.DESCRIBE_LOG_DIRS,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    1,
    5,
)
# v3 may answer THROTTLING_QUOTA_EXCEEDED; brokerd has no partition-creation quota.
CREATE_PARTITIONS = ApiSpec(
    ApiKey.CREATE_PARTITIONS,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    0,
    3,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (DELETE_RECORDS, DESCRIBE_LOG_DIRS, CREATE_PARTITIONS)
