# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of DescribeCluster (60), and the version range brokerd
answers (:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Every version is flexible. Pure: no I/O, no Twisted,
no broker logic.
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
from brokerd.kafka.wire.schema import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ApiSpec,
    Wire,
    array,
    wire_message,
)

#: DescribeCluster's ``endpoint_type`` (v1+): the brokers, or the KRaft controllers.
ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2


@wire_message
@attrs.frozen(kw_only=True)
class DescribeClusterRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    include_cluster_authorized_operations: Annotated[bool, Wire(BOOL)] = False
    endpoint_type: Annotated[int, Wire(INT8, 1)] = ENDPOINT_BROKERS
    include_fenced_brokers: Annotated[bool, Wire(BOOL, 2)] = False


@wire_message
@attrs.frozen(kw_only=True)
class DescribeClusterBroker:
    broker_id: Annotated[int, Wire(INT32)]
    host: Annotated[str, Wire(STRING)]
    port: Annotated[int, Wire(INT32)]
    rack: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    is_fenced: Annotated[bool, Wire(BOOL, 2)] = False


@wire_message
@attrs.frozen(kw_only=True)
class DescribeClusterResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    endpoint_type: Annotated[int, Wire(INT8, 1)] = ENDPOINT_BROKERS
    cluster_id: Annotated[str, Wire(STRING)] = ""
    controller_id: Annotated[int, Wire(INT32)] = -1
    brokers: Annotated[
        tuple[DescribeClusterBroker, ...], Wire(Array(Struct(DescribeClusterBroker)))
    ] = array()
    cluster_authorized_operations: Annotated[int, Wire(INT32)] = AUTHORIZED_OPERATIONS_OMITTED


DESCRIBE_CLUSTER = ApiSpec(
    ApiKey.DESCRIBE_CLUSTER,
    DescribeClusterRequest,
    DescribeClusterResponse,
    0,
    2,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (DESCRIBE_CLUSTER,)
