# -*- test-case-name: tests.native.test_protocol -*-
"""Twisted glue for brokerd's native protocol: one :class:`NativeProtocol` per connection.

What this module does: hands the native protocol's two parts to the shared connection
(:class:`brokerd.net.connection.RequestConnection`, which owns flow control, read
pausing, the idle and frame deadlines, closing and the connection limit): its sans-IO
decoder (:class:`~brokerd.native.request_decoder.NativeDecoder`: one request at a time, a
parked request reading ahead a little, undecoded input bounded) and its dispatcher
(:class:`NativeDispatcher`), which hands each request to its row of
:data:`~brokerd.native.commands.COMMANDS` (ACL check, the broker, the answer encoded),
answers the decoder's refusals in their turn (an unknown request type is answered and
then closes the connection), and turns a failure into an error response. Whatever is in
flight is cancelled when the connection goes away. The connection is one share-group
member for the queue requests, released when it closes.

What it does not do: parse or build bytes (the codec does), touch files or threads (the
core does), or use the global reactor (the clock is injected).
"""

from __future__ import annotations

from twisted.internet import defer
from twisted.internet.interfaces import IAddress, IReactorTime
from twisted.internet.protocol import Factory
from twisted.python.failure import Failure

from brokerd.core.api import CoreApi
from brokerd.native import server_codec
from brokerd.native.acl_checks import NativeAccess
from brokerd.native.answer_metrics import observe_native, observe_records, observe_refusal
from brokerd.native.commands import COMMANDS, MAX_LONG_POLL_WAIT_MS, NativeContext
from brokerd.native.messages import (
    DEFAULT_MAX_FETCH_BYTES,
    DEFAULT_MAX_PRODUCE_BYTES,
    ErrorCode,
    Request,
    RequestType,
    error_code_for,
)
from brokerd.native.operator_wire import OperatorWireError
from brokerd.native.queue_handlers import QueueMember, QueueOps
from brokerd.native.request_decoder import (
    LONG_POLL_EAGER_READ_BYTES,
    MAX_UNREAD_SLACK_BYTES,
    NativeDecoder,
    Refusal,
)
from brokerd.net.connection import DispatcherBase, RequestConnection
from brokerd.net.connlimit import DEFAULT_MAX_CONNECTIONS, AddressLimits, ConnectionLimit
from brokerd.net.decoding import Aside, FrameFault
from brokerd.net.request_budget import RequestBudget
from brokerd.observers import NULL_REQUESTS, RequestObserver
from brokerd.operator.operations import OperatorOps
from brokerd.security.acl import AclAuthorizer

__all__ = [
    "DEFAULT_FRAME_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "LONG_POLL_EAGER_READ_BYTES",
    "MAX_LONG_POLL_WAIT_MS",
    "MAX_UNREAD_SLACK_BYTES",
    "NativeDispatcher",
    "NativeFactory",
    "NativeProtocol",
]

#: Close a connection that sent nothing and was sent nothing for this long (Kafka's
#: ``connections.max.idle.ms`` is 10 minutes too). ``None`` disables it.
DEFAULT_IDLE_TIMEOUT = 600.0
#: A frame must be complete this long after its first byte arrives, so a client trickling
#: one byte at a time (slowloris) cannot hold a connection and a partial buffer forever.
DEFAULT_FRAME_TIMEOUT = 30.0


#: The native connection, as its dispatcher sees it.
Connection = RequestConnection[Request, bytes | None]


def _parks(request: Request) -> bool:
    return COMMANDS[type(request)].parks


