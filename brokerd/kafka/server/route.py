# -*- test-case-name: tests.kafka.server.handlers.test_acl -*-
"""One API as the dispatch sees it: its key, its handler and its ACL rule.

Every handler module under ``brokerd/kafka/server/handlers/`` gives its APIs as
:class:`Route` values (its ``routes()``), each handler with the rule that guards it, so
an API's answer and its access check sit side by side; the dispatch
(:class:`~brokerd.kafka.listener.dispatch.KafkaHandlers`) collects them. Pure data.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, TypeVar

import attrs

from brokerd.kafka.server.acl_gate import Rule
from brokerd.kafka.server.handler_base import Handler
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.schema import ApiSpec

#: The API's request and response message classes.
Q = TypeVar("Q")
P = TypeVar("P")


@attrs.frozen
class Route(Generic[Q, P]):
    """``spec``'s API is answered by ``handle`` behind ``rule``. ``rule`` None: every
    connection may use the API unchecked (only ApiVersions: a client asks it before
    anything else).

    The handler and the rule are typed by the spec's request and response classes, so
    ``Route(CREATE_TOPICS, self.create_topics, rule)`` does not type-check unless the
    handler takes a ``Request[CreateTopicsRequest]`` and answers a
    ``CreateTopicsResponse`` (or an :class:`~brokerd.kafka.server.handler_base.Outcome`).
    """

    spec: ApiSpec[Q, P]
    handle: Handler[Q, P]
    rule: Rule[Q, P] | None

    @property
    def key(self) -> ApiKey:
        return self.spec.key


#: A route of any API: what the dispatch's table holds (each typed where it is built).
AnyRoute = Route[Any, Any]


def route(spec: ApiSpec[Q, P], handle: Handler[Q, P], rule: Rule[Q, P] | None) -> AnyRoute:
    """``spec``'s API answered by ``handle`` behind ``rule``, checked against the spec's
    classes. Handler modules build their routes with it rather than with :class:`Route`
    itself: its result type does not name the classes, so mypy infers them from ``spec``
    alone (a ``Route(...)`` written where a ``Route[Any, Any]`` is expected would take
    its classes from that expectation and check nothing)."""
    return Route(spec, handle, rule)


def route_table(routes: Iterable[AnyRoute]) -> dict[ApiKey, AnyRoute]:
    """The routes by key; an API routed twice is a bug, refused here."""
    table: dict[ApiKey, AnyRoute] = {}
    for route in routes:
        if route.key in table:
            raise ValueError(f"{route.key.name} is routed twice")
        table[route.key] = route
    return table


__all__ = ["AnyRoute", "Route", "route", "route_table"]
