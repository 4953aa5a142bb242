# -*- test-case-name: tests.native.test_protocol -*-
"""Twisted glue for brokerd's native protocol: one :class:`NativeProtocol` per connection.

What this module does: supplies the native protocol's decoder and dispatch to the shared
connection machinery (:class:`brokerd.net.connection.RequestConnection`, which owns flow
control, read pausing, the idle and frame deadlines, closing and the connection limit).
It feeds received bytes to the sans-IO :class:`~brokerd.native.server_codec.RequestDecoder`
and hands each request to its row of :data:`~brokerd.native.commands.COMMANDS`, which
checks its ACL, calls the broker and encodes the answer, one request at a time (so
answers keep request order). Its own policies: exactly one request in flight; refusals
the decoder reports are answered in their turn, and an unknown request type is answered
and then closes the connection; a parked request (a row that ``parks``) keeps reading a
little, so a client closing meanwhile is noticed; undecoded input beyond a bound aborts
a client that ignores flow control; whatever is in flight is cancelled when the
connection goes away. The connection is one share-group member for the queue requests,
released when it closes.

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
    RequestError,
    RequestType,
    error_code_for,
)
from brokerd.native.operator_wire import OperatorWireError
from brokerd.native.queue_handlers import QueueMember, QueueOps
from brokerd.native.server_codec import RequestDecoder
from brokerd.net.connection import RequestConnection
from brokerd.net.connlimit import DEFAULT_MAX_CONNECTIONS, AddressLimits, ConnectionLimit
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
    "NativeFactory",
    "NativeProtocol",
]

#: Close a connection that sent nothing and was sent nothing for this long (Kafka's
#: ``connections.max.idle.ms`` is 10 minutes too). ``None`` disables it.
DEFAULT_IDLE_TIMEOUT = 600.0
#: A frame must be complete this long after its first byte arrives, so a client trickling
#: one byte at a time (slowloris) cannot hold a connection and a partial buffer forever.
DEFAULT_FRAME_TIMEOUT = 30.0
#: Undecoded input allowed beyond ``max_produce_bytes`` (which bounds one partial record)
#: before the connection is dropped. A transport stops delivering soon after it is paused,
#: so this only trips on a transport that ignores pauseProducing: defence in depth.
MAX_UNREAD_SLACK_BYTES = 4 * 1024 * 1024
#: While a long poll is parked, input is still read (not decoded) up to this many bytes,
#: so that the client closing the connection is noticed (see :meth:`NativeProtocol.readAhead`).
LONG_POLL_EAGER_READ_BYTES = 16 * 1024


class NativeProtocol(RequestConnection[Request, bytes | None]):
    """One client connection of the native protocol.

    Flow: received bytes wait undecoded in the decoder; :meth:`nextRequest` decodes one
    request only when none is in flight, so a busy connection holds raw bytes (bounded,
    and reading is paused) rather than decoded requests. Answers are encoded as soon as
    the core answers; a failure becomes an error response in the request's own form.
    """

    protocolName = "native"

    def __init__(
        self,
        core: CoreApi,
        *,
        clock: IReactorTime,
        max_produce_bytes: int = DEFAULT_MAX_PRODUCE_BYTES,
        max_fetch_bytes: int = DEFAULT_MAX_FETCH_BYTES,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        frame_timeout: float | None = DEFAULT_FRAME_TIMEOUT,
        connection_limit: ConnectionLimit | None = None,
        authorizer: AclAuthorizer | None = None,
        admin: OperatorOps | None = None,
        request_budget: RequestBudget | None = None,
        queues: QueueOps | None = None,
    ) -> None:
        super().__init__(
            clock=clock,
            idle_timeout=idle_timeout,
            frame_timeout=frame_timeout,
            connection_limit=connection_limit,
            request_budget=request_budget,
        )
        self._core = core
        self._authorizer = authorizer
        self._admin = admin
        self._queues = queues
        #: This connection as a share-group member (queue fetches acquire for it).
        self.queue_member = QueueMember()
        self._max_fetch_bytes = max_fetch_bytes
        self._decoder = RequestDecoder(max_produce_bytes=max_produce_bytes)
        self._max_unread = max_produce_bytes + MAX_UNREAD_SLACK_BYTES

    # ----------------------------------------------------------------- decoding

    def dataReceived(self, data: bytes) -> None:
        super().dataReceived(data)
        if not self.closing and self._decoder.buffered > self._max_unread:
            self._log.warn(
                "native: closing connection: {n} bytes of unread input", n=self._decoder.buffered
            )
            self.close(abort=True)

    def requestDataReceived(self, data: bytes) -> None:
        self._decoder.receive(data)

    def nextRequest(self) -> Request | None:
        if self.inFlight:
            return None  # one at a time: the rest stays undecoded
        while not self.closing and not self.blocked:
            event = self._decoder.next_event()
            if event is None:
                return None
            if not isinstance(event, RequestError):
                return event
            self._refuse(event)
        return None

    def framePending(self) -> bool:
        # While a request is in flight, buffered bytes are requests waiting their turn.
        return not self.inFlight and self._decoder.in_frame

    def readAhead(self) -> bool:
        # A paused transport does not notice the peer closing, so a parked long poll of
        # a client that went away would wait out its full max_wait. While one is parked,
        # keep reading a little (requests stay undecoded) so a close is seen and the
        # poll is cancelled at once.
        in_flight = self.inFlight
        return (
            bool(in_flight)
            and COMMANDS[type(in_flight[0])].parks
            and self._decoder.buffered < LONG_POLL_EAGER_READ_BYTES
        )

    def inputHeld(self) -> int:
        return self._decoder.held

    def inputOwed(self) -> int:
        return self._decoder.owed

    def inputArrived(self) -> int:
        # The owed value (or admin body) starts the undecoded buffer.
        return self._decoder.buffered

    def lastRequestBytes(self) -> int:
        return self._decoder.last_frame_bytes

    def stopProducing(self) -> None:
        # The transport is going away: take nothing more (connectionLost cleans up).
        self.refuseRequests()

    def requestsAbandoned(self) -> None:
        self._decoder = RequestDecoder()  # drop the undecoded input with it
        if self._queues is not None and not self.queue_member.closed:
            # Whatever this connection acquired is given back now, not at lock expiry.
            self.queue_member.release(self._queues.service).addErrback(
                lambda f: self._log.failure("releasing a native queue member", f)
            )
        # Cancels a parked long poll (or any pending call): it must not outlive its
        # connection, and its late result is dropped.
        super().requestsAbandoned()

    def _refuse(self, error: RequestError) -> None:
        observe_refusal(self.metrics, error.request_type, error.code)
        self.write(server_codec.encode_error_response(error.request_type, error.code,
                                                      error.message))
        if error.fatal:
            self._log.info("native: closing connection: {message}", message=error.message)
            self.close()

    # ----------------------------------------------------------------- dispatch

    def handleRequest(self, request: Request) -> defer.Deferred[bytes | None]:
        command = COMMANDS[type(request)]
        access = None
        if self._authorizer is not None:
            # The principal is read now: the TLS handshake sets it before the first
            # request.
            access = NativeAccess(
                self._authorizer,
                self.state.principal,
                self.state.peer_host,
                lambda: self._core.topics(),
            )
        context = NativeContext(
            self._core, self._max_fetch_bytes, self.queue_member, self._admin, self._queues,
            access,
        )
        metrics = self.metrics
        topic = getattr(request, "topic", None)
        started = metrics.now()
        d = defer.maybeDeferred(
            command.run, context, request, lambda result: observe_records(metrics, topic, result)
        )
        answered = observe_native(metrics, command.request_type, started, d)
        return answered.addErrback(self._encode_failure, command.request_type)

    def deliverAnswer(self, request: Request, answer: bytes | None) -> bool:
        if answer is not None:
            self.write(answer)
        return True

    def _encode_failure(self, failure: Failure, request_type: RequestType) -> bytes | None:
        if not self.isConnected:
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
        admin: OperatorOps | None = None,
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
        #: The admin operations (request types 7 to 14); None answers them
        #: UNSUPPORTED_REQUEST.
        self.admin = admin
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
        proto = NativeProtocol(
            self.broker,
            clock=self.clock,
            max_produce_bytes=self.max_produce_bytes,
            max_fetch_bytes=self.max_fetch_bytes,
            idle_timeout=self.idle_timeout,
            frame_timeout=self.frame_timeout,
            connection_limit=self.connections,
            authorizer=self.authorizer,
            admin=self.admin,
            request_budget=self.request_budget,
            queues=self.queues,
        )
        proto.factory = self
        proto.metrics = self.metrics
        return proto
