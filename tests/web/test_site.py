"""The ``--http`` site: its tree (console, health, readiness, metrics) and the bound on
what a request may send, over a StringTransport."""

from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.resource import Resource
from twisted.web.server import Request, Site

from brokerd.operator.inspect import Inspector
from brokerd.web.site import MAX_FORM_BYTES, BoundedRequest, make_site

from tests.fake_core import FakeCore


class Echo(Resource):
    isLeaf = True

    def render_POST(self, request: Request) -> bytes:
        assert request.content is not None
        return b"got %d" % len(request.content.read())

    def render_GET(self, request: Request) -> bytes:
        return b"page"


def connect(site: Site) -> StringTransport:
    transport = StringTransport()
    protocol = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 8))
    assert protocol is not None
    protocol.makeConnection(transport)
    transport.protocol = protocol  # type: ignore[attr-defined]
    return transport


def send(transport: StringTransport, data: bytes) -> None:
    transport.protocol.dataReceived(data)  # type: ignore[attr-defined]


class BoundedRequestTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.transport = connect(Site(Echo(), requestFactory=BoundedRequest))

    def test_a_body_within_the_bound_is_read_and_rendered(self) -> None:
        send(self.transport, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        self.assertIn(b"got 5", self.transport.value())
        self.assertFalse(self.transport.disconnecting)

    def test_a_declared_length_over_the_bound_is_refused_before_the_body(self) -> None:
        send(self.transport, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
             % (MAX_FORM_BYTES + 1))
        answer = self.transport.value()
        self.assertTrue(answer.startswith(b"HTTP/1.1 413 Content Too Large\r\n"))
        self.assertTrue(self.transport.disconnecting)
        self.assertNotIn(b"got", answer)

    def test_a_chunked_body_growing_past_the_bound_is_refused(self) -> None:
        send(self.transport, b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * (1 << 20)
        for _ in range(MAX_FORM_BYTES // len(chunk) + 1):
            send(self.transport, b"%x\r\n%s\r\n" % (len(chunk), chunk))
        send(self.transport, b"0\r\n\r\n")
        answer = self.transport.value()
        self.assertIn(b" 413 ", answer)
        self.assertNotIn(b"got", answer)
        self.assertTrue(self.transport.disconnecting)


class MakeSiteTests(SynchronousTestCase):
    def test_health_answers_and_access_is_not_logged(self) -> None:
        site = make_site(Inspector(FakeCore()), clock=Clock(), settings={})  # type: ignore[arg-type]
        self.assertIs(site.requestFactory, BoundedRequest)
        self.assertFalse(site.noisy)
        transport = connect(site)
        send(transport, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(transport.value().startswith(b"HTTP/1.1 200 "))
        transport.clear()
        send(transport, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(transport.value().startswith(b"HTTP/1.1 404 "))  # no registry given
