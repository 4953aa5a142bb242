"""Tests of the shared connection machinery (``brokerd.net.connection.RequestConnection``)
through a toy line protocol: each ``\\n``-terminated line is a request, answered with
whatever its Deferred (fired by the test) returns. Synchronous: StringTransport and
task.Clock, so trial and pytest run them alike."""

from __future__ import annotations

import gc
from collections.abc import Sized

from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd.net.connection import ConnectionState, DispatcherBase, RequestConnection
from brokerd.net.connlimit import ConnectionLimit
from brokerd.net.decoding import Aside, FrameFault
from brokerd.net.frames import Frame

IDLE = 100.0
FRAME = 10.0


class LineDecoder:
    """Requests are lines; ``pipeline`` of them may be in flight at once (None: any)."""

    def __init__(self, pipeline: int | None = None) -> None:
        self.pipeline = pipeline
        self.buffer = b""
        self.read_ahead_flag = False
        self.last_request_bytes = 0

    def receive(self, data: bytes) -> None:
        self.buffer += data

    def next_request(self, in_flight: Sized) -> bytes | None:
        full = self.pipeline is not None and len(in_flight) >= self.pipeline
        if full or b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def overflow(self) -> FrameFault | None:
        return None

    def frame_pending(self, in_flight: Sized) -> bool:
        return bool(self.buffer)

    def read_ahead(self) -> bool:
        return self.read_ahead_flag

    def input_bytes(self) -> int:
        return 0

    def discard(self) -> None:
        pass

    def lost(self) -> None:
        pass


Lines = RequestConnection[bytes, bytes]


class LineDispatcher(DispatcherBase[bytes, bytes]):
    """Answers each line with whatever its Deferred (fired by the test) returns, or at
    once from ``sync_answers``; ``fail`` fails; ``CLOSE`` closes; a line named in
    ``frames`` is answered with that frame."""

    def __init__(self) -> None:
        self.handled: list[tuple[bytes, defer.Deferred[bytes]]] = []
        self.cancelled: list[bytes] = []
        self.sync_answers: dict[bytes, bytes] = {}
        self.frames: dict[bytes, Frame] | None = None

    def handle(self, connection: Lines, request: bytes) -> defer.Deferred[bytes]:
        if request in self.sync_answers:
            return defer.succeed(self.sync_answers[request])
        if request == b"fail":
            return defer.fail(RuntimeError("handler bug"))
        d: defer.Deferred[bytes] = defer.Deferred(lambda _: self.cancelled.append(request))
        self.handled.append((request, d))
        return d

    def deliver(self, connection: Lines, request: bytes, answer: bytes) -> bool:
        if self.frames is not None:
            connection.write(self.frames.get(answer, answer + b"\n"))
            return True
        if answer == b"CLOSE":
            connection.close()
            return False
        connection.write(answer + b"\n")
        return True


class LineConnection(RequestConnection[bytes, bytes]):
    """The connection given a line decoder and dispatcher (it only builds them, and
    shows their fields to the tests)."""

    protocolName = "lines"
    decoder: LineDecoder
    dispatcher: LineDispatcher

    def __init__(self, clock: task.Clock, limit: ConnectionLimit | None, pipeline: int) -> None:
        self.first: list[bytes] = []
        super().__init__(
            LineDecoder(pipeline), LineDispatcher(),
            clock=clock, idle_timeout=IDLE, frame_timeout=FRAME, connection_limit=limit,
            first_bytes=self._first,
        )

    def _first(self, state: ConnectionState, data: bytes) -> bytes:
        self.first.append(data)
        return data.removeprefix(b"HELLO ")

    @property
    def handled(self) -> list[tuple[bytes, defer.Deferred[bytes]]]:
        return self.dispatcher.handled

    @property
    def cancelled(self) -> list[bytes]:
        return self.dispatcher.cancelled

    @property
    def sync_answers(self) -> dict[bytes, bytes]:
        return self.dispatcher.sync_answers

    @sync_answers.setter
    def sync_answers(self, answers: dict[bytes, bytes]) -> None:
        self.dispatcher.sync_answers = answers

    @property
    def read_ahead(self) -> bool:
        return self.decoder.read_ahead_flag

    @read_ahead.setter
    def read_ahead(self, flag: bool) -> None:
        self.decoder.read_ahead_flag = flag


