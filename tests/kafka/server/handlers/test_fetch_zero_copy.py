"""The zero-copy Kafka fetch end to end, in-process on real sockets (pytest-twisted runs
the reactor; the core runs its real thread pools).

Three listeners share one broker core: plain TCP (records sent by ``os.sendfile``), plain
TCP with file regions turned off (the by-value path) and a real TLS listener (file regions
read and encrypted in bounded chunks, ``brokerd/net/chunked.py``). The same Fetch
requests must get byte-identical answers on all three.
Also: a reader that stops reading leaves the server with neither buffered records nor new
requests taken, and deleting the topic while its segment is being sent still delivers the
whole answer; no segment pin outlives the answers.
"""

from __future__ import annotations

import os
import struct
import uuid
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import attrs
import pytest
import pytest_twisted
from twisted.internet import defer, reactor, ssl
from twisted.internet.endpoints import (
    SSL4ClientEndpoint,
    TCP4ClientEndpoint,
    connectProtocol,
    serverFromString,
)
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Protocol, connectionDone
from twisted.python.failure import Failure

from brokerd.core import Broker, FsyncPolicy
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.listener.protocol import KafkaFactory, KafkaProtocol
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.wire.codec import ApiKey, FrameDecoder, RequestHeader
from brokerd.kafka.wire.requests import apis
from brokerd.net.connection import RequestConnection
from brokerd.net.prompt_write import SMALL_FRAME_BYTES
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import read_header
from brokerd.storage.types import Delivery, ReadSpec

from tests.kafka.listener.test_protocol import offsets_store
from tests.tls_helpers import make_pki, ssl_description

BIG_VALUE = 100 * 1024
BIG_VALUES = 60  # about 6 MB in one partition: far more than the socket buffers hold


@attrs.define
class Server:
    broker: Broker
    ports: dict[str, IListeningPort]
    protocols: dict[str, list[KafkaProtocol]]
    stored_reads: list[tuple[str, int, int]]
    pki_ca: Path

    def port(self, name: str) -> int:
        return cast(Any, self.ports[name].getHost()).port

    def log(self, topic: str, partition: int) -> Any:
        return self.broker.logdir.get(topic, partition, create=False)

    def segments(self) -> list[Any]:
        out = []
        for name, info in self.broker.logdir.topics().items():
            for partition in range(info.partitions):
                out.extend(self.log(name, partition).segments)
        return out


def _factory(
    broker: Broker, groups: GroupCoordinator, record: list[KafkaProtocol], *, by_value: bool
) -> KafkaFactory:
    factory = KafkaFactory(
        broker,
        KafkaCoordinators(groups),  # no group APIs are used here: the real one, empty
        clock=reactor,
        advertised_host="127.0.0.1",
        advertised_port=0,
    )
    build = factory.buildProtocol

    def recording_build(addr: Any) -> KafkaProtocol | None:
        proto = build(addr)
        if proto is None:
            return None
        record.append(proto)
        if by_value:
            made = proto.connectionMade

            def connection_made() -> None:
                made()
                # What a TLS connection gets: records read into memory.
                proto.state.regions = None

            proto.connectionMade = connection_made  # type: ignore[method-assign]
        return proto

    factory.buildProtocol = recording_build  # type: ignore[method-assign]
    return factory


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    logdir = LogDirectory.open(str(tmp_path / "data"), default_partitions=1)
    broker = Broker(
        logdir,
        reactor=reactor,
        fsync=FsyncPolicy("never"),
        retention_check_seconds=0,
        checkpoint_seconds=0,
    )
    broker.startService()
    stored_reads: list[tuple[str, int, int]] = []
    read = broker.reads.read

    def counting(
        topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec
    ) -> Any:
        # Reads by reference, answered from memory or in the pool.
        if spec.delivery is Delivery.REFERENCE:
            stored_reads.append((topic, partition, offset))
        return read(topic, partition, offset, max_bytes, spec)

    broker.reads.read = counting  # type: ignore[method-assign]
    protocols: dict[str, list[KafkaProtocol]] = {"zero": [], "value": [], "tls": []}
    offsets = offsets_store(str(tmp_path / "groups"))
    groups = GroupCoordinator(clock=reactor, offsets=offsets, run_blocking=defer.maybeDeferred)
    pki = make_pki(tmp_path / "pki")
    ports = {
        "zero": reactor.listenTCP(  # type: ignore[attr-defined]
            0, _factory(broker, groups, protocols["zero"], by_value=False), interface="127.0.0.1"
        ),
        "value": reactor.listenTCP(  # type: ignore[attr-defined]
            0, _factory(broker, groups, protocols["value"], by_value=True), interface="127.0.0.1"
        ),
        "tls": pytest_twisted.blockon(
            serverFromString(reactor, ssl_description(0, pki)).listen(
                _factory(broker, groups, protocols["tls"], by_value=False)
            )
        ),
    }
    srv = Server(broker, ports, protocols, stored_reads, pki.ca)
    yield srv
    for protos in protocols.values():
        for proto in protos:
            if proto.transport is not None:
                proto.transport.abortConnection()  # type: ignore[attr-defined]
    pytest_twisted.blockon(
        defer.gatherResults(
            [defer.maybeDeferred(p.stopListening) for p in ports.values()]
            + [broker.stopService(), groups.stop()]
        )
    )
    offsets.close()


