"""The web console: read-only, server-rendered HTML pages of topics and consumer groups.

A first version: one page listing topics and groups. (Being extended with per-topic and
per-group pages, rates, lag charts and live refresh.)
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from twisted.internet.interfaces import IReactorTime
from twisted.web.resource import Resource
from twisted.web.server import Request

from brokerd.admin.inspect import Inspector


class _Overview(Resource):
    """``/``; the site adds ``/metrics`` and the health checks as its children."""

    def __init__(self, inspector: Inspector, settings: Mapping[str, str]) -> None:
        super().__init__()
        self._inspector = inspector
        self._settings = settings

    def getChild(self, path: bytes, request: Request) -> Resource:
        if path == b"":
            return self
        return super().getChild(path, request)

    def render_GET(self, request: Request) -> bytes:
        rows = "".join(
            f"<tr><td>{escape(t.name)}</td><td>{len(t.partitions)}</td>"
            f"<td>{t.records}</td><td>{t.size_bytes}</td></tr>"
            for t in self._inspector.topics()
        )
        groups = "".join(
            f"<tr><td>{escape(g.group_id)}</td><td>{escape(g.state)}</td>"
            f"<td>{len(g.members)}</td><td>{g.total_lag}</td></tr>"
            for g in self._inspector.groups()
        )
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        return (
            "<!doctype html><html><head><title>brokerd</title></head><body>"
            "<h1>brokerd</h1><h2>Topics</h2><table><tr><th>topic</th><th>partitions</th>"
            f"<th>records</th><th>bytes</th></tr>{rows}</table>"
            "<h2>Consumer groups</h2><table><tr><th>group</th><th>state</th>"
            f"<th>members</th><th>lag</th></tr>{groups}</table></body></html>"
        ).encode()


def make_console(
    inspector: Inspector, *, clock: IReactorTime, settings: Mapping[str, str]
) -> Resource:
    """The console's root resource."""
    del clock
    return _Overview(inspector, settings)


__all__ = ["make_console"]
