"""What the connection machinery (``brokerd.net.connection``) needs of Twisted's transports,
typed (its clock is :class:`brokerd.clock.Clock`).

Twisted declares these through zope interfaces, whose methods lack ``self`` and so cannot
be called through the interface type under mypy; these ``typing.Protocol`` classes say
the same thing in a form mypy checks. Also the one socket option both listeners set.
No behaviour beyond that.
"""

from __future__ import annotations

from typing import Protocol


class Transport(Protocol):
    """The transport methods a connection uses (TCP, TLS and UNIX transports have all)."""

    def write(self, data: bytes) -> None: ...
    def loseConnection(self) -> None: ...
    def abortConnection(self) -> None: ...
    def pauseProducing(self) -> None: ...
    def resumeProducing(self) -> None: ...
    def registerProducer(self, producer: object, streaming: bool) -> None: ...
    def unregisterProducer(self) -> None: ...
    def getPeer(self) -> object: ...


def disable_nagle(transport: object) -> None:
    """Turn TCP_NODELAY on where the transport is TCP.

    Pipelining clients wait for several small responses; with Nagle's algorithm the
    second one waits for the client's delayed ACK (~40 ms). Kafka brokers disable it too.
    """
    set_no_delay = getattr(transport, "setTcpNoDelay", None)
    if set_no_delay is not None:
        set_no_delay(True)
