"""What a protocol's request decoder gives the connection: the sans-IO half of a protocol.

What this module does: declares :class:`RequestDecoder`, the part of a protocol that turns
received bytes into whole requests (bytes in, requests out, with its own bounds,
read-ahead and held-bytes accounting), and the two things a decoder may say besides a
request: an :class:`Aside` (something the protocol's dispatcher answers or acts on
without a handler, say a refusal, handed over in its turn) and a :class:`FrameFault` (the
frame boundary is lost: the connection is aborted). A decoder knows nothing of
transports, timers or Deferreds and imports no Twisted, so it is tested with plain bytes;
:class:`brokerd.net.connection.RequestConnection` holds one (given to it, with its
dispatcher) and asks it everything about input.

What it does not do: write, close or log (the connection and the dispatcher do).
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Protocol, TypeVar

__all__ = ["Aside", "FrameFault", "RequestDecoder"]

RequestT_co = TypeVar("RequestT_co", covariant=True)


class Aside:
    """Base of what a decoder hands out that is not a request: the dispatcher's
    :meth:`~brokerd.net.connection.Dispatcher.aside` takes it in its turn (no handler,
    nothing in flight), and the connection re-checks its phase before asking for more."""

    __slots__ = ()


class FrameFault(Exception):
    """The decoder lost the frame boundary (or the client ignores flow control): the
    connection logs it through its dispatcher and aborts. The decoder holds nothing of
    the broken input afterwards."""


class RequestDecoder(Protocol[RequestT_co]):
    """Bytes in, whole requests out: one protocol's decoder, one per connection.

    The connection calls :meth:`receive` with every read, then :meth:`next_request`
    while it may hand requests out; the other methods answer its questions about input
    (the frame deadline, reading ahead, the request budget).
    """

    @property
    def last_request_bytes(self) -> int:
        """Request bytes the request :meth:`next_request` returned last holds until it is
        answered (its frame); they leave :meth:`input_bytes` when it is handed out."""
        ...

    def receive(self, data: bytes) -> None:
        """Take received bytes (decode lazily or eagerly); raise :class:`FrameFault`
        when they lose the frame boundary."""
        ...

    def next_request(self, in_flight: Sized) -> RequestT_co | Aside | None:
        """The next request to hand out now (``in_flight``: the requests handed out and
        not answered, a sized collection; the decoder says how many may run at once), an
        :class:`Aside`, or None when there is none or the protocol must wait."""
        ...

    def overflow(self) -> FrameFault | None:
        """After a read was served: a fault when undecoded input passed its bound (a
        client that ignores flow control), else None."""
        ...

    def frame_pending(self, in_flight: Sized) -> bool:
        """Whether part of a frame has arrived whose rest the client still owes us."""
        ...

    def read_ahead(self) -> bool:
        """Whether to keep reading while requests are in flight (asked only then). Bytes
        read meanwhile stay undecoded; reading on lets a client's close be noticed."""
        ...

    def input_bytes(self) -> int:
        """What the request budget must cover for input: request bytes received and
        not yet handed out, plus the claim (``brokerd.net.request_budget.claim``) on
        those a size prefix announced and the client has not sent yet."""
        ...

    def discard(self) -> None:
        """The connection closes: drop decoded requests not yet handed out."""
        ...

    def lost(self) -> None:
        """The connection is lost: drop what can no longer become a request (a partial
        frame; more if the protocol carries nothing out after a loss)."""
        ...
