# -*- test-case-name: tests.kafka.listener.test_protocol -*-
"""Twisted glue for the Kafka listener: one :class:`KafkaProtocol` per connection.

What this module does: supplies the Kafka decoder and dispatch to the shared connection
machinery (:class:`brokerd.net.connection.RequestConnection`, which owns flow control, read
pausing, the idle and frame deadlines, closing and the connection limit). It feeds
received bytes to the sans-IO :class:`~brokerd.kafka.wire.codec.FrameDecoder`, decodes one
request at a time (:mod:`brokerd.kafka.wire.requests.apis`), hands it to
:class:`~brokerd.kafka.listener.dispatch.KafkaHandlers`, and writes the encoded responses strictly
in request order. Its own policies:

* one request in flight, except that up to :data:`MAX_PIPELINED_PRODUCES` consecutive
  Produce requests run together (answered in order), so that a client pipelining small
  produces shares one group commit instead of paying one fsync per request; later
  frames wait, and reading pauses once more than :data:`PIPELINE_READ_BYTES` of them
  are buffered (so memory stays bounded, yet a client that disconnects during a long
  poll is still noticed and its wait cancelled);
* requests received in full before the client disconnected are still carried out
  (unanswered), so an acks=0 produce or a LeaveGroup sent just before closing counts;
* acks=0 Produce gets no response at all (and a failed one closes the connection);
* an unknown API key, an unsupported version (other than ApiVersions, which gets the
  version-0 fallback), a malformed request, or a bad frame size closes the connection,
  as Kafka does, with a log line saying why;
* the idle timeout is Kafka's ``connections.max.idle.ms``;
* with SASL enabled (the factory's ``sasl``), a connection may send only ApiVersions,
  SaslHandshake and SaslAuthenticate until it has authenticated; anything else closes
  it, as does a failed authentication (after its answer). After a SaslHandshake v0 the
  client's next frames are raw SASL tokens, answered with raw size-prefixed tokens
  (Kafka's original framing); a failure then closes without an answer. On success
  ``state.principal`` becomes ``"User:<name>"``. Until then a frame may be at most
  ``limits.sasl_max_receive_bytes`` (Kafka's ``sasl.server.max.receive.size``); a larger size
  prefix closes the connection before any of the frame is read (logged at a bounded
  rate: a flood of them cannot fill the log). An answer the SASL session says to
  hold (a failure, or an attempt of a user that failed recently from this address)
  is sent that much later through ``callLater``; nothing else of the connection is
  served meanwhile, and failure log lines are rate-limited;
* every frame is reserved from the broker-wide request budget as it arrives
  (``brokerd.net.request_budget``: the announced rest in full once one read of it is
  here), and given back when its request is answered; a frame larger than the whole
  budget is refused as too large.

What it does not do: parse or build bytes (the codecs do), know what any API means (the
handlers do), touch files or threads, or use the global reactor (the clock is injected).
"""

from __future__ import annotations

from collections import deque
from time import perf_counter
from typing import TYPE_CHECKING, Any, cast

import attrs
from twisted.internet import defer
from twisted.internet.interfaces import IAddress, IReactorTime
from twisted.internet.protocol import Factory
from twisted.python.failure import Failure

from brokerd.clock import Clock
from brokerd.core.api import CoreApi
from brokerd.core.quotas.manager import QuotaManager
from brokerd.kafka.listener.dispatch import (
    DEFAULT_PARTITIONS,
    KafkaHandlers,
    Outcome,
    RequestContext,
)
from brokerd.kafka.listener.factory_parts import (
    DEFAULT_FRAME_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_LIMITS,
    DEFAULT_SASL_MAX_RECEIVE_BYTES,
    IN_MEMORY_CLIENTS,
    OPEN_SECURITY,
    ClientServices,
    ConnectionLimits,
    ListenerEdge,
    ListenerSecurity,
)
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.server.handlers.sasl import SASL_API_KEYS, answer_sasl
from brokerd.kafka.server.observe import observe_kafka
from brokerd.kafka.server.sasl_session import SaslConfig, SaslFailed, SaslSession
from brokerd.kafka.server.throttle import QuotaEnforcer
from brokerd.kafka.wire import codec
from brokerd.kafka.wire.codec import ApiKey, CodecError, FrameError, FrameTooLarge
from brokerd.kafka.wire.requests import apis
from brokerd.net.connection import RequestConnection
from brokerd.net.connlimit import ConnectionLimit
from brokerd.net.refusals import RefusalLog

