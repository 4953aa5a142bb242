"""The web console: read-only, server-rendered HTML pages of topics, consumer groups and
the broker, refreshing live in the browser.

This module is the HTTP layer: which URL shows which page, status codes and headers.
``/`` is the overview, ``/clients`` the clients known by their telemetry (KIP-714:
:mod:`brokerd.web.client_pages`), ``/topics/<name>`` one topic, ``/groups/<id>`` one group (of any
type: a share group's too), ``/share-groups/<id>`` one share group (names URL-quoted);
anything else, or a topic or group that does not exist, is a 404 page.
``?fragment=1`` answers the page's body alone (what the refresh script swaps in). These
pages serve GET and HEAD only. The root resource is not a leaf, so the site adds
``/metrics`` and the health checks beside the pages. Page bodies are built by
:mod:`brokerd.web.console_pages` as :mod:`twisted.web.template` tag trees, written out
by :func:`brokerd.web.console_html.flat`; the history behind rates and charts by
:class:`ConsoleSampler` (:mod:`brokerd.web.console_history`).

Given :class:`~brokerd.web.permits.DataPages`, the console also routes to the data pages:
``/topics/<name>/messages`` (:mod:`brokerd.web.browse_page`), ``/schemas``
(:mod:`brokerd.web.schema_pages`) and the actions (:mod:`brokerd.web.actions`:
``/topics/<name>/produce``, ``/configs``, ``/delete``, ``/new-topic``,
``/groups/<id>/reset-offsets``), which are built with :mod:`twisted.web.template`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import cast

from twisted.internet.interfaces import IReactorTime
from twisted.web.resource import Resource
from twisted.web.server import Request
from twisted.web.template import Flattenable

from brokerd.clock import Seconds
from brokerd.core.quotas.manager import QuotaManager
from brokerd.operator.share_groups import ShareGroupInspector, ShareGroupView
from brokerd.operator.telemetry_face import TelemetryClientView, TelemetryFace
from brokerd.web import client_pages, data_pages
from brokerd.web import console_pages as pages
from brokerd.web.console_history import (
    HISTORY_SAMPLES,
    SAMPLE_SECONDS,
    ConsoleSampler,
    ConsoleSource,
)
from brokerd.web.console_html import FRAGMENT_ARG, HEADERS, document, flat
from brokerd.web.data_pages import ROOT_PAGES, TOPIC_PAGES
from brokerd.web.permits import DataPages
from brokerd.web.scope import EVERYTHING, ScopeOf

#: A page: ``(HTTP status, title, body tree)`` rendered at a moment.
Render = Callable[[pages.Moment], tuple[int, str, Flattenable]]

OK = 200
#: Measured client quota shares the overview lists at most (the most recently active).
QUOTA_SHARES_SHOWN = 50
NOT_FOUND = 404
METHOD_NOT_ALLOWED = 405


class _Console:
    """What every page needs: the source, the clock, the history, and the render
    counter."""

    def __init__(
        self,
        source: ConsoleSource,
        clock: Seconds,
        settings: Mapping[str, str],
        sampler: ConsoleSampler | None,
        scope_of: ScopeOf,
        shares: ShareGroupInspector | None = None,
        data: DataPages | None = None,
        telemetry: TelemetryFace | None = None,
        quotas: QuotaManager | None = None,
    ) -> None:
        self.data = data
        self.telemetry = telemetry
        self.quotas = quotas
        self.source = source
        self.shares = shares
        self.clock = clock
        self.settings = dict(settings)
        self.sampler = sampler
        self.scope_of = scope_of
        self.started = clock.seconds()
        self.renders = 0

    def source_for(self, request: Request) -> ConsoleSource:
        """What ``request``'s principal may see of the broker."""
        return self.scope_of(request).source(self.source)

    def pages_with_records(self) -> DataPages | None:
        """The data pages, when the console has the broker's records (None: views only)."""
        return self.data if self.data is not None and self.data.data is not None else None

    def share_groups_for(self, request: Request) -> list[ShareGroupView] | None:
        """The share groups ``request``'s principal may DESCRIBE, each with only the
        partitions of topics it may DESCRIBE; None when the console has none."""
        if self.shares is None:
            return None
        visibility = self.scope_of(request).visibility
        groups = self.shares.groups()
        if visibility is None:
            return groups
        return visibility.share_group_views(groups)

    def clients_for(self, request: Request) -> Sequence[TelemetryClientView] | None:
        """The telemetry clients, for a principal that may see the broker's settings;
        None when it may not, or the broker has no telemetry."""
        if self.telemetry is None or not self.scope_of(request).shows_settings:
            return None
        return self.telemetry.clients()
    def quotas_for(self, request: Request) -> pages.ClientQuotasView | None:
        """The client quotas, for a principal that may see the broker's configs."""
        quotas = self.quotas
        if quotas is None or not self.scope_of(request).shows_settings:
            return None
        configured = [
            (entity.label(), key, value)
            for entity, values in sorted(quotas.entities().items(), key=lambda e: e[0].label())
            for key, value in sorted(values.items())
        ]
        shares = [
            (v.key, v.user, v.client_id, v.bound, v.rate, v.throttled)
            for v in quotas.sensors(self.clock.seconds() * 1000.0, QUOTA_SHARES_SHOWN)
        ]
        return pages.ClientQuotasView(configured, shares)

    def settings_for(self, request: Request) -> Mapping[str, str]:
        return self.settings if self.scope_of(request).shows_settings else {}

    def moment(self, request: Request) -> pages.Moment:
        samples = tuple(self.sampler.samples) if self.sampler is not None else ()
        scoped = self.scope_of(request).samples(samples)
        return pages.Moment(self.clock.seconds(), self.renders + 1, scoped)

    def respond(self, request: Request, render: Render) -> bytes:
        status, title, body = render(self.moment(request))
        if status == OK:
            # Only pages count: a 404 (a browser asking for /favicon.ico) is no render.
            self.renders += 1
        request.setResponseCode(status)
        for name, value in HEADERS.items():
            request.setHeader(name, value)
        if FRAGMENT_ARG in request.args:
            return flat(body)
        return b"<!doctype html>" + flat(document(title, body))

    def not_found(self, what: str, name: str) -> Render:
        return lambda moment: (NOT_FOUND, "Not found", pages.not_found(what, name))


