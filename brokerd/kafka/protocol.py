# -*- test-case-name: tests.test_kafka_protocol -*-
"""Twisted glue for the Kafka listener: one :class:`KafkaProtocol` per connection.

What this module does: feeds received bytes to the sans-IO
:class:`~brokerd.kafka.codec.FrameDecoder`, decodes one request at a time
(:mod:`brokerd.kafka.apis`), hands it to :class:`~brokerd.kafka.handlers.KafkaHandlers`,
and writes the encoded responses strictly in request order. It owns the per-connection
policies:

* one request in flight, except that up to :data:`MAX_PIPELINED_PRODUCES` consecutive
  Produce requests run together (answered in order), so that a client pipelining small
  produces shares one group commit instead of paying one fsync per request; later
  frames wait, and reading pauses once more than :data:`PIPELINE_READ_BYTES` of them
  are buffered (so memory stays bounded, yet a client that disconnects during a long
  poll is still noticed and its wait cancelled);
* requests received in full before the client disconnected are still carried out
  (unanswered), so an acks=0 produce or a LeaveGroup sent just before closing counts;
* write-side flow control: it registers as a streaming producer on its transport and
  stops taking requests (and reading) while the client does not read its responses;
* acks=0 Produce gets no response at all (and a failed one closes the connection);
* an unknown API key, an unsupported version (other than ApiVersions, which gets the
  version-0 fallback), a malformed request, or a bad frame size closes the connection,
  as Kafka does, with a log line saying why;
* an idle timeout (Kafka's ``connections.max.idle.ms``) and a frame-completion deadline.

What it does not do: parse or build bytes (the codecs do), know what any API means (the
handlers do), touch files or threads, or use the global reactor (the clock is injected).
"""

from __future__ import annotations

from collections import deque
from typing import Any, cast

from twisted.internet.interfaces import IPushProducer, IReactorTime
from twisted.internet.protocol import Factory, Protocol, connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from brokerd.connlimit import DEFAULT_MAX_CONNECTIONS, ConnectionLimit
from brokerd.kafka import apis, codec
from brokerd.kafka.codec import ApiKey, CodecError, FrameError
from brokerd.kafka.handlers import (
    DEFAULT_PARTITIONS,
    Clock,
    Connection,
    GroupCoordinatorLike,
    KafkaCore,
    KafkaHandlers,
    Outcome,
)
from brokerd.transport_types import DelayedCall, TimerClock, Transport, disable_nagle

#: Cluster id reported in Metadata v2+: any stable string; clients only compare it.
DEFAULT_CLUSTER_ID = "brokerd-single-node"
#: While a request is in flight, keep reading until this much pipelined input is
#: buffered, then pause the transport (Twisted's HTTPChannel does the same with 16 KiB).
#: Reading on is what lets us notice a disconnect during a long poll.
PIPELINE_READ_BYTES = 64 * 1024
#: Consecutive Produce requests of one connection that may be in flight together. Their
#: appends are queued in arrival order (per partition, the core keeps that order), and
#: responses are written in request order; anything else waits for them to finish.
MAX_PIPELINED_PRODUCES = 16
#: Close a connection with no traffic either way for this long (Kafka's
#: ``connections.max.idle.ms`` default). A parked request does not count as idle.
DEFAULT_IDLE_TIMEOUT = 600.0
#: A frame must be complete this long after its first byte arrived, so that a client
#: trickling bytes cannot hold a partial buffer forever.
DEFAULT_FRAME_TIMEOUT = 60.0


