"""The connection phases (``brokerd.net.phase``): the transition table over every
(phase, event) pair, written out here a second time, and a real connection
(:class:`~brokerd.net.connection.RequestConnection` on a StringTransport) driven into each
phase through its own methods. Synchronous, so trial runs it too."""

from __future__ import annotations

import re

from twisted.internet import task
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from brokerd.fsm import InvalidTransition
from brokerd.net.phase import TRANSITIONS, Event, Phase, next_phase

from tests import paths
from tests.net.test_connection import LineConnection

REPO = paths.REPO

# The expected table, one row per phase, columns in this event order; "-" where the
# event cannot happen in that phase.
COLUMNS = (Event.MADE, Event.PAUSE, Event.RESUME, Event.SPLICE_START, Event.SPLICE_DONE,
           Event.CLOSE, Event.LOST)
EXPECTED = {
    #               MADE    PAUSE      RESUME     SPLICE_ST  SPLICE_DN  CLOSE      LOST
    Phase.NEW:      ("open", "new", "new", "-", "-", "closed", "closed"),
    Phase.OPEN:     ("-", "blocked", "open", "splicing", "-", "closing", "lost"),
    Phase.BLOCKED:  ("-", "blocked", "open", "splicing", "-", "closing", "lost"),
    Phase.SPLICING: ("-", "splicing", "splicing", "-", "open", "closing", "lost"),
    Phase.CLOSING:  ("-", "closing", "closing", "closing", "closing", "closing", "closed"),
    Phase.LOST:     ("-", "lost", "lost", "-", "-", "closed", "lost"),
    Phase.CLOSED:   ("-", "closed", "closed", "-", "-", "closed", "closed"),
}


class TransitionTableTests(SynchronousTestCase):
    def test_every_pair_is_in_the_table(self) -> None:
        self.assertEqual(set(TRANSITIONS), {(p, e) for p in Phase for e in Event})

    def test_every_pair_goes_where_expected(self) -> None:
        for phase, row in EXPECTED.items():
            for event, want in zip(COLUMNS, row, strict=True):
                if want == "-":
                    with self.assertRaises(InvalidTransition, msg=f"{phase} {event}"):
                        next_phase(phase, event)
                else:
                    self.assertEqual(next_phase(phase, event), Phase(want), f"{phase} {event}")

    def test_derived_facts(self) -> None:
        connected = {p for p in Phase if p.connected}
        self.assertEqual(connected, {Phase.OPEN, Phase.BLOCKED, Phase.SPLICING, Phase.CLOSING})
        self.assertEqual({p for p in Phase if p.taking}, {Phase.OPEN, Phase.LOST})
        self.assertEqual({p for p in Phase if p.write_blocked}, {Phase.BLOCKED, Phase.SPLICING})
        self.assertEqual({p for p in Phase if p.closing}, {Phase.CLOSING, Phase.CLOSED})


class KeepTakingAfterLoss(LineConnection):
    """Carries out requests received before the loss (as the Kafka listener does)."""

    def __init__(self, clock: task.Clock, limit: None, pipeline: int) -> None:
        super().__init__(clock, limit, pipeline)
        self.dispatcher.carries_on_after_loss = True


class ConnectionPhaseTests(SynchronousTestCase):
    def connect(self, cls: type[LineConnection] = LineConnection) -> LineConnection:
        self.clock = task.Clock()
        self.transport = StringTransport()
        proto = cls(self.clock, None, pipeline=1)
        self.assertIs(proto.phase, Phase.NEW)
        proto.makeConnection(self.transport)
        return proto

    def test_open_blocked_and_back(self) -> None:
        proto = self.connect()
        self.assertIs(proto.phase, Phase.OPEN)
        proto.pauseProducing()
        self.assertIs(proto.phase, Phase.BLOCKED)
        self.assertTrue(proto.blocked)
        proto.pauseProducing()
        self.assertIs(proto.phase, Phase.BLOCKED)
        proto.resumeProducing()
        self.assertIs(proto.phase, Phase.OPEN)

    def test_close_then_lost(self) -> None:
        proto = self.connect()
        proto.pauseProducing()
        proto.close()
        self.assertIs(proto.phase, Phase.CLOSING)
        self.assertTrue(self.transport.disconnecting)
        proto.resumeProducing()  # a late resume changes nothing
        self.assertIs(proto.phase, Phase.CLOSING)
        proto.connectionLost()
        self.assertIs(proto.phase, Phase.CLOSED)
        self.assertFalse(proto.isConnected)

    def test_lost_by_default_takes_nothing_more(self) -> None:
        proto = self.connect()
        proto.connectionLost()
        self.assertIs(proto.phase, Phase.CLOSED)

    def test_lost_may_keep_carrying_out_received_requests(self) -> None:
        proto = self.connect(KeepTakingAfterLoss)
        proto.dataReceived(b"one\ntwo\n")
        proto.connectionLost()
        self.assertIs(proto.phase, Phase.LOST)
        self.assertFalse(proto.isConnected)
        proto.handled[0][1].callback(b"1")  # "two" is taken, though nobody reads it
        self.assertEqual([r for r, _ in proto.handled], [b"one", b"two"])
        proto.close()
        self.assertIs(proto.phase, Phase.CLOSED)

    def test_refusing_requests_is_closing_without_touching_the_transport(self) -> None:
        proto = self.connect()
        proto.refuseRequests()
        self.assertIs(proto.phase, Phase.CLOSING)
        self.assertFalse(self.transport.disconnecting)
        proto.dataReceived(b"ignored\n")
        self.assertEqual(proto.handled, [])

    def test_scheduled_calls_do_not_outlive_the_connection(self) -> None:
        proto = self.connect()
        fired: list[int] = []
        proto.schedule(1.0, lambda: fired.append(1))
        proto.schedule(5.0, lambda: fired.append(5))
        self.clock.advance(1.0)
        proto.connectionLost()
        self.clock.advance(10.0)
        self.assertEqual(fired, [1])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_connection_lost_gives_back_the_producer_registration(self) -> None:
        proto = self.connect()
        self.assertIs(self.transport.producer, proto)
        proto.connectionLost()
        self.assertIsNone(self.transport.producer)


class NoPrivateStateOfTheBaseTests(SynchronousTestCase):
    """The listeners use the base's methods and properties, never its private state."""

    def test_protocols_write_no_private_attribute_of_the_base(self) -> None:
        base = (REPO / "brokerd/net/connection.py").read_text()
        private = set(re.findall(r"self\.(_[a-z]\w*)\s*(?::[^=]*)?=", base))
        for path in ("brokerd/kafka/listener/protocol.py", "brokerd/native/protocol.py"):
            source = (REPO / path).read_text()
            written = set(re.findall(r"self\.(_[a-z]\w*)\s*(?::[^=]*)?=(?!=)", source))
            self.assertEqual(written & private, set(), path)

    def test_protocols_build_the_connection_and_override_nothing(self) -> None:
        from brokerd.kafka.listener.protocol import KafkaProtocol
        from brokerd.native.protocol import NativeProtocol
        from brokerd.net.connection import RequestConnection

        base = {name for klass in RequestConnection.__mro__ for name in vars(klass)}
        for protocol in (KafkaProtocol, NativeProtocol):
            # Dunder names are the constructor and zope.interface's bookkeeping
            # (__provides__ appears once anything asks what the class provides).
            overridden = {
                name for name, value in vars(protocol).items()
                if name in base and callable(value) and not name.startswith("__")
            }
            self.assertEqual(overridden, set(), protocol.__name__)