class RawClient(Protocol):
    """Kafka requests encoded by hand; each answer's raw payload, in order."""

    def __init__(self) -> None:
        self._decoder = FrameDecoder(64 * 1024 * 1024)
        self._waiting: deque[defer.Deferred[bytes]] = deque()
        self._correlation = 0

    def call(self, api_key: ApiKey, version: int, body: Any) -> defer.Deferred[bytes]:
        self._correlation += 1
        header = RequestHeader(int(api_key), version, self._correlation, "zc-tests")
        d: defer.Deferred[bytes] = defer.Deferred()
        self._waiting.append(d)
        assert self.transport is not None
        self.transport.write(apis.encode_request(header, body))
        return d

    def dataReceived(self, data: bytes) -> None:
        for payload in self._decoder.feed(data):
            self._waiting.popleft().callback(payload)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        while self._waiting:
            self._waiting.popleft().errback(reason)

    def stop_reading(self) -> None:
        self.transport.pauseProducing()  # type: ignore[union-attr]

    def resume_reading(self) -> None:
        self.transport.resumeProducing()  # type: ignore[union-attr]


async def connect(srv: Server, name: str) -> RawClient:
    port = srv.port(name)
    if name == "tls":
        trust = ssl.Certificate.loadPEM(srv.pki_ca.read_bytes())
        endpoint: Any = SSL4ClientEndpoint(
            reactor, "127.0.0.1", port, ssl.optionsForClientTLS("localhost", trust)
        )
    else:
        endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port)
    client: RawClient = await connectProtocol(endpoint, RawClient())
    return client


def fetch_request(
    parts: list[tuple[str, int, int, int]],
    *,
    max_bytes: int = 50 * 1024 * 1024,
    isolation: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
) -> apis.FetchRequest:
    topics: dict[str, list[apis.FetchPartition]] = {}
    for topic, partition, offset, limit in parts:
        topics.setdefault(topic, []).append(
            apis.FetchPartition(partition=partition, fetch_offset=offset,
                                partition_max_bytes=limit)
        )
    return apis.FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation,
        topics=tuple(apis.FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()),
    )


async def produce(srv: Server, topic: str, partition: int, batches: list[bytes]) -> None:
    for data in batches:
        await srv.broker.produce_batches(topic, partition, data, acks=-1)


def some_batches(partition: int, count: int) -> list[bytes]:
    out = []
    for i in range(count):
        values: list[bytes | None] = [
            b"p%d-b%d-r%d-" % (partition, i, j) + bytes([65 + (i + j) % 26]) * (50 + 37 * j)
            for j in range(1 + i % 7)
        ]
        out.append(encode_batch(
            values, timestamp_ms=1_000 + i,
            compression=Compression.GZIP if i % 4 == 0 else Compression.NONE,
        ))
    return out


def pins(srv: Server) -> list[int]:
    return [s._refs for s in srv.segments()]


