"""The broker-wide request budget (``brokerd.net.request_budget``) and the limits on what
a connection buffers: each rule of the budget (claims that follow what arrived, bounded
overtaking by small needs, the address share, the small pool), waiting with the
transport paused and within the frame deadline, resuming as budget comes back, refusal
of a frame larger than the budget, the SASL pre-authentication frame limit, and the
native decoder's held and owed bytes.
StringTransport and task.Clock: synchronous, so trial runs these too."""

from __future__ import annotations

from typing import Any

import attrs
from twisted.internet import task
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.listener.factory_parts import DEFAULT_LIMITS, ListenerEdge, ListenerSecurity
from brokerd.kafka.listener.protocol import DEFAULT_FRAME_TIMEOUT, KafkaFactory, KafkaProtocol
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.server.sasl_session import SaslConfig
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis
from brokerd.native.protocol import NativeFactory
from brokerd.native.server_codec import RequestDecoder
from brokerd.net.request_budget import PROOF_BYTES, RequestBudget, claim
from brokerd.security.auth_throttle import AuthThrottle

from tests.fake_core import FakeCore, HandFiredCore
from tests.kafka.listener.test_protocol import FakeCoordinator, temp_dir
from tests.kafka.server.handlers.test_sasl import SaslProtocolTestCase
from tests.native_helpers import produce_frame

KIB = 1024
MIB = 1024 * KIB


def announce(size: int, sent: int) -> bytes:
    """A Kafka size prefix announcing ``size`` bytes and the first ``sent`` of them."""
    return size.to_bytes(4, "big") + b"\0" * sent


