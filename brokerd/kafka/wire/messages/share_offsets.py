# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of the share group offsets APIs (KIP-932):
DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets
(92), and the version range brokerd answers of each (:data:`APIS`).

Transcribed from Kafka 4.2's JSON message schemas; every version is flexible. Pure: no
I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
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

__all__ = ["ZERO_UUID"]

# -- DescribeShareGroupOffsets (90) ------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class DescribeShareOffsetsTopic:
    topic_name: Annotated[str, Wire(STRING)]
    partitions: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeShareOffsetsGroup:
    group_id: Annotated[str, Wire(STRING)]
    #: None: every partition the group has a start offset for.
    topics: Annotated[
        tuple[DescribeShareOffsetsTopic, ...] | None,
        Wire(Array(Struct(DescribeShareOffsetsTopic)), nullable_from=0),
    ] = array(None)


@wire_message
@attrs.frozen(kw_only=True)
class DescribeShareGroupOffsetsRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    groups: Annotated[
        tuple[DescribeShareOffsetsGroup, ...], Wire(Array(Struct(DescribeShareOffsetsGroup)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribedShareOffsetsPartition:
    partition_index: Annotated[int, Wire(INT32)]
    start_offset: Annotated[int, Wire(INT64)] = -1
    leader_epoch: Annotated[int, Wire(INT32)] = -1
    #: v1: records from the start offset to the end not yet acknowledged or archived.
    lag: Annotated[int, Wire(INT64, 1)] = -1
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class DescribedShareOffsetsTopic:
    topic_name: Annotated[str, Wire(STRING)]
    topic_id: Annotated[uuid.UUID, Wire(UUID)] = ZERO_UUID
    partitions: Annotated[
        tuple[DescribedShareOffsetsPartition, ...],
        Wire(Array(Struct(DescribedShareOffsetsPartition))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribedShareOffsetsGroup:
    group_id: Annotated[str, Wire(STRING)]
    topics: Annotated[
        tuple[DescribedShareOffsetsTopic, ...], Wire(Array(Struct(DescribedShareOffsetsTopic)))
    ] = array()
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class DescribeShareGroupOffsetsResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    groups: Annotated[
        tuple[DescribedShareOffsetsGroup, ...], Wire(Array(Struct(DescribedShareOffsetsGroup)))
    ] = array()


# -- AlterShareGroupOffsets (91) ---------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class AlterShareOffsetsPartition:
    partition_index: Annotated[int, Wire(INT32)]
    start_offset: Annotated[int, Wire(INT64)]


@wire_message
@attrs.frozen(kw_only=True)
class AlterShareOffsetsTopic:
    topic_name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[AlterShareOffsetsPartition, ...], Wire(Array(Struct(AlterShareOffsetsPartition)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class AlterShareGroupOffsetsRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    group_id: Annotated[str, Wire(STRING)]
    topics: Annotated[
        tuple[AlterShareOffsetsTopic, ...], Wire(Array(Struct(AlterShareOffsetsTopic)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class AlteredShareOffsetsPartition:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class AlteredShareOffsetsTopic:
    topic_name: Annotated[str, Wire(STRING)]
    topic_id: Annotated[uuid.UUID, Wire(UUID)] = ZERO_UUID
    partitions: Annotated[
        tuple[AlteredShareOffsetsPartition, ...],
        Wire(Array(Struct(AlteredShareOffsetsPartition))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class AlterShareGroupOffsetsResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    responses: Annotated[
        tuple[AlteredShareOffsetsTopic, ...], Wire(Array(Struct(AlteredShareOffsetsTopic)))
    ] = array()


# -- DeleteShareGroupOffsets (92) --------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class DeleteShareOffsetsTopic:
    topic_name: Annotated[str, Wire(STRING)]


@wire_message
@attrs.frozen(kw_only=True)
class DeleteShareGroupOffsetsRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    group_id: Annotated[str, Wire(STRING)]
    topics: Annotated[
        tuple[DeleteShareOffsetsTopic, ...], Wire(Array(Struct(DeleteShareOffsetsTopic)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DeletedShareOffsetsTopic:
    topic_name: Annotated[str, Wire(STRING)]
    topic_id: Annotated[uuid.UUID, Wire(UUID)] = ZERO_UUID
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class DeleteShareGroupOffsetsResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    responses: Annotated[
        tuple[DeletedShareOffsetsTopic, ...], Wire(Array(Struct(DeletedShareOffsetsTopic)))
    ] = array()


DESCRIBE_SHARE_GROUP_OFFSETS = ApiSpec(
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, 0, 1,
)
ALTER_SHARE_GROUP_OFFSETS = ApiSpec(
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, 0, 0,
)
DELETE_SHARE_GROUP_OFFSETS = ApiSpec(
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse, 0, 0,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (
    DESCRIBE_SHARE_GROUP_OFFSETS,
    ALTER_SHARE_GROUP_OFFSETS,
    DELETE_SHARE_GROUP_OFFSETS,
)