@pytest_twisted.ensureDeferred
async def test_fetch_answers_are_byte_identical_on_every_path(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent_by_sendfile: list[int] = []
    real = os.sendfile

    def observed(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        n = real(out_fd, in_fd, offset, count)
        sent_by_sendfile.append(n)
        return n

    monkeypatch.setattr(os, "sendfile", observed)
    await server.broker.create_topic("zc", 2, {"segment.bytes": "8192"})
    await produce(server, "zc", 0, some_batches(0, 80))
    await produce(server, "zc", 1, some_batches(1, 30))
    clients = {name: await connect(server, name) for name in ("zero", "value", "tls")}
    hw0 = server.log("zc", 0).high_watermark
    requests = [
        fetch_request([("zc", 0, 0, 1 << 20)]),
        fetch_request([("zc", 0, 5, 300)]),  # one whole batch at least
        fetch_request([("zc", 0, 40, 1 << 20)]),  # from the middle, to a segment end
        fetch_request([("zc", 0, hw0, 1 << 20)]),  # at the end: empty
        fetch_request([("zc", 0, hw0 + 5, 1 << 20)]),  # out of range: an error
        fetch_request([("zc", 0, 0, 5000), ("zc", 1, 0, 5000)], max_bytes=6000),  # cut
        fetch_request([("zc", 1, 0, 1 << 20), ("zc", 0, 17, 1 << 20)], isolation=1),
        fetch_request([("zc", 0, 3, 1 << 20), ("nosuch", 0, 0, 1 << 20)]),
    ]
    records_at_v11: list[list[bytes | None]] = []
    # 12: flexible (compact records lengths before the spliced bytes); 13+: topic IDs.
    for version in (4, 7, 11, 12, 13, 18):
        # Up to v11 every region goes by sendfile; from v12 small answers (all of these:
        # the segments are 8 KiB) are read and sent as bytes (brokerd/net/prompt_write.py).
        monkeypatch.setattr(
            RequestConnection, "small_frame_limit", 0 if version <= 11 else SMALL_FRAME_BYTES
        )
        for i, request in enumerate(requests):
            if version >= 13:
                request = by_topic_ids(server, request)
            answers = {
                name: await client.call(ApiKey.FETCH, version, request)
                for name, client in clients.items()
            }
            assert answers["zero"] == answers["value"], (version, request)
            assert answers["tls"] == answers["value"], (version, request)
            records = [
                p.records
                for t in decode_fetch(answers["zero"], version).responses
                for p in t.partitions
            ]
            if version == 11:
                records_at_v11.append(records)
            elif version > 11:
                assert records == records_at_v11[i], (version, request)
    assert sent_by_sendfile and sum(sent_by_sendfile) > 10_000
    # Plain TCP and TLS hand out file regions; the by-value listener does not.
    assert server.protocols["zero"][0].state.regions is not None
    assert server.protocols["value"][0].state.regions is None
    assert server.protocols["tls"][0].state.regions is not None
    assert pins(server) == [0] * len(pins(server))


def by_topic_ids(srv: Server, request: apis.FetchRequest) -> apis.FetchRequest:
    """``request`` naming its topics by ID (a random one for a topic that does not exist)."""
    known = srv.broker.topic_registry.topics()
    return attrs.evolve(request, topics=tuple(
        attrs.evolve(t, topic="", topic_id=known[t.topic].topic_id if t.topic in known
                     else uuid.uuid4())
        for t in request.topics
    ))


def all_values(records: bytes) -> list[bytes | None]:
    values: list[bytes | None] = []
    pos = 0
    while pos < len(records):
        size = read_header(records, pos).size
        batch = records[pos : pos + size]
        assert len(batch) == size, "a partial batch"
        values.extend(r.value for r in decode_records(batch, max_uncompressed=1 << 26))
        pos += size
    return values


def decode_fetch(payload: bytes, version: int) -> apis.FetchResponse:
    correlation, body = apis.decode_response(ApiKey.FETCH, version, payload)
    del correlation
    return cast(apis.FetchResponse, body)


@pytest_twisted.ensureDeferred
async def test_a_slow_reader_holds_no_buffered_records_and_survives_topic_deletion(
    server: Server,
) -> None:
    await server.broker.create_topic("big", 1, {"segment.bytes": str(16 * 1024 * 1024)})
    values = [bytes([48 + i % 10]) * BIG_VALUE for i in range(BIG_VALUES)]
    await produce(
        server, "big", 0, [encode_batch(values[i : i + 6], timestamp_ms=i) for i in range(0, 60, 6)]
    )
    segment = server.segments()[0]
    client = await connect(server, "zero")
    await client.call(ApiKey.API_VERSIONS, 0, apis.ApiVersionsRequest())
    client.stop_reading()
    whole = fetch_request([("big", 0, 0, 8 * 1024 * 1024)])
    first = client.call(ApiKey.FETCH, 4, whole)
    later = [client.call(ApiKey.FETCH, 4, fetch_request([("big", 0, 6, 1 << 20)]))
             for _ in range(20)]
    deadline = reactor.seconds() + 10  # type: ignore[attr-defined]
    proto = server.protocols["zero"][0]
    while proto._splicing is None:
        assert reactor.seconds() < deadline, "the big answer never started"  # type: ignore[attr-defined]
        await sleep(0.05)
    await sleep(0.5)
    transport = cast(Any, proto.transport)
    buffered = len(transport.dataBuffer) - transport.offset + transport._tempDataLen
    assert proto._splicing is not None, "6 MB went out to a client that reads nothing"
    # Flow control: no records in user space, and no further requests taken.
    assert buffered < 64 * 1024, buffered
    assert len(server.stored_reads) <= 2, server.stored_reads
    # Retention or a delete unlinks the segment mid-send: the pinned file stays readable.
    await server.broker.topic_registry.delete_topic("big")
    assert not os.path.exists(segment.log_path)
    client.resume_reading()
    response = decode_fetch(await first, 4)
    (part,) = response.responses[0].partitions
    assert part.error_code == 0
    got = all_values(part.records or b"")
    assert got == values
    for d in later:
        answer = decode_fetch(await d, 4)
        assert answer.responses[0].partitions[0].error_code != 0  # the topic is gone
    assert segment._refs == 0 and segment._fd == -1


@pytest_twisted.ensureDeferred
async def test_answers_dropped_by_a_closing_connection_give_their_pins_back(
    server: Server,
) -> None:
    await server.broker.create_topic("gone", 1)
    await produce(server, "gone", 0, some_batches(0, 40))
    client = await connect(server, "zero")
    client.stop_reading()
    for _ in range(30):
        client.call(ApiKey.FETCH, 4, fetch_request([("gone", 0, 0, 1 << 20)])).addErrback(
            lambda _f: None
        )
    await sleep(0.3)
    cast(Any, client.transport).abortConnection()
    deadline = reactor.seconds() + 10  # type: ignore[attr-defined]
    while any(pins(server)) or server.protocols["zero"][0].isConnected:
        assert reactor.seconds() < deadline, pins(server)  # type: ignore[attr-defined]
        await sleep(0.05)


@pytest_twisted.ensureDeferred
async def test_a_long_poll_that_reads_twice_releases_its_first_read(server: Server) -> None:
    await server.broker.create_topic("lp", 1)
    await produce(server, "lp", 0, some_batches(0, 3))
    client = await connect(server, "zero")
    # min_bytes above what is there: the first read falls short and the fetch parks (it
    # answers at max_wait_ms, the second read short too; the sleep's timer fires first).
    parked = client.call(
        ApiKey.FETCH, 4, fetch_request([("lp", 0, 0, 1 << 20)], min_bytes=1 << 20,
                                       max_wait_ms=500)
    )
    await sleep(0.1)
    assert not parked.called
    await produce(server, "lp", 0, some_batches(0, 2))  # wakes it: it reads again
    answer = decode_fetch(await parked, 4)
    assert answer.responses[0].partitions[0].records
    assert len(server.stored_reads) >= 2
    assert pins(server) == [0] * len(pins(server))


async def sleep(seconds: float) -> None:
    d: defer.Deferred[None] = defer.Deferred()
    reactor.callLater(seconds, d.callback, None)  # type: ignore[attr-defined]
    await d


def test_frame_size_prefix_matches(tmp_path: Path) -> None:
    """Sanity of the helper encodings this module relies on."""
    frame = apis.encode_request(RequestHeader(int(ApiKey.FETCH), 4, 1, "x"), fetch_request([]))
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
