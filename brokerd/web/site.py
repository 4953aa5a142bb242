"""The resource tree of the ``--http`` endpoint.

``/`` and below: the web console (:mod:`brokerd.web.console`); ``/metrics``,
``/healthz`` and ``/readyz`` are added beside it. This module only assembles the tree;
each resource lives in its own module.
"""

from __future__ import annotations

from collections.abc import Mapping

from twisted.internet.interfaces import IReactorTime
from twisted.web.resource import Resource
from twisted.web.server import Site

from brokerd.admin.inspect import Inspector
from brokerd.web.console import ConsoleSampler, make_console


def make_site(
    inspector: Inspector,
    *,
    clock: IReactorTime,
    settings: Mapping[str, str],
    sampler: ConsoleSampler | None = None,
) -> Site:
    """The HTTP site: the console at ``/`` (``settings`` are the broker's effective
    options, shown on its broker page; ``sampler`` its history)."""
    root: Resource = make_console(inspector, clock=clock, settings=settings, sampler=sampler)
    site = Site(root)
    # Access logs would flood the broker's log with every console refresh and scrape.
    site.noisy = False
    site.log = lambda request: None  # type: ignore[method-assign]
    return site


__all__ = ["make_site"]
