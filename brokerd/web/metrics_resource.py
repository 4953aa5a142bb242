# -*- test-case-name: tests.web.test_metrics_resource -*-
"""``/metrics``: the broker's Prometheus registry in the exposition format the scraper
asks for (``Accept``): OpenMetrics when it asks for it, the text format otherwise, as
``prometheus_client`` negotiates it. A ``HEAD`` gets the headers only.

What it does not do: build series (``brokerd.metrics``), or write any format itself.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from twisted.web.resource import Resource
from twisted.web.server import Request

from brokerd.web.scope import ScopeOf


class MetricsResource(Resource):
    """Serves one registry (every collector runs on the reactor thread at scrape time)."""

    isLeaf = True

    def __init__(self, registry: CollectorRegistry, scope_of: ScopeOf | None = None) -> None:
        super().__init__()
        self._registry = registry
        self._scope_of = scope_of

    def render_GET(self, request: Request) -> bytes:
        accept = request.getHeader(b"accept")
        encoder, content_type = choose_encoder(accept.decode("latin-1") if accept else "")
        registry: Any = self._registry
        if self._scope_of is not None:
            # Without the topics and groups the request's principal may not DESCRIBE.
            registry = self._scope_of(request).collector(self._registry)
        body = encoder(registry)
        request.setHeader(b"content-type", content_type.encode())
        request.setHeader(b"cache-control", b"no-store")
        return body


__all__ = ["MetricsResource"]
