"""The resource tree of the ``--http`` endpoint.

``/`` and below: the web console (:mod:`brokerd.web.console`); ``/metrics``
(:mod:`brokerd.web.metrics_resource`), ``/healthz`` and ``/readyz``
(:mod:`brokerd.web.health`) are added beside it as children of the console's root; with
``--http-auth`` the whole tree sits behind :class:`~brokerd.web.auth.AuthGuard`, and
every resource asks :mod:`brokerd.web.scope` what the request may see. This module only
assembles the tree (each resource lives in its own module) and bounds what a request may
send: a body over :data:`MAX_FORM_BYTES` (the console's forms post the largest) is
refused with 413 and the connection closed, before more of it is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from prometheus_client import CollectorRegistry
from twisted.internet.interfaces import IReactorTime
from twisted.web.resource import IResource, Resource
from twisted.web.server import Request, Site

from brokerd.clock import Clock
from brokerd.core.quotas.manager import QuotaManager
from brokerd.operator.inspect import Inspector
from brokerd.operator.share_groups import ShareGroupInspector
from brokerd.operator.telemetry_face import TelemetryFace
from brokerd.security.acl import AclAuthorizer
from brokerd.security.doors import HttpAuth
from brokerd.web.auth import AuthGuard, HttpIdentity
from brokerd.web.console import ConsoleSampler, make_console
from brokerd.web.csrf import CsrfGuard
from brokerd.web.data_face import BrokerData
from brokerd.web.health import HealthResource, Readiness, ReadyResource
from brokerd.web.metrics_resource import MetricsResource
from brokerd.web.permits import DataPages
from brokerd.web.schema_face import SchemaSource
from brokerd.web.scope import Scoper

#: The largest request body the HTTP endpoint reads (a console form: a produced value
#: of up to 1 MiB, URL-encoded, with the other fields).
MAX_FORM_BYTES = 4 * 1024 * 1024


class BoundedRequest(Request):
    """A request whose body may not exceed :data:`MAX_FORM_BYTES`: a declared length over
    it, or a body growing past it, is answered 413 and the connection closed; nothing of
    the body is kept and the request is never rendered."""

    _received = 0
    _refused = False

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > MAX_FORM_BYTES:
            self._refuse()
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self._refused:
            return
        self._received += len(data)
        if self._received > MAX_FORM_BYTES:
            self._refuse()
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if not self._refused:
            super().requestReceived(command, path, version)

    def _refuse(self) -> None:
        self._refused = True
        self.content = None
        transport: Any = self.channel.transport if self.channel is not None else None
        if transport is None:
            return
        body = f"Request body over {MAX_FORM_BYTES} bytes.\n".encode()
        transport.write(
            b"HTTP/1.1 413 Content Too Large\r\ncontent-type: text/plain\r\n"
            b"connection: close\r\ncontent-length: " + str(len(body)).encode()
            + b"\r\n\r\n" + body
        )
        transport.loseConnection()


def make_site(
    inspector: Inspector,
    *,
    clock: IReactorTime,
    settings: Mapping[str, str],
    sampler: ConsoleSampler | None = None,
    registry: CollectorRegistry | None = None,
    readiness: Readiness | None = None,
    identity: HttpIdentity | None = None,
    authorizer: AclAuthorizer | None = None,
    shares: ShareGroupInspector | None = None,
    data: BrokerData | None = None,
    schemas: SchemaSource | None = None,
    actions: bool = True,
    telemetry: TelemetryFace | None = None,
    quotas: QuotaManager | None = None,
) -> Site:
    """The HTTP site: the console at ``/`` (``settings`` are the broker's effective
    options, shown on its broker page; ``sampler`` its history), ``/metrics`` serving
    ``registry``, ``/healthz``, and ``/readyz`` asking ``readiness`` (by default only
    offline partitions make it fail). ``identity`` says who a request is
    (``--http-auth``; None: nobody is asked), ``authorizer`` what it may see (None:
    everything), ``shares`` the share groups the console shows (None: none); ``data``
    the records and operations of the message browser and the actions (None: neither),
    ``schemas`` the registry its pages read (None: none), ``actions`` whether the
    console may change anything (``--http-console-readonly`` says no), ``telemetry``
    the clients known by their pushed metrics (None: none), ``quotas`` the client quotas
    its overview shows (None: none)."""
    identity = identity or HttpIdentity(HttpAuth.NONE)
    scope_of = Scoper(identity, authorizer)
    pages = DataPages(
        data, schemas, cast(Clock, clock), scope_of, inspector, CsrfGuard(), actions=actions,
    )
    root: Resource = make_console(
        inspector, clock=clock, settings=settings, sampler=sampler, scope_of=scope_of,
        shares=shares, data=pages, telemetry=telemetry, quotas=quotas,
    )
    children: dict[bytes, Resource] = {
        b"healthz": HealthResource(),
        b"readyz": ReadyResource(
            readiness or Readiness(inspector.offline_partitions),
            shows_reasons=lambda request: scope_of(request).shows_reasons,
        ),
    }
    if registry is not None:
        children[b"metrics"] = MetricsResource(registry, scope_of)
    for name, child in children.items():
        # Resource implements IResource through zope.interface, which mypy cannot see.
        root.putChild(name, cast(IResource, child))
    if identity.asks:
        root = AuthGuard(root, identity)
    site = Site(root, requestFactory=BoundedRequest)
    # Access logs would flood the broker's log with every console refresh and scrape.
    site.noisy = False
    site.log = lambda request: None  # type: ignore[method-assign]
    return site


__all__ = ["MAX_FORM_BYTES", "BoundedRequest", "make_site"]