class ConnectionTestCase(SynchronousTestCase):
    pipeline = 1

    def setUp(self) -> None:
        self.clock = task.Clock()
        self.limit = ConnectionLimit(None, "test listener")
        assert self.limit.admit()
        self.proto = LineConnection(self.clock, self.limit, self.pipeline)
        self.tr = StringTransport(peerAddress=IPv4Address("TCP", "10.0.0.9", 4444))
        self.proto.makeConnection(self.tr)

    def send(self, data: bytes) -> None:
        self.proto.dataReceived(data)

    def take(self) -> bytes:
        out = self.tr.value()
        self.tr.clear()
        return out

    def lose(self) -> None:
        self.proto.connectionLost(Failure(ConnectionDone()))

    def answer(self, i: int, value: bytes) -> None:
        self.proto.handled[i][1].callback(value)

    @property
    def paused(self) -> bool:
        return self.tr.producerState == "paused"


class SetupTests(ConnectionTestCase):
    def test_registers_as_streaming_producer(self) -> None:
        self.assertIs(self.tr.producer, self.proto)
        self.assertTrue(self.tr.streaming)

    def test_state_knows_the_peer(self) -> None:
        self.assertEqual(self.proto.state, ConnectionState("10.0.0.9"))
        self.assertTrue(self.proto.isConnected)

    def test_first_bytes_are_seen_once_before_the_decoder(self) -> None:
        self.send(b"HELLO a\n")
        self.send(b"HELLO b\n")
        self.assertEqual(self.proto.first, [b"HELLO a\n"])
        self.assertEqual([r for r, _ in self.proto.handled], [b"a"])
        self.answer(0, b"A")
        self.assertEqual([r for r, _ in self.proto.handled], [b"a", b"HELLO b"])

    def test_connection_limit_released_once(self) -> None:
        self.assertEqual(self.limit.open, 1)
        self.lose()
        self.assertEqual(self.limit.open, 0)
        self.assertFalse(self.proto.isConnected)
        self.assertTrue(self.proto.closing)


class PumpTests(ConnectionTestCase):
    def test_one_in_flight_and_reading_paused_meanwhile(self) -> None:
        self.send(b"a\nb\n")
        self.assertEqual(self.proto.inFlight, (b"a",))
        self.assertTrue(self.paused)
        self.answer(0, b"A")
        self.assertEqual(self.proto.inFlight, (b"b",))
        self.answer(1, b"B")
        self.assertFalse(self.paused)
        self.assertEqual(self.take(), b"A\nB\n")

    def test_synchronous_answers_do_not_recurse(self) -> None:
        self.proto.sync_answers = {b"x": b"X"}
        self.send(b"x\n" * 500)  # deep recursion would fail here
        self.assertEqual(self.take(), b"X\n" * 500)
        self.assertFalse(self.paused)

    def test_read_ahead_keeps_reading_while_in_flight(self) -> None:
        self.proto.read_ahead = True
        self.send(b"a\n")
        self.assertFalse(self.paused)
        self.proto.read_ahead = False
        self.send(b"b\n")
        self.assertTrue(self.paused)

    def test_handler_failure_aborts_and_drops_everything(self) -> None:
        self.send(b"fail\nnext\n")
        self.assertTrue(self.tr.disconnected)
        self.assertEqual(self.proto.inFlight, ())
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.assertEqual(self.proto.handled, [])


class PipelineTests(ConnectionTestCase):
    pipeline = 3

    def test_answers_keep_request_order(self) -> None:
        self.send(b"a\nb\nc\nd\n")
        self.assertEqual(self.proto.inFlight, (b"a", b"b", b"c"))
        self.answer(2, b"C")
        self.answer(1, b"B")
        self.assertEqual(self.take(), b"")
        self.answer(0, b"A")
        self.assertEqual(self.take(), b"A\nB\nC\n")
        self.assertEqual(self.proto.inFlight, (b"d",))

    def test_close_answer_stops_delivery(self) -> None:
        self.send(b"a\nb\n")
        self.answer(1, b"B")
        self.answer(0, b"CLOSE")
        self.assertEqual(self.take(), b"")
        self.assertTrue(self.tr.disconnecting)


