# -*- test-case-name: tests.kafka.listener.test_request_decoder -*-
"""The Kafka listener's request decoder for the connection: bytes in, whole requests out
(sans-IO, no Twisted).

What this module does: the :class:`~brokerd.net.decoding.RequestDecoder` a Kafka
connection holds. Complete frames are split off at once
(:class:`~brokerd.kafka.wire.codec.FrameDecoder`) and queue undecoded; each is decoded
(:mod:`brokerd.kafka.wire.requests.apis`) when its turn comes. Its policies:

* one request in flight, except that up to :data:`MAX_PIPELINED_PRODUCES` consecutive
  Produce requests run together (the frames it hands out in flight are always the last
  ones it handed out, so it counts the Produce run at their end);
* read ahead behind a busy request until :data:`PIPELINE_READ_BYTES` are buffered;
* a frame larger than its limit (lower before SASL authentication: the dispatcher moves
  it) or a bad size is a :class:`FrameFault` (and nothing of it is kept);
* an unsupported ApiVersions version is answered with the version-0 fallback
  (:class:`Answer`); any other unsupported version, a malformed request, or (before SASL
  authentication) an API other than ApiVersions and the SASL ones is a :class:`Refuse`
  (the connection is closed, as Kafka does);
* after a SaslHandshake v0, the frames are raw SASL tokens (:class:`RawToken`), read off
  the connection's SASL session;
* once the connection is lost, Fetch requests are dropped (the client is gone and a
  fetch changes nothing); the rest are still handed out.

What it does not do: answer, log, write or close (the dispatcher and the connection do).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sized
from typing import TYPE_CHECKING

from brokerd.kafka.wire.codec import ApiKey, CodecError, FrameDecoder, FrameError, FrameTooLarge
from brokerd.kafka.wire.requests import apis
from brokerd.net.decoding import Aside, FrameFault
from brokerd.net.request_budget import claim

if TYPE_CHECKING:
    from brokerd.kafka.server.sasl_session import SaslSession

__all__ = [
    "MAX_PIPELINED_PRODUCES",
    "PIPELINE_READ_BYTES",
    "Answer",
    "KafkaDecoder",
    "KafkaFrameFault",
    "RawToken",
    "Refuse",
]

#: While a request is in flight, keep reading until this much pipelined input is
#: buffered, then pause the transport (Twisted's HTTPChannel does the same with 16 KiB).
#: Reading on is what lets us notice a disconnect during a long poll.
PIPELINE_READ_BYTES = 64 * 1024
#: Consecutive Produce requests of one connection that may be in flight together. Their
#: appends are queued in arrival order (per partition, the core keeps that order), and
#: responses are written in request order; anything else waits for them to finish.
MAX_PIPELINED_PRODUCES = 16
#: What a connection may send before it has authenticated on a SASL listener.
BEFORE_AUTHENTICATION = frozenset(
    {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.API_VERSIONS})


class Answer(Aside):
    """A frame to write in this request's turn, no handler needed."""

    __slots__ = ("frame",)

    def __init__(self, frame: bytes) -> None:
        self.frame = frame


