"""The web console: read-only, server-rendered HTML pages of topics and consumer groups.

A first version: one page listing topics and groups. (Being extended with per-topic and
per-group pages, rates, lag charts and live refresh.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from html import escape
from typing import cast

from twisted.application import service
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.web.resource import Resource
from twisted.web.server import Request

from brokerd.admin.inspect import Inspector
from brokerd.core.interfaces import Seconds

#: Seconds between two samples of the console's history, and how many are kept.
SAMPLE_SECONDS = 5.0
HISTORY_SAMPLES = 120


class ConsoleSampler(service.Service):
    """Samples every topic's end offsets and every group's lag at a fixed interval while
    the HTTP endpoint runs, so the console can show rates and lag over the last minutes.
    Keeps :data:`HISTORY_SAMPLES` samples; memory only."""

    def __init__(self, inspector: Inspector, *, clock: IReactorTime) -> None:
        self._inspector = inspector
        self._loop = LoopingCall(self.sample)
        self._loop.clock = clock
        self._clock: Seconds = cast(Seconds, clock)
        #: ``(time, {topic: sum of end offsets}, {group: total lag})``, oldest first.
        self.samples: deque[tuple[float, dict[str, int], dict[str, int]]] = deque(
            maxlen=HISTORY_SAMPLES
        )

    def sample(self) -> None:
        self.samples.append(
            (
                self._clock.seconds(),
                {t.name: t.end_offsets for t in self._inspector.topics()},
                {g.group_id: g.total_lag for g in self._inspector.groups()},
            )
        )

    def startService(self) -> None:
        super().startService()
        self._loop.start(SAMPLE_SECONDS, now=True)

    def stopService(self) -> None:
        super().stopService()
        if self._loop.running:
            self._loop.stop()


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
    inspector: Inspector,
    *,
    clock: IReactorTime,
    settings: Mapping[str, str],
    sampler: ConsoleSampler | None = None,
) -> Resource:
    """The console's root resource (``sampler``: the history its rates and charts come
    from; None shows current figures only)."""
    del clock, sampler
    return _Overview(inspector, settings)


__all__ = ["ConsoleSampler", "make_console"]