class FlowControlTests(ConnectionTestCase):
    def test_pause_holds_requests_until_resume(self) -> None:
        self.proto.pauseProducing()
        self.assertTrue(self.paused)
        self.assertTrue(self.proto.blocked)
        self.send(b"a\n")
        self.assertEqual(self.proto.handled, [])
        self.proto.resumeProducing()
        self.assertEqual([r for r, _ in self.proto.handled], [b"a"])

    def test_answer_written_while_paused_but_next_not_taken(self) -> None:
        self.send(b"a\nb\n")
        self.proto.pauseProducing()
        self.answer(0, b"A")
        self.assertEqual(self.take(), b"A\n")
        self.assertEqual(len(self.proto.handled), 1)
        self.assertTrue(self.paused)
        self.proto.resumeProducing()
        self.assertEqual(len(self.proto.handled), 2)


class MuteTests(ConnectionTestCase):
    """A client quota's throttle: after its answer, nothing is read or taken for a while
    (KIP-219), overlapping mutes ending with the last."""

    def test_nothing_read_or_taken_while_muted(self) -> None:
        self.send(b"a\n")
        self.answer(0, b"A")
        self.proto.mute(2.0)
        self.assertTrue(self.proto.muted)
        self.assertTrue(self.paused)
        self.send(b"b\n")  # already in the socket buffer: kept, not taken
        self.assertEqual(len(self.proto.handled), 1)
        self.clock.advance(1.999)
        self.assertEqual(len(self.proto.handled), 1)
        self.clock.advance(0.001)
        self.assertFalse(self.proto.muted)
        self.assertEqual([r for r, _ in self.proto.handled], [b"a", b"b"])
        self.assertTrue(self.paused)  # b in flight

    def test_overlapping_mutes_end_with_the_last(self) -> None:
        self.proto.mute(1.0)
        self.proto.mute(3.0)
        self.send(b"a\n")
        self.clock.advance(1.0)
        self.assertTrue(self.proto.muted)
        self.assertEqual(self.proto.handled, [])
        self.clock.advance(2.0)
        self.assertEqual([r for r, _ in self.proto.handled], [b"a"])

    def test_no_mute_for_no_time(self) -> None:
        self.proto.mute(0.0)
        self.assertFalse(self.proto.muted)
        self.assertFalse(self.paused)


class CloseTests(ConnectionTestCase):
    def test_connection_lost_cancels_in_flight_and_drops_late_answers(self) -> None:
        self.send(b"a\nb\n")
        d = self.proto.handled[0][1]
        self.lose()
        self.assertEqual(self.proto.cancelled, [b"a"])
        self.assertTrue(d.called)
        self.assertEqual(self.take(), b"")
        self.send(b"c\n")
        self.assertEqual(len(self.proto.handled), 1)

    def test_close_is_graceful_or_abort(self) -> None:
        self.proto.close()
        self.assertTrue(self.tr.disconnecting)
        self.assertFalse(self.tr.disconnected)
        self.proto.close(abort=True)  # already closing: nothing more
        self.assertFalse(self.tr.disconnected)

    def test_write_after_loss_is_dropped(self) -> None:
        self.lose()
        self.proto.write(b"late")
        self.assertEqual(self.take(), b"")


