"""brokerd.net.listener_service: a listener service reports its bound address and
refuses to hide a bind failure."""

from __future__ import annotations

from typing import Any

from twisted.internet.protocol import Factory, Protocol
from twisted.internet.testing import MemoryReactorClock
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from brokerd.net.listener_service import PortReportingEndpoint, listener_service
from brokerd.net.tls import ClientAuth, ClientVerification


class ListenerServiceTests(SynchronousTestCase):
    def test_the_bound_address_is_reported_on_listen(self) -> None:
        reactor = MemoryReactorClock()
        seen: list[Any] = []
        factory = Factory.forProtocol(Protocol)
        svc = listener_service(
            reactor, "tcp:7070:interface=127.0.0.1", factory, None, seen.append
        )
        self.assertTrue(svc._raiseSynchronously)
        self.assertIsInstance(svc.endpoint, PortReportingEndpoint)
        svc.startService()
        [(port, _, _, interface)] = reactor.tcpServers
        self.assertEqual((port, interface), (7070, "127.0.0.1"))
        self.assertEqual(len(seen), 1)
        self.assertEqual(seen[0].port, 7070)

    def test_no_callback_no_wrapper(self) -> None:
        svc = listener_service(
            MemoryReactorClock(), "tcp:0", Factory.forProtocol(Protocol), None
        )
        self.assertNotIsInstance(svc.endpoint, PortReportingEndpoint)

    def test_client_certificates_on_a_plaintext_listener_are_warned_about(self) -> None:
        events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        verification = ClientVerification(ClientAuth.REQUIRED, "ca.pem", ())
        listener_service(
            MemoryReactorClock(), "tcp:0", Factory.forProtocol(Protocol), verification
        )
        warned = [e for e in events if e.get("log_level") is LogLevel.warn]
        self.assertEqual(len(warned), 1)
        self.assertIn("plaintext", warned[0]["log_format"])
