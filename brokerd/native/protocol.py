"""Twisted glue for brokerd's native protocol: one :class:`NativeProtocol` per connection.

What this module does: feeds received bytes to the sans-IO
:class:`~brokerd.native.codec.RequestDecoder`, calls the broker core for one request at a
time, and writes the codec's encoded answers back in request order. It owns the
per-connection policies: one request in flight (reading paused meanwhile), write-side
flow control (it registers as a streaming producer on its transport and stops taking
frames while the client is not reading), an idle timeout, a frame-completion deadline,
and cancelling whatever is in flight when the connection goes away.

What it does not do: parse or build bytes (the codec does), touch files or threads (the
core does), or use the global reactor (the clock is injected).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol as TypingProtocol
from typing import cast

from twisted.internet import defer
from twisted.internet.interfaces import IAddress, IPushProducer, IReactorTime
from twisted.internet.protocol import Factory, Protocol, connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from brokerd.connlimit import DEFAULT_MAX_CONNECTIONS, ConnectionLimit
from brokerd.native import codec
from brokerd.native.codec import (
    DEFAULT_MAX_FETCH_BYTES,
    DEFAULT_MAX_PRODUCE_BYTES,
    ErrorCode,
    RequestType,
)
from brokerd.storage.types import AppendInfo, RecordsResult, TopicInfo
from brokerd.transport_types import DelayedCall, TimerClock, Transport, disable_nagle

__all__ = [
    "DEFAULT_FRAME_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "LONG_POLL_EAGER_READ_BYTES",
    "MAX_LONG_POLL_WAIT_MS",
    "MAX_UNREAD_SLACK_BYTES",
    "NativeCore",
    "NativeFactory",
    "NativeProtocol",
]

#: Close a connection that sent nothing and was sent nothing for this long (Kafka's
#: ``connections.max.idle.ms`` is 10 minutes too). ``None`` disables it.
DEFAULT_IDLE_TIMEOUT = 600.0
#: A frame must be complete this long after its first byte arrives, so a client trickling
#: one byte at a time (slowloris) cannot hold a connection and a partial buffer forever.
DEFAULT_FRAME_TIMEOUT = 30.0
#: A long poll waits at most this long whatever the client asks, so a parked request
#: cannot outlive every timeout (the idle timeout never fires while one is in flight).
MAX_LONG_POLL_WAIT_MS = 300_000
#: Undecoded input allowed beyond ``max_produce_bytes`` (which bounds one partial record)
#: before the connection is dropped. A transport stops delivering soon after it is paused,
#: so this only trips on a transport that ignores pauseProducing: defence in depth.
MAX_UNREAD_SLACK_BYTES = 4 * 1024 * 1024
#: While a long poll is parked, input is still read (not decoded) up to this many bytes,
#: so that the client closing the connection is noticed (see ``_update_reading``).
LONG_POLL_EAGER_READ_BYTES = 16 * 1024


class NativeCore(TypingProtocol):
    """What the native protocol needs from the broker core. Every method answers with a
    Deferred that fires in the reactor thread; failures carry ``brokerd.errors``
    exceptions. A synchronous raise is treated like a failed Deferred."""

    def produce_values(
        self, topic: str, partition: int, values: list[bytes]
    ) -> defer.Deferred[AppendInfo]: ...

    def fetch_records(
        self, topic: str, partition: int, offset: int, max_value_bytes: int
    ) -> defer.Deferred[RecordsResult]: ...

    def wait_records(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_value_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
    ) -> defer.Deferred[RecordsResult]: ...

    def create_topic(self, name: str, partitions: int) -> defer.Deferred[None]: ...

    def list_offsets(self, topic: str, partition: int) -> defer.Deferred[tuple[int, int]]: ...

    def list_topics(self) -> defer.Deferred[list[TopicInfo]]: ...


@implementer(IPushProducer)
class NativeProtocol(Protocol):
    """One client connection of the native protocol.

    Flow: ``dataReceived`` hands bytes to the decoder; :meth:`_pump` takes one decoded
    request at a time, but only while nothing is in flight and the client is reading our
    answers. Undecoded bytes wait in the decoder, and the transport is paused whenever
    the pump cannot take frames, so memory per connection stays bounded.
    """

    _log = Logger()

    def __init__(
        self,
        core: NativeCore,
        *,
        clock: IReactorTime,
        max_produce_bytes: int = DEFAULT_MAX_PRODUCE_BYTES,
        max_fetch_bytes: int = DEFAULT_MAX_FETCH_BYTES,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        frame_timeout: float | None = DEFAULT_FRAME_TIMEOUT,
    ) -> None:
        self._core = core
        self._clock = cast(TimerClock, clock)
        self._max_fetch_bytes = max_fetch_bytes
        self._idle_timeout = idle_timeout
        self._frame_timeout = frame_timeout
        self._decoder = codec.RequestDecoder(max_produce_bytes=max_produce_bytes)
        self._max_unread = max_produce_bytes + MAX_UNREAD_SLACK_BYTES
        self._in_flight: defer.Deferred[object] | None = None
        self._connected = False
        self._closing = False  # loseConnection/abortConnection called: take nothing more
        self._write_blocked = False  # the transport asked us to stop producing
        self._reading = True  # whether we last told the transport to read
        self._pumping = False  # re-entrancy guard: a core may answer synchronously
        self._parked = False  # the request in flight is a long poll
        self._idle_call: DelayedCall | None = None
        self._frame_call: DelayedCall | None = None

    # ----------------------------------------------------------------- Twisted overrides

    def connectionMade(self) -> None:
        self._connected = True
        disable_nagle(self.transport)
        # Our transport tells us when its send buffer is full: then we stop taking
        # requests, so a client that does not read cannot make us buffer answers forever.
        self._t.registerProducer(self, True)
        if self._idle_timeout is not None:
            self._idle_call = self._clock.callLater(self._idle_timeout, self._idle_expired)

    def dataReceived(self, data: bytes) -> None:
        if self._closing or not self._connected:
            return
        self._touch()
        self._decoder.receive(data)
        self._pump()
        if self._decoder.buffered > self._max_unread:
            self._log.warn(
                "native: closing connection: {n} bytes of unread input", n=self._decoder.buffered
            )
            self._close(abort=True)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self._connected and isinstance(self.factory, NativeFactory):
            self.factory.connections.release()
        self._connected = False
        self._closing = True
        for call in (self._idle_call, self._frame_call):
            if call is not None and call.active():
                call.cancel()
        self._idle_call = self._frame_call = None
        # Drop the undecoded input with the decoder.
        self._decoder = codec.RequestDecoder()
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            # A parked long poll (or any pending call) must not outlive its connection;
            # its late result is dropped because it is no longer ``_in_flight``.
            in_flight.cancel()

    # ----------------------------------------------------------------- IPushProducer

    def pauseProducing(self) -> None:
        self._write_blocked = True
        self._update_reading()
        self._update_frame_timer()

    def resumeProducing(self) -> None:
        self._write_blocked = False
        self._pump()

    def stopProducing(self) -> None:
        # The transport is going away; connectionLost does the cleanup.
        self._closing = True

    # ----------------------------------------------------------------- the pump

    @property
    def _t(self) -> Transport:
        return cast(Transport, self.transport)

    def _pump(self) -> None:
        """Serve decoded requests one at a time while we may."""
        if self._pumping:
            return  # the outer loop (further up this stack) carries on
        self._pumping = True
        try:
            while not self._closing and self._in_flight is None and not self._write_blocked:
                event = self._decoder.next_event()
                if event is None:
                    break
                if isinstance(event, codec.RequestError):
                    self._refuse(event)
                else:
                    self._dispatch(event)
        finally:
            self._pumping = False
        self._update_reading()
        self._update_frame_timer()

    def _update_reading(self) -> None:
        if self._closing:
            return  # a closing transport must not be resumed (and need not be paused)
        if self._write_blocked:
            want = False
        elif self._in_flight is None:
            want = True
        else:
            # A paused transport does not notice the peer closing, so a parked long poll
            # of a client that went away would wait out its full max_wait. While one is
            # parked, keep reading a little (requests stay undecoded) so a close is seen
            # and the poll is cancelled at once.
            want = self._parked and self._decoder.buffered < LONG_POLL_EAGER_READ_BYTES
        if want != self._reading:
            self._reading = want
            if want:
                self._t.resumeProducing()
            else:
                self._t.pauseProducing()

    def _refuse(self, error: codec.RequestError) -> None:
        self._write(codec.encode_error_response(error.request_type, error.code, error.message))
        if error.fatal:
            self._log.info("native: closing connection: {message}", message=error.message)
            self._close()

    def _dispatch(self, request: codec.Request) -> None:
        request_type, call = self._plan(request)
        d: defer.Deferred[object] = defer.maybeDeferred(call)
        # Set before adding callbacks: a core that answers synchronously runs them now.
        self._in_flight = d
        self._parked = request_type is RequestType.LONG_POLL_FETCH
        (
            d.addCallback(self._encode, request)
            .addErrback(self._encode_failure, request_type)
            .addCallback(self._finish, d)
            .addErrback(self._bug)
        )

    def _plan(self, request: codec.Request) -> tuple[RequestType, Callable[[], object]]:
        core = self._core
        match request:
            case codec.ProduceRequest():
                return RequestType.PRODUCE, lambda: core.produce_values(
                    request.topic, request.partition, list(request.values)
                )
            case codec.FetchRequest():
                return RequestType.FETCH, lambda: core.fetch_records(
                    request.topic, request.partition, request.offset, self._max_fetch_bytes
                )
            case codec.CreateTopicRequest():
                return RequestType.CREATE_TOPIC, lambda: core.create_topic(
                    request.topic, request.partitions
                )
            case codec.ListOffsetsRequest():
                return RequestType.LIST_OFFSETS, lambda: core.list_offsets(
                    request.topic, request.partition
                )
            case codec.ListTopicsRequest():
                return RequestType.LIST_TOPICS, core.list_topics
            case codec.LongPollFetchRequest():
                return RequestType.LONG_POLL_FETCH, lambda: core.wait_records(
                    request.topic,
                    request.partition,
                    request.offset,
                    max_value_bytes=min(request.max_bytes, self._max_fetch_bytes),
                    min_bytes=request.min_bytes,
                    max_wait_ms=min(request.max_wait_ms, MAX_LONG_POLL_WAIT_MS),
                )
        raise TypeError(f"not a native request: {request!r}")

    def _encode(self, result: object, request: codec.Request) -> bytes:
        """Turn the core's answer into response bytes."""
        match request:
            case codec.ProduceRequest():
                return codec.encode_produce_response(cast(AppendInfo, result).base_offset)
            case codec.FetchRequest():
                records = cast(RecordsResult, result).records
                return codec.encode_fetch_response([r.value for r in records])
            case codec.CreateTopicRequest():
                return codec.encode_create_topic_response()
            case codec.ListOffsetsRequest():
                start, high = cast(tuple[int, int], result)
                return codec.encode_list_offsets_response(start, high)
            case codec.ListTopicsRequest():
                topics = sorted(cast(Iterable[TopicInfo], result), key=lambda t: t.name)
                return codec.encode_list_topics_response((t.name, t.partitions) for t in topics)
            case codec.LongPollFetchRequest():
                found = cast(RecordsResult, result)
                return codec.encode_long_poll_fetch_response(
                    found.high_watermark, [(r.offset, r.value) for r in found.records]
                )
        raise TypeError(f"not a native request: {request!r}")

    def _encode_failure(self, failure: Failure, request_type: RequestType) -> bytes | None:
        if not self._connected:
            return None  # cancelled by connectionLost, or simply too late: nobody to tell
        exc = failure.value
        code = codec.error_code_for(exc) if exc is not None else None
        if code is None or code is ErrorCode.INTERNAL_ERROR:
            # A bug or an unexpected failure: log it for the operator. Only our own
            # errors' texts are meant for clients, so anything else stays generic.
            self._log.failure(
                "native request type {request_type} failed",
                failure=failure,
                request_type=int(request_type),
            )
        if code is None:
            return codec.encode_error_response(
                request_type, ErrorCode.INTERNAL_ERROR, "internal error"
            )
        return codec.encode_error_response(request_type, code, str(exc))

    def _finish(self, response: bytes | None, d: defer.Deferred[object]) -> None:
        if d is not self._in_flight or response is None:
            return  # the connection went away meanwhile: the result is dropped
        self._in_flight = None
        self._write(response)
        self._pump()

    def _bug(self, failure: Failure) -> None:
        # A failure here is a bug in this module, not the request's; the connection state
        # cannot be trusted after it.
        self._log.failure("native protocol internal error", failure=failure)
        self._in_flight = None
        if self._connected:
            self._close(abort=True)

    # ----------------------------------------------------------------- output and timers

    def _write(self, data: bytes) -> None:
        # The one place that writes to the transport (always in the reactor thread:
        # callbacks of the core's Deferreds fire there).
        self._touch()
        self._t.write(data)

    def _close(self, *, abort: bool = False) -> None:
        if self._closing:
            return
        self._closing = True
        if abort:
            self._t.abortConnection()
        else:
            self._t.loseConnection()

    def _touch(self) -> None:
        if self._idle_call is not None and self._idle_call.active():
            assert self._idle_timeout is not None
            self._idle_call.reset(self._idle_timeout)

    def _idle_expired(self) -> None:
        self._idle_call = None
        if self._in_flight is not None:
            # Waiting on the core (a long poll) is not idleness: look again later.
            assert self._idle_timeout is not None
            self._idle_call = self._clock.callLater(self._idle_timeout, self._idle_expired)
            return
        self._log.info("native: closing idle connection")
        # A client that stopped reading would keep a graceful close waiting forever.
        self._close(abort=self._write_blocked)

    def _update_frame_timer(self) -> None:
        """Run the frame deadline only while we are reading and a frame is incomplete."""
        if self._frame_timeout is None:
            return
        waiting_for_client = (
            not self._closing
            and self._in_flight is None
            and not self._write_blocked
            and self._decoder.in_frame
        )
        call = self._frame_call
        if waiting_for_client:
            if call is None or not call.active():
                self._frame_call = self._clock.callLater(self._frame_timeout, self._frame_expired)
        elif call is not None:
            if call.active():
                call.cancel()
            self._frame_call = None

    def _frame_expired(self) -> None:
        self._frame_call = None
        self._log.info(
            "native: closing connection: frame not completed in {seconds}s",
            seconds=self._frame_timeout,
        )
        self._close(abort=True)


