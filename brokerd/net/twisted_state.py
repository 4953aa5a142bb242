# -*- test-case-name: tests.net.test_twisted_state -*-
"""Every place the broker depends on Twisted state that Twisted does not publish.

Twisted's transports have no public way to ask some things the connection edge needs,
and its TLS layer leaves a reference cycle behind that no public call breaks. Rather
than scatter ``transport._something`` through the code, each such dependency is one
function or class here, naming exactly the private attributes it uses, and
``tests/net/test_twisted_state.py`` runs each against the real transports of the installed
Twisted, so an upgrade that renames or removes one fails that test loudly instead of
quietly changing the broker's behaviour.

* :func:`holds_nothing`: whether a socket transport has no bytes waiting to be sent
  (``FileDescriptor.dataBuffer``, ``offset`` and ``_tempDataLen``). The sendfile path
  asks it before sending a file region straight to the socket, so that bytes written
  earlier go first.
* :class:`CycleFreeTLSProtocol`: Twisted's TLS protocol (``BufferingTLSTransport``)
  except that a failure ending the TLS session (a peer that closes without a TLS
  close_notify: ``SysCallError('Unexpected EOF')``) is cleaned as soon as it is
  reported (``_tlsShutdownFinished``). Twisted keeps that failure in a local variable of
  its receive loop (``_flushReceiveBIO``) whose frame the failure's own traceback holds:
  a cycle through the TLS protocol, its unsent buffers and the socket transport's, that
  only a full garbage collection frees. Dropping the failure's traceback
  (:func:`forget_traceback`) breaks the cycle.
* :func:`pending_listen`: the ``listen()`` a ``StreamServerEndpointService`` started
  (``_waitingForPort``), which the readiness notice (``brokerd.sdnotify``) waits on, since
  the service publishes no way to learn that its port is bound; and
  :func:`raise_bind_failures`, which sets the same service's ``_raiseSynchronously`` so a
  listener that cannot bind fails the start (twistd's own ``strports`` services do it too).
* :func:`request_gone`: whether a ``twisted.web`` request lost its connection
  (``Request._disconnected``), so the console does not write a page nobody reads.
* :func:`void_elements`: the elements Twisted's HTML flattener closes with ``" />"``
  (``twisted.web._stan.voidElements``), which the console's own fast flattener must match.

What it does not do: change what the transports send or when; decide anything.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.protocols.tls import BufferingTLSTransport
from twisted.python.failure import Failure

__all__ = [
    "PRIVATE_STATE",
    "CycleFreeTLSProtocol",
    "forget_traceback",
    "holds_nothing",
    "pending_listen",
    "raise_bind_failures",
    "request_gone",
    "void_elements",
]

#: What this module relies on (reads, and the one write of ``_raiseSynchronously``), by
#: class or module: checked against the installed Twisted by the tests (an attribute
#: named here must exist where it is said to).
PRIVATE_STATE: dict[str, tuple[str, ...]] = {
    "twisted.internet.abstract.FileDescriptor": ("dataBuffer", "offset", "_tempDataLen"),
    "twisted.protocols.tls.TLSMemoryBIOProtocol": ("_tlsShutdownFinished",),
    "twisted.application.internet.StreamServerEndpointService": (
        "_waitingForPort", "_raiseSynchronously"
    ),
    "twisted.web.http.Request": ("_disconnected",),
    "twisted.web._stan": ("voidElements",),
}


def pending_listen(service: object) -> Deferred[object] | None:
    """The Deferred of the ``listen()`` a ``StreamServerEndpointService`` started (it
    fires with the port once bound), or None for any other service or before its start."""
    waiting = getattr(service, "_waitingForPort", None)
    return waiting if isinstance(waiting, Deferred) else None


def raise_bind_failures(service: object) -> None:
    """Make a ``StreamServerEndpointService`` raise a failure to listen from its
    ``startService`` (``_raiseSynchronously``) instead of only logging it."""
    service._raiseSynchronously = True  # type: ignore[attr-defined]


def request_gone(request: object) -> bool:
    """Whether a ``twisted.web`` request's connection was lost (``_disconnected``; False
    for an object without it)."""
    return bool(getattr(request, "_disconnected", False))


def void_elements() -> frozenset[str]:
    """The elements Twisted's HTML flattener writes as ``<name ... />`` when empty
    (imported here, on first use: ``twisted.web`` is not loaded without ``--http``)."""
    from twisted.web._stan import voidElements

    return frozenset(voidElements)


def holds_nothing(transport: object) -> bool:
    """Whether ``transport`` has no bytes waiting to be sent: the buffers of Twisted's
    ``FileDescriptor`` (``dataBuffer`` from ``offset`` on, and the pending list whose
    length is ``_tempDataLen``). False for a transport without them: a caller then waits
    for a write turn first, which is always in order."""
    try:
        buffered = len(transport.dataBuffer) - transport.offset  # type: ignore[attr-defined]
        pending = transport._tempDataLen  # type: ignore[attr-defined]
    except AttributeError:
        return False
    return buffered <= 0 and not pending


class CycleFreeTLSProtocol(BufferingTLSTransport):
    """``BufferingTLSTransport`` whose session-ending failure is cleaned when reported,
    so a closed TLS connection is freed by reference counting (see the module
    docstring)."""

    def _tlsShutdownFinished(self, reason: Failure | None) -> None:
        if reason is not None:
            forget_traceback(reason)
        shutdown: Any = super()._tlsShutdownFinished
        shutdown(reason)


def forget_traceback(failure: Failure) -> None:
    """Drop the traceback of ``failure`` (and so its frames' locals); what it says stays.
    ``cleanFailure`` keeps the frames as text where Twisted's own is in force (a test
    runner may replace it with a no-op), so the public ``tb`` and the exception's
    ``__traceback__`` are cleared as well."""
    clean: Any = failure.cleanFailure  # unannotated in Twisted
    clean()
    failure.tb = None
    if failure.value is not None:
        failure.value.__traceback__ = None