class BudgetTests(SynchronousTestCase):
    """The budget's rules on bare accounts: 100 bytes, of which reservations up to 10
    bytes are small; addresses and the small pool stay out of the way unless a test
    brings them in."""

    def setUp(self) -> None:
        self.budget = RequestBudget(100, small_bytes=10, small_pool=100)
        self.granted: list[str] = []

    def on(self, name: str) -> Any:
        return lambda: self.granted.append(name)

    def test_covered_at_once_while_it_fits(self) -> None:
        a = self.budget.account()
        self.assertTrue(a.cover(60, self.on("a")))
        self.assertEqual((a.reserved, self.budget.reserved), (60, 60))
        self.assertTrue(a.cover(20))  # shrinking gives back
        self.assertEqual(self.budget.reserved, 20)

    def test_large_waiters_are_served_in_order(self) -> None:
        a, b, c = (self.budget.account() for _ in range(3))
        self.assertTrue(a.cover(90))
        self.assertFalse(b.cover(50, self.on("b")))
        self.assertFalse(c.cover(30, self.on("c")))
        self.assertEqual(self.budget.waiting, 2)
        a.cover(60)
        # 40 free: c would fit, but it is not small, so it does not pass b.
        self.assertEqual(self.granted, [])
        a.close()
        self.assertEqual(self.granted, ["b", "c"])
        self.assertEqual((b.reserved, c.reserved, self.budget.reserved), (50, 30, 80))
        self.assertFalse(b.waiting or c.waiting)

    def test_a_waiter_that_needs_less_keeps_its_place(self) -> None:
        a, b, c = (self.budget.account() for _ in range(3))
        a.cover(100)
        b.cover(80, self.on("b"))
        c.cover(20, self.on("c"))
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

    def test_small_needs_overtake_a_blocked_large_one(self) -> None:
        a, large, small = (self.budget.account() for _ in range(3))
        a.cover(60)
        self.assertFalse(large.cover(50, self.on("large")))
        # A metadata request, say: it fits in what is free and passes the large frame.
        self.assertTrue(small.cover(8, self.on("small")))
        self.assertTrue(large.waiting)
        a.close()
        self.assertEqual(self.granted, ["large"])

    def test_overtaking_is_bounded_so_a_large_frame_is_not_starved(self) -> None:
        a, large = self.budget.account(), self.budget.account()
        a.cover(60)
        self.assertFalse(large.cover(50, self.on("large")))
        smalls = [self.budget.account() for _ in range(8)]
        covered = [s.cover(10, self.on(f"s{i}")) for i, s in enumerate(smalls)]
        self.assertEqual(covered, [True] * 4 + [False] * 4)  # the 40 free bytes
        self.assertEqual(large.overtaken, 40)
        smalls[0].close()  # s4 fits and may still pass: 40 of the 50 the large one needs
        self.assertEqual(self.granted, ["s4"])
        # s5 fits; the large frame was passed by its need, but a's claim, not the small
        # reservations, keeps it out: holding s5 back would not help it.
        smalls[1].close()
        self.assertEqual(self.granted, ["s4", "s5"])
        a.close()
        self.assertEqual(self.granted, ["s4", "s5", "large", "s6"])
        self.assertEqual(large.overtaken, 0)

    def test_overtaking_stops_once_small_reservations_keep_a_large_frame_out(self) -> None:
        held = [self.budget.account() for _ in range(10)]
        self.assertEqual([h.cover(10) for h in held], [True] * 10)
        large = self.budget.account()
        self.assertFalse(large.cover(50, self.on("large")))
        waiting = [self.budget.account() for _ in range(10)]
        for i, w in enumerate(waiting):
            self.assertFalse(w.cover(10, self.on(f"w{i}")))
        for h in held[:5]:
            h.close()  # each frees 10 bytes that a small waiter may take: 50 in all
        self.assertEqual(self.granted, [f"w{i}" for i in range(5)])
        for h in held[5:9]:
            h.close()  # strict order now: the room goes to the large frame
        self.assertEqual(len(self.granted), 5)
        held[9].close()
        self.assertEqual(self.granted[5:], ["large"])

    def test_claims_filling_the_budget_do_not_stop_small_requests(self) -> None:
        # Two addresses' claims (frames announced, one read sent, then silence) fill the
        # budget and a third claim waits: small requests must go on meanwhile.
        budget = RequestBudget(100, small_bytes=10, small_pool=100)
        a, b = budget.account("10.0.0.1"), budget.account("10.0.0.2")
        self.assertTrue(a.cover(45))
        self.assertTrue(b.cover(45))
        third = budget.account("10.0.0.2")
        self.assertFalse(third.cover(30, self.on("third")))
        for _ in range(50):  # far more than the third claim's need of 30
            small = budget.account("10.0.0.3")
            self.assertTrue(small.cover(10))
            small.close()
        self.assertGreaterEqual(third.overtaken, 30)
        a.close()
        self.assertEqual(self.granted, ["third"])

    def test_an_address_holds_its_share_and_waits_without_holding_up_others(self) -> None:
        budget = RequestBudget(100, small_bytes=10, address_share=40)
        a1, a2 = budget.account("10.0.0.1"), budget.account("10.0.0.1")
        other = budget.account("10.0.0.2")
        self.assertTrue(a1.cover(50))  # 40 beyond its small part: the share is full
        self.assertEqual(budget.held_by("10.0.0.1"), 40)
        self.assertFalse(a2.cover(30, self.on("a2")))  # fits the budget, not the share
        self.assertTrue(a2.cover(10))  # small needs still pass the address's share
        self.assertTrue(other.cover(30, self.on("other")))  # a2 waits, nobody else does
        self.assertFalse(a2.cover(30, self.on("a2")))
        a1.cover(20)  # 10 beyond the small part: a2 may grow
        self.assertEqual(self.granted, ["a2"])
        self.assertEqual(budget.held_by("10.0.0.1"), 30)
        for account in (a1, a2, other):
            account.close()
        self.assertEqual((budget.reserved, budget.reserved_small, budget.held_by("10.0.0.1")),
                         (0, 0, 0))

    def test_an_address_may_always_take_one_frame_beyond_its_share(self) -> None:
        budget = RequestBudget(100, small_bytes=10, address_share=20)
        a = budget.account("10.0.0.1")
        self.assertTrue(a.cover(90))  # larger than the share: nothing else held
        unaddressed = [budget.account() for _ in range(2)]  # UNIX sockets: no share
        self.assertTrue(unaddressed[0].cover(5))
        self.assertTrue(unaddressed[1].cover(5))

    def test_the_small_pool_keeps_room_for_claims(self) -> None:
        budget = RequestBudget(100, small_bytes=10, small_pool=25)
        partial = [budget.account() for _ in range(4)]
        covered = [p.cover(10, self.on(f"p{i}")) for i, p in enumerate(partial)]
        self.assertEqual(covered, [True, True, False, False])  # 20 held; 30 would pass 25
        # A claim is not small: the pool does not stop it, and its waiters do not either.
        claim_ = budget.account()
        self.assertTrue(claim_.cover(70, self.on("claim")))
        partial[0].close()
        self.assertEqual(self.granted, ["p2"])

    def test_admits_and_unlimited(self) -> None:
        self.assertTrue(self.budget.admits(100))
        self.assertFalse(self.budget.admits(101))
        unlimited = RequestBudget(None)
        self.assertTrue(unlimited.admits(1 << 40))
        self.assertTrue(unlimited.account("10.0.0.1").cover(1 << 40))
        with self.assertRaises(ValueError):
            RequestBudget(0)


