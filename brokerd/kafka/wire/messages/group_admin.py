# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of the group admin APIs: ListGroups (16), DescribeGroups (15),
DeleteGroups (42) and OffsetDelete (47), and the version range brokerd answers of each
(:data:`APIS`, collected by :mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    BYTES,
    INT16,
    INT32,
    STRING,
    ApiKey,
    Array,
    Field,
    Struct,
)
from brokerd.kafka.wire.schema import AUTHORIZED_OPERATIONS_OMITTED, ApiSpec, array

# -- Group admin: ListGroups (16), DescribeGroups (15), DeleteGroups (42),
# -- OffsetDelete (47) ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ListGroupsRequest:
    #: v4+: list only groups in these states (case-insensitive); empty = every group.
    states_filter: tuple[str, ...] = array()
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
    groups: tuple[ListedGroup, ...] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("error_code", INT16),
        Field("groups", Array(Struct(ListedGroup))),
    )


@attrs.frozen(kw_only=True)
class DescribeGroupsRequest:
    groups: tuple[str, ...] = array()
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
    members: tuple[DescribedGroupMember, ...] = array()
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
    groups: tuple[DescribedGroup, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("groups", Array(Struct(DescribedGroup))),
    )


@attrs.frozen(kw_only=True)
class DeleteGroupsRequest:
    groups_names: tuple[str, ...] = array()
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
    results: tuple[DeletableGroupResult, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Struct(DeletableGroupResult))),
    )


@attrs.frozen(kw_only=True)
class OffsetDeleteRequestTopic:
    name: str
    partitions: tuple[int, ...] = array()
    # Kafka's schema nests {PartitionIndex}; one int32 per element is the same bytes.
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[OffsetDeleteRequestTopic, ...] = array()
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
    partitions: tuple[OffsetDeleteResponsePartition, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partitions", Array(Struct(OffsetDeleteResponsePartition))),
    )


@attrs.frozen(kw_only=True)
class OffsetDeleteResponse:
    error_code: int = 0
    throttle_time_ms: int = 0
    topics: tuple[OffsetDeleteResponseTopic, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("throttle_time_ms", INT32),
        Field("topics", Array(Struct(OffsetDeleteResponseTopic))),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    # To its flexible v4, whose group states librdkafka needs.
    ApiSpec(ApiKey.LIST_GROUPS, ListGroupsRequest, ListGroupsResponse, 0, 4),
    ApiSpec(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest, DescribeGroupsResponse, 0, 4),
    ApiSpec(ApiKey.DELETE_GROUPS, DeleteGroupsRequest, DeleteGroupsResponse, 0, 1),
    ApiSpec(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, OffsetDeleteResponse, 0, 0),
)
