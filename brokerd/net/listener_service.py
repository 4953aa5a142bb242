"""A listener as a service: an endpoint description (``tcp:``, ``ssl:`` with client
certificates, ``systemd:``, ...) and a protocol factory, bound when the service starts.

The bound address is reported to a callback as soon as the port listens (port 0 and
systemd sockets are known only then), before the first client connects; a bind failure
aborts the start (twistd exits with status 1) rather than being logged. This module
does not choose the factory nor read any option.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.application.internet import StreamServerEndpointService
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IStreamServerEndpoint
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from zope.interface import implementer

from brokerd.net.tls import ClientVerification, is_tls_description, listener_endpoint
from brokerd.net.twisted_state import raise_bind_failures

_log = Logger()


@implementer(IStreamServerEndpoint)
class PortReportingEndpoint:
    """Wraps an endpoint to report the bound address to a callback, before the first
    client connects."""

    def __init__(self, wrapped: Any, on_listen: Callable[..., None]) -> None:
        self._wrapped = wrapped
        self._on_listen = on_listen

    def listen(self, factory: Factory) -> Deferred[Any]:
        d: Deferred[Any] = self._wrapped.listen(factory)

        def report(port: Any) -> Any:
            self._on_listen(port.getHost())
            return port

        return d.addCallback(report)


def listener_service(
    reactor: Any,
    description: str,
    factory: Factory[Any],
    verification: ClientVerification | None,
    on_listen: Callable[..., None] | None = None,
) -> StreamServerEndpointService:
    """The service listening on ``description`` with ``factory``; ``verification``
    applies to an ``ssl:`` description only (a plaintext one beside it is warned about)."""
    if not is_tls_description(description):
        if verification is not None:
            _log.warn(
                "Listener {description} is plaintext: no client certificates on it",
                description=description,
            )
        verification = None
    endpoint: Any = listener_endpoint(reactor, description, verification)
    if on_listen is not None:
        endpoint = PortReportingEndpoint(endpoint, on_listen)
    svc = StreamServerEndpointService(endpoint, factory)  # type: ignore[no-untyped-call]
    # A bind failure must abort start-up (exit status 1) rather than be logged.
    raise_bind_failures(svc)
    return svc
