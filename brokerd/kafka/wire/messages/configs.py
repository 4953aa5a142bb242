# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of DescribeConfigs (32), AlterConfigs (33) and
IncrementalAlterConfigs (44), and the version range brokerd answers of each (:data:`APIS`,
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
    INT8,
    INT16,
    INT32,
    STRING,
    ApiKey,
    Array,
    Field,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, array

# -- DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44) ----------


@attrs.frozen(kw_only=True)
class DescribeConfigsResource:
    resource_type: int
    resource_name: str
    #: None = every config of the resource.
    configuration_keys: tuple[str, ...] | None = array(None)
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("configuration_keys", Array(STRING), nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsRequest:
    resources: tuple[DescribeConfigsResource, ...] = array()
    include_synonyms: bool = False
    include_documentation: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resources", Array(Struct(DescribeConfigsResource))),
        Field("include_synonyms", BOOL, 1),
        Field("include_documentation", BOOL, 3),
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsSynonym:
    name: str
    value: str | None = None
    source: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("value", STRING, nullable_from=0),
        Field("source", INT8),
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsResourceResult:
    name: str
    value: str | None = None
    read_only: bool = False
    #: v0 only (v1+ carry ``config_source`` instead).
    is_default: bool = False
    config_source: int = -1
    is_sensitive: bool = False
    synonyms: tuple[DescribeConfigsSynonym, ...] = array()
    config_type: int = 0
    documentation: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("value", STRING, nullable_from=0),
        Field("read_only", BOOL),
        Field("is_default", BOOL, 0, 0),
        Field("config_source", INT8, 1),
        Field("is_sensitive", BOOL),
        Field("synonyms", Array(Struct(DescribeConfigsSynonym)), 1),
        Field("config_type", INT8, 3),
        Field("documentation", STRING, 3, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsResult:
    error_code: int = 0
    error_message: str | None = None
    resource_type: int
    resource_name: str
    configs: tuple[DescribeConfigsResourceResult, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("configs", Array(Struct(DescribeConfigsResourceResult))),
    )


@attrs.frozen(kw_only=True)
class DescribeConfigsResponse:
    throttle_time_ms: int = 0
    results: tuple[DescribeConfigsResult, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Struct(DescribeConfigsResult))),
    )


@attrs.frozen(kw_only=True)
class AlterableConfig:
    name: str
    value: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("value", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("configs", Array(Struct(AlterableConfig))),
    )


@attrs.frozen(kw_only=True)
class AlterConfigsRequest:
    resources: tuple[AlterConfigsResource, ...] = array()
    validate_only: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resources", Array(Struct(AlterConfigsResource))),
        Field("validate_only", BOOL),
    )


@attrs.frozen(kw_only=True)
class AlterConfigsResourceResponse:
    error_code: int = 0
    error_message: str | None = None
    resource_type: int
    resource_name: str
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable_from=0),
        Field("resource_type", INT8),
        Field("resource_name", STRING),
    )


@attrs.frozen(kw_only=True)
class AlterConfigsResponse:
    """The answer to AlterConfigs and to IncrementalAlterConfigs (same layout)."""

    throttle_time_ms: int = 0
    responses: tuple[AlterConfigsResourceResponse, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32),
        Field("responses", Array(Struct(AlterConfigsResourceResponse))),
    )


@attrs.frozen(kw_only=True)
class IncrementalAlterableConfig:
    name: str
    config_operation: int
    value: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("config_operation", INT8),
        Field("value", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[IncrementalAlterableConfig, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("configs", Array(Struct(IncrementalAlterableConfig))),
    )


@attrs.frozen(kw_only=True)
class IncrementalAlterConfigsRequest:
    resources: tuple[IncrementalAlterConfigsResource, ...] = array()
    validate_only: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resources", Array(Struct(IncrementalAlterConfigsResource))),
        Field("validate_only", BOOL),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, DescribeConfigsResponse, 0, 3),
    ApiSpec(ApiKey.ALTER_CONFIGS, AlterConfigsRequest, AlterConfigsResponse, 0, 1),
    ApiSpec(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        IncrementalAlterConfigsRequest,
        AlterConfigsResponse,
        0,
        0,
    ),
)
