"""The broker-wide request budget (``brokerd.net.request_budget``) and the limits on what
a connection buffers: reservation at the size prefix, waiting in order with the transport
paused, resuming as budget comes back, refusal of a frame larger than the budget, the
SASL pre-authentication frame limit, and the native decoder's held and owed bytes.
StringTransport and task.Clock: synchronous, so trial runs these too."""

from __future__ import annotations

from typing import Any

from twisted.internet import task
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.listener.protocol import KafkaFactory, KafkaProtocol
from brokerd.kafka.server.sasl import SaslConfig
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis
from brokerd.native.protocol import NativeFactory
from brokerd.native.server_codec import RequestDecoder
from brokerd.net.request_budget import RequestBudget
from brokerd.security.auth_throttle import AuthThrottle

from tests.kafka.server.handlers.test_sasl import SaslProtocolTestCase
from tests.kafka.server.test_protocol import FakeCoordinator, FakeCore
from tests.native_helpers import FakeCore as NativeFakeCore
from tests.native_helpers import produce_frame


class BudgetTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.budget = RequestBudget(100)
        self.granted: list[str] = []

    def on(self, name: str) -> Any:
        return lambda: self.granted.append(name)

    def test_covered_at_once_while_it_fits(self) -> None:
        a = self.budget.account()
        self.assertTrue(a.cover(60, self.on("a")))
        self.assertEqual((a.reserved, self.budget.reserved), (60, 60))
        self.assertTrue(a.cover(20))  # shrinking gives back
        self.assertEqual(self.budget.reserved, 20)

    def test_waiters_are_served_in_order_and_nobody_overtakes(self) -> None:
        a, b, c = (self.budget.account() for _ in range(3))
        self.assertTrue(a.cover(90))
        self.assertFalse(b.cover(50, self.on("b")))
        # c would fit in what is left (10), but b waits first.
        self.assertFalse(c.cover(5, self.on("c")))
        self.assertEqual(self.budget.waiting, 2)
        a.cover(60)
        self.assertEqual(self.granted, [])  # 40 free: b still does not fit
        a.close()
        self.assertEqual(self.granted, ["b", "c"])
        self.assertEqual((b.reserved, c.reserved, self.budget.reserved), (50, 5, 55))
        self.assertFalse(b.waiting or c.waiting)

    def test_a_waiter_that_needs_less_keeps_its_place(self) -> None:
        a, b, c = (self.budget.account() for _ in range(3))
        a.cover(100)
        b.cover(80, self.on("b"))
        c.cover(10, self.on("c"))
        b.cover(90, self.on("b"))
        a.cover(10)
        self.assertEqual(self.granted, ["b"])  # b first, though it now asks for more
        self.assertTrue(c.waiting)

    def test_leaving_the_queue_lets_the_next_in(self) -> None:
        a, b, c = (self.budget.account() for _ in range(3))
        a.cover(70)
        b.cover(80, self.on("b"))
        c.cover(20, self.on("c"))
        b.close()
        self.assertEqual(self.granted, ["c"])
        self.assertIsNone(b.on_granted)  # no callback held outside a wait

    def test_admits_and_unlimited(self) -> None:
        self.assertTrue(self.budget.admits(100))
        self.assertFalse(self.budget.admits(101))
        unlimited = RequestBudget(None)
        self.assertTrue(unlimited.admits(1 << 40))
        self.assertTrue(unlimited.account().cover(1 << 40))
        with self.assertRaises(ValueError):
            RequestBudget(0)


