# -*- test-case-name: tests.kafka.server.handlers.test_acl -*-
"""One API as the dispatch sees it: its key, its handler and its ACL rule.

Every handler module under ``brokerd/kafka/server/handlers/`` gives its APIs as
:class:`Route` values (its ``routes()``), each handler with the rule that guards it, so
an API's answer and its access check sit side by side; the dispatch
(:class:`~brokerd.kafka.listener.dispatch.KafkaHandlers`) collects them. Pure data.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from brokerd.kafka.server.acl_gate import Rule
from brokerd.kafka.server.handler_base import Handler
from brokerd.kafka.wire.codec import ApiKey


@attrs.frozen
class Route:
    """``key`` is answered by ``handle`` behind ``rule``. ``rule`` None: every connection
    may use the API unchecked (only ApiVersions: a client asks it before anything else)."""

    key: ApiKey
    handle: Handler
    rule: Rule | None


def route_table(routes: Iterable[Route]) -> dict[ApiKey, Route]:
    """The routes by key; an API routed twice is a bug, refused here."""
    table: dict[ApiKey, Route] = {}
    for route in routes:
        if route.key in table:
            raise ValueError(f"{route.key.name} is routed twice")
        table[route.key] = route
    return table


__all__ = ["Route", "route_table"]
