# -*- test-case-name: tests.kafka.listener.test_protocol -*-
"""Twisted glue for the Kafka listener: one :class:`KafkaProtocol` per connection.

What this module does: hands the Kafka listener's parts to the shared connection
(:class:`brokerd.net.connection.RequestConnection`, which owns flow control, read pausing,
the idle and frame deadlines, in-order answers, closing and the connection limit): the
sans-IO :class:`~brokerd.kafka.listener.request_decoder.KafkaDecoder` (frames split off,
decoded one at a time, the pipelining and read-ahead bounds), the
:class:`KafkaDispatcher` (the SASL phase, requests to
:class:`~brokerd.kafka.listener.dispatch.KafkaHandlers`, quotas, responses encoded and
written) and, on a SASL listener, its first-bytes step. The policies of the whole:

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

from time import perf_counter
from typing import Any, cast

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
from brokerd.kafka.listener.request_decoder import (
    MAX_PIPELINED_PRODUCES,
    PIPELINE_READ_BYTES,
    Answer,
    KafkaDecoder,
    KafkaFrameFault,
    RawToken,
    Refuse,
)
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.server.handlers.sasl import SASL_API_KEYS, answer_sasl
from brokerd.kafka.server.observe import observe_kafka
from brokerd.kafka.server.sasl_session import SaslConfig, SaslFailed, SaslSession
from brokerd.kafka.server.throttle import QuotaEnforcer
from brokerd.kafka.wire import codec
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis
from brokerd.net.connection import ConnectionState, DispatcherBase, RequestConnection
from brokerd.net.connlimit import ConnectionLimit
from brokerd.net.decoding import Aside, FrameFault
from brokerd.net.refusals import RefusalLog
from brokerd.net.transport import Transport

#: Seconds between writing the answer to a failed authentication and closing the
#: connection: a client that handles the close before reading what arrived
#: (kafka-python does) still learns why. Nothing more is served meanwhile. (The answer
#: itself waits first: ``--connection-failed-authentication-delay-ms``.)
FAILED_AUTHENTICATION_CLOSE_DELAY = 0.1

#: Cluster id reported in Metadata v2+: any stable string; clients only compare it.
DEFAULT_CLUSTER_ID = "brokerd-single-node"


#: A Kafka connection, as its dispatcher sees it.
Connection = RequestConnection[apis.AnyRequest, object]


class KafkaDispatcher(DispatcherBase[apis.AnyRequest, object]):
    """The Kafka listener's dispatch for one connection: the SASL phase (its first-bytes
    step makes the session; SaslHandshake, SaslAuthenticate and raw tokens are answered
    here), each other request to :class:`~brokerd.kafka.listener.dispatch.KafkaHandlers`,
    client quotas charged while any is set, and the answers encoded and written. Answers
    are the handlers' response messages or an
    :class:`~brokerd.kafka.listener.dispatch.Outcome`."""

    #: Requests received in full before the client disconnected are still carried out
    #: (unanswered): an acks=0 produce, a commit or a LeaveGroup sent just before closing
    #: counts, as in Kafka.
    carries_on_after_loss = True

    def __init__(self, factory: KafkaFactory, decoder: KafkaDecoder) -> None:
        self._factory = factory
        self._decoder = decoder
        self._handlers = factory.handlers
        self._quotas = factory.quotas
        self._sasl_clock = cast(Clock, factory.clock)
        self.context = RequestContext("")
        self._close_after_answer = False
        self._auth_failed = False  # answered a failed authentication: close soon
        self._holding_raw_token = False  # a raw SASL token answer waits for its delay
        self.holding = False
        # While some quota is set: per request handed out (by id), its frame size and
        # the reactor time spent on it so far.
        self._charges: dict[int, list[float]] = {}

    # ----------------------------------------------------------------- the connection

    def connection_made(self, connection: Connection) -> None:
        state = connection.state
        self.context = RequestContext("/" + state.peer_host, state)
        peer = cast(Transport, connection.transport).getPeer()
        self.context.client_port = int(getattr(peer, "port", 0) or 0)

    def lost(self, connection: Connection) -> None:
        # Cancels a parked long-poll fetch or a held JoinGroup/SyncGroup: nobody waits
        # for their answers any more. Requests received in full are still carried out.
        self.context.close()

    def fault(self, connection: Connection, fault: FrameFault) -> None:
        sasl = self.sasl
        if (
            isinstance(fault, KafkaFrameFault) and fault.too_large
            and sasl is not None and not sasl.authenticated
        ):
            self._factory.unauthenticated_refusals.refused(
                "kafka: closing connection from {peer}: before SASL authentication, "
                "{error} (see --sasl-server-max-receive-size)",
                peer=self.context.client_host, error=str(fault))
        else:
            self._log.info("kafka: closing connection from {peer}: {error}",
                           peer=self.context.client_host, error=str(fault))

    def failed(self, connection: Connection, failure: Failure, request: apis.AnyRequest) -> None:
        # Every expected error is an error code inside a response; this is a bug, and
        # the request cannot be answered in its API's terms: close, as Kafka does.
        self._log.failure(
            "kafka: {api} v{version} failed; closing the connection",
            failure=failure, api=request.api_key.name, version=request.api_version,
        )

    def aside(self, connection: Connection, item: Aside) -> None:
        if isinstance(item, Answer):
            connection.write(item.frame)
        elif isinstance(item, RawToken):
            sasl = self.sasl
            assert sasl is not None
            self._raw_token(connection, sasl, item.token)
        else:
            assert isinstance(item, Refuse)
            self._refuse(connection, item.why)

    # ----------------------------------------------------------------- SASL

    @property
    def sasl(self) -> SaslSession | None:
        """This connection's SASL session (None until its first bytes, or without SASL)."""
        return self._decoder.sasl

    @sasl.setter
    def sasl(self, session: SaslSession | None) -> None:
        self._decoder.sasl = session

    def first_bytes(self, state: ConnectionState, data: bytes) -> bytes:
        """The SASL listener's first-bytes step: the session is made with the first
        bytes, not when the connection is made: a TLS handshake completes (setting
        ``state.tls``) only after that, and the session offers PLAIN only on an encrypted
        connection."""
        config = self._factory.sasl
        if self.sasl is None and config is not None:
            self.sasl = SaslSession(config, tls=state.tls, peer=state.peer_host)
        return data

    def _hold(self) -> None:
        self.holding = self._auth_failed or self._holding_raw_token

    def _raw_token(self, connection: Connection, session: SaslSession, token: bytes) -> None:
        """A raw SASL token (after SaslHandshake v0): answer with a raw token frame."""
        try:
            answer = session.token(token)
        except SaslFailed as e:
            self._sasl_failed(e.log, e.kind)
            self._fail_authentication()
            self._sasl_clock.callLater(e.delay, connection.close)  # serve nothing more
            return
        if session.answer_delay > 0:
            self._holding_raw_token = True
            self._hold()
            self._sasl_clock.callLater(
                session.answer_delay, self._release_raw_token, connection, session, answer)
            return
        connection.write(codec.frame(answer))
        self._authenticated(connection, session)

    def _release_raw_token(
        self, connection: Connection, session: SaslSession, answer: bytes
    ) -> None:
        self._holding_raw_token = False
        self._hold()
        if connection.closing or not connection.isConnected:
            return
        connection.write(codec.frame(answer))
        self._authenticated(connection, session)
        connection.pump()

    def _authenticated(self, connection: Connection, session: SaslSession) -> None:
        if session.authenticated:
            self._decoder.max_frame_bytes = self._factory.frame_limit(authenticated=True)
        state = connection.state
        if session.principal is not None and state.principal != session.principal:
            state.principal = session.principal
            self._log.info("kafka: {peer} authenticated as {principal} ({mechanism})",
                           peer=self.context.client_host, principal=session.principal,
                           mechanism=session.mechanism)

    def _sasl_failed(self, why: str, kind: str) -> None:
        config = self._factory.sasl
        suppressed = 0 if config is None else config.failure_log.admit(kind)
        if suppressed is None:
            return  # counted; told with the next line of its kind
        more = f" ({suppressed} more {kind} failures not logged)" if suppressed else ""
        self._log.warn("kafka: SASL authentication from {peer} failed: {why}{more}",
                       peer=self.context.client_host, why=why, more=more)

    def _fail_authentication(self) -> None:
        self._auth_failed = True
        self._decoder.ignoring = True  # about to close: nothing more is served
        self._hold()

    def _close_after_failure(self, connection: Connection) -> None:
        self._fail_authentication()
        # Even when already disconnected: serve nothing more.
        connection.schedule(FAILED_AUTHENTICATION_CLOSE_DELAY, connection.close)

    def _refuse(self, connection: Connection, why: str) -> None:
        self._log.info("kafka: closing connection from {peer}: {why}",
                       peer=self.context.client_host, why=why)
        connection.close()  # even when already disconnected: serve nothing more

    # ----------------------------------------------------------------- dispatch

    def handle(self, connection: Connection, request: apis.AnyRequest) -> defer.Deferred[object]:
        metrics = connection.metrics
        started = metrics.now()
        quotas = self._quotas
        if quotas.quotas.keys_set and request.api_key not in SASL_API_KEYS:
            return self._handle_charged(connection, quotas, request, started)
        return observe_kafka(metrics, request, started, self._dispatch(connection, request))

    def _handle_charged(
        self, connection: Connection, quotas: QuotaEnforcer, request: apis.AnyRequest,
        started: float,
    ) -> defer.Deferred[object]:
        """Dispatch while client quotas are set: note the request's size and time (and
        cut a fetch to what the consumer quota allows in its window)."""
        begun = perf_counter()
        # Keyed by the request handed out: its answer is delivered with that one.
        charge = [float(self._decoder.last_request_bytes), 0.0]
        self._charges[id(request)] = charge
        if request.api_key is ApiKey.FETCH:
            cap = quotas.fetch_cap(connection.state.principal, request.header.client_id)
            if cap is not None and cap < request.body.max_bytes:
                body = request.body
                request = attrs.evolve(request, body=attrs.evolve(
                    body, max_bytes=cap, min_bytes=min(body.min_bytes, cap)))
        d = observe_kafka(connection.metrics, request, started, self._dispatch(connection, request))
        charge[1] += perf_counter() - begun
        return d

    def _dispatch(self, connection: Connection, request: apis.AnyRequest) -> defer.Deferred[object]:
        if request.api_key in SASL_API_KEYS:
            # Answered here, synchronously: they change this connection's state, and the
            # next frame must be read in the state they leave.
            answer = answer_sasl(self.sasl, request)
            if answer.failure is not None:
                self._sasl_failed(answer.failure, answer.failure_kind)
            if answer.close:
                self._close_after_answer = True
            elif self.sasl is not None:
                self._authenticated(connection, self.sasl)
            if answer.delay > 0:
                # Later frames wait behind this one, so none is served meanwhile.
                held: defer.Deferred[object] = defer.Deferred()
                self._sasl_clock.callLater(answer.delay, held.callback, answer.response)
                return held
            return defer.succeed(answer.response)
        return self._handlers.handle(self.context, request)

    def deliver(self, connection: Connection, request: apis.AnyRequest, answer: object) -> bool:
        charge = self._charges.pop(id(request), None) if self._charges else None
        if charge is not None:
            return self._deliver_charged(connection, self._quotas, request, answer, charge)
        if answer is Outcome.NO_RESPONSE or connection.closing or not connection.isConnected:
            return True  # acks=0, or the connection is going away: nobody to answer
        if answer is Outcome.CLOSE_CONNECTION:
            connection.close()
            return False
        connection.write(apis.encode_response(
            request.header.correlation_id, request.api_version, answer))
        if self._close_after_answer:
            self._close_after_failure(connection)
            return False
        return True

    def _deliver_charged(
        self, connection: Connection, quotas: QuotaEnforcer, request: apis.AnyRequest,
        answer: object, charge: list[float],
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
            request.api_key, connection.state.principal, request.header.client_id, response,
            int(charge[0]), answer_bytes, charge[1] + (perf_counter() - begun),
        )
        if charged.throttle_ms > 0:
            frame = None  # the answer changed (its throttle time, an emptied fetch)
        if isinstance(answer, Outcome):
            go_on = self._deliver_outcome(connection, answer)
        elif connection.closing or not connection.isConnected:
            return True
        else:
            connection.write(frame if frame is not None else apis.encode_response(
                request.header.correlation_id, request.api_version, charged.answer))
            go_on = True
        if charged.throttle_ms > 0 and go_on:
            connection.mute(charged.throttle_ms / 1000.0)
        return go_on

    def _deliver_outcome(self, connection: Connection, outcome: Outcome) -> bool:
        if (
            outcome is Outcome.CLOSE_CONNECTION
            and not connection.closing
            and connection.isConnected
        ):
            connection.close()
            return False
        return True


