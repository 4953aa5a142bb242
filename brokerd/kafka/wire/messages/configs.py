# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of DescribeConfigs (32), AlterConfigs (33) and
IncrementalAlterConfigs (44), and the version range brokerd answers of each (:data:`APIS`,
collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message

# -- DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44) ----------


@wire_message
@attrs.frozen(kw_only=True)
class DescribeConfigsResource:
    resource_type: Annotated[int, Wire(INT8)]
    resource_name: Annotated[str, Wire(STRING)]
    #: None = every config of the resource.
    configuration_keys: Annotated[
        tuple[str, ...] | None,
        Wire(Array(STRING), nullable_from=0),
    ] = array(None)


@wire_message
@attrs.frozen(kw_only=True)
class DescribeConfigsRequest:
    resources: Annotated[
        tuple[DescribeConfigsResource, ...],
        Wire(Array(Struct(DescribeConfigsResource))),
    ] = array()
    include_synonyms: Annotated[bool, Wire(BOOL, 1)] = False
    include_documentation: Annotated[bool, Wire(BOOL, 3)] = False
    FLEXIBLE_FROM: ClassVar[int | None] = 4


@wire_message
@attrs.frozen(kw_only=True)
class DescribeConfigsSynonym:
    name: Annotated[str, Wire(STRING)]
    value: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    source: Annotated[int, Wire(INT8)]


@wire_message
@attrs.frozen(kw_only=True)
class DescribeConfigsResourceResult:
    name: Annotated[str, Wire(STRING)]
    value: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    read_only: Annotated[bool, Wire(BOOL)] = False
    config_source: Annotated[int, Wire(INT8, 1)] = -1
    is_sensitive: Annotated[bool, Wire(BOOL)] = False
    synonyms: Annotated[
        tuple[DescribeConfigsSynonym, ...],
        Wire(Array(Struct(DescribeConfigsSynonym)), 1),
    ] = array()
    config_type: Annotated[int, Wire(INT8, 3)] = 0
    documentation: Annotated[str | None, Wire(STRING, 3, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class DescribeConfigsResult:
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    resource_type: Annotated[int, Wire(INT8)]
    resource_name: Annotated[str, Wire(STRING)]
    configs: Annotated[
        tuple[DescribeConfigsResourceResult, ...],
        Wire(Array(Struct(DescribeConfigsResourceResult))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class DescribeConfigsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    results: Annotated[
        tuple[DescribeConfigsResult, ...],
        Wire(Array(Struct(DescribeConfigsResult))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 4


@wire_message
@attrs.frozen(kw_only=True)
class AlterableConfig:
    name: Annotated[str, Wire(STRING)]
    value: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class AlterConfigsResource:
    resource_type: Annotated[int, Wire(INT8)]
    resource_name: Annotated[str, Wire(STRING)]
    configs: Annotated[tuple[AlterableConfig, ...], Wire(Array(Struct(AlterableConfig)))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class AlterConfigsRequest:
    resources: Annotated[
        tuple[AlterConfigsResource, ...],
        Wire(Array(Struct(AlterConfigsResource))),
    ] = array()
    validate_only: Annotated[bool, Wire(BOOL)] = False
    FLEXIBLE_FROM: ClassVar[int | None] = 2


@wire_message
@attrs.frozen(kw_only=True)
class AlterConfigsResourceResponse:
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    resource_type: Annotated[int, Wire(INT8)]
    resource_name: Annotated[str, Wire(STRING)]


@wire_message
@attrs.frozen(kw_only=True)
class AlterConfigsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    responses: Annotated[
        tuple[AlterConfigsResourceResponse, ...],
        Wire(Array(Struct(AlterConfigsResourceResponse))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 2


@wire_message
@attrs.frozen(kw_only=True)
class IncrementalAlterableConfig:
    name: Annotated[str, Wire(STRING)]
    config_operation: Annotated[int, Wire(INT8)]
    value: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsResource:
    resource_type: Annotated[int, Wire(INT8)]
    resource_name: Annotated[str, Wire(STRING)]
    configs: Annotated[
        tuple[IncrementalAlterableConfig, ...],
        Wire(Array(Struct(IncrementalAlterableConfig))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsRequest:
    resources: Annotated[
        tuple[IncrementalAlterConfigsResource, ...],
        Wire(Array(Struct(IncrementalAlterConfigsResource))),
    ] = array()
    validate_only: Annotated[bool, Wire(BOOL)] = False
    FLEXIBLE_FROM: ClassVar[int | None] = 1


@wire_message
@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsResponse:
    """AlterConfigs' layout, flexible one version earlier (so a class of its own)."""

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    responses: Annotated[
        tuple[AlterConfigsResourceResponse, ...],
        Wire(Array(Struct(AlterConfigsResourceResponse))),
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 1


# v0 (the IsDefault flag instead of the config source) was removed in Kafka 4.0.
DESCRIBE_CONFIGS = ApiSpec(
    ApiKey.DESCRIBE_CONFIGS,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    1,
    4,
)
ALTER_CONFIGS = ApiSpec(ApiKey.ALTER_CONFIGS, AlterConfigsRequest, AlterConfigsResponse, 0, 2)
INCREMENTAL_ALTER_CONFIGS = ApiSpec(
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    0,
    1,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS)