if TYPE_CHECKING:
    pass

#: Seconds between writing the answer to a failed authentication and closing the
#: connection: a client that handles the close before reading what arrived
#: (kafka-python does) still learns why. Nothing more is served meanwhile. (The answer
#: itself waits first: ``--connection-failed-authentication-delay-ms``.)
FAILED_AUTHENTICATION_CLOSE_DELAY = 0.1
#: What a connection may send before it has authenticated on a SASL listener.
_BEFORE_AUTHENTICATION = SASL_API_KEYS | {ApiKey.API_VERSIONS}

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


class KafkaProtocol(RequestConnection[apis.AnyRequest, object]):
    """One Kafka client connection. See the module docstring for its policies.

    Complete frames are split off at once and queue (undecoded) in ``_pending``; each is
    decoded when its turn comes. Answers are the handlers' response messages or an
    :class:`~brokerd.kafka.listener.dispatch.Outcome`.
    """

    protocolName = "kafka"

    def __init__(self, factory: KafkaFactory) -> None:
        super().__init__(
            clock=factory.clock,
            idle_timeout=factory.limits.idle_timeout,
            frame_timeout=factory.limits.frame_timeout,
            connection_limit=factory.connections,
            request_budget=factory.edge.request_budget,
        )
        self._factory = factory
        self.metrics = factory.edge.metrics
        self.answer_budget = factory.edge.answer_budget
        self._handlers = factory.handlers
        self._decoder = codec.FrameDecoder(factory.frame_limit(authenticated=False))
        self._pending: deque[bytes] = deque()
        self._pending_bytes = 0
        self._handed_bytes = 0  # the frame of the request nextRequest returned last
        self._conn = RequestContext("")
        self._sasl: SaslSession | None = None
        self._close_after_answer = False
        self._auth_failed = False  # answered a failed authentication: close soon
        self._holding_raw_token = False  # a raw SASL token answer waits for its delay
        self._quotas = factory.quotas
        # While some quota is set: per request handed out (by id), its frame size and
        # the reactor time spent on it so far.
        self._charges: dict[int, list[float]] = {}

    def connectionMade(self) -> None:
        super().connectionMade()
        self._conn = RequestContext("/" + self.state.peer_host, self.state)
        self._conn.client_port = int(getattr(self._t.getPeer(), "port", 0) or 0)

    # ----------------------------------------------------------------- decoding

    def requestDataReceived(self, data: bytes) -> None:
        if self._auth_failed:
            return  # about to close: nothing more is served
        if self._sasl is None and self._factory.sasl is not None:
            # Made with the first bytes, not in connectionMade: a TLS handshake
            # completes (setting ``state.tls``) only after connectionMade, and the
            # session offers PLAIN only on an encrypted connection.
            self._sasl = SaslSession(
                self._factory.sasl, tls=self.state.tls, peer=self.state.peer_host
            )
        try:
            frames = self._decoder.feed(data)
        except FrameTooLarge as e:
            self._decoder = codec.FrameDecoder(self._factory.limits.max_frame_bytes)  # hold nothing
            if self._sasl is not None and not self._sasl.authenticated:
                self._factory.unauthenticated_refusals.refused(
                    "kafka: closing connection from {peer}: before SASL authentication, "
                    "{error} (see --sasl-server-max-receive-size)",
                    peer=self._conn.client_host, error=str(e))
            else:
                self._log.info("kafka: closing connection from {peer}: {error}",
                               peer=self._conn.client_host, error=str(e))
            self.close(abort=True)
            return
        except FrameError as e:
            self._decoder = codec.FrameDecoder(self._factory.limits.max_frame_bytes)
            self._log.info("kafka: closing connection from {peer}: {error}",
                           peer=self._conn.client_host, error=str(e))
            self.close(abort=True)
            return
        for f in frames:
            self._pending.append(f)
            self._pending_bytes += len(f)

    def nextRequest(self) -> apis.AnyRequest | None:
        while (
            not self.closing and not self.blocked and not self._auth_failed
            and not self._holding_raw_token and self._may_dispatch()
        ):
            payload = self._pending.popleft()
            self._pending_bytes -= len(payload)
            self._handed_bytes = len(payload)
            if self._sasl is not None and self._sasl.raw_tokens and self._sasl.awaiting_tokens:
                self._raw_token(self._sasl, payload)
                continue
            request = self._decode(payload)
            if request is None:
                continue  # answered or refused already
            if (
                self._sasl is not None
                and not self._sasl.authenticated
                and request.api_key not in _BEFORE_AUTHENTICATION
            ):
                self._refuse(f"{request.api_key.name} before SASL authentication")
                continue
            if not self.isConnected and request.api_key is ApiKey.FETCH:
                continue  # the client is gone and a fetch changes nothing
            return request
        return None

    def _may_dispatch(self) -> bool:
        if not self._pending:
            return False
        in_flight = self.inFlight
        if not in_flight:
            return True
        return (
            len(in_flight) < MAX_PIPELINED_PRODUCES
            and _is_produce(self._pending[0])
            and all(request.api_key is ApiKey.PRODUCE for request in in_flight)
        )

    def _decode(self, payload: bytes) -> apis.AnyRequest | None:
        try:
            return apis.decode_request(payload)
        except apis.UnsupportedVersion as e:
            if e.api_key is ApiKey.API_VERSIONS:
                # Never close here: old librdkafka would take it for a pre-0.10 broker.
                self.write(apis.api_versions_fallback(e.correlation_id))
                return None
            self._refuse(str(e))
        except CodecError as e:
            self._refuse(str(e))
        return None

    def _raw_token(self, session: SaslSession, token: bytes) -> None:
        """A raw SASL token (after SaslHandshake v0): answer with a raw token frame."""
        try:
            answer = session.token(token)
        except SaslFailed as e:
            self._sasl_failed(e.log, e.kind)
            self._auth_failed = True
            self._clock.callLater(e.delay, self._refuse_quietly)
            return
        if session.answer_delay > 0:
            self._holding_raw_token = True
            self._clock.callLater(session.answer_delay, self._release_raw_token, session, answer)
            return
        self.write(codec.frame(answer))
        self._authenticated(session)

    def _release_raw_token(self, session: SaslSession, answer: bytes) -> None:
        self._holding_raw_token = False
        if self.closing or not self.isConnected:
            return
        self.write(codec.frame(answer))
        self._authenticated(session)
        self._pump()

    def _authenticated(self, session: SaslSession) -> None:
        if session.authenticated:
            self._decoder.max_frame_bytes = self._factory.frame_limit(authenticated=True)
        if session.principal is not None and self.state.principal != session.principal:
            self.state.principal = session.principal
            self._log.info("kafka: {peer} authenticated as {principal} ({mechanism})",
                           peer=self._conn.client_host, principal=session.principal,
                           mechanism=session.mechanism)

    def _sasl_failed(self, why: str, kind: str) -> None:
        config = self._factory.sasl
        suppressed = 0 if config is None else config.failure_log.admit(kind)
        if suppressed is None:
            return  # counted; told with the next line of its kind
        more = f" ({suppressed} more {kind} failures not logged)" if suppressed else ""
        self._log.warn("kafka: SASL authentication from {peer} failed: {why}{more}",
                       peer=self._conn.client_host, why=why, more=more)

    def _close_after_failure(self) -> None:
        self._auth_failed = True
        self.schedule(FAILED_AUTHENTICATION_CLOSE_DELAY, self._refuse_quietly)

    def _refuse_quietly(self) -> None:
        self.close()  # even when already disconnected: serve nothing more

    def _refuse(self, why: str) -> None:
        self._log.info("kafka: closing connection from {peer}: {why}",
                       peer=self._conn.client_host, why=why)
        self.close()  # even when already disconnected: serve nothing more

    def framePending(self) -> bool:
        return self._decoder.buffered > 0  # complete frames are in _pending already

    def readAhead(self) -> bool:
        # Keep reading behind a busy request up to a bound: pipelined produces can join
        # it, and a client's disconnect during a long poll is noticed.
        return self._pending_bytes + self._decoder.buffered < PIPELINE_READ_BYTES

    def inputHeld(self) -> int:
        return self._pending_bytes + self._decoder.buffered

    def inputOwed(self) -> int:
        return self._decoder.owed

    def inputArrived(self) -> int:
        return self._decoder.buffered  # complete frames are split off: the one owed

    def lastRequestBytes(self) -> int:
        return self._handed_bytes

    def inputDiscarded(self) -> None:
        self._pending.clear()
        self._pending_bytes = 0

    def requestsAbandoned(self) -> None:
        self._decoder = codec.FrameDecoder(self._factory.limits.max_frame_bytes)
        # Cancels a parked long-poll fetch or a held JoinGroup/SyncGroup: nobody waits
        # for their answers any more.
        self._conn.close()
        # Requests received in full before the client closed are still carried out, in
        # order and unanswered, as Kafka does: a client may send acks=0 produces, a
        # commit or a LeaveGroup and close at once. (Fetches are skipped: no effect.)
        self._pump()

    # ----------------------------------------------------------------- dispatch

    def handleRequest(self, request: apis.AnyRequest) -> defer.Deferred[object]:
        started = self.metrics.now()
        quotas = self._quotas
        if quotas.quotas.keys_set and request.api_key not in SASL_API_KEYS:
            return self._handle_charged(quotas, request, started)
        return observe_kafka(self.metrics, request, started, self._dispatch(request))

    def _handle_charged(
        self, quotas: QuotaEnforcer, request: apis.AnyRequest, started: float
    ) -> defer.Deferred[object]:
        """Dispatch while client quotas are set: note the request's size and time (and
        cut a fetch to what the consumer quota allows in its window)."""
        begun = perf_counter()
        # Keyed by the request handed out: its answer is delivered with that one.
        charge = [float(self._handed_bytes), 0.0]
        self._charges[id(request)] = charge
        if request.api_key is ApiKey.FETCH:
            cap = quotas.fetch_cap(self.state.principal, request.header.client_id)
            if cap is not None and cap < request.body.max_bytes:
                body = request.body
                request = attrs.evolve(request, body=attrs.evolve(
                    body, max_bytes=cap, min_bytes=min(body.min_bytes, cap)))
        d = observe_kafka(self.metrics, request, started, self._dispatch(request))
        charge[1] += perf_counter() - begun
        return d

    def _dispatch(self, request: apis.AnyRequest) -> defer.Deferred[object]:
        if request.api_key in SASL_API_KEYS:
            # Answered here, synchronously: they change this connection's state, and the
            # next frame must be read in the state they leave.
            answer = answer_sasl(self._sasl, request)
            if answer.failure is not None:
                self._sasl_failed(answer.failure, answer.failure_kind)
            if answer.close:
                self._close_after_answer = True
            elif self._sasl is not None:
                self._authenticated(self._sasl)
            if answer.delay > 0:
                # Later frames wait behind this one, so none is served meanwhile.
                held: defer.Deferred[object] = defer.Deferred()
                self._clock.callLater(answer.delay, held.callback, answer.response)
                return held
            return defer.succeed(answer.response)
        return self._handlers.handle(self._conn, request)

    def deliverAnswer(self, request: apis.AnyRequest, answer: object) -> bool:
        charge = self._charges.pop(id(request), None) if self._charges else None
        if charge is not None:
            return self._deliver_charged(self._quotas, request, answer, charge)
        if answer is Outcome.NO_RESPONSE or self.closing or not self.isConnected:
            return True  # acks=0, or the connection is going away: nobody to answer
        if answer is Outcome.CLOSE_CONNECTION:
            self.close()
            return False
        self.write(apis.encode_response(
            request.header.correlation_id, request.api_version, answer))
        if self._close_after_answer:
            self._close_after_failure()
            return False
        return True

    def _deliver_charged(
        self, quotas: QuotaEnforcer, request: apis.AnyRequest, answer: object,
        charge: list[float],
    ) -> bool:
        """Charge the request to its client quotas, answer it (with its throttle time)
        and mute the connection for that long."""
        begun = perf_counter()
        response: Any = None if isinstance(answer, Outcome) else answer
        frame = None
        answer_bytes = 0
        if request.api_key is ApiKey.FETCH and response is not None:
            frame = apis.encode_response(
                request.header.correlation_id, request.api_version, response)
            answer_bytes = frame.size if not isinstance(frame, bytes) else len(frame)
        charged = quotas.charge(
            request.api_key, self.state.principal, request.header.client_id, response,
            int(charge[0]), answer_bytes, charge[1] + (perf_counter() - begun),
        )
        if charged.throttle_ms > 0:
            frame = None  # the answer changed (its throttle time, an emptied fetch)
        if isinstance(answer, Outcome):
            go_on = self._deliver_outcome(answer)
        elif self.closing or not self.isConnected:
            return True
        else:
            self.write(frame if frame is not None else apis.encode_response(
                request.header.correlation_id, request.api_version, charged.answer))
            go_on = True
        if charged.throttle_ms > 0 and go_on:
            self.mute(charged.throttle_ms / 1000.0)
        return go_on

    def _deliver_outcome(self, outcome: Outcome) -> bool:
        if outcome is Outcome.CLOSE_CONNECTION and not self.closing and self.isConnected:
            self.close()
            return False
        return True

    def requestFailed(self, failure: Failure, request: apis.AnyRequest) -> None:
        # Every expected error is an error code inside a response; this is a bug, and
        # the request cannot be answered in its API's terms: close, as Kafka does.
        self._log.failure(
            "kafka: {api} v{version} failed; closing the connection",
            failure=failure, api=request.api_key.name, version=request.api_version,
        )


