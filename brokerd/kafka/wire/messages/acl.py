# -*- test-case-name: tests.test_acl_handlers -*-
"""Request and response bodies of CreateAcls (30), DescribeAcls (29) and DeleteAcls (31),
versions 0-3 (flexible from 2; v1 added the resource pattern type, LITERAL at v0).

Transcribed from Kafka's JSON message schemas like the rest of
:mod:`brokerd.kafka.wire.messages`; :data:`APIS` registers them
(:mod:`brokerd.kafka.wire.registry`). Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import INT8, INT16, INT32, STRING, ApiKey, Array, Field, Struct
from brokerd.kafka.wire.schema import ApiSpec

#: The pattern type a v0 request means (v0 has only literal resource names).
LITERAL_PATTERN = 3
ACL_FLEXIBLE_FROM = 2


def _tuple(v: Any) -> Any:
    return None if v is None else tuple(v)


def _arr() -> Any:
    return attrs.field(default=(), converter=_tuple)


# -- CreateAcls (30) ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class AclCreation:
    resource_type: int
    resource_name: str
    resource_pattern_type: int = LITERAL_PATTERN
    principal: str
    host: str
    operation: int
    permission_type: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("resource_pattern_type", INT8, 1),
        Field("principal", STRING),
        Field("host", STRING),
        Field("operation", INT8),
        Field("permission_type", INT8),
    )


@attrs.frozen(kw_only=True)
class CreateAclsRequest:
    creations: tuple[AclCreation, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("creations", Array(Struct(AclCreation))),)


@attrs.frozen(kw_only=True)
class AclCreationResult:
    error_code: int = 0
    error_message: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class CreateAclsResponse:
    throttle_time_ms: int = 0
    results: tuple[AclCreationResult, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Struct(AclCreationResult))),
    )


# -- DescribeAcls (29) -------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DescribeAclsRequest:
    resource_type_filter: int
    resource_name_filter: str | None = None
    pattern_type_filter: int = LITERAL_PATTERN
    principal_filter: str | None = None
    host_filter: str | None = None
    operation: int
    permission_type: int
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resource_type_filter", INT8),
        Field("resource_name_filter", STRING, nullable_from=0),
        Field("pattern_type_filter", INT8, 1),
        Field("principal_filter", STRING, nullable_from=0),
        Field("host_filter", STRING, nullable_from=0),
        Field("operation", INT8),
        Field("permission_type", INT8),
    )


@attrs.frozen(kw_only=True)
class AclDescription:
    principal: str
    host: str
    operation: int
    permission_type: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("principal", STRING),
        Field("host", STRING),
        Field("operation", INT8),
        Field("permission_type", INT8),
    )


@attrs.frozen(kw_only=True)
class DescribeAclsResource:
    resource_type: int
    resource_name: str
    pattern_type: int = LITERAL_PATTERN
    acls: tuple[AclDescription, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("pattern_type", INT8, 1),
        Field("acls", Array(Struct(AclDescription))),
    )


@attrs.frozen(kw_only=True)
class DescribeAclsResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    resources: tuple[DescribeAclsResource, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
        Field("resources", Array(Struct(DescribeAclsResource))),
    )


# -- DeleteAcls (31) ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DeleteAclsFilter:
    resource_type_filter: int
    resource_name_filter: str | None = None
    pattern_type_filter: int = LITERAL_PATTERN
    principal_filter: str | None = None
    host_filter: str | None = None
    operation: int
    permission_type: int
    FIELDS: ClassVar[tuple[Field, ...]] = DescribeAclsRequest.FIELDS


@attrs.frozen(kw_only=True)
class DeleteAclsRequest:
    filters: tuple[DeleteAclsFilter, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("filters", Array(Struct(DeleteAclsFilter))),)


@attrs.frozen(kw_only=True)
class DeleteAclsMatchingAcl:
    error_code: int = 0
    error_message: str | None = None
    resource_type: int
    resource_name: str
    pattern_type: int = LITERAL_PATTERN
    principal: str
    host: str
    operation: int
    permission_type: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("pattern_type", INT8, 1),
        Field("principal", STRING),
        Field("host", STRING),
        Field("operation", INT8),
        Field("permission_type", INT8),
    )


@attrs.frozen(kw_only=True)
class DeleteAclsFilterResult:
    error_code: int = 0
    error_message: str | None = None
    matching_acls: tuple[DeleteAclsMatchingAcl, ...] = _arr()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
        Field("matching_acls", Array(Struct(DeleteAclsMatchingAcl))),
    )


@attrs.frozen(kw_only=True)
class DeleteAclsResponse:
    throttle_time_ms: int = 0
    filter_results: tuple[DeleteAclsFilterResult, ...] = _arr()
    FLEXIBLE_FROM: ClassVar[int | None] = ACL_FLEXIBLE_FROM
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("filter_results", Array(Struct(DeleteAclsFilterResult))),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest, DescribeAclsResponse, 0, 3),
    ApiSpec(ApiKey.CREATE_ACLS, CreateAclsRequest, CreateAclsResponse, 0, 3),
    ApiSpec(ApiKey.DELETE_ACLS, DeleteAclsRequest, DeleteAclsResponse, 0, 3),
)
