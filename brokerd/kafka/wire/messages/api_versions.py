# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of ApiVersions (18), and the version range brokerd answers of
each (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    INT16,
    INT32,
    ApiKey,
    Array,
    Field,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, array

# -- ApiVersions (18) ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ApiVersionsRequest:
    FIELDS: ClassVar[tuple[Field, ...]] = ()


@attrs.frozen(kw_only=True)
class ApiVersionRange:
    api_key: int
    min_version: int
    max_version: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("api_key", INT16),
        Field("min_version", INT16),
        Field("max_version", INT16),
    )


@attrs.frozen(kw_only=True)
class ApiVersionsResponse:
    error_code: int = 0
    api_keys: tuple[ApiVersionRange, ...] = array()
    throttle_time_ms: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("error_code", INT16),
        Field("api_keys", Array(Struct(ApiVersionRange))),
        Field("throttle_time_ms", INT32, 1),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse, 0, 2),
)