class _ReadOnly(Resource):
    """Answers GET and HEAD; any other method is refused with 405 (nothing here
    changes the broker)."""

    def render(self, request: Request) -> bytes:
        if request.method in (b"GET", b"HEAD"):
            result: bytes = super().render(request)
            return result
        request.setResponseCode(METHOD_NOT_ALLOWED)
        request.setHeader(b"allow", b"GET, HEAD")
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return b"The console is read-only: GET and HEAD only.\n"


class _Page(_ReadOnly):
    """One rendered page (a leaf: nothing below it)."""

    isLeaf = True

    def __init__(self, console: _Console, render: Render) -> None:
        super().__init__()
        self._console = console
        self._render = render

    def render_GET(self, request: Request) -> bytes:
        # A page has no children; a longer path is a page that does not exist.
        if request.postpath not in ([], [b""]):
            render = self._console.not_found("page", request.path.decode("utf-8", "replace"))
            return self._console.respond(request, render)
        return self._console.respond(request, self._render)


def _see_other(request: Request, location: bytes) -> bytes:
    request.setResponseCode(303)
    request.setHeader(b"location", location)
    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
    return b"See " + location + b"\n"


def _decoded(segment: bytes) -> str | None:
    try:
        return segment.decode("utf-8")
    except UnicodeDecodeError:
        return None


class _Collection(_ReadOnly):
    """``/<collection>/<name>`` (topics, groups, share groups): ``/<collection>`` itself
    sends the browser to the overview's list at ``anchor``; a name that is not UTF-8 or
    names nothing (``child`` answers None) is the ``kind`` not found."""

    def __init__(
        self,
        console: _Console,
        anchor: bytes,
        kind: str,
        child: Callable[[_Console, str, Request], Resource | None],
    ) -> None:
        super().__init__()
        self._console = console
        self._anchor = anchor
        self._kind = kind
        self._child = child

    def render_GET(self, request: Request) -> bytes:
        return _see_other(request, self._anchor)

    def getChild(self, path: bytes, request: Request) -> Resource:
        if path == b"":
            return self
        name = _decoded(path)
        found = None if name is None else self._child(self._console, name, request)
        if found is None:
            shown = path.decode("utf-8", "replace")
            return _Page(self._console, self._console.not_found(self._kind, shown))
        return found


def _descend(request: Request) -> None:
    """Move the next segment of ``request``'s path from ``postpath`` to ``prepath``, as
    Twisted's resource traversal does, for a child that serves a page below itself."""
    postpath = request.postpath or []
    (request.prepath or []).append(postpath.pop(0))


def _topic_child(console: _Console, name: str, request: Request) -> Resource | None:
    source = console.source_for(request)
    topic = source.topic(name)
    if topic is None:
        return None
    links = console.pages_with_records()
    below = (request.postpath or [])[:1]
    if links is not None and below and below[0] in TOPIC_PAGES:
        _descend(request)
        return data_pages.topic_page(links, below[0].decode(), topic)

    def render(moment: pages.Moment) -> tuple[int, str, Flattenable]:
        # Looked up again at render time: the topic may be gone by the next refresh.
        topic = source.topic(name)
        if topic is None:
            return NOT_FOUND, "Not found", pages.not_found("topic", name)
        body = pages.topic_page(topic, source.groups(), moment)
        if links is not None:
            return OK, f"Topic {name}", [data_pages.topic_links(links, name), body]
        return OK, f"Topic {name}", body

    return _Page(console, render)


