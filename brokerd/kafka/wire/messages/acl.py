# -*- test-case-name: tests.kafka.wire.messages.test_acl, tests.kafka.server.handlers.test_acl -*-
"""Request and response bodies of CreateAcls (30), DescribeAcls (29) and DeleteAcls (31),
versions 1-3 (flexible from 2; v3 adds the USER resource type). Kafka 4.0 removed v0,
which had no resource pattern type; the pattern fields keep their v1 start so the
layouts read as Kafka's schemas declare them.

Transcribed from Kafka's JSON message schemas like the rest of
:mod:`brokerd.kafka.wire.messages`; :data:`APIS` registers them
(:mod:`brokerd.kafka.wire.requests.registry`). Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import INT8, INT16, INT32, STRING, ApiKey, Array, Struct
from brokerd.kafka.wire.schema import ApiSpec, Wire, wire_message

#: The pattern type's default (Kafka's schemas: literal resource names).
LITERAL_PATTERN = 3
ACL_FLEXIBLE_FROM = 2


def _tuple(v: Any) -> Any:
    return None if v is None else tuple(v)


def _arr() -> Any:
    return attrs.field(default=(), converter=_tuple)


# -- CreateAcls (30) ---------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class AclCreation:
    resource_type: Annotated[int, Wire(INT8)]
    resource_name: Annotated[str, Wire(STRING)]
    resource_pattern_type: Annotated[int, Wire(INT8, 1)] = LITERAL_PATTERN
    principal: Annotated[str, Wire(STRING)]
    host: Annotated[str, Wire(STRING)]
    operation: Annotated[int, Wire(INT8)]
    permission_type: Annotated[int, Wire(INT8)]


@wire_message
@attrs.frozen(kw_only=True)
class CreateAclsRequest:
    creations: Annotated[tuple[AclCreation, ...], Wire(Array(Struct(AclCreation)))] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM


@wire_message
@attrs.frozen(kw_only=True)
class AclCreationResult:
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class CreateAclsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    results: Annotated[
        tuple[AclCreationResult, ...],
        Wire(Array(Struct(AclCreationResult))),
    ] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM


# -- DescribeAcls (29) -------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class DescribeAclsRequest:
    resource_type_filter: Annotated[int, Wire(INT8)]
    resource_name_filter: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    pattern_type_filter: Annotated[int, Wire(INT8, 1)] = LITERAL_PATTERN
    principal_filter: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    host_filter: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    operation: Annotated[int, Wire(INT8)]
    permission_type: Annotated[int, Wire(INT8)]
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM


@wire_message
@attrs.frozen(kw_only=True)
class AclDescription:
    principal: Annotated[str, Wire(STRING)]
    host: Annotated[str, Wire(STRING)]
    operation: Annotated[int, Wire(INT8)]
    permission_type: Annotated[int, Wire(INT8)]


@wire_message
@attrs.frozen(kw_only=True)
class DescribeAclsResource:
    resource_type: Annotated[int, Wire(INT8)]
    resource_name: Annotated[str, Wire(STRING)]
    pattern_type: Annotated[int, Wire(INT8, 1)] = LITERAL_PATTERN
    acls: Annotated[tuple[AclDescription, ...], Wire(Array(Struct(AclDescription)))] = _arr()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeAclsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    resources: Annotated[
        tuple[DescribeAclsResource, ...],
        Wire(Array(Struct(DescribeAclsResource))),
    ] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM


# -- DeleteAcls (31) ---------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class DeleteAclsFilter:
    """One filter of DeleteAcls: the layout of a DescribeAcls request."""

    resource_type_filter: Annotated[int, Wire(INT8)]
    resource_name_filter: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    pattern_type_filter: Annotated[int, Wire(INT8, 1)] = LITERAL_PATTERN
    principal_filter: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    host_filter: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    operation: Annotated[int, Wire(INT8)]
    permission_type: Annotated[int, Wire(INT8)]


@wire_message
@attrs.frozen(kw_only=True)
class DeleteAclsRequest:
    filters: Annotated[tuple[DeleteAclsFilter, ...], Wire(Array(Struct(DeleteAclsFilter)))] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM


@wire_message
@attrs.frozen(kw_only=True)
class DeleteAclsMatchingAcl:
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    resource_type: Annotated[int, Wire(INT8)]
    resource_name: Annotated[str, Wire(STRING)]
    pattern_type: Annotated[int, Wire(INT8, 1)] = LITERAL_PATTERN
    principal: Annotated[str, Wire(STRING)]
    host: Annotated[str, Wire(STRING)]
    operation: Annotated[int, Wire(INT8)]
    permission_type: Annotated[int, Wire(INT8)]


@wire_message
@attrs.frozen(kw_only=True)
class DeleteAclsFilterResult:
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    matching_acls: Annotated[
        tuple[DeleteAclsMatchingAcl, ...],
        Wire(Array(Struct(DeleteAclsMatchingAcl))),
    ] = _arr()


@wire_message
@attrs.frozen(kw_only=True)
class DeleteAclsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    filter_results: Annotated[
        tuple[DeleteAclsFilterResult, ...],
        Wire(Array(Struct(DeleteAclsFilterResult))),
    ] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM


DESCRIBE_ACLS = ApiSpec(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest, DescribeAclsResponse, 1, 3)
CREATE_ACLS = ApiSpec(ApiKey.CREATE_ACLS, CreateAclsRequest, CreateAclsResponse, 1, 3)
DELETE_ACLS = ApiSpec(ApiKey.DELETE_ACLS, DeleteAclsRequest, DeleteAclsResponse, 1, 3)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS)
