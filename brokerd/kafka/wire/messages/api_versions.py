# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of ApiVersions (18), and the version range brokerd answers of
each (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    INT16,
    INT32,
    STRING,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.features import api_versions_tags
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message

# -- ApiVersions (18) ----------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class ApiVersionsRequest:
    r"""v0-2 have no fields; v3 (the first flexible version) names the client software
    (Kafka refuses a name or version outside ``[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?``);
    v4 changes only what the response's tagged SupportedFeatures may hold; v5 (KIP-1242)
    names the cluster and node the client means to reach, so that a connection that landed
    on another broker (an address reused after a restart elsewhere) is told to bootstrap
    again instead of being served another cluster's metadata."""

    FLEXIBLE_FROM: ClassVar[int | None] = 3

    client_software_name: Annotated[str, Wire(STRING, 3)] = ""
    client_software_version: Annotated[str, Wire(STRING, 3)] = ""
    cluster_id: Annotated[str | None, Wire(STRING, 5, nullable_from=5)] = None
    node_id: Annotated[int, Wire(INT32, 5)] = -1


@wire_message
@attrs.frozen(kw_only=True)
class ApiVersionRange:
    api_key: Annotated[int, Wire(INT16)]
    min_version: Annotated[int, Wire(INT16)]
    max_version: Annotated[int, Wire(INT16)]


@wire_message
@attrs.frozen(kw_only=True)
class ApiVersionsResponse:
    """v3+'s tagged SupportedFeatures, FinalizedFeaturesEpoch and FinalizedFeatures
    announce ``share.version`` (:mod:`brokerd.kafka.wire.features`); ZkMigrationReady is
    left out (false). The response header is always v0 (``apis.response_header_flexible``)."""

    FLEXIBLE_FROM: ClassVar[int | None] = 3
    TAGGED_FIELDS: ClassVar[Callable[[int], Sequence[tuple[int, bytes]]]] = staticmethod(
        api_versions_tags
    )

    error_code: Annotated[int, Wire(INT16)] = 0
    api_keys: Annotated[tuple[ApiVersionRange, ...], Wire(Array(Struct(ApiVersionRange)))] = array()
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0


API_VERSIONS = ApiSpec(ApiKey.API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse, 0, 5)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (API_VERSIONS,)