class KafkaBudgetTests(SynchronousTestCase):
    """Two Kafka connections sharing a budget that holds one of their frames."""

    def setUp(self) -> None:
        self.clock = task.Clock()
        self.correlation = 0
        frame = self.frame()
        self.size = len(frame) - 4
        self.budget = RequestBudget(self.size + self.size // 2)
        self.factory = KafkaFactory(
            FakeCore(), FakeCoordinator(), clock=self.clock,  # type: ignore[arg-type]
            advertised_host="broker.example", advertised_port=19092,
            request_budget=self.budget,
        )

    def frame(self) -> bytes:
        self.correlation += 1
        # A long client id makes a frame of some size.
        header = RequestHeader(int(ApiKey.API_VERSIONS), 0, self.correlation, "x" * 400)
        return apis.encode_request(header, apis.ApiVersionsRequest())

    def connect(self) -> tuple[KafkaProtocol, StringTransport]:
        proto = self.factory.buildProtocol(None)
        assert proto is not None
        tr = StringTransport(peerAddress=IPv4Address("TCP", "10.1.2.3", 5555))
        proto.makeConnection(tr)
        return proto, tr

    def test_reserved_at_the_prefix_waits_paused_and_resumes(self) -> None:
        a, ta = self.connect()
        b, tb = self.connect()
        fa, fb = self.frame(), self.frame()
        a.dataReceived(fa[:4])
        self.assertEqual(self.budget.reserved, self.size)  # before any of the body
        self.assertEqual(ta.producerState, "producing")
        b.dataReceived(fb[:4])
        self.assertTrue(b.budgetWaiting)
        self.assertEqual(tb.producerState, "paused")  # stops reading instead of buffering
        a.dataReceived(fa[4:])
        self.assertTrue(ta.value())  # answered, and its frame given back
        self.assertFalse(b.budgetWaiting)
        self.assertEqual(tb.producerState, "producing")
        self.assertEqual(self.budget.reserved, self.size)  # b's frame now
        b.dataReceived(fb[4:])
        self.assertTrue(tb.value())
        self.assertEqual(self.budget.reserved, 0)

    def test_a_waiting_connection_lost_leaves_the_queue_and_gives_back(self) -> None:
        a, _ = self.connect()
        b, _ = self.connect()
        a.dataReceived(self.frame()[:4])
        b.dataReceived(self.frame()[:4])
        b.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(self.budget.waiting, 0)
        a.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(self.budget.reserved, 0)

    def test_a_frame_larger_than_the_whole_budget_is_refused(self) -> None:
        a, ta = self.connect()
        too_large = self.budget.capacity + 1  # type: ignore[operator]
        a.dataReceived(too_large.to_bytes(4, "big"))
        self.assertTrue(ta.disconnecting)
        self.assertEqual(self.budget.reserved, 0)


class PreAuthenticationLimitTests(SaslProtocolTestCase):
    def setUp(self) -> None:
        super().setUp()
        assert self.factory.sasl is not None
        self.factory = KafkaFactory(
            self.core, self.groups, clock=self.clock,  # type: ignore[arg-type]
            advertised_host="broker.example", advertised_port=19092,
            sasl=SaslConfig(self.factory.sasl.mechanisms, self.store,
                            AuthThrottle(self.clock.seconds)),
            sasl_max_receive_bytes=1024,
        )
        self.proto, self.tr = self.connect()

    def test_a_large_frame_before_login_closes_before_it_is_buffered(self) -> None:
        self.proto.dataReceived((8 * 1024 * 1024).to_bytes(4, "big") + b"\0" * 1000)
        self.assertTrue(self.tr.disconnecting)
        self.assertEqual(self.proto.inputHeld() + self.proto.inputOwed(), 0)
        self.assertEqual(self.factory.unauthenticated_refusals.count, 1)

    def test_the_limit_is_the_pre_authentication_one_only(self) -> None:
        self.proto.dataReceived((1024).to_bytes(4, "big"))
        self.assertFalse(self.tr.disconnecting)  # at the limit: accepted
        self.proto, self.tr = self.connect()
        self.assertEqual(self.scram_login("wonderland").error_code, 0)
        self.proto.dataReceived((64 * 1024).to_bytes(4, "big"))
        self.assertFalse(self.tr.disconnecting)
        self.assertEqual(self.proto.inputOwed(), 64 * 1024)


class NativeBudgetTests(SynchronousTestCase):
    def test_decoder_holds_and_owes_a_value_whose_size_is_read(self) -> None:
        decoder = RequestDecoder()
        frame = produce_frame("t", 0, [b"a" * 100, b"b" * 5000])
        decoder.receive(frame[:-1000])
        self.assertIsNone(decoder.next_event())
        # The first record decoded, the second's header and 4000 of its bytes buffered.
        self.assertEqual(decoder.held, (4 + 100) + (4 + 4000))
        self.assertEqual(decoder.owed, 1000)
        decoder.receive(frame[-1000:])
        request = decoder.next_event()
        self.assertIsNotNone(request)
        self.assertEqual((decoder.held, decoder.owed), (0, 0))
        self.assertEqual(decoder.last_frame_bytes, len(frame))

    def test_a_second_connection_waits_while_the_first_holds_the_budget(self) -> None:
        budget = RequestBudget(8000)
        factory = NativeFactory(NativeFakeCore(), clock=task.Clock(), request_budget=budget)
        first, second = factory.buildProtocol(None), factory.buildProtocol(None)
        t1, t2 = StringTransport(), StringTransport()
        first.makeConnection(t1)
        second.makeConnection(t2)
        big = produce_frame("t", 0, [b"a" * 6000])
        first.dataReceived(big[:-100])  # the value's size is read: all of it is reserved
        self.assertEqual(budget.reserved, 4 + 6000)  # the record, before its last bytes
        second.dataReceived(produce_frame("t", 0, [b"b" * 3000])[:-10])
        self.assertTrue(second.budgetWaiting)
        self.assertEqual(t2.producerState, "paused")
        first.connectionLost(Failure(ConnectionDone()))
        self.assertFalse(second.budgetWaiting)
        self.assertEqual(t2.producerState, "producing")