class Refuse(Aside):
    """Close the connection (gracefully), saying why in the log."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class RawToken(Aside):
    """A raw SASL token (after SaslHandshake v0), for the SASL session."""

    __slots__ = ("token",)

    def __init__(self, token: bytes) -> None:
        self.token = token


class KafkaFrameFault(FrameFault):
    """A bad frame size; ``too_large``: a size above the limit."""

    def __init__(self, why: str, *, too_large: bool) -> None:
        super().__init__(why)
        self.too_large = too_large


class KafkaDecoder:
    """The Kafka connection's input (see the module docstring).

    :param max_frame_bytes: the largest frame now (:attr:`max_frame_bytes` may change).
    :param reset_frame_bytes: the limit of the frame decoder made again after a fault or
        a loss (it holds nothing then), read then.
    """

    def __init__(self, max_frame_bytes: int, *, reset_frame_bytes: Callable[[], int]) -> None:
        self._frames = FrameDecoder(max_frame_bytes)
        self._reset_frame_bytes = reset_frame_bytes
        self._pending: deque[bytes] = deque()
        self._pending_bytes = 0
        self._produce_run = 0  # Produce requests at the end of those handed out
        self._lost = False
        self.last_request_bytes = 0
        #: The connection's SASL session (None: no authentication on this listener).
        self.sasl: SaslSession | None = None
        #: Input is ignored (a failed authentication: the connection is about to close).
        self.ignoring = False

    @property
    def max_frame_bytes(self) -> int:
        return self._frames.max_frame_bytes

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        self._frames.max_frame_bytes = value

    @property
    def held(self) -> int:
        """Request bytes received and not yet handed out."""
        return self._pending_bytes + self._frames.buffered

    @property
    def owed(self) -> int:
        """Bytes a size prefix announced that have not arrived yet."""
        return self._frames.owed

    def receive(self, data: bytes) -> None:
        if self.ignoring:
            return  # about to close: nothing more is served
        try:
            frames = self._frames.feed(data)
        except FrameError as e:
            self._frames = FrameDecoder(self._reset_frame_bytes())  # hold nothing
            raise KafkaFrameFault(str(e), too_large=isinstance(e, FrameTooLarge)) from e
        pending = self._pending
        for f in frames:
            pending.append(f)
            self._pending_bytes += len(f)

    def next_request(self, in_flight: Sized) -> apis.AnyRequest | Aside | None:
        pending = self._pending
        while pending:
            if in_flight and not (
                len(in_flight) < MAX_PIPELINED_PRODUCES
                and len(in_flight) <= self._produce_run
                and _is_produce(pending[0])
            ):
                return None
            payload = pending.popleft()
            self._pending_bytes -= len(payload)
            self.last_request_bytes = len(payload)
            sasl = self.sasl
            if sasl is not None and sasl.raw_tokens and sasl.awaiting_tokens:
                return RawToken(payload)
            try:
                request = apis.decode_request(payload)
            except apis.UnsupportedVersion as e:
                if e.api_key is ApiKey.API_VERSIONS:
                    # Never close here: old librdkafka would take it for a pre-0.10 broker.
                    return Answer(apis.api_versions_fallback(e.correlation_id))
                return Refuse(str(e))
            except CodecError as e:
                return Refuse(str(e))
            api_key = request.api_key
            if (
                sasl is not None
                and not sasl.authenticated
                and api_key not in BEFORE_AUTHENTICATION
            ):
                return Refuse(f"{api_key.name} before SASL authentication")
            if api_key is ApiKey.PRODUCE:
                self._produce_run += 1
            else:
                if self._lost and api_key is ApiKey.FETCH:
                    continue  # the client is gone and a fetch changes nothing
                self._produce_run = 0
            return request
        return None

    def overflow(self) -> FrameFault | None:
        return None  # complete frames are split off; the pipeline read bound pauses reading

    def frame_pending(self, in_flight: Sized) -> bool:
        return self._frames.buffered > 0  # complete frames are in the queue already

    def read_ahead(self) -> bool:
        # Keep reading behind a busy request up to a bound: pipelined produces can join
        # it, and a client's disconnect during a long poll is noticed.
        return self._pending_bytes + self._frames.buffered < PIPELINE_READ_BYTES

    def input_bytes(self) -> int:
        frames = self._frames
        buffered = frames.buffered
        # Complete frames are split off: what has arrived of the one owed is buffered.
        return self._pending_bytes + buffered + claim(frames.owed, buffered)

    def discard(self) -> None:
        self._pending.clear()
        self._pending_bytes = 0

    def lost(self) -> None:
        # A partial frame can no longer complete; whole ones are still carried out.
        self._frames = FrameDecoder(self._reset_frame_bytes())
        self._lost = True


def _is_produce(payload: bytes) -> bool:
    """Whether a frame is a Produce request (its first two bytes are the API key)."""
    return len(payload) >= 2 and payload[0] == 0 and payload[1] == ApiKey.PRODUCE