class TimerTests(ConnectionTestCase):
    def test_idle_close_and_activity_resets_it(self) -> None:
        self.clock.advance(IDLE - 1)
        self.proto.sync_answers = {b"x": b"X"}
        self.send(b"x\n")
        self.clock.advance(IDLE - 1)
        self.assertFalse(self.tr.disconnecting)
        self.clock.advance(1)
        self.assertTrue(self.tr.disconnecting)
        self.assertFalse(self.tr.disconnected)

    def test_idle_while_blocked_aborts(self) -> None:
        self.proto.pauseProducing()
        self.clock.advance(IDLE)
        self.assertTrue(self.tr.disconnected)

    def test_waiting_on_a_handler_is_not_idle(self) -> None:
        self.send(b"a\n")
        self.clock.advance(IDLE * 5)
        self.assertFalse(self.tr.disconnecting)
        self.answer(0, b"A")
        self.clock.advance(IDLE)
        self.assertTrue(self.tr.disconnecting)

    def test_incomplete_frame_aborted_at_the_deadline(self) -> None:
        self.send(b"partial")
        self.clock.advance(FRAME - 1)
        self.send(b"more")  # arriving bytes do not extend the deadline
        self.assertFalse(self.tr.disconnecting)
        self.clock.advance(1)
        self.assertTrue(self.tr.disconnected)

    def test_frame_deadline_runs_only_while_reading(self) -> None:
        self.send(b"a\npartial")  # not read while a is in flight
        self.clock.advance(FRAME * 3)
        self.assertFalse(self.tr.disconnecting)
        self.answer(0, b"A")
        self.clock.advance(FRAME)
        self.assertTrue(self.tr.disconnected)

    def test_frame_deadline_stops_while_the_client_does_not_read(self) -> None:
        self.send(b"partial")
        self.proto.pauseProducing()
        self.clock.advance(FRAME * 3)
        self.assertFalse(self.tr.disconnecting)
        self.proto.resumeProducing()
        self.clock.advance(FRAME)
        self.assertTrue(self.tr.disconnected)

    def test_completed_frame_cancels_the_deadline(self) -> None:
        self.send(b"par")
        self.send(b"tial\n")
        self.answer(0, b"A")
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)  # only the idle timer

    def test_timers_cancelled_on_loss(self) -> None:
        self.send(b"x")
        self.assertEqual(len(self.clock.getDelayedCalls()), 2)
        self.lose()
        self.assertEqual(self.clock.getDelayedCalls(), [])


class Refused(Aside):
    """A line the toy decoder refuses (``no``), answered by the dispatcher in its turn."""


class PartsDecoder(LineDecoder):
    """A line decoder that hands out ``no`` as an aside and faults on ``bad``."""

    def receive(self, data: bytes) -> None:
        if b"bad" in data:
            raise FrameFault("bad bytes")
        super().receive(data)

    def next_request(self, in_flight: Sized) -> bytes | Aside | None:
        if self.buffer.startswith(b"no\n") and not in_flight:
            self.buffer = self.buffer[3:]
            return Refused()
        return super().next_request(in_flight)


class PartsDispatcher(LineDispatcher):
    def __init__(self) -> None:
        super().__init__()
        self.faults: list[str] = []

    def aside(self, connection: Lines, item: Aside) -> None:
        connection.write(b"refused\n")

    def fault(self, connection: Lines, fault: FrameFault) -> None:
        self.faults.append(str(fault))


class PartsTests(SynchronousTestCase):
    """The connection asks its given parts, and keeps no cycle with its dispatcher."""

    def setUp(self) -> None:
        self.dispatcher = PartsDispatcher()
        self.proto = RequestConnection(
            PartsDecoder(1), self.dispatcher,
            clock=task.Clock(), idle_timeout=None, frame_timeout=None,
        )
        self.tr = StringTransport()
        self.proto.makeConnection(self.tr)

    def test_an_aside_is_answered_in_its_turn(self) -> None:
        self.proto.dataReceived(b"a\nno\nb\n")
        self.assertEqual([r for r, _ in self.dispatcher.handled], [b"a"])
        self.dispatcher.handled[0][1].callback(b"A")
        self.assertEqual(self.tr.value(), b"A\nrefused\n")
        self.assertEqual([r for r, _ in self.dispatcher.handled], [b"a", b"b"])

    def test_a_frame_fault_is_told_and_aborts(self) -> None:
        self.proto.dataReceived(b"bad")
        self.assertEqual(self.dispatcher.faults, ["bad bytes"])
        self.assertTrue(self.tr.disconnected)

    def test_the_dispatcher_holds_no_reference_to_its_connection(self) -> None:
        self.proto.dataReceived(b"a\n")
        self.assertNotIn(self.proto, gc.get_referents(self.dispatcher))
        self.assertNotIn(self.proto, gc.get_referents(*gc.get_referents(self.dispatcher)))