class KafkaProtocol(RequestConnection[apis.AnyRequest, object]):
    """One Kafka client connection: the shared connection given the Kafka decoder
    (:class:`~brokerd.kafka.listener.request_decoder.KafkaDecoder`), dispatcher
    (:class:`KafkaDispatcher`) and, on a SASL listener, the SASL first-bytes step. It only
    builds them; it changes nothing of the connection. See the module docstring for the
    policies."""

    protocolName = "kafka"
    decoder: KafkaDecoder
    dispatcher: KafkaDispatcher

    def __init__(self, factory: KafkaFactory) -> None:
        decoder = KafkaDecoder(
            factory.frame_limit(authenticated=False),
            reset_frame_bytes=lambda: factory.limits.max_frame_bytes,
        )
        dispatcher = KafkaDispatcher(factory, decoder)
        super().__init__(
            decoder,
            dispatcher,
            clock=factory.clock,
            idle_timeout=factory.limits.idle_timeout,
            frame_timeout=factory.limits.frame_timeout,
            connection_limit=factory.connections,
            request_budget=factory.edge.request_budget,
            first_bytes=dispatcher.first_bytes,
            after_answer=factory.core.after_answer,
        )
        self.metrics = factory.edge.metrics
        self.answer_budget = factory.edge.answer_budget


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
    "KafkaDispatcher",
    "KafkaFactory",
    "KafkaProtocol",
]
