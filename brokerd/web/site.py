"""The resource tree of the ``--http`` endpoint.

``/`` and below: the web console (:mod:`brokerd.web.console`); ``/metrics``
(:mod:`brokerd.web.metrics_resource`), ``/healthz`` and ``/readyz``
(:mod:`brokerd.web.health`) are added beside it as children of the console's root; with
``--http-auth`` the whole tree sits behind :class:`~brokerd.web.auth.AuthGuard`, and
every resource asks :mod:`brokerd.web.scope` what the request may see. This module only
assembles the tree; each resource lives in its own module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from prometheus_client import CollectorRegistry
from twisted.internet.interfaces import IReactorTime
from twisted.web.resource import IResource, Resource
from twisted.web.server import Site

from brokerd.admin.inspect import Inspector
from brokerd.admin.share_groups import ShareGroupInspector
from brokerd.security.acl import AclAuthorizer
from brokerd.security.doors import HttpAuth
from brokerd.web.auth import AuthGuard, HttpIdentity
from brokerd.web.console import ConsoleSampler, make_console
from brokerd.web.health import HealthResource, Readiness, ReadyResource
from brokerd.web.metrics_resource import MetricsResource
from brokerd.web.scope import Scoper


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
) -> Site:
    """The HTTP site: the console at ``/`` (``settings`` are the broker's effective
    options, shown on its broker page; ``sampler`` its history), ``/metrics`` serving
    ``registry``, ``/healthz``, and ``/readyz`` asking ``readiness`` (by default only
    offline partitions make it fail). ``identity`` says who a request is
    (``--http-auth``; None: nobody is asked), ``authorizer`` what it may see (None:
    everything), ``shares`` the share groups the console shows (None: none)."""
    identity = identity or HttpIdentity(HttpAuth.NONE)
    scope_of = Scoper(identity, authorizer)
    root: Resource = make_console(
        inspector, clock=clock, settings=settings, sampler=sampler, scope_of=scope_of,
        shares=shares,
    )
    children: dict[bytes, Resource] = {
        b"healthz": HealthResource(),
        b"readyz": ReadyResource(
            readiness or Readiness(inspector),
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
    site = Site(root)
    # Access logs would flood the broker's log with every console refresh and scrape.
    site.noisy = False
    site.log = lambda request: None  # type: ignore[method-assign]
    return site


__all__ = ["make_site"]
