"""The native listener in-process, on a real TCP socket on 127.0.0.1 (port 0), in the test's
own reactor (pytest-twisted runs it), with a Twisted client connection.

Unlike the ``StringTransport`` tests, bytes go through the kernel and the core runs its
real thread pools; unlike the ``twistd`` process tests, everything is in one process, so
a test can watch the server side. Covered: produce and fetch across connections, a parked
long poll woken by another connection's append, and flow control against a client that
stops reading (the server stops taking requests instead of buffering answers).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import pytest_twisted
from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Protocol, connectionDone
from twisted.python.failure import Failure

from brokerd.core import Broker, FsyncPolicy
from brokerd.native import client_codec, messages
from brokerd.native.messages import RequestType
from brokerd.native.protocol import NativeFactory, NativeProtocol
from brokerd.storage.logdir.log_directory import LogDirectory

#: Three values this big make one fetch answer of about 768 KB (under the 1 MB default
#: fetch limit): a few such answers fill the socket buffers of both ends.
BIG_VALUE = 256 * 1024
#: Fetches a slow reader sends at once: their answers (768 KB each) are far more than
#: the kernel and the server transport buffer together.
PIPELINED_FETCHES = 64


@attrs.define
class Server:
    """The listening broker and the server-side protocols it built."""

    data_dir: Path
    broker: Broker
    port: IListeningPort
    protocols: list[NativeProtocol]
    fetches: list[int]  # offsets of the read calls the core received

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.port.getHost().port


def start_server(data_dir: Path) -> Server:
    """Build and start the core and its native listener: the one place that knows the
    constructors, so a change in how the core is built is adapted here only."""
    logdir = LogDirectory.open(str(data_dir), default_partitions=1)
    broker = Broker(
        logdir,
        reactor=reactor,
        fsync=FsyncPolicy("always"),
        retention_check_seconds=0,
        checkpoint_seconds=0,
    )
    broker.startService()
    fetches: list[int] = []
    read = broker.reads.read

    def counting_read(topic, partition, offset, max_bytes, spec):  # type: ignore[no-untyped-def]
        fetches.append(offset)
        return read(topic, partition, offset, max_bytes, spec)

    broker.reads.read = counting_read  # type: ignore[method-assign]
    factory = NativeFactory(broker, clock=reactor)
    protocols: list[NativeProtocol] = []
    build = factory.buildProtocol

    def recording_build(addr):  # type: ignore[no-untyped-def]
        proto = build(addr)
        if proto is not None:
            protocols.append(proto)
        return proto

    factory.buildProtocol = recording_build  # type: ignore[method-assign]
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")  # type: ignore[attr-defined]
    return Server(data_dir, broker, port, protocols, fetches)


class Client(Protocol):
    """A pipelining native client: each request's Deferred fires with its response."""

    def __init__(self) -> None:
        self._decoder = client_codec.ResponseDecoder()
        self._waiting: deque[defer.Deferred[messages.Response]] = deque()
        self.received_bytes = 0
        self.lost: defer.Deferred[None] = defer.Deferred()

    def request(self, request_type: RequestType, frame: bytes) -> defer.Deferred[messages.Response]:
        self._decoder.expect(request_type)
        d: defer.Deferred[messages.Response] = defer.Deferred()
        self._waiting.append(d)
        assert self.transport is not None
        self.transport.write(frame)
        return d

    def dataReceived(self, data: bytes) -> None:
        self.received_bytes += len(data)
        for response in self._decoder.feed(data):
            self._waiting.popleft().callback(response)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        while self._waiting:
            self._waiting.popleft().errback(reason)
        self.lost.callback(None)

    def stop_reading(self) -> None:
        self.transport.pauseProducing()  # type: ignore[union-attr]

    def resume_reading(self) -> None:
        self.transport.resumeProducing()  # type: ignore[union-attr]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = start_server(tmp_path / "data")
    yield srv
    for proto in srv.protocols:
        if proto.transport is not None:
            proto.transport.abortConnection()  # type: ignore[attr-defined]
    pytest_twisted.blockon(
        defer.gatherResults([defer.maybeDeferred(srv.port.stopListening), srv.broker.stopService()])
    )