class NativeFactory(Factory):
    """Builds :class:`NativeProtocol` instances sharing one core and one set of limits."""

    def __init__(
        self,
        broker: NativeCore,
        *,
        clock: IReactorTime,
        max_produce_bytes: int = DEFAULT_MAX_PRODUCE_BYTES,
        max_fetch_bytes: int = DEFAULT_MAX_FETCH_BYTES,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        frame_timeout: float | None = DEFAULT_FRAME_TIMEOUT,
        max_connections: int | None = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self.broker = broker
        self.connections = ConnectionLimit(max_connections, "native listener")
        self.clock = clock
        self.max_produce_bytes = max_produce_bytes
        self.max_fetch_bytes = max_fetch_bytes
        self.idle_timeout = idle_timeout
        self.frame_timeout = frame_timeout

    def buildProtocol(self, addr: IAddress | None) -> NativeProtocol | None:
        if not self.connections.admit():
            return None  # Twisted closes the socket at once
        proto = NativeProtocol(
            self.broker,
            clock=self.clock,
            max_produce_bytes=self.max_produce_bytes,
            max_fetch_bytes=self.max_fetch_bytes,
            idle_timeout=self.idle_timeout,
            frame_timeout=self.frame_timeout,
        )
        proto.factory = self
        return proto