class ClaimTests(SynchronousTestCase):
    def test_the_announced_rest_is_claimed_once_one_read_of_it_arrived(self) -> None:
        announced = 8 * 1024 * 1024
        self.assertEqual(claim(announced - 8, 8), 0)  # an idle announcer: what it sent
        self.assertEqual(claim(announced - PROOF_BYTES, PROOF_BYTES), announced - PROOF_BYTES)
        self.assertEqual(claim(0, 0), 0)


class KafkaBudgetTests(SynchronousTestCase):
    """Kafka connections sharing a budget of 1 MiB, frames announced by size prefixes."""

    def setUp(self) -> None:
        self.clock = task.Clock()
        self.budget = RequestBudget(MIB)
        groups = FakeCoordinator(temp_dir(self))
        self.addCleanup(groups.close)
        self.factory = KafkaFactory(
            FakeCore(), KafkaCoordinators(groups), clock=self.clock,  # type: ignore[arg-type]
            advertised_host="broker.example", advertised_port=19092,
            edge=ListenerEdge(request_budget=self.budget),
        )
        self.peers = 0

    def connect(self) -> tuple[KafkaProtocol, StringTransport]:
        """A connection from an address of its own (the address share stays out)."""
        self.peers += 1
        proto = self.factory.buildProtocol(None)
        assert proto is not None
        tr = StringTransport(peerAddress=IPv4Address("TCP", f"10.1.2.{self.peers}", 5555))
        proto.makeConnection(tr)
        return proto, tr

    def test_an_idle_announcer_holds_what_it_sent_not_what_it_announced(self) -> None:
        # The attack: connections announce the largest frame, send a few bytes, go quiet.
        idle = [self.connect() for _ in range(16)]
        for proto, _ in idle:
            proto.dataReceived(announce(MIB, 8))
        self.assertEqual(self.budget.reserved, 16 * 8)
        self.assertEqual(self.budget.waiting, 0)
        self.assertEqual({tr.producerState for _, tr in idle}, {"producing"})
        # A sender's frame is claimed whole once one read of it is here, at once.
        a, ta = self.connect()
        a.dataReceived(announce(600 * KIB, PROOF_BYTES))
        self.assertFalse(a.budgetWaiting)
        self.assertEqual(ta.producerState, "producing")
        self.assertEqual(self.budget.reserved, 16 * 8 + 600 * KIB)
        # A second one does not fit beside it: it waits, not reading, until a gives back.
        b, tb = self.connect()
        b.dataReceived(announce(600 * KIB, PROOF_BYTES))
        self.assertTrue(b.budgetWaiting)
        self.assertEqual(tb.producerState, "paused")
        a.connectionLost(Failure(ConnectionDone()))
        self.assertFalse(b.budgetWaiting)
        self.assertEqual(tb.producerState, "producing")
        self.assertEqual(self.budget.reserved, 16 * 8 + 600 * KIB)

    def test_a_small_frame_passes_a_waiting_large_one(self) -> None:
        a, _ = self.connect()
        a.dataReceived(announce(600 * KIB, PROOF_BYTES))
        b, _ = self.connect()
        b.dataReceived(announce(600 * KIB, PROOF_BYTES))
        self.assertTrue(b.budgetWaiting)
        c, tc = self.connect()
        frame = apis.encode_request(
            RequestHeader(int(ApiKey.API_VERSIONS), 0, 1, "small"), apis.ApiVersionsRequest()
        )
        c.dataReceived(frame[:10])  # a prefix and a few bytes, then the rest
        self.assertFalse(c.budgetWaiting)  # it reads on: what arrived fits
        c.dataReceived(frame[10:])
        self.assertTrue(tc.value())  # answered while b waits
        self.assertFalse(c.budgetWaiting)
        self.assertTrue(b.budgetWaiting)

    def test_a_connection_waiting_for_the_budget_meets_its_frame_deadline(self) -> None:
        a, _ = self.connect()
        a.dataReceived(announce(600 * KIB, PROOF_BYTES))
        b, tb = self.connect()
        b.dataReceived(announce(600 * KIB, PROOF_BYTES))
        self.assertTrue(b.budgetWaiting)
        self.clock.advance(DEFAULT_FRAME_TIMEOUT - 1)
        self.assertFalse(tb.disconnecting)
        self.clock.advance(1)
        # Its place in the queue is not held forever (nor what it buffered).
        self.assertTrue(tb.disconnecting)
        b.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(self.budget.waiting, 0)

    def test_a_waiting_connection_lost_leaves_the_queue_and_gives_back(self) -> None:
        a, _ = self.connect()
        b, _ = self.connect()
        a.dataReceived(announce(600 * KIB, PROOF_BYTES))
        b.dataReceived(announce(600 * KIB, PROOF_BYTES))
        self.assertEqual(self.budget.waiting, 1)
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
            self.core, KafkaCoordinators(self.groups), clock=self.clock,  # type: ignore[arg-type]
            advertised_host="broker.example", advertised_port=19092,
            limits=attrs.evolve(DEFAULT_LIMITS, sasl_max_receive_bytes=1024),
            security=ListenerSecurity(sasl=SaslConfig(
                self.factory.sasl.mechanisms, self.store, AuthThrottle(self.clock.seconds))),
        )
        self.proto, self.tr = self.connect()

    def test_a_large_frame_before_login_closes_before_it_is_buffered(self) -> None:
        self.proto.dataReceived((8 * 1024 * 1024).to_bytes(4, "big") + b"\0" * 1000)
        self.assertTrue(self.tr.disconnecting)
        self.assertEqual(self.proto.decoder.held + self.proto.decoder.owed, 0)
        self.assertEqual(self.factory.unauthenticated_refusals.count, 1)

    def test_the_limit_is_the_pre_authentication_one_only(self) -> None:
        self.proto.dataReceived((1024).to_bytes(4, "big"))
        self.assertFalse(self.tr.disconnecting)  # at the limit: accepted
        self.proto, self.tr = self.connect()
        self.assertEqual(self.scram_login("wonderland").error_code, 0)
        self.proto.dataReceived((64 * 1024).to_bytes(4, "big"))
        self.assertFalse(self.tr.disconnecting)
        self.assertEqual(self.proto.decoder.owed, 64 * 1024)


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
        budget = RequestBudget(300 * KIB)
        factory = NativeFactory(HandFiredCore(), clock=task.Clock(), request_budget=budget)
        first, second = factory.buildProtocol(None), factory.buildProtocol(None)
        t1, t2 = StringTransport(), StringTransport()
        first.makeConnection(t1)
        second.makeConnection(t2)
        big = produce_frame("t", 0, [b"a" * 200_000])
        first.dataReceived(big[:-100])  # one read of the value is here: all of it claimed
        self.assertEqual(budget.reserved, 4 + 200_000)  # the record, before its last bytes
        second.dataReceived(produce_frame("t", 0, [b"b" * 150_000])[:-10])
        self.assertTrue(second.budgetWaiting)
        self.assertEqual(t2.producerState, "paused")
        first.connectionLost(Failure(ConnectionDone()))
        self.assertFalse(second.budgetWaiting)
        self.assertEqual(t2.producerState, "producing")

    def test_an_idle_announcer_holds_what_it_sent(self) -> None:
        budget = RequestBudget(2 * MIB)
        factory = NativeFactory(HandFiredCore(), clock=task.Clock(), request_budget=budget)
        protos = [factory.buildProtocol(None) for _ in range(8)]
        for proto in protos:
            proto.makeConnection(StringTransport())
            # A value of almost the largest produce announced, 8 bytes of it sent (13
            # bytes of type, topic, partition and count before the value's length).
            proto.dataReceived(produce_frame("t", 0, [b"v" * (MIB - 64)])[: 13 + 4 + 8])
        self.assertEqual(budget.reserved, 8 * (4 + 8))  # the record's header and bytes
        self.assertEqual(budget.waiting, 0)