@implementer(IPushProducer)
class KafkaProtocol(Protocol):
    """One Kafka client connection. See the module docstring for its policies."""

    _log = Logger()

    def __init__(self, factory: KafkaFactory) -> None:
        self._factory = factory
        self._handlers = factory.handlers
        self._clock = cast(TimerClock, factory.clock)
        self._decoder = codec.FrameDecoder(factory.max_frame_bytes)
        self._pending: deque[bytes] = deque()
        self._pending_bytes = 0
        self._conn = Connection("")
        # Requests dispatched and not yet answered, oldest first: one, or a run of
        # produces. Each slot is [request, deferred, done, result].
        self._in_flight: deque[list[Any]] = deque()
        self._connected = False
        self._closing = False  # we asked the transport to close: take nothing more
        self._write_blocked = False  # the transport asked us to stop producing
        self._reading = True  # whether we last told the transport to read
        self._pumping = False  # re-entrancy guard: handlers may answer synchronously
        self._idle_call: DelayedCall | None = None
        self._frame_call: DelayedCall | None = None

    # ----------------------------------------------------------------- Twisted overrides

    def connectionMade(self) -> None:
        self._connected = True
        disable_nagle(self.transport)
        peer = self._t.getPeer()
        self._conn = Connection("/" + str(getattr(peer, "host", "")))
        # The transport tells us when its send buffer is full; we then stop taking
        # requests, so a client that does not read cannot make us buffer without end.
        self._t.registerProducer(self, True)
        if self._factory.idle_timeout is not None:
            self._idle_call = self._clock.callLater(
                self._factory.idle_timeout, self._idle_expired
            )

    def dataReceived(self, data: bytes) -> None:
        if self._closing or not self._connected:
            return
        self._touch()
        try:
            frames = self._decoder.feed(data)
        except FrameError as e:
            self._log.info("kafka: closing connection from {peer}: {error}",
                           peer=self._conn.client_host, error=str(e))
            self._close(abort=True)
            return
        for f in frames:
            self._pending.append(f)
            self._pending_bytes += len(f)
        self._pump()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self._connected:
            self._factory.connections.release()
        self._connected = False
        self._write_blocked = False
        for call in (self._idle_call, self._frame_call):
            if call is not None and call.active():
                call.cancel()
        self._idle_call = self._frame_call = None
        self._decoder = codec.FrameDecoder(self._factory.max_frame_bytes)
        # Cancels a parked long-poll fetch or a held JoinGroup/SyncGroup: nobody waits
        # for their answers any more.
        self._conn.close()
        # Requests received in full before the client closed are still carried out, in
        # order and unanswered, as Kafka does: a client may send acks=0 produces, a
        # commit or a LeaveGroup and close at once. (Fetches are skipped: no effect.)
        self._pump()

    # ----------------------------------------------------------------- IPushProducer

    def pauseProducing(self) -> None:
        self._write_blocked = True
        self._update_reading()

    def resumeProducing(self) -> None:
        self._write_blocked = False
        self._pump()

    def stopProducing(self) -> None:
        pass  # the transport is going away; connectionLost does the rest

    # ----------------------------------------------------------------- the pump

    @property
    def _t(self) -> Transport:
        return cast(Transport, self.transport)

    def _pump(self) -> None:
        """Serve queued frames one at a time while we may."""
        if self._pumping:
            return  # the loop further up this stack carries on
        self._pumping = True
        try:
            while not self._closing and not self._write_blocked and self._may_dispatch():
                payload = self._pending.popleft()
                self._pending_bytes -= len(payload)
                self._dispatch(payload)
        finally:
            self._pumping = False
        self._update_reading()
        self._update_frame_timer()

    def _may_dispatch(self) -> bool:
        if not self._pending:
            return False
        if not self._in_flight:
            return True
        return (
            len(self._in_flight) < MAX_PIPELINED_PRODUCES
            and _is_produce(self._pending[0])
            and all(slot[0].api_key is ApiKey.PRODUCE for slot in self._in_flight)
        )

    def _update_reading(self) -> None:
        if self._closing or not self._connected:
            return  # a closing transport must not be resumed (and need not be paused)
        buffered = self._pending_bytes + self._decoder.buffered
        want = not self._write_blocked and (
            not self._in_flight or buffered < PIPELINE_READ_BYTES
        )
        if want != self._reading:
            self._reading = want
            if want:
                self._t.resumeProducing()
            else:
                self._t.pauseProducing()

    def _dispatch(self, payload: bytes) -> None:
        try:
            request = apis.decode_request(payload)
        except apis.UnsupportedVersion as e:
            if e.api_key is ApiKey.API_VERSIONS:
                # Never close here: old librdkafka would take it for a pre-0.10 broker.
                self._write(apis.api_versions_fallback(e.correlation_id))
                return
            self._refuse(str(e))
            return
        except CodecError as e:
            self._refuse(str(e))
            return
        if not self._connected and request.api_key is ApiKey.FETCH:
            return  # the client is gone and a fetch changes nothing
        d = self._handlers.handle(self._conn, request)
        # Queued before adding callbacks: a handler that answers synchronously runs them now.
        slot: list[Any] = [request, d, False, None]
        self._in_flight.append(slot)
        d.addCallbacks(
            self._respond, self._failed, callbackArgs=(slot,), errbackArgs=(slot,)
        ).addErrback(self._bug)

    def _refuse(self, why: str) -> None:
        self._log.info("kafka: closing connection from {peer}: {why}",
                       peer=self._conn.client_host, why=why)
        self._close()
        self._closing = True  # even when already disconnected: serve nothing more

    def _respond(self, result: object, slot: list[Any]) -> None:
        if not any(s is slot for s in self._in_flight):
            return  # the connection was closed on purpose meanwhile
        slot[2], slot[3] = True, result
        # Answer in request order: a later produce that finished first waits its turn.
        while self._in_flight and self._in_flight[0][2]:
            request, _, _, result = self._in_flight.popleft()
            if result is Outcome.NO_RESPONSE or self._closing or not self._connected:
                pass  # acks=0, or the connection is going away: nobody to answer
            elif result is Outcome.CLOSE_CONNECTION:
                self._close()
                return
            else:
                self._write(apis.encode_response(
                    request.header.correlation_id, request.api_version, result))
        self._pump()

    def _bug(self, failure: Failure) -> None:
        # A failure here is a bug in this module or the codec (say, a response that does
        # not encode); the connection's state cannot be trusted after it.
        self._log.failure("kafka protocol internal error", failure=failure)
        self._in_flight.clear()
        self._close(abort=True)

    def _failed(self, failure: Failure, slot: list[Any]) -> None:
        if not any(s is slot for s in self._in_flight):
            return  # the connection was closed on purpose meanwhile
        request = slot[0]
        self._in_flight.clear()
        # Every expected error is an error code inside a response; this is a bug, and
        # the request cannot be answered in its API's terms: close, as Kafka does.
        self._log.failure(
            "kafka: {api} v{version} failed; closing the connection",
            failure=failure, api=request.api_key.name, version=request.api_version,
        )
        self._close(abort=True)

    # ----------------------------------------------------------------- output and timers

    def _write(self, data: bytes) -> None:
        # The one place that writes to the transport (always in the reactor thread).
        if not self._connected:
            return
        self._touch()
        self._t.write(data)

    def _close(self, *, abort: bool = False) -> None:
        if self._closing:
            return
        self._closing = True
        self._pending.clear()
        self._pending_bytes = 0
        if not self._connected:
            return
        if abort:
            self._t.abortConnection()
        else:
            self._t.loseConnection()

    def _touch(self) -> None:
        timeout = self._factory.idle_timeout
        if timeout is not None and self._idle_call is not None and self._idle_call.active():
            self._idle_call.reset(timeout)

    def _idle_expired(self) -> None:
        self._idle_call = None
        timeout = self._factory.idle_timeout
        assert timeout is not None
        if self._in_flight:
            # Waiting on the broker (a long poll, a held JoinGroup) is not idleness.
            self._idle_call = self._clock.callLater(timeout, self._idle_expired)
            return
        self._log.info("kafka: closing idle connection from {peer}",
                       peer=self._conn.client_host)
        # A client that stopped reading would keep a graceful close waiting forever.
        self._close(abort=self._write_blocked)

    def _update_frame_timer(self) -> None:
        """Run the frame deadline only while a frame is incomplete and we read."""
        timeout = self._factory.frame_timeout
        if timeout is None:
            return
        waiting_for_client = (
            not self._closing and self._reading and self._decoder.buffered > 0
        )
        call = self._frame_call
        if waiting_for_client:
            if call is None or not call.active():
                self._frame_call = self._clock.callLater(timeout, self._frame_expired)
        elif call is not None:
            if call.active():
                call.cancel()
            self._frame_call = None

    def _frame_expired(self) -> None:
        self._frame_call = None
        if not self._reading or self._decoder.buffered == 0:
            return
        self._log.info("kafka: closing connection from {peer}: frame not completed in {s}s",
                       peer=self._conn.client_host, s=self._factory.frame_timeout)
        self._close(abort=True)


