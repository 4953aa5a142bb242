"""The TLS answer path: :class:`~brokerd.net.chunked.ChunkedSender` and the
:class:`~brokerd.net.answer_budget.AnswerBudget`, alone and inside ``RequestConnection``.

Synchronous: a StringTransport that pauses its producer past a high-water mark (as
Twisted's TCP transport does under TLS) and ``task.Clock`` for the sender's reactor turns.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import task
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd.net.answer_budget import AnswerBudget
from brokerd.net.chunked import CHUNK_BYTES, ChunkedSender
from brokerd.net.frames import Frame, SplicedFrame
from brokerd.net.sendfile import RegionGone, RegionLedger, can_chunk, can_splice
from brokerd.storage.types import StoredRecords

from tests.net.test_connection import IDLE, LineConnection

#: Buffered bytes past which the fake transport pauses its producer (Twisted: 64 KiB).
HIGH_WATER = 64 * 1024


class CountingRegion:
    """A file region over ``data`` that counts the bytes read out of it."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0
        self.length = len(data)
        self.released = False
        self.bytes_read = 0

    def fileno(self) -> int:
        raise AssertionError("a TLS answer is never sent by descriptor")

    def read(self) -> bytes:
        raise AssertionError("a TLS answer is never read whole")

    def read_at(self, offset: int, size: int) -> bytes:
        assert not self.released
        assert offset >= 0 and offset + size <= self.length
        self.bytes_read += size
        return self.data[offset : offset + size]

    def truncate(self, length: int) -> None:
        self.length = length

    def release(self) -> None:
        self.released = True


class TlsLikeTransport(StringTransport):
    """Pauses its streaming producer once it holds more than :data:`HIGH_WATER` bytes and
    resumes it when :meth:`drain` empties it, as Twisted's TLS-over-TCP transport does."""

    TLS = True

    def __init__(self) -> None:
        super().__init__(peerAddress=IPv4Address("TCP", "10.0.0.9", 4444))
        self.received = b""
        self.writes: list[int] = []
        self.held = False  # the producer is paused by this transport

    def write(self, data: bytes) -> None:
        super().write(data)
        self.writes.append(len(data))
        if len(self.value()) > HIGH_WATER and self.producer is not None and not self.held:
            self.held = True
            self.producer.pauseProducing()

    def unregisterProducer(self) -> None:
        super().unregisterProducer()
        self.held = False

    def drain(self) -> None:
        self.received += self.value()
        self.clear()
        if self.producer is not None and self.held:
            self.held = False
            self.producer.resumeProducing()


class Driven:
    """A sender on a transport, standing in for the connection as its producer."""

    def __init__(self, parts: list[Any], budget: AnswerBudget | None = None) -> None:
        self.clock = task.Clock()
        self.transport = TlsLikeTransport()
        self.ledger = RegionLedger()
        for part in parts:
            if not isinstance(part, bytes):
                self.ledger.hold(part)
        self.budget = budget if budget is not None else AnswerBudget(None)
        self.done: list[BaseException | None] = []
        self.sender = ChunkedSender(
            self.transport, parts, self.ledger, self.budget, self.clock, self.done.append
        )
        self.transport.registerProducer(self.sender, True)

    def run(self, turns: int = 1000, drain: bool = True) -> None:
        for _ in range(turns):
            if self.done:
                return
            self.clock.advance(0)
            if drain:
                self.transport.drain()


