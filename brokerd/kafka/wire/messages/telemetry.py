# -*- test-case-name: tests.kafka.server.handlers.test_telemetry -*-
"""Request and response bodies of GetTelemetrySubscriptions (71), PushTelemetry (72) and
ListConfigResources (74), and the version range brokerd answers of each (:data:`APIS`,
collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    STRING,
    UUID,
    ZERO_UUID,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message

# -- GetTelemetrySubscriptions (71) ----------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class GetTelemetrySubscriptionsRequest:
    #: Zero on a client's first request: the broker assigns one.
    client_instance_id: Annotated[uuid.UUID, Wire(UUID)] = ZERO_UUID
    FLEXIBLE_FROM: ClassVar[int | None] = 0


@wire_message
@attrs.frozen(kw_only=True)
class GetTelemetrySubscriptionsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    client_instance_id: Annotated[uuid.UUID, Wire(UUID)] = ZERO_UUID
    subscription_id: Annotated[int, Wire(INT32)] = 0
    accepted_compression_types: Annotated[tuple[int, ...], Wire(Array(INT8))] = array()
    push_interval_ms: Annotated[int, Wire(INT32)] = 0
    telemetry_max_bytes: Annotated[int, Wire(INT32)] = 0
    delta_temporality: Annotated[bool, Wire(BOOL)] = False
    #: Empty: nothing subscribed; one empty string: every metric.
    requested_metrics: Annotated[tuple[str, ...], Wire(Array(STRING))] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 0


# -- PushTelemetry (72) ----------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class PushTelemetryRequest:
    client_instance_id: Annotated[uuid.UUID, Wire(UUID)] = ZERO_UUID
    subscription_id: Annotated[int, Wire(INT32)] = 0
    terminating: Annotated[bool, Wire(BOOL)] = False
    compression_type: Annotated[int, Wire(INT8)] = 0
    #: OpenTelemetry ``MetricsData`` (protobuf), compressed by ``compression_type``.
    metrics: Annotated[bytes, Wire(BYTES)] = b""
    FLEXIBLE_FROM: ClassVar[int | None] = 0


@wire_message
@attrs.frozen(kw_only=True)
class PushTelemetryResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    FLEXIBLE_FROM: ClassVar[int | None] = 0


# -- ListConfigResources (74) ----------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class ListConfigResourcesRequest:
    #: v1+: the config resource types wanted; empty: every type the broker has.
    #: v0 lists client-metrics resources only.
    resource_types: Annotated[tuple[int, ...], Wire(Array(INT8), 1)] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 0


@wire_message
@attrs.frozen(kw_only=True)
class ListedConfigResource:
    resource_name: Annotated[str, Wire(STRING)]
    resource_type: Annotated[int, Wire(INT8, 1)] = 16


@wire_message
@attrs.frozen(kw_only=True)
class ListConfigResourcesResponse:
    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    config_resources: Annotated[
        tuple[ListedConfigResource, ...], Wire(Array(Struct(ListedConfigResource)))
    ] = array()
    FLEXIBLE_FROM: ClassVar[int | None] = 0


GET_TELEMETRY_SUBSCRIPTIONS = ApiSpec(
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    0,
    0,
)
PUSH_TELEMETRY = ApiSpec(ApiKey.PUSH_TELEMETRY, PushTelemetryRequest, PushTelemetryResponse, 0, 0)
LIST_CONFIG_RESOURCES = ApiSpec(
    ApiKey.LIST_CONFIG_RESOURCES, ListConfigResourcesRequest, ListConfigResourcesResponse, 0, 1
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (
    GET_TELEMETRY_SUBSCRIPTIONS,
    PUSH_TELEMETRY,
    LIST_CONFIG_RESOURCES,
)
