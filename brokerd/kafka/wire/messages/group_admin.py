# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of the group admin APIs: ListGroups (16), DescribeGroups (15),
DeleteGroups (42) and OffsetDelete (47), and the version range brokerd answers of each
(:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    BYTES,
    INT16,
    INT32,
    STRING,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ApiSpec,
    Wire,
    array,
    wire_message,
)

# -- Group admin: ListGroups (16), DescribeGroups (15), DeleteGroups (42),
# -- OffsetDelete (47) ----------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class ListGroupsRequest:
    #: v4+: list only groups in these states (case-insensitive); empty = every group.
    states_filter: Annotated[tuple[str, ...], Wire(Array(STRING), 4)] = array()
    #: v5+: list only groups of these types (case-insensitive: "classic", "consumer",
    #: "share", "streams"); empty = every type.
    types_filter: Annotated[tuple[str, ...], Wire(Array(STRING), 5)] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 3


@wire_message
@attrs.frozen(kw_only=True)
class ListedGroup:
    group_id: Annotated[str, Wire(STRING)]
    protocol_type: Annotated[str, Wire(STRING)] = ""
    group_state: Annotated[str, Wire(STRING, 4)] = ""
    #: v5+: "classic" for every brokerd group.
    group_type: Annotated[str, Wire(STRING, 5)] = ""


@wire_message
@attrs.frozen(kw_only=True)
class ListGroupsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    groups: Annotated[tuple[ListedGroup, ...], Wire(Array(Struct(ListedGroup)))] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 3


@wire_message
@attrs.frozen(kw_only=True)
class DescribeGroupsRequest:
    groups: Annotated[tuple[str, ...], Wire(Array(STRING))] = array()
    include_authorized_operations: Annotated[bool, Wire(BOOL, 3)] = False
    FLEXIBLE_FROM: ClassVar[int | None] = 5


@wire_message
@attrs.frozen(kw_only=True)
class DescribedGroupMember:
    member_id: Annotated[str, Wire(STRING)]
    group_instance_id: Annotated[str | None, Wire(STRING, 4, nullable_from=4)] = None
    client_id: Annotated[str, Wire(STRING)] = ""
    client_host: Annotated[str, Wire(STRING)] = ""
    member_metadata: Annotated[bytes, Wire(BYTES)] = b""
    member_assignment: Annotated[bytes, Wire(BYTES)] = b""


@wire_message
@attrs.frozen(kw_only=True)
class DescribedGroup:
    error_code: Annotated[int, Wire(INT16)] = 0
    #: v6+: why the group could not be described (e.g. GROUP_ID_NOT_FOUND).
    error_message: Annotated[str | None, Wire(STRING, 6, nullable_from=6)] = None
    group_id: Annotated[str, Wire(STRING)]
    group_state: Annotated[str, Wire(STRING)] = ""
    protocol_type: Annotated[str, Wire(STRING)] = ""
    protocol_data: Annotated[str, Wire(STRING)] = ""
    members: Annotated[
        tuple[DescribedGroupMember, ...],
        Wire(Array(Struct(DescribedGroupMember))),
    ] = array()
    authorized_operations: Annotated[int, Wire(INT32, 3)] = AUTHORIZED_OPERATIONS_OMITTED


@wire_message
@attrs.frozen(kw_only=True)
class DescribeGroupsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    groups: Annotated[tuple[DescribedGroup, ...], Wire(Array(Struct(DescribedGroup)))] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 5


@wire_message
@attrs.frozen(kw_only=True)
class DeleteGroupsRequest:
    groups_names: Annotated[tuple[str, ...], Wire(Array(STRING))] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 2


@wire_message
@attrs.frozen(kw_only=True)
class DeletableGroupResult:
    group_id: Annotated[str, Wire(STRING)]
    error_code: Annotated[int, Wire(INT16)] = 0
    #: v3+: why the group was not deleted (None when it was).
    error_message: Annotated[str | None, Wire(STRING, 3, nullable_from=3)] = None


@wire_message
@attrs.frozen(kw_only=True)
class DeleteGroupsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    results: Annotated[
        tuple[DeletableGroupResult, ...],
        Wire(Array(Struct(DeletableGroupResult))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 2


@wire_message
@attrs.frozen(kw_only=True)
class OffsetDeleteRequestTopic:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()
    # Kafka's schema nests {PartitionIndex}; one int32 per element is the same bytes.


@wire_message
@attrs.frozen(kw_only=True)
class OffsetDeleteRequest:
    group_id: Annotated[str, Wire(STRING)]
    topics: Annotated[
        tuple[OffsetDeleteRequestTopic, ...],
        Wire(Array(Struct(OffsetDeleteRequestTopic))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetDeleteResponsePartition:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class OffsetDeleteResponseTopic:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[OffsetDeleteResponsePartition, ...],
        Wire(Array(Struct(OffsetDeleteResponsePartition))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OffsetDeleteResponse:
    error_code: Annotated[int, Wire(INT16)] = 0
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    topics: Annotated[
        tuple[OffsetDeleteResponseTopic, ...],
        Wire(Array(Struct(OffsetDeleteResponseTopic))),
    ] = array()


LIST_GROUPS = ApiSpec(ApiKey.LIST_GROUPS, ListGroupsRequest, ListGroupsResponse, 0, 5)
DESCRIBE_GROUPS = ApiSpec(
    ApiKey.DESCRIBE_GROUPS,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    0,
    6,
)
DELETE_GROUPS = ApiSpec(ApiKey.DELETE_GROUPS, DeleteGroupsRequest, DeleteGroupsResponse, 0, 3)
OFFSET_DELETE = ApiSpec(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, OffsetDeleteResponse, 0, 0)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS, OFFSET_DELETE)