def _group_child(console: _Console, group_id: str, request: Request) -> Resource | None:
    source = console.source_for(request)
    found = source.group(group_id)
    if found is None:
        return None
    links = console.pages_with_records()
    if links is not None and (request.postpath or [])[:1] == [b"reset-offsets"]:
        _descend(request)
        return data_pages.reset_page(links, found)

    def render(moment: pages.Moment) -> tuple[int, str, Flattenable]:
        group = source.group(group_id)
        if group is None:
            return NOT_FOUND, "Not found", pages.not_found("consumer group", group_id)
        body = pages.group_page(group, moment)
        if links is not None and links.actions:
            return OK, f"Group {group_id}", [data_pages.group_links(group), body]
        return OK, f"Group {group_id}", body

    return _Page(console, render)


def _share_group_child(console: _Console, group_id: str, request: Request) -> Resource | None:

    def find() -> ShareGroupView | None:
        groups = console.share_groups_for(request) or []
        return next((g for g in groups if g.group_id == group_id), None)

    if find() is None:
        return None

    def render(moment: pages.Moment) -> tuple[int, str, Flattenable]:
        group = find()
        if group is None:
            return NOT_FOUND, "Not found", pages.not_found("share group", group_id)
        return OK, f"Share group {group_id}", pages.share_group_page(group, moment)

    return _Page(console, render)


class _Root(_ReadOnly):
    """``/``: the overview. The site adds ``/metrics`` and the health checks as children
    (``putChild``), which take precedence over :meth:`getChild`."""

    def __init__(self, console: _Console) -> None:
        super().__init__()
        self._console = console
        self._topics = _Collection(console, b"/#topics", "topic", _topic_child)
        self._groups = _Collection(console, b"/#groups", "consumer group", _group_child)
        self._share_groups = _Collection(
            console, b"/#share-groups", "share group", _share_group_child
        )

    def getChild(self, path: bytes, request: Request) -> Resource:
        if path == b"":
            return self
        if path == b"topics":
            return self._topics
        if path == b"groups":
            return self._groups
        if path == b"share-groups":
            return self._share_groups
        if path == b"clients" and self._console.telemetry is not None:
            return _Page(self._console, self._clients(request))
        data = self._console.data
        if data is not None and path in ROOT_PAGES:
            return data_pages.root_page(data, path.decode())
        shown = path.decode("utf-8", "replace")
        return _Page(self._console, self._console.not_found("page", "/" + shown))

    def _clients(self, request: Request) -> Render:
        console = self._console

        def render(moment: pages.Moment) -> tuple[int, str, Flattenable]:
            clients = console.clients_for(request)
            if clients is None:
                return NOT_FOUND, "Not found", pages.not_found("page", "/clients")
            return OK, "Clients", client_pages.clients_page(clients, moment.now, moment.render)

        return render

    def render_GET(self, request: Request) -> bytes:
        console = self._console
        source = console.source_for(request)
        settings = console.settings_for(request)

        def render(moment: pages.Moment) -> tuple[int, str, Flattenable]:
            body = pages.overview(
                source, moment, settings=settings, started=console.started,
                share_groups=console.share_groups_for(request),
                client_quotas=console.quotas_for(request),
            )
            clients = console.clients_for(request)
            if clients is not None:
                body.insert(-1, client_pages.clients_section(clients, moment.now))
            if console.data is not None:
                return OK, "Overview", [data_pages.overview_links(console.data), body]
            return OK, "Overview", body

        return console.respond(request, render)


def make_console(
    inspector: ConsoleSource,
    *,
    clock: IReactorTime,
    settings: Mapping[str, str],
    sampler: ConsoleSampler | None = None,
    scope_of: ScopeOf | None = None,
    shares: ShareGroupInspector | None = None,
    data: DataPages | None = None,
    telemetry: TelemetryFace | None = None,
    quotas: QuotaManager | None = None,
) -> Resource:
    """The console's root resource. ``inspector``: where the figures come from
    (:class:`brokerd.operator.inspect.Inspector`); ``clock``: the time shown and uptime's
    origin (the moment this is called); ``settings``: the broker's effective options,
    shown on the overview; ``sampler``: the history its rates and charts come from (None
    shows current figures only); ``scope_of``: what each request may see
    (:mod:`brokerd.web.scope`; None: everything); ``shares``: the share groups'
    figures (None: the console shows no share groups); ``data``: the data pages'
    (message browser, schemas, actions; None: none); ``telemetry``: the clients known
    by their telemetry (None: no clients section or page); ``quotas``: the client quotas
    shown to principals that may see the broker's configs (None: none)."""
    return _Root(
        _Console(
            inspector, cast(Seconds, clock), settings, sampler,
            scope_of if scope_of is not None else (lambda request: EVERYTHING),
            shares, data, telemetry, quotas,
        )
    )


__all__ = ["HISTORY_SAMPLES", "SAMPLE_SECONDS", "ConsoleSampler", "make_console"]