def _is_produce(payload: bytes) -> bool:
    """Whether a frame is a Produce request (its first two bytes are the API key)."""
    return len(payload) >= 2 and payload[0] == 0 and payload[1] == ApiKey.PRODUCE


class KafkaFactory(Factory):
    """Builds :class:`KafkaProtocol` instances sharing one core, coordinator and limits.

    ``advertised_host`` / ``advertised_port`` are what Metadata and FindCoordinator tell
    clients to connect to; they are plain attributes, read on every request, because
    the port of a ``tcp:0`` listener is only known after it binds.

    :param core: the broker core (:class:`~brokerd.core.api.CoreApi`).
    :param coordinators: the coordinators the handlers answer from
        (:class:`~brokerd.kafka.server.coordinators.KafkaCoordinators`).
    :param clock: provides ``callLater`` (the reactor, or ``task.Clock`` in tests).
    :param node_id: this broker's node id in Metadata and FindCoordinator.
    :param cluster_id: reported in Metadata v2+.
    :param default_partitions: partitions of a CreateTopics topic with num_partitions -1
        (pass the broker's ``--default-partitions``).
    :param limits: sizes, deadlines and counts
        (:class:`~brokerd.kafka.listener.factory_parts.ConnectionLimits`).
    :param security: authorizer, ACL APIs, SASL and SCRAM credentials
        (:class:`~brokerd.kafka.listener.factory_parts.ListenerSecurity`).
    :param edge: the budgets, address limits and metrics shared with the broker's edge
        (:class:`~brokerd.kafka.listener.factory_parts.ListenerEdge`).
    :param clients: client telemetry and quotas
        (:class:`~brokerd.kafka.listener.factory_parts.ClientServices`).
    """

    def __init__(
        self,
        core: CoreApi,
        coordinators: KafkaCoordinators,
        *,
        clock: IReactorTime,
        advertised_host: str,
        advertised_port: int,
        node_id: int = 0,
        cluster_id: str = DEFAULT_CLUSTER_ID,
        default_partitions: int = DEFAULT_PARTITIONS,
        limits: ConnectionLimits = DEFAULT_LIMITS,
        security: ListenerSecurity = OPEN_SECURITY,
        edge: ListenerEdge | None = None,
        clients: ClientServices = IN_MEMORY_CLIENTS,
    ) -> None:
        if edge is None:
            edge = ListenerEdge()  # its answer budget is the listener's own
        #: Read per connection (a test may replace it with an evolved copy).
        self.limits = limits
        self.security = security
        self.edge = edge
        self.connections = ConnectionLimit(
            limits.max_connections, "kafka listener", edge.addresses)
        #: Connections closed for a frame too large before authentication.
        self.unauthenticated_refusals = RefusalLog()
        self.core = core
        self.coordinators = coordinators
        self.clock = clock
        self.advertised_host = advertised_host
        self.advertised_port = advertised_port
        self.node_id = node_id
        self.cluster_id = cluster_id
        #: Client quota enforcement (nothing is measured while no quota is set).
        self.quotas = clients.quotas if clients.quotas is not None else QuotaEnforcer(
            QuotaManager(), cast(Clock, clock))
        quota_handlers = clients.quota_handlers
        if quota_handlers is None:
            from brokerd.kafka.server.handlers.quotas import ClientQuotaHandlers

            quota_handlers = ClientQuotaHandlers(self.quotas.quotas)
        self.handlers = KafkaHandlers(
            core, coordinators, self, clock=cast(Clock, clock),
            default_partitions=default_partitions,
            authorizer=security.authorizer, acls=security.acls,
            credentials=security.credentials,
            fetch_max_bytes=limits.fetch_max_bytes, answer_budget=edge.answer_budget,
            telemetry=clients.telemetry, quotas=quota_handlers, enforcer=self.quotas,
            fetch_session_slots=limits.fetch_session_slots,
        )

    @property
    def sasl(self) -> SaslConfig | None:
        """The SASL mechanisms of this listener; None: no authentication."""
        return self.security.sasl

    def frame_limit(self, *, authenticated: bool) -> int:
        """The largest frame a connection may send: before SASL authentication (on a
        listener that requires it) the pre-authentication limit; never more than the
        whole request budget (such a frame could never be reserved)."""
        limit = self.limits.max_frame_bytes
        if self.sasl is not None and not authenticated:
            limit = min(limit, self.limits.sasl_max_receive_bytes)
        budget = self.edge.request_budget
        if budget is not None and budget.capacity is not None:
            limit = min(limit, budget.capacity)
        return limit

    def buildProtocol(self, addr: IAddress | None) -> KafkaProtocol | None:
        if not self.connections.admit(str(getattr(addr, "host", ""))):
            return None  # Twisted closes the socket at once
        return KafkaProtocol(self)


__all__ = [
    "DEFAULT_CLUSTER_ID",
    "DEFAULT_FRAME_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_SASL_MAX_RECEIVE_BYTES",
    "FAILED_AUTHENTICATION_CLOSE_DELAY",
    "MAX_PIPELINED_PRODUCES",
    "PIPELINE_READ_BYTES",
    "KafkaFactory",
    "KafkaProtocol",
]