def _is_produce(payload: bytes) -> bool:
    """Whether a frame is a Produce request (its first two bytes are the API key)."""
    return len(payload) >= 2 and payload[0] == 0 and payload[1] == ApiKey.PRODUCE


class KafkaFactory(Factory):
    """Builds :class:`KafkaProtocol` instances sharing one core, coordinator and limits.

    ``advertised_host`` / ``advertised_port`` are what Metadata and FindCoordinator tell
    clients to connect to; they are plain attributes, read on every request, because
    the port of a ``tcp:0`` listener is only known after it binds.

    :param core: the broker core (:class:`~brokerd.kafka.handlers.KafkaCore`).
    :param coordinator: the group coordinator
        (:class:`~brokerd.kafka.handlers.GroupCoordinatorLike`).
    :param clock: provides ``callLater`` (the reactor, or ``task.Clock`` in tests).
    :param node_id: this broker's node id in Metadata and FindCoordinator.
    :param max_frame_bytes: largest request accepted; a larger size prefix closes the
        connection before any of the frame is buffered.
    :param cluster_id: reported in Metadata v2+.
    :param idle_timeout: seconds without traffic before closing; None = never.
    :param frame_timeout: seconds a started frame may take to arrive; None = forever.
    :param default_partitions: partitions of a CreateTopics topic with num_partitions -1
        (pass the broker's ``--default-partitions``).
    """

    def __init__(
        self,
        core: KafkaCore,
        coordinator: GroupCoordinatorLike,
        *,
        clock: IReactorTime,
        advertised_host: str,
        advertised_port: int,
        node_id: int = 0,
        max_frame_bytes: int = codec.DEFAULT_MAX_FRAME_BYTES,
        cluster_id: str = DEFAULT_CLUSTER_ID,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        frame_timeout: float | None = DEFAULT_FRAME_TIMEOUT,
        default_partitions: int = DEFAULT_PARTITIONS,
        max_connections: int | None = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.connections = ConnectionLimit(max_connections, "kafka listener")
        self.core = core
        self.coordinator = coordinator
        self.clock = clock
        self.advertised_host = advertised_host
        self.advertised_port = advertised_port
        self.node_id = node_id
        self.max_frame_bytes = max_frame_bytes
        self.cluster_id = cluster_id
        self.idle_timeout = idle_timeout
        self.frame_timeout = frame_timeout
        self.handlers = KafkaHandlers(
            core, coordinator, self, clock=cast(Clock, clock),
            default_partitions=default_partitions,
        )

    def buildProtocol(self, addr: Any) -> KafkaProtocol | None:
        if not self.connections.admit():
            return None  # Twisted closes the socket at once
        return KafkaProtocol(self)


__all__ = [
    "DEFAULT_CLUSTER_ID",
    "DEFAULT_FRAME_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "MAX_PIPELINED_PRODUCES",
    "PIPELINE_READ_BYTES",
    "KafkaFactory",
    "KafkaProtocol",
]
