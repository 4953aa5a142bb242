# -*- test-case-name: tests.net.test_connection -*-
"""The connection machinery both listeners share: :class:`RequestConnection`.

What this module does: everything about one client connection that does not depend on
the protocol spoken over it.

* The pump: requests are taken one at a time by a loop guarded against re-entrancy (a
  core or handler may answer synchronously, from inside the loop), and answers are
  delivered strictly in request order whatever order they complete in.
* Write-side flow control: the connection registers as a streaming producer on its
  transport; while the transport says its send buffer is full, no request is taken and
  the transport stops reading, so a client that does not read cannot make us buffer
  answers without end.
* Read pausing while requests are in flight, with a protocol-chosen allowance for
  reading ahead (to notice a client closing during a long wait); and muting
  (:meth:`RequestConnection.mute`): nothing read or handed out for a while, what a
  client quota's throttle asks after its answer is written.
* An idle deadline (no traffic either way; waiting on the core is not idleness) and a
  frame deadline (a frame must be complete this long after its first byte, while we
  read or it waits for the request budget), both on an injected clock.
* Closing (graceful or abort), the connection-limit release, TCP_NODELAY, and one place
  that sees a connection's first bytes (the optional first-bytes step).
* The phase of the connection (``brokerd.net.phase``: open, blocked, splicing, closing,
  lost, closed), changed only through that module's transition table.
* Its share of the broker-wide request budget (``brokerd.net.request_budget``): after
  every read and every finished request its reservation is made to cover the request
  bytes it holds plus its claim on those a size prefix announced (the decoder says how
  many: :meth:`~brokerd.net.decoding.RequestDecoder.input_bytes`, and
  :attr:`~brokerd.net.decoding.RequestDecoder.last_request_bytes` for each request in
  flight);
  while the budget cannot cover them, the transport does not read, and the frame
  deadline keeps running.
* Leaving nothing behind: when the connection is lost it gives back its producer
  registration (Twisted's TLS layer would keep it, and with it this object), its
  reservation once nothing is held, its timers and file regions.
* The TLS facts of a connection: whether it is encrypted, and the principal of a verified
  client certificate, both set when the handshake completes (before any request arrives).
* Answers sent when written, not at the end of the reactor turn, whenever that keeps
  their order (``brokerd.net.prompt_write``).
* Spliced answers (a Kafka Fetch response whose records are file regions of the log,
  ``brokerd.net.frames``): read and sent as bytes when the frame is small
  (``brokerd.net.prompt_write.small_frame_bytes``), else sent by ``os.sendfile`` through a
  :class:`~brokerd.net.sendfile.SpliceSender` on plain socket transports, which stands in for
  the connection as the transport's producer until the frame is sent; on TLS through a
  :class:`~brokerd.net.chunked.ChunkedSender`, which reads and writes bounded chunks while
  the connection stays the producer and passes pause and resume on. Answers written
  meanwhile wait their turn, and no request is taken (flow control as when the send
  buffer is full). The connection's :class:`~brokerd.net.sendfile.RegionLedger` gives back
  the regions of answers that are never sent, and the listener's
  :class:`~brokerd.net.answer_budget.AnswerBudget` counts the in-memory parts of a frame
  being sent.

What it does not do: parse or build bytes, decide what a request means, or how many may
run at once. A protocol does not subclass it: it hands the connection two objects, as
AMP splits its box parser from its dispatcher. Its sans-IO decoder
(:class:`brokerd.net.decoding.RequestDecoder`: bytes in, whole requests out, with its own
bounds, read-ahead and held bytes) and its :class:`Dispatcher` (a request to a Deferred
answer, the answer delivered, asides and faults acted on), plus an optional first-bytes
step (a callable that sees the first read before the decoder). It never uses the global
reactor.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar, cast
from typing import Protocol as Interface

import attrs
from twisted.internet import defer
from twisted.internet.interfaces import IHandshakeListener, IPushProducer, IReactorTime
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from brokerd.after_answer import AfterAnswer
from brokerd.clock import Clock, DelayedCall
from brokerd.errors import StorageError
from brokerd.net.answer_budget import AnswerBudget
from brokerd.net.chunked import ChunkedSender
from brokerd.net.connlimit import ConnectionLimit
from brokerd.net.decoding import Aside, FrameFault, RequestDecoder
from brokerd.net.frames import Frame, SplicedFrame, frame_memory_bytes
from brokerd.net.phase import Event, Phase, next_phase
from brokerd.net.prompt_write import (
    SMALL_FRAME_BYTES,
    small_frame_bytes,
    write_now,
    write_sequence_now,
)
from brokerd.net.request_budget import Account, RequestBudget
from brokerd.net.sendfile import (
    RegionGone,
    RegionLedger,
    SpliceSender,
    SpliceTransport,
    can_chunk,
    can_splice,
)
from brokerd.net.tls import ANONYMOUS, peer_principal
from brokerd.net.transport import Transport, disable_nagle
from brokerd.observers import NULL_REQUESTS, RequestObserver

__all__ = [
    "ConnectionState", "Dispatcher", "DispatcherBase", "InFlight", "RequestConnection",
]

#: The budget of connections built without one: never waits.
_UNLIMITED = RequestBudget(None)

RequestT = TypeVar("RequestT")
AnswerT = TypeVar("AnswerT")


@attrs.frozen(eq=False)
class InFlight(Generic[RequestT, AnswerT]):
    """A request handed to its handler and not yet answered.

    Compared by identity: two equal requests in flight are two slots.
    """

    request: RequestT
    deferred: defer.Deferred[AnswerT]
    #: Request bytes it holds in memory until it is answered (its frame).
    held: int = 0


@attrs.define
class ConnectionState:
    """Facts about one connection, set when it is made (protocol-specific state belongs
    to its dispatcher)."""

    #: The peer's address without port (``""`` when the transport has none, e.g. UNIX).
    peer_host: str = ""
    #: Who the client is, in Kafka's form ``User:<name>``: from a verified TLS client
    #: certificate (``User:`` and its subject in RFC 2253 form), replaced by a SASL
    #: authentication; ``User:ANONYMOUS`` until then.
    principal: str = ANONYMOUS
    #: The connection is TLS and its handshake is complete.
    tls: bool = False
    #: The file regions this connection's answers hold; None when its transport takes
    #: no file regions (neither a plain socket nor TLS): then answers carry bytes only.
    regions: RegionLedger | None = None


class Dispatcher(Interface[RequestT, AnswerT]):
    """A protocol's dispatch, one per connection: what its requests mean and how their
    answers are sent. It never touches the transport's producer state, the timers or the
    connection limit; it answers through the connection's :meth:`~RequestConnection.write`
    and closes through its :meth:`~RequestConnection.close`. The connection passes itself
    to every call, so the dispatcher keeps no reference to it (the connection holds the
    dispatcher: no cycle keeps a lost connection and what it holds alive)."""

    #: True while the dispatcher holds the connection's requests back (say, a SASL
    #: answer that waits for its delay): the connection hands out nothing meanwhile.
    holding: bool
    #: Requests received in full before the client went away are still carried out
    #: (unanswered); False: whatever is in flight is cancelled when the connection is
    #: lost, and nothing more is taken once the transport stops.
    carries_on_after_loss: bool

    def connection_made(self, connection: RequestConnection[RequestT, AnswerT]) -> None:
        """The connection is made (its :attr:`~RequestConnection.state` knows the peer)."""
        ...

    def handle(
        self, connection: RequestConnection[RequestT, AnswerT], request: RequestT
    ) -> defer.Deferred[AnswerT]:
        """Start serving ``request``. A failed Deferred is a bug (:meth:`failed`);
        expected errors must already be answers."""
        ...

    def deliver(
        self, connection: RequestConnection[RequestT, AnswerT], request: RequestT,
        answer: AnswerT,
    ) -> bool:
        """Send ``request``'s answer (called in request order, also after the connection
        is lost: then write nothing). Return False to stop delivering (the connection
        was closed on purpose)."""
        ...

    def aside(self, connection: RequestConnection[RequestT, AnswerT], item: Aside) -> None:
        """Act on what the decoder handed out instead of a request (a refusal, say),
        in its turn."""
        ...

    def fault(self, connection: RequestConnection[RequestT, AnswerT], fault: FrameFault) -> None:
        """Log why the decoder gave up; the connection is then aborted."""
        ...

    def failed(
        self, connection: RequestConnection[RequestT, AnswerT], failure: Failure,
        request: RequestT,
    ) -> None:
        """Log a request whose handler failed; the connection is then aborted."""
        ...

    def lost(self, connection: RequestConnection[RequestT, AnswerT]) -> None:
        """The connection is lost (its decoder was told first): let go of what the
        connection held in the protocol (cancel what waits on it)."""
        ...


class DispatcherBase(Generic[RequestT, AnswerT]):
    """What most dispatchers do by default (a dispatcher need not derive from it):
    hold nothing back, carry nothing out after a loss, log faults and failed requests."""

    _log = Logger()
    holding = False
    carries_on_after_loss = False

    def connection_made(self, connection: RequestConnection[RequestT, AnswerT]) -> None:
        pass

    def aside(self, connection: RequestConnection[RequestT, AnswerT], item: Aside) -> None:
        raise TypeError(f"{type(self).__name__} takes no {type(item).__name__}")

    def fault(self, connection: RequestConnection[RequestT, AnswerT], fault: FrameFault) -> None:
        self._log.info("{name}: closing connection from {peer}: {why}",
                       name=connection.protocolName, peer=connection.state.peer_host,
                       why=str(fault))

    def failed(
        self, connection: RequestConnection[RequestT, AnswerT], failure: Failure,
        request: RequestT,
    ) -> None:
        self._log.failure(
            "{name}: request failed; closing the connection",
            failure=failure,
            name=connection.protocolName,
        )

    def lost(self, connection: RequestConnection[RequestT, AnswerT]) -> None:
        pass


@implementer(IPushProducer, IHandshakeListener)
class RequestConnection(Protocol, Generic[RequestT, AnswerT]):
    """One client connection of a request/response protocol: given its protocol's
    decoder and dispatcher (and an optional first-bytes step), never subclassed to
    change them. Answers go out through :meth:`write`, closing through :meth:`close`.

    Attribute :attr:`protocolName` prefixes log lines.
    """

    _log = Logger()
    protocolName = "connection"
    #: Where connections and requests are counted (the factory sets its listener's).
    metrics: RequestObserver = NULL_REQUESTS
    #: The listener's budget of answer bytes held in memory (the factory sets it;
    #: unbounded by default).
    answer_budget: AnswerBudget = AnswerBudget(None)
    #: Spliced frames up to this many bytes are read and sent as bytes
    #: (``brokerd.net.prompt_write.small_frame_bytes``); 0: every region by sendfile.
    small_frame_limit: int = SMALL_FRAME_BYTES

    def __init__(
        self,
        decoder: RequestDecoder[RequestT],
        dispatcher: Dispatcher[RequestT, AnswerT],
        *,
        clock: IReactorTime,
        idle_timeout: float | None,
        frame_timeout: float | None,
        connection_limit: ConnectionLimit | None = None,
        request_budget: RequestBudget | None = None,
        first_bytes: Callable[[ConnectionState, bytes], bytes] | None = None,
        after_answer: AfterAnswer | None = None,
    ) -> None:
        #: Told of every answer handed over at once (the broker's: its inline appends'
        #: wake-ups run then, ``brokerd.after_answer``).
        self._after_answer = after_answer if after_answer is not None else AfterAnswer()
        #: The protocol's parts: given, not overridden.
        self.decoder = decoder
        self.dispatcher = dispatcher
        #: Sees the connection's first bytes (and its state) before the decoder does and
        #: returns what the decoder gets (a protocol sniff, a TLS or SASL first step).
        self._first_bytes = first_bytes
        self._clock = cast(Clock, clock)
        self._idle_timeout = idle_timeout
        self._frame_timeout = frame_timeout
        self._connection_limit = connection_limit
        self.state = ConnectionState()
        # Requests handed out and not yet answered, oldest first; answers that arrived
        # early wait in _answers until every older request is answered.
        self._in_flight: deque[InFlight[RequestT, AnswerT]] = deque()
        self._answers: dict[InFlight[RequestT, AnswerT], AnswerT] = {}
        self._held_in_flight = 0  # the request bytes their slots hold, summed
        self._phase = Phase.NEW
        # Facts beside the phase:
        self._reading = True  # whether we last told the transport to read
        self._pumping = False  # re-entrancy guard for _pump
        self._mutes = 0  # throttles running (mute): nothing is read or handed out
        self._seen_data = False
        self._registered = False  # we are the transport's producer
        self._budget = request_budget or _UNLIMITED
        self._account: Account = self._budget.account()  # its address is set when made
        self._idle_call: DelayedCall | None = None
        self._frame_call: DelayedCall | None = None
        self._timers: list[DelayedCall] = []  # the protocol's, through schedule()
        # A spliced frame being sent, the budget its in-memory parts hold, and the
        # answers written meanwhile.
        self._splicing: SpliceSender | ChunkedSender | None = None
        self._splice_held = 0
        self._queued_out: deque[Frame] = deque()

    # ----------------------------------------------------------------- state for the parts

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def isConnected(self) -> bool:
        """Between connectionMade and connectionLost."""
        return self._phase.connected

    @property
    def closing(self) -> bool:
        """:meth:`close` or :meth:`refuseRequests` was called: take nothing more."""
        return self._phase.closing

    @property
    def blocked(self) -> bool:
        """The client is not reading our answers: take no requests."""
        return self._phase.write_blocked

    @property
    def budgetWaiting(self) -> bool:
        """The request budget cannot cover this connection's input now: no reading."""
        return self._account.waiting

    def schedule(self, delay: float, call: Callable[[], object]) -> None:
        """Call ``call`` after ``delay`` seconds on the connection's clock, unless the
        connection is lost first (the timer is cancelled then, so it holds nothing)."""
        self._timers = [t for t in self._timers if t.active()]
        self._timers.append(self._clock.callLater(delay, call))

    def mute(self, seconds: float) -> None:
        """Read and hand out nothing for ``seconds`` (a client quota's throttle, after
        its answer is written); overlapping mutes last until the last one ends."""
        if seconds <= 0:
            return
        self._mutes += 1
        self.schedule(seconds, self._unmute)
        self._update_reading()

    @property
    def muted(self) -> bool:
        return self._mutes > 0

    def _unmute(self) -> None:
        self._mutes -= 1
        if not self._mutes:
            self._pump()

    def refuseRequests(self) -> None:
        """Take nothing more, without touching the transport (it is going away, or the
        protocol closes it itself)."""
        self._event(Event.CLOSE)

    def _event(self, event: Event) -> None:
        self._phase = next_phase(self._phase, event)

    @property
    def inFlight(self) -> tuple[RequestT, ...]:
        """Requests handed out and not yet delivered, oldest first."""
        return tuple(slot.request for slot in self._in_flight)

    # ----------------------------------------------------------------- Twisted overrides

    def connectionMade(self) -> None:
        self._event(Event.MADE)
        disable_nagle(self.transport)
        self.metrics.connection_opened()
        self.state = ConnectionState(str(getattr(self._t.getPeer(), "host", "")))
        # Nothing is reserved before the first read: the new account draws on its
        # address's share from the start.
        self._account = self._budget.account(self.state.peer_host)
        if can_splice(self.transport) or can_chunk(self.transport):
            self.state.regions = RegionLedger()
        # The transport tells us when its send buffer is full; we then stop taking
        # requests, so a client that does not read cannot make us buffer without end.
        self._t.registerProducer(self, True)
        self._registered = True
        if self._idle_timeout is not None:
            self._idle_call = self._clock.callLater(self._idle_timeout, self._idle_expired)
        self.dispatcher.connection_made(self)

    def dataReceived(self, data: bytes) -> None:
        if self._phase.closing or not self._phase.connected:
            return
        self._touch()
        if not self._seen_data:
            self._seen_data = True
            if self._first_bytes is not None:
                data = self._first_bytes(self.state, data)
        decoder = self.decoder
        try:
            decoder.receive(data)
        except FrameFault as fault:
            self._frame_fault(fault)  # closing: the pump takes nothing, settles the rest
        self._pump()
        if not self._phase.closing:
            overflow = decoder.overflow()
            if overflow is not None:
                self._frame_fault(overflow)

    def _frame_fault(self, fault: FrameFault) -> None:
        self.dispatcher.fault(self, fault)
        self.close(abort=True)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        was_connected = self._phase.connected
        if was_connected:
            self.metrics.connection_closed()
        if was_connected and self._connection_limit is not None:
            self._connection_limit.release(self.state.peer_host)
        self._event(Event.LOST)
        if self._registered:
            # Twisted's TLS layer keeps its producer (and so this connection, and what
            # it holds) after the connection is lost; TCP forgets it. Say it ourselves.
            self._registered = False
            self._t.unregisterProducer()
        for call in (self._idle_call, self._frame_call, *self._timers):
            if call is not None and call.active():
                call.cancel()
        self._timers = []
        self._idle_call = self._frame_call = None
        self._answers_lost()
        if self.state.regions is not None:
            self.state.regions.release_all()
        self.decoder.lost()
        dispatcher = self.dispatcher
        dispatcher.lost(self)
        if dispatcher.carries_on_after_loss:
            # Requests received in full are still carried out, in order and unanswered.
            self._pump()
        else:
            # Cancel whatever is in flight (its late answer is dropped); take nothing more.
            self.refuseRequests()
            abandoned = list(self._in_flight)
            self._in_flight.clear()
            self._answers.clear()
            self._held_in_flight = 0
            for slot in abandoned:
                slot.deferred.cancel()
        self._reconcile_budget()

    # ----------------------------------------------------------------- IPushProducer

    def pauseProducing(self) -> None:
        self._event(Event.PAUSE)
        if isinstance(self._splicing, ChunkedSender):
            self._splicing.pauseProducing()
        self._update_reading()
        self._update_frame_timer()

    def resumeProducing(self) -> None:
        if isinstance(self._splicing, ChunkedSender):
            self._splicing.resumeProducing()  # the frame being sent has the turn
            return
        self._event(Event.RESUME)
        self._pump()

    def stopProducing(self) -> None:
        # The transport is going away; connectionLost does the cleanup.
        if not self.dispatcher.carries_on_after_loss:
            self.refuseRequests()  # take nothing more

    # ----------------------------------------------------------------- IHandshakeListener

    def handshakeCompleted(self) -> None:
        """A TLS listener's handshake is complete (called before the first data): the
        client certificate, verified by then if the listener asked for one, names the
        principal."""
        self.state.tls = True
        self.state.principal = peer_principal(self.transport)

    # ----------------------------------------------------------------- output

    def write(self, data: Frame) -> None:
        """The one place that writes to the transport (always in the reactor thread):
        sent at once when the transport holds nothing ahead of it
        (``brokerd.net.prompt_write``), not at the end of the reactor turn.
        ``data`` may be a :class:`~brokerd.net.frames.SplicedFrame`."""
        if not self._phase.connected:
            return
        self._touch()
        if self._splicing is not None:
            self._queued_out.append(data)  # behind the frame being sent
            return
        if isinstance(data, SplicedFrame):
            self._write_spliced(data)
        else:
            write_now(self.transport, data)
            self._after_answer.answer_written()

    def _write_spliced(self, frame: SplicedFrame) -> None:
        """Send a spliced frame: in-memory parts without joining them, file regions by
        ``os.sendfile`` on a plain socket, else (TLS) read and written in bounded chunks
        (``brokerd/net/chunked.py``)."""
        t = cast(SpliceTransport, self.transport)
        ledger = self.state.regions
        splice = can_splice(t)
        if not frame.regions and (ledger is None or splice):
            # Bytes only, and no encryption to spread over reactor turns.
            write_sequence_now(t, [p for p in frame.parts if isinstance(p, bytes)])
            self._after_answer.answer_written()
            return
        if ledger is None:
            # Regions are handed out only to connections with a ledger.
            raise TypeError(f"{frame!r} holds file regions; this connection takes none")
        if splice:
            try:
                small = small_frame_bytes(frame, ledger, self.small_frame_limit)
            except (OSError, StorageError, RegionGone) as exc:
                self._send_failed(exc)
                return
            if small is not None:
                write_sequence_now(t, small)
                self._after_answer.answer_written()
                return
        blocked = self._phase.write_blocked
        sender: SpliceSender | ChunkedSender
        if splice:
            sender = SpliceSender(t, frame.parts, ledger, self._splice_done)
        else:
            # The connection stays the transport's producer and passes pauseProducing /
            # resumeProducing on: Twisted's TLS layer wraps each registered producer in
            # a membrane that ignores a resume it did not pause, so a producer swapped in
            # while the TCP buffer is full would never be resumed.
            sender = ChunkedSender(
                t, frame.parts, ledger, self.answer_budget, self._clock, self._splice_done,
                paused=blocked, progress=self._touch,
            )
        if sender.send_now():
            return  # all sent (or failed and handled) without waiting for the socket
        # The sender has the transport until the frame is sent: take no requests
        # meanwhile (the same rule as a full send buffer). Its in-memory parts are
        # answer bytes held until then.
        self._splicing = sender
        self._splice_held = frame_memory_bytes(frame)
        self.answer_budget.charge(self._splice_held)
        self._event(Event.SPLICE_START)
        self._update_reading()
        if isinstance(sender, SpliceSender):
            t.unregisterProducer()
            self._registered = False
        sender.start()

    def _splice_done(self, failure: BaseException | None) -> None:
        sender, self._splicing = self._splicing, None
        self._give_back_splice()
        if not self._phase.connected:
            return
        if failure is not None:
            self._send_failed(failure)
            return
        if isinstance(sender, ChunkedSender):
            # The connection stayed the producer: the transport's buffer may still be
            # full, and then it has not resumed us yet.
            self._event(Event.SPLICE_DONE)
            if sender.paused:
                self._event(Event.PAUSE)
        else:
            self._t.registerProducer(self, True)
            self._registered = True
            self._event(Event.SPLICE_DONE)
        while self._queued_out and self._splicing is None:
            self.write(self._queued_out.popleft())
        if self._splicing is None and not self._phase.write_blocked:
            self._pump()

    def _send_failed(self, failure: BaseException) -> None:
        self._log.info("{name}: sending a response to {peer} failed: {why}",
                       name=self.protocolName, peer=self.state.peer_host, why=failure)
        self._queued_out.clear()
        self.close(abort=True)

    def _give_back_splice(self) -> None:
        if self._splice_held:
            self.answer_budget.give(self._splice_held)
            self._splice_held = 0

    def _answers_lost(self) -> None:
        """The connection is gone: stop a chunked send (a spliced one is stopped by its
        transport), give its budget back and drop the answers queued behind it."""
        sender, self._splicing = self._splicing, None
        if isinstance(sender, ChunkedSender):
            sender.stopProducing()
        self._give_back_splice()
        self._queued_out.clear()

    def close(self, *, abort: bool = False) -> None:
        """Take nothing more and close: gracefully (written data is sent first), or at
        once with ``abort`` (for a client we no longer trust to read)."""
        if self._phase.closing:
            return
        connected = self._phase.connected
        self._event(Event.CLOSE)
        self.decoder.discard()
        if not connected:
            return
        if abort:
            self._t.abortConnection()
        else:
            self._t.loseConnection()

    # ----------------------------------------------------------------- the pump

    @property
    def _t(self) -> Transport:
        return cast(Transport, self.transport)

    def _pump(self) -> None:
        """Hand out requests while we may, then adjust reading and the frame deadline."""
        if self._pumping:
            return  # the loop further up this stack carries on
        self._pumping = True
        decoder = self.decoder
        dispatcher = self.dispatcher
        try:
            while self._phase.taking and not self._mutes and not dispatcher.holding:
                request = decoder.next_request(self._in_flight)
                if request is None:
                    break
                if isinstance(request, Aside):
                    dispatcher.aside(self, request)  # then the phase is checked again
                    continue
                self._start(request, decoder.last_request_bytes)
        finally:
            self._pumping = False
        self._reconcile_budget()
        self._update_reading()
        self._update_frame_timer()

    def pump(self) -> None:
        """Hand out requests again: for a dispatcher whose :attr:`Dispatcher.holding`
        ended outside any answer (the connection pumps after every read and answer)."""
        self._pump()

    def _start(self, request: RequestT, held: int) -> None:
        d = self.dispatcher.handle(self, request)
        slot = InFlight(request, d, held)
        # Queued before adding callbacks: a handler that answers synchronously runs them now.
        self._in_flight.append(slot)
        self._held_in_flight += held
        d.addCallbacks(
            self._answered, self._failed, callbackArgs=(slot,), errbackArgs=(slot,)
        ).addErrback(self._bug)

    def _answered(self, answer: AnswerT, slot: InFlight[RequestT, AnswerT]) -> None:
        if slot not in self._in_flight:
            return  # abandoned or dropped meanwhile: nobody waits for this answer
        self._answers[slot] = answer
        # Answer in request order: a later request that finished first waits its turn.
        deliver = self.dispatcher.deliver
        while self._in_flight and self._in_flight[0] in self._answers:
            done = self._in_flight.popleft()
            self._held_in_flight -= done.held
            if not deliver(self, done.request, self._answers.pop(done)):
                self._reconcile_budget()
                return
        self._pump()

    def _failed(self, failure: Failure, slot: InFlight[RequestT, AnswerT]) -> None:
        if slot not in self._in_flight:
            return
        self._drop_in_flight()
        self.dispatcher.failed(self, failure, slot.request)
        self.close(abort=True)

    def _bug(self, failure: Failure) -> None:
        # A failure here is a bug in the protocol layer or its codec (say, an answer that
        # does not encode); the connection's state cannot be trusted after it.
        self._log.failure("{name} protocol internal error", failure=failure,
                          name=self.protocolName)
        self._drop_in_flight()
        self.close(abort=True)

    def _drop_in_flight(self) -> None:
        self._in_flight.clear()
        self._answers.clear()
        self._held_in_flight = 0
        self._reconcile_budget()

    # ----------------------------------------------------------------- request budget

    def _reconcile_budget(self) -> None:
        """Make the reservation cover what is held and owed (only give back once the
        connection is gone: it reads nothing more, so it must never wait)."""
        account = self._account
        wanted = self.decoder.input_bytes() + self._held_in_flight
        capacity = account.budget.capacity
        if capacity is not None:
            # More than the whole budget can never be granted; the protocols refuse a
            # frame that large, so this is at most one read beyond it.
            wanted = min(wanted, capacity)
        if not self._phase.connected or self._phase.closing:
            wanted = min(wanted, account.reserved)
        account.cover(wanted, self._budget_granted)

    def _budget_granted(self) -> None:
        self._update_reading()
        self._update_frame_timer()

    def _update_reading(self) -> None:
        phase = self._phase
        if phase.closing or not phase.connected:
            return  # a closing transport must not be resumed (and need not be paused)
        want = (
            not phase.write_blocked
            and not self._account.waiting
            and not self._mutes
            and (not self._in_flight or self.decoder.read_ahead())
        )
        if want != self._reading:
            self._reading = want
            if want:
                self._t.resumeProducing()
            else:
                self._t.pauseProducing()

    # ----------------------------------------------------------------- timers

    def _touch(self) -> None:
        if self._idle_call is not None and self._idle_call.active():
            assert self._idle_timeout is not None
            self._idle_call.reset(self._idle_timeout)

    def _idle_expired(self) -> None:
        self._idle_call = None
        assert self._idle_timeout is not None
        if self._in_flight:
            # Waiting on the core (a long poll, a held JoinGroup) is not idleness.
            self._idle_call = self._clock.callLater(self._idle_timeout, self._idle_expired)
            return
        self._log.info("{name}: closing idle connection from {peer}",
                       name=self.protocolName, peer=self.state.peer_host)
        # A client that stopped reading would keep a graceful close waiting forever.
        self.close(abort=self._phase.write_blocked)

    def _waiting_for_frame(self) -> bool:
        phase = self._phase
        return (
            phase.connected
            and not phase.closing
            and (self._reading or self._account.waiting)
            and self.decoder.frame_pending(self._in_flight)
        )

    def _update_frame_timer(self) -> None:
        """Run the frame deadline while a frame is incomplete and we read, or wait for
        the request budget to read it: a waiter must not keep its place (and what it
        holds) forever. Bytes we do not read for other reasons (the client does not
        read our answers, a request is in flight) are not the client's delay."""
        if self._frame_timeout is None:
            return
        call = self._frame_call
        if self._waiting_for_frame():
            if call is None or not call.active():
                self._frame_call = self._clock.callLater(self._frame_timeout, self._frame_expired)
        elif call is not None:
            if call.active():
                call.cancel()
            self._frame_call = None

    def _frame_expired(self) -> None:
        self._frame_call = None
        if not self._waiting_for_frame():
            return
        self._log.info("{name}: closing connection from {peer}: frame not completed in {s}s",
                       name=self.protocolName, peer=self.state.peer_host,
                       s=self._frame_timeout)
        self.close(abort=True)