class NativeDispatcher(DispatcherBase[Request, bytes | None]):
    """The native protocol's dispatch for one connection: each request to its row of
    :data:`~brokerd.native.commands.COMMANDS` (ACL check, the core, the answer encoded);
    a failure becomes an error response in the request's own form; refusals the decoder
    reports are answered in their turn (a fatal one then closes the connection). The
    connection is one share-group member for the queue requests, released when it is
    lost."""

    def __init__(
        self,
        core: CoreApi,
        *,
        max_fetch_bytes: int,
        authorizer: AclAuthorizer | None,
        operator: OperatorOps | None,
        queues: QueueOps | None,
    ) -> None:
        self._core = core
        self._authorizer = authorizer
        self._operator = operator
        self._queues = queues
        self._max_fetch_bytes = max_fetch_bytes
        #: This connection as a share-group member (queue fetches acquire for it).
        self.queue_member = QueueMember()

    def handle(self, connection: Connection, request: Request) -> defer.Deferred[bytes | None]:
        command = COMMANDS[type(request)]
        access = None
        if self._authorizer is not None:
            # The principal is read now: the TLS handshake sets it before the first
            # request.
            access = NativeAccess(
                self._authorizer,
                connection.state.principal,
                connection.state.peer_host,
                lambda: self._core.topic_registry.topics(),
            )
        context = NativeContext(
            self._core, self._max_fetch_bytes, self.queue_member, self._operator, self._queues,
            access,
        )
        metrics = connection.metrics
        topic = getattr(request, "topic", None)
        started = metrics.now()
        d = defer.maybeDeferred(
            command.run, context, request, lambda result: observe_records(metrics, topic, result)
        )
        answered = observe_native(metrics, command.request_type, started, d)
        return answered.addErrback(self._encode_failure, command.request_type, connection)

    def deliver(self, connection: Connection, request: Request, answer: bytes | None) -> bool:
        if answer is not None:
            connection.write(answer)
        return True

    def aside(self, connection: Connection, item: Aside) -> None:
        assert isinstance(item, Refusal)
        error = item.error
        observe_refusal(connection.metrics, error.request_type, error.code)
        connection.write(server_codec.encode_error_response(error.request_type, error.code,
                                                            error.message))
        if error.fatal:
            self._log.info("native: closing connection: {message}", message=error.message)
            connection.close()

    def fault(self, connection: Connection, fault: FrameFault) -> None:
        self._log.warn("native: closing connection: {why}", why=str(fault))

    def lost(self, connection: Connection) -> None:
        if self._queues is not None and not self.queue_member.closed:
            # Whatever this connection acquired is given back now, not at lock expiry.
            self.queue_member.release(self._queues.service).addErrback(
                lambda f: self._log.failure("releasing a native queue member", f)
            )

    def _encode_failure(
        self, failure: Failure, request_type: RequestType, connection: Connection
    ) -> bytes | None:
        if not connection.isConnected:
            return None  # cancelled by connectionLost, or simply too late: nobody to tell
        exc = failure.value
        if isinstance(exc, OperatorWireError):  # an answer too large to send
            return server_codec.encode_error_response(request_type, exc.code, str(exc))
        code = error_code_for(exc) if exc is not None else None
        if code is None or code is ErrorCode.INTERNAL_ERROR:
            # A bug or an unexpected failure: log it for the operator. Only our own
            # errors' texts are meant for clients, so anything else stays generic.
            self._log.failure(
                "native request type {request_type} failed",
                failure=failure,
                request_type=int(request_type),
            )
        if code is None:
            return server_codec.encode_error_response(
                request_type, ErrorCode.INTERNAL_ERROR, "internal error"
            )
        return server_codec.encode_error_response(request_type, code, str(exc))


class NativeProtocol(RequestConnection[Request, bytes | None]):
    """One client connection of the native protocol: the shared connection given the
    native decoder (:class:`~brokerd.native.request_decoder.NativeDecoder`) and
    dispatcher (:class:`NativeDispatcher`). It only builds them; it changes nothing of
    the connection."""

    protocolName = "native"
    decoder: NativeDecoder
    dispatcher: NativeDispatcher

    def __init__(self, factory: NativeFactory) -> None:
        """A connection of ``factory``'s listener, with its core and limits."""
        super().__init__(
            NativeDecoder(_parks, max_produce_bytes=factory.max_produce_bytes),
            NativeDispatcher(
                factory.broker, max_fetch_bytes=factory.max_fetch_bytes,
                authorizer=factory.authorizer, operator=factory.operator, queues=factory.queues,
            ),
            clock=factory.clock,
            idle_timeout=factory.idle_timeout,
            frame_timeout=factory.frame_timeout,
            connection_limit=factory.connections,
            request_budget=factory.request_budget,
            after_answer=factory.broker.after_answer,
        )
        self.factory = factory
        self.metrics = factory.metrics

    @property
    def queue_member(self) -> QueueMember:
        """This connection as a share-group member."""
        return self.dispatcher.queue_member


class NativeFactory(Factory):
    """Builds :class:`NativeProtocol` instances sharing one core and one set of limits."""

    #: Where its connections and requests are counted (``brokerd.metrics``).
    metrics: RequestObserver = NULL_REQUESTS

    def __init__(
        self,
        broker: CoreApi,
        *,
        clock: IReactorTime,
        max_produce_bytes: int = DEFAULT_MAX_PRODUCE_BYTES,
        max_fetch_bytes: int = DEFAULT_MAX_FETCH_BYTES,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        frame_timeout: float | None = DEFAULT_FRAME_TIMEOUT,
        max_connections: int | None = DEFAULT_MAX_CONNECTIONS,
        authorizer: AclAuthorizer | None = None,
        operator: OperatorOps | None = None,
        request_budget: RequestBudget | None = None,
        addresses: AddressLimits | None = None,
        queues: QueueOps | None = None,
    ) -> None:
        self.broker = broker
        #: Share groups (request types 15 to 18); None answers them UNSUPPORTED_REQUEST.
        self.queues = queues
        #: The broker-wide budget of buffered request bytes (shared with the Kafka
        #: listener); None: no limit.
        self.request_budget = request_budget
        #: The operator room's operations (request types 7 to 14); None answers them
        #: UNSUPPORTED_REQUEST.
        self.operator = operator
        #: ACL checks of every request (``docs/security.md``); None allows everything.
        self.authorizer = authorizer
        self.connections = ConnectionLimit(max_connections, "native listener", addresses)
        self.clock = clock
        self.max_produce_bytes = max_produce_bytes
        self.max_fetch_bytes = max_fetch_bytes
        self.idle_timeout = idle_timeout
        self.frame_timeout = frame_timeout

    def buildProtocol(self, addr: IAddress | None) -> NativeProtocol | None:
        if not self.connections.admit(str(getattr(addr, "host", ""))):
            return None  # Twisted closes the socket at once
        return NativeProtocol(self)