async def connect(srv: Server) -> Client:
    host, port = srv.address
    client: Client = await connectProtocol(TCP4ClientEndpoint(reactor, host, port), Client())
    return client


async def sleep(seconds: float) -> None:
    d: defer.Deferred[None] = defer.Deferred()
    reactor.callLater(seconds, d.callback, None)  # type: ignore[attr-defined]
    await d


@pytest_twisted.ensureDeferred
async def test_produce_and_fetch_across_connections(server: Server) -> None:
    writer, reader = await connect(server), await connect(server)
    created = await writer.request(
        RequestType.CREATE_TOPIC, client_codec.encode_create_topic("t", 2)
    )
    assert created == messages.CreateTopicResponse()
    first = await writer.request(
        RequestType.PRODUCE, client_codec.encode_produce("t", 1, [b"a", b"b", b"c"])
    )
    second = await writer.request(RequestType.PRODUCE, client_codec.encode_produce("t", 1, [b"d"]))
    assert (first, second) == (messages.ProduceResponse(0), messages.ProduceResponse(3))
    fetched = await reader.request(RequestType.FETCH, client_codec.encode_fetch("t", 1, 1))
    assert fetched == messages.FetchResponse((b"b", b"c", b"d"))
    offsets = await reader.request(
        RequestType.LIST_OFFSETS, client_codec.encode_list_offsets("t", 1)
    )
    assert offsets == messages.ListOffsetsResponse(0, 4)
    empty = await reader.request(RequestType.FETCH, client_codec.encode_fetch("t", 0, 0))
    assert empty == messages.FetchResponse(())
    # The appends are on disk under the topic's directory.
    assert any(p.stat().st_size > 0 for p in (server.data_dir / "t-1").glob("*.log"))


@pytest_twisted.ensureDeferred
async def test_parked_long_poll_is_woken_by_an_append_on_another_connection(
    server: Server,
) -> None:
    writer, reader = await connect(server), await connect(server)
    await writer.request(RequestType.CREATE_TOPIC, client_codec.encode_create_topic("lp", 1))
    parked = reader.request(
        RequestType.LONG_POLL_FETCH,
        client_codec.encode_long_poll_fetch("lp", 0, 0, max_wait_ms=30_000),
    )
    await sleep(0.2)
    assert not parked.called, "answered with nothing to read"
    started = reactor.seconds()  # type: ignore[attr-defined]
    await writer.request(RequestType.PRODUCE, client_codec.encode_produce("lp", 0, [b"wake"]))
    woken = await parked
    assert woken == messages.LongPollFetchResponse(1, (messages.FetchedRecord(0, b"wake"),))
    assert reactor.seconds() - started < 5  # type: ignore[attr-defined]  # not the 30 s timeout


@pytest_twisted.ensureDeferred
async def test_a_client_that_stops_reading_stops_the_server_taking_requests(
    server: Server,
) -> None:
    writer, slow = await connect(server), await connect(server)
    await writer.request(RequestType.CREATE_TOPIC, client_codec.encode_create_topic("big", 1))
    values = [bytes([65 + i]) * BIG_VALUE for i in range(3)]
    await writer.request(RequestType.PRODUCE, client_codec.encode_produce("big", 0, values))

    slow.stop_reading()
    answers = [
        slow.request(RequestType.FETCH, client_codec.encode_fetch("big", 0, 0))
        for _ in range(PIPELINED_FETCHES)
    ]
    # Let the server run until it stops taking fetches: the kernel buffers fill, the
    # server transport pauses its protocol, and the rest of the requests wait unread.
    taken = -1
    while taken != len(server.fetches):
        taken = len(server.fetches)
        await sleep(0.3)
    assert 0 < taken < PIPELINED_FETCHES, f"{taken} fetches taken from a client not reading"
    assert not any(d.called for d in answers)

    slow.resume_reading()
    responses = await defer.gatherResults(answers)
    assert len(server.fetches) == PIPELINED_FETCHES
    assert all(r == messages.FetchResponse(tuple(values)) for r in responses)
