# -*- test-case-name: tests.kafka.server.handlers.test_telemetry -*-
"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71) and PushTelemetry (72),
and ListConfigResources (74), which lists the client-metrics resources and (v1+) the
broker's other config resources.

The rules of subscriptions and pushes are :mod:`brokerd.kafka.telemetry.clients`'; this
module gives them what the connection knows of the client (its client id, the software
name and version of its ApiVersions request, its address and port) and turns their
refusals into error codes. Neither telemetry API is ACL-checked, as in Kafka (any
connected client may push its own metrics); ListConfigResources needs DESCRIBE_CONFIGS
on the cluster.

ListConfigResources v0 lists the client-metrics resources; v1 lists the types asked
for, or when none, every type brokerd has configs of: topics (2), the broker (4, its
node id), client-metrics resources (16) and the groups that have config overrides
(32). A type brokerd has no configs of (the broker loggers, 8) is INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Callable

from brokerd.core.api import CoreApi
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.acl_gate import CLUSTER_DENIED, Access, Gate, answer_now
from brokerd.kafka.server.handler_base import BrokerIdentity, RequestContext
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.telemetry.clients import ClientTelemetry, ConnectionFacts, TelemetryError
from brokerd.kafka.wire.messages.telemetry import (
    GET_TELEMETRY_SUBSCRIPTIONS,
    LIST_CONFIG_RESOURCES,
    PUSH_TELEMETRY,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
    ListedConfigResource,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import Operation

TOPIC = 2
BROKER = 4
CLIENT_METRICS = 16
GROUP = 32
#: What ListConfigResources v1 lists when no type is asked for.
LISTED_TYPES = (TOPIC, BROKER, CLIENT_METRICS, GROUP)


def connection_facts(
    conn: RequestContext,
    req: Request[GetTelemetrySubscriptionsRequest] | Request[PushTelemetryRequest],
) -> ConnectionFacts:
    name, version = conn.client_software
    return ConnectionFacts(
        client_id=req.header.client_id or "",
        software_name=name,
        software_version=version,
        address=conn.client_host.lstrip("/"),
        port=conn.client_port,
    )


class TelemetryHandlers:
    """The telemetry APIs over one broker's client instances.

    :param configured_groups: the groups with config overrides.
    """

    def __init__(
        self,
        core: CoreApi,
        identity: BrokerIdentity,
        telemetry: ClientTelemetry,
        *,
        configured_groups: Callable[[], list[str]] = list,
    ) -> None:
        self._core = core
        self._id = identity
        self._telemetry = telemetry
        self._groups = configured_groups

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(GET_TELEMETRY_SUBSCRIPTIONS, self.get_subscriptions, subscriptions_rule),
            route(PUSH_TELEMETRY, self.push, push_rule),
            route(LIST_CONFIG_RESOURCES, self.list_config_resources, list_rule),
        )

    async def get_subscriptions(
        self, conn: RequestContext, req: Request[GetTelemetrySubscriptionsRequest]
    ) -> GetTelemetrySubscriptionsResponse:
        body = req.body
        try:
            sub = self._telemetry.get_subscriptions(
                body.client_instance_id, connection_facts(conn, req)
            )
        except TelemetryError as e:
            return GetTelemetrySubscriptionsResponse(error_code=e.code)
        return GetTelemetrySubscriptionsResponse(
            client_instance_id=sub.instance_id,
            subscription_id=sub.subscription_id,
            accepted_compression_types=sub.accepted_compression,
            push_interval_ms=sub.push_interval_ms,
            telemetry_max_bytes=sub.telemetry_max_bytes,
            delta_temporality=True,
            requested_metrics=sub.requested_metrics,
        )

    async def push(
        self, conn: RequestContext, req: Request[PushTelemetryRequest]
    ) -> PushTelemetryResponse:
        body = req.body
        try:
            await self._telemetry.push(
                body.client_instance_id,
                body.subscription_id,
                terminating=body.terminating,
                compression=body.compression_type,
                metrics=body.metrics or b"",
                facts=connection_facts(conn, req),
            )
        except TelemetryError as e:
            return PushTelemetryResponse(error_code=e.code)
        return PushTelemetryResponse()

    async def list_config_resources(
        self, conn: RequestContext, req: Request[ListConfigResourcesRequest]
    ) -> ListConfigResourcesResponse:
        body = req.body
        if req.api_version == 0:
            wanted: tuple[int, ...] = (CLIENT_METRICS,)
        else:
            wanted = tuple(dict.fromkeys(body.resource_types)) or LISTED_TYPES
        unknown = [t for t in wanted if t not in LISTED_TYPES]
        if unknown:
            return ListConfigResourcesResponse(error_code=ErrorCode.INVALID_REQUEST)
        out: list[ListedConfigResource] = []
        for rtype in wanted:
            out.extend(
                ListedConfigResource(resource_name=name, resource_type=rtype)
                for name in self._names(rtype)
            )
        return ListConfigResourcesResponse(config_resources=tuple(out))

    def _names(self, rtype: int) -> list[str]:
        if rtype == TOPIC:
            return sorted(self._core.topic_registry.topics())
        if rtype == BROKER:
            return [str(self._id.node_id)]
        if rtype == GROUP:
            return self._groups()
        return self._telemetry.resources.names()


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


def subscriptions_rule(
    access: Access, req: Request[GetTelemetrySubscriptionsRequest]
) -> Gate[GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse]:
    """Kafka checks nothing: a client asks for its own subscription."""
    return Gate(req)


def push_rule(
    access: Access, req: Request[PushTelemetryRequest]
) -> Gate[PushTelemetryRequest, PushTelemetryResponse]:
    """Kafka checks nothing: a client pushes its own metrics."""
    return Gate(req)


def list_rule(
    access: Access, req: Request[ListConfigResourcesRequest]
) -> Gate[ListConfigResourcesRequest, ListConfigResourcesResponse]:
    if access.cluster(Operation.DESCRIBE_CONFIGS):
        return Gate(req)
    return answer_now(req, ListConfigResourcesResponse(error_code=CLUSTER_DENIED))


__all__ = ["TelemetryHandlers"]