class ChunkedSenderTests(SynchronousTestCase):
    def test_a_large_answer_goes_out_a_chunk_per_turn_byte_for_byte(self) -> None:
        data = bytes(range(256)) * (4 * CHUNK_BYTES // 256 + 7)
        region = CountingRegion(data)
        driven = Driven([b"header", region, b"trailer"])
        self.assertFalse(driven.sender.send_now())
        driven.sender.start()
        self.assertEqual(driven.transport.writes, [])  # nothing before the reactor turn
        driven.run()
        self.assertEqual(driven.done, [None])
        self.assertEqual(driven.transport.received, b"header" + data + b"trailer")
        self.assertLessEqual(max(driven.transport.writes), CHUNK_BYTES)
        self.assertTrue(region.released)
        self.assertEqual(len(driven.ledger), 0)
        self.assertEqual(driven.budget.in_use, 0)
        self.assertLessEqual(driven.budget.peak, CHUNK_BYTES)

    def test_a_client_that_never_reads_holds_about_one_chunk(self) -> None:
        region = CountingRegion(b"x" * (40 * CHUNK_BYTES))
        budget = AnswerBudget(16 * CHUNK_BYTES)
        driven = Driven([region], budget)
        driven.sender.start()
        driven.run(turns=50, drain=False)
        # The first chunk filled the transport past its high-water mark: paused since.
        self.assertTrue(driven.sender.paused)
        self.assertEqual(region.bytes_read, CHUNK_BYTES)
        self.assertEqual(len(driven.transport.value()), CHUNK_BYTES)
        self.assertEqual(budget.in_use, CHUNK_BYTES)
        self.assertEqual(driven.done, [])
        # Draining gives the chunk back and lets the next one go.
        driven.transport.drain()
        self.assertEqual(budget.in_use, 0)
        driven.clock.advance(0)
        self.assertEqual(region.bytes_read, 2 * CHUNK_BYTES)

    def test_a_full_budget_defers_the_read(self) -> None:
        budget = AnswerBudget(CHUNK_BYTES)
        budget.charge(CHUNK_BYTES)  # another answer holds all of it
        region = CountingRegion(b"y" * (3 * CHUNK_BYTES))
        driven = Driven([region], budget)
        driven.sender.start()
        driven.run(turns=20)
        self.assertEqual(region.bytes_read, 0)
        self.assertEqual(budget.waiting, 1)
        budget.give(CHUNK_BYTES)
        driven.run()
        self.assertEqual(driven.done, [None])
        self.assertEqual(driven.transport.received, region.data)
        self.assertEqual(budget.in_use, 0)

    def test_stopping_mid_answer_releases_the_region_and_the_budget(self) -> None:
        region = CountingRegion(b"z" * (10 * CHUNK_BYTES))
        budget = AnswerBudget(None)
        driven = Driven([region], budget)
        driven.sender.start()
        driven.run(turns=2, drain=False)
        self.assertFalse(region.released)
        driven.sender.stopProducing()
        self.assertTrue(region.released)
        self.assertEqual(budget.in_use, 0)
        self.assertEqual(len(driven.done), 1)
        self.assertIsInstance(driven.done[0], RegionGone)
        driven.clock.advance(0)  # nothing scheduled fires after the stop
        self.assertEqual(region.bytes_read, CHUNK_BYTES)

    def test_a_region_released_before_its_turn_fails_the_send(self) -> None:
        region = CountingRegion(b"r" * (2 * CHUNK_BYTES))
        driven = Driven([b"h" * (CHUNK_BYTES + 1), region])
        driven.sender.start()
        region.release()
        driven.run()
        self.assertEqual(len(driven.done), 1)
        self.assertIsInstance(driven.done[0], RegionGone)

    def test_a_small_answer_is_written_at_once(self) -> None:
        region = CountingRegion(b"s" * 1000)
        driven = Driven([b"head", region], AnswerBudget(1))
        self.assertTrue(driven.sender.send_now())
        self.assertEqual(driven.transport.value(), b"head" + b"s" * 1000)
        self.assertTrue(region.released)
        self.assertEqual(driven.done, [])  # as after a plain write


class SplicingLines(LineConnection):
    """Answers a line with the frame the test put under its name, else echoes it."""

    def __init__(self, clock: task.Clock) -> None:
        super().__init__(clock, None, 2)
        self.frames: dict[bytes, Frame] = {}
        self.dispatcher.frames = self.frames


class ConnectionTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = task.Clock()
        self.budget = AnswerBudget(64 * CHUNK_BYTES)
        self.proto = SplicingLines(self.clock)
        self.proto.answer_budget = self.budget
        self.tr = TlsLikeTransport()
        self.proto.makeConnection(self.tr)
        self.region = CountingRegion(bytes(range(200)) * (3 * CHUNK_BYTES // 200))
        assert self.proto.state.regions is not None
        self.proto.state.regions.hold(self.region)
        self.proto.frames[b"big"] = SplicedFrame.of(
            [b"H" * 10, StoredRecords(self.region), b"T"]
        )

    def test_tls_transports_take_regions_in_chunks(self) -> None:
        self.assertTrue(can_chunk(self.tr))
        self.assertFalse(can_splice(self.tr))
        self.assertIsNotNone(self.proto.state.regions)

    def test_an_answer_in_chunks_then_the_next_requests(self) -> None:
        self.proto.dataReceived(b"big\n")
        self.proto.handled[0][1].callback(b"big")
        self.proto.dataReceived(b"small\n")
        # No request is taken while the frame is being sent.
        self.assertEqual(len(self.proto.handled), 1)
        for _ in range(100):
            self.clock.advance(0)
            self.tr.drain()
        self.assertEqual(self.tr.received, b"H" * 10 + self.region.data + b"T")
        self.assertTrue(self.region.released)
        self.assertEqual(self.budget.in_use, 0)
        self.assertEqual([r for r, _ in self.proto.handled], [b"big", b"small"])
        self.proto.handled[1][1].callback(b"small")
        self.tr.drain()
        self.assertTrue(self.tr.received.endswith(b"small\n"))
        self.assertIs(self.tr.producer, self.proto)  # the connection stayed the producer

    def test_an_answer_still_going_out_is_not_idleness(self) -> None:
        self.proto.dataReceived(b"big\n")
        self.proto.handled[0][1].callback(b"big")
        for _ in range(3):
            self.clock.advance(IDLE * 0.6)  # each advance runs one turn, one chunk
            self.tr.drain()
        self.assertFalse(self.tr.disconnecting)
        self.clock.advance(0)
        self.tr.drain()
        self.assertEqual(self.tr.received, b"H" * 10 + self.region.data + b"T")
        self.clock.advance(IDLE)  # nothing more either way: idle now
        self.assertTrue(self.tr.disconnecting)

    def test_closing_mid_answer_gives_everything_back(self) -> None:
        self.proto.dataReceived(b"big\n")
        self.proto.handled[0][1].callback(b"big")
        self.clock.advance(0)  # one chunk out; the client reads nothing more
        self.assertGreater(self.budget.in_use, 0)
        self.assertFalse(self.region.released)
        self.proto.connectionLost(Failure(ConnectionDone()))
        self.assertTrue(self.region.released)
        self.assertEqual(self.budget.in_use, 0)
        self.assertEqual(self.clock.getDelayedCalls(), [])
