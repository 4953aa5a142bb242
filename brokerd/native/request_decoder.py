# -*- test-case-name: tests.native.test_request_decoder -*-
"""The native protocol's request decoder for the connection: bytes in, one request at a
time out (sans-IO, no Twisted).

What this module does: wraps the codec's :class:`~brokerd.native.server_codec.RequestDecoder`
with the native connection's input policies, as the
:class:`~brokerd.net.decoding.RequestDecoder` a
:class:`~brokerd.net.connection.RequestConnection` holds: exactly one request in flight
(received bytes wait undecoded until it is answered, so a busy connection holds raw
bytes, bounded, rather than decoded requests); refusals the codec reports handed out in
their turn as :class:`Refusal` asides; while a request that parks (a long poll) is in
flight, reading on a little (:data:`LONG_POLL_EAGER_READ_BYTES`) so a client closing
meanwhile is noticed; undecoded input beyond ``max_produce_bytes`` plus
:data:`MAX_UNREAD_SLACK_BYTES` is a fault (a client that ignores flow control); the bytes
it holds and is owed, for the request budget.

What it does not do: answer, write or close (the dispatcher and the connection do).
"""

from __future__ import annotations

from collections.abc import Callable, Sized

from brokerd.native.messages import DEFAULT_MAX_PRODUCE_BYTES, Request, RequestError
from brokerd.native.server_codec import RequestDecoder
from brokerd.net.decoding import Aside, FrameFault
from brokerd.net.request_budget import claim

__all__ = [
    "LONG_POLL_EAGER_READ_BYTES",
    "MAX_UNREAD_SLACK_BYTES",
    "NativeDecoder",
    "Refusal",
]

#: Undecoded input allowed beyond ``max_produce_bytes`` (which bounds one partial record)
#: before the connection is dropped. A transport stops delivering soon after it is paused,
#: so this only trips on a transport that ignores pauseProducing: defence in depth.
MAX_UNREAD_SLACK_BYTES = 4 * 1024 * 1024
#: While a long poll is parked, input is still read (not decoded) up to this many bytes,
#: so that the client closing the connection is noticed (see :meth:`NativeDecoder.read_ahead`).
LONG_POLL_EAGER_READ_BYTES = 16 * 1024


class Refusal(Aside):
    """A request the codec refused (:class:`~brokerd.native.messages.RequestError`),
    answered in its turn by the dispatcher."""

    __slots__ = ("error",)

    def __init__(self, error: RequestError) -> None:
        self.error = error


class NativeDecoder:
    """The native connection's input (see the module docstring).

    :param parks: whether a request parks (waits on the core for data): while one is in
        flight, input is read ahead a little.
    """

    def __init__(
        self,
        parks: Callable[[Request], bool],
        *,
        max_produce_bytes: int = DEFAULT_MAX_PRODUCE_BYTES,
    ) -> None:
        self._parks = parks
        self.codec = RequestDecoder(max_produce_bytes=max_produce_bytes)
        self._max_unread = max_produce_bytes + MAX_UNREAD_SLACK_BYTES
        self._last: Request | None = None  # the request handed out last (the one in flight)
        self.last_request_bytes = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not yet decoded."""
        return self.codec.buffered

    @property
    def owed(self) -> int:
        """Bytes a length already read announced that have not arrived yet."""
        return self.codec.owed

    def receive(self, data: bytes) -> None:
        self.codec.receive(data)

    def next_request(self, in_flight: Sized) -> Request | Refusal | None:
        if in_flight:
            return None  # one at a time: the rest stays undecoded
        event = self.codec.next_event()
        if event is None:
            return None
        if isinstance(event, RequestError):
            return Refusal(event)
        self._last = event
        self.last_request_bytes = self.codec.last_frame_bytes
        return event

    def overflow(self) -> FrameFault | None:
        buffered = self.codec.buffered
        if buffered > self._max_unread:
            return FrameFault(f"{buffered} bytes of unread input")
        return None

    def frame_pending(self, in_flight: Sized) -> bool:
        # While a request is in flight, buffered bytes are requests waiting their turn.
        return not in_flight and self.codec.in_frame

    def read_ahead(self) -> bool:
        # A paused transport does not notice the peer closing, so a parked long poll of
        # a client that went away would wait out its full max_wait. While one is parked,
        # keep reading a little (requests stay undecoded) so a close is seen and the
        # poll is cancelled at once.
        last = self._last
        return (
            last is not None
            and self._parks(last)
            and self.codec.buffered < LONG_POLL_EAGER_READ_BYTES
        )

    def input_bytes(self) -> int:
        codec = self.codec
        # The owed value (or admin body) starts the undecoded buffer.
        return codec.held + claim(codec.owed, codec.buffered)

    def discard(self) -> None:
        pass  # nothing is decoded before its turn

    def lost(self) -> None:
        self.codec = RequestDecoder()  # drop the undecoded input with it
