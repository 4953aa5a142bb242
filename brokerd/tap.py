# -*- test-case-name: tests.test_tap -*-
"""``twistd broker``'s entry points: the options class and ``makeService``.

The options, the typed settings and the service tree live in :mod:`brokerd.app`; this
module only hands twistd the :class:`~brokerd.app.options.Options` and builds the tree
from the settings they made (:func:`brokerd.app.wiring.build_services`). It is the only
module that imports the global reactor (inside :func:`makeService`).
"""

from __future__ import annotations

from twisted.application import service

from brokerd.app.options import Options

__all__ = ["Options", "makeService"]


def makeService(options: Options) -> service.MultiService:
    """The broker's service tree, built from the parsed options' settings."""
    from twisted.internet import reactor

    from brokerd.app.wiring import build_services

    return build_services(options.settings, reactor).top
