# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of ApiVersions (18), and the version range brokerd answers of
each (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated

import attrs

from brokerd.kafka.wire.codec import (
    INT16,
    INT32,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message

# -- ApiVersions (18) ----------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class ApiVersionsRequest:
    """No fields at the versions brokerd answers (v3 adds the client's name)."""


@wire_message
@attrs.frozen(kw_only=True)
class ApiVersionRange:
    api_key: Annotated[int, Wire(INT16)]
    min_version: Annotated[int, Wire(INT16)]
    max_version: Annotated[int, Wire(INT16)]


@wire_message
@attrs.frozen(kw_only=True)
class ApiVersionsResponse:
    error_code: Annotated[int, Wire(INT16)] = 0
    api_keys: Annotated[tuple[ApiVersionRange, ...], Wire(Array(Struct(ApiVersionRange)))] = array()
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse, 0, 2),
)
