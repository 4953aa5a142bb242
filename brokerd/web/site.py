"""The resource tree of the ``--http`` endpoint.

``/`` and below: the web console (:mod:`brokerd.web.console`); ``/metrics``
(:mod:`brokerd.web.metrics_resource`), ``/healthz`` and ``/readyz``
(:mod:`brokerd.web.health`) are added beside it as children of the console's root. This
module only assembles the tree; each resource lives in its own module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from prometheus_client import CollectorRegistry
from twisted.internet.interfaces import IReactorTime
from twisted.web.resource import IResource, Resource
from twisted.web.server import Site

from brokerd.admin.inspect import Inspector
from brokerd.web.console import ConsoleSampler, make_console
from brokerd.web.health import HealthResource, Readiness, ReadyResource
from brokerd.web.metrics_resource import MetricsResource


def make_site(
    inspector: Inspector,
    *,
    clock: IReactorTime,
    settings: Mapping[str, str],
    sampler: ConsoleSampler | None = None,
    registry: CollectorRegistry | None = None,
    readiness: Readiness | None = None,
) -> Site:
    """The HTTP site: the console at ``/`` (``settings`` are the broker's effective
    options, shown on its broker page; ``sampler`` its history), ``/metrics`` serving
    ``registry``, ``/healthz``, and ``/readyz`` asking ``readiness`` (by default only
    offline partitions make it fail)."""
    root: Resource = make_console(inspector, clock=clock, settings=settings, sampler=sampler)
    children: dict[bytes, Resource] = {
        b"healthz": HealthResource(),
        b"readyz": ReadyResource(readiness or Readiness(inspector)),
    }
    if registry is not None:
        children[b"metrics"] = MetricsResource(registry)
    for name, child in children.items():
        # Resource implements IResource through zope.interface, which mypy cannot see.
        root.putChild(name, cast(IResource, child))
    site = Site(root)
    # Access logs would flood the broker's log with every console refresh and scrape.
    site.noisy = False
    site.log = lambda request: None  # type: ignore[method-assign]
    return site


__all__ = ["make_site"]
