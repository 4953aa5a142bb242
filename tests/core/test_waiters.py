"""Long-poll fetches through both protocols into the real core and a real log directory,
on a fake clock: every Deferred fires synchronously, so each test states exactly when an
answer may and may not exist. Also the core's long-poll primitive on its own
(:class:`brokerd.core.waiters.WaiterRegistry` and ``long_poll``).

The core's own waiter tests (``tests/core/test_broker.py``) use a fake log and call the core
directly; these go through ``NativeProtocol`` / ``KafkaProtocol`` on a
``StringTransport``, so they also cover the protocol glue: a parked fetch holds back only
its own connection, one parked fetch per connection, the global limit, cleanup on close,
Kafka's any-partition wake-up, shutdown, and the race between a read in the pool and an
append landing meanwhile.
"""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core import Broker, FsyncPolicy
from brokerd.core.appends import ValuesAppend
from brokerd.core.roles.long_poll import Shortfall, long_poll
from brokerd.core.waiters import WaiterRegistry
from brokerd.errors import TooManyWaiters, UnknownTopicOrPartition
from brokerd.kafka.errors import ErrorCode as KafkaCode
from brokerd.kafka.listener.factory_parts import DEFAULT_LIMITS
from brokerd.kafka.listener.protocol import KafkaFactory, KafkaProtocol
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.wire import codec as kcodec
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis
from brokerd.native import client_codec, messages
from brokerd.native.messages import ErrorCode, RequestType
from brokerd.native.protocol import NativeFactory, NativeProtocol
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch, stored_size
from brokerd.storage.record.header import read_header
from brokerd.storage.types import AppendInfo

from tests.kafka.listener.test_protocol import FakeCoordinator

IDLE = 600.0  # the native idle timeout; the only timer a quiet connection may leave


class LateRunner:
    """A pool whose jobs run at once but whose results reach the reactor only when the
    test says so: the window in which another job can finish first."""

    def __init__(self) -> None:
        self.held: list[tuple[defer.Deferred[Any], Any]] = []
        self.hold = False

    def __call__(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> defer.Deferred[Any]:
        if not self.hold:
            return defer.maybeDeferred(f, *args, **kwargs)
        d: defer.Deferred[Any] = defer.Deferred()
        self.held.append((d, f(*args, **kwargs)))
        return d

    def deliver(self) -> None:
        d, result = self.held.pop(0)
        d.callback(result)


class Harness:
    """A started core over a real log directory, a fake clock and connections to it."""

    def __init__(self, path: Path, *, max_waiters: int = 100) -> None:
        self.clock = task.Clock()
        self.reads = LateRunner()
        self.writes = LateRunner()
        self.logdir = LogDirectory.open(str(path), default_partitions=1)
        self.broker = Broker(
            self.logdir,
            reactor=self.clock,
            fsync=FsyncPolicy("always"),
            run_read=self.reads,
            run_write=self.writes,
            max_waiters=max_waiters,
            retention_check_seconds=0,
            checkpoint_seconds=0,
        )
        self.broker.startService()
        self.groups = FakeCoordinator(str(path / "groups"))
        self.native_factory = NativeFactory(self.broker, clock=self.clock, idle_timeout=IDLE)
        self.kafka_factory = KafkaFactory(
            self.broker,
            KafkaCoordinators(self.groups),  # Fetch never asks the coordinator: empty
            clock=self.clock,
            advertised_host="127.0.0.1",
            advertised_port=9092,
            limits=attrs.evolve(DEFAULT_LIMITS, idle_timeout=None, frame_timeout=None),
        )
        self.connections: list[NativeConn | KafkaConn] = []

    def native(self) -> NativeConn:
        conn = NativeConn(self.native_factory.buildProtocol(None))
        self.connections.append(conn)
        return conn

    def kafka(self) -> KafkaConn:
        conn = KafkaConn(self.kafka_factory.buildProtocol(None))
        self.connections.append(conn)
        return conn

    def create(self, topic: str, partitions: int = 1) -> None:
        self.broker.create_topic(topic, partitions)

    def produce(self, topic: str, partition: int, *values: bytes) -> int:
        d = self.broker.produce_values(topic, partition, list(values))
        results: list[Any] = []
        d.addBoth(results.append)
        assert results and not isinstance(results[0], Failure), results
        base: int = results[0].base_offset
        return base

    def timers(self) -> list[Any]:
        """Pending timers other than native idle timers."""
        return [
            c for c in self.clock.getDelayedCalls() if c.getTime() - self.clock.seconds() != IDLE
        ]

    def close(self) -> None:
        for conn in self.connections:
            conn.lose()
        self.broker.stopService()
        self.groups.close()


class NativeConn:
    def __init__(self, proto: NativeProtocol) -> None:
        self.proto = proto
        self.transport = StringTransport()
        proto.makeConnection(self.transport)
        self.decoder = client_codec.ResponseDecoder()
        self.lost = False

    def send(self, request_type: RequestType, frame: bytes) -> None:
        self.decoder.expect(request_type)
        self.proto.dataReceived(frame)

    def poll(
        self, topic: str, partition: int, offset: int, *, wait_ms: int, min_bytes: int = 1
    ) -> None:
        self.send(
            RequestType.LONG_POLL_FETCH,
            client_codec.encode_long_poll_fetch(
                topic,
                partition,
                offset,
                max_wait_ms=wait_ms,
                min_bytes=min_bytes,
                max_bytes=1 << 20,
            ),
        )

    def responses(self) -> list[messages.Response]:
        out = self.decoder.feed(self.transport.value())
        self.transport.clear()
        return out

    def lose(self) -> None:
        if not self.lost:
            self.lost = True
            self.proto.connectionLost(Failure(ConnectionDone()))


class KafkaConn:
    def __init__(self, proto: KafkaProtocol) -> None:
        self.proto = proto
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 5555))
        proto.makeConnection(self.transport)
        self.correlation = 0
        self.sent: dict[int, tuple[ApiKey, int]] = {}
        self.lost = False

    def send(self, key: ApiKey, version: int, body: Any) -> None:
        self.correlation += 1
        self.sent[self.correlation] = (key, version)
        self.proto.dataReceived(
            apis.encode_request(RequestHeader(int(key), version, self.correlation, "test"), body)
        )

    def fetch(
        self, parts: list[tuple[str, int, int]], *, wait_ms: int, min_bytes: int = 1,
        session_id: int = 0, epoch: int = -1,
    ) -> None:
        topics: dict[str, list[apis.FetchPartition]] = {}
        for topic, partition, offset in parts:
            topics.setdefault(topic, []).append(
                apis.FetchPartition(
                    partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                )
            )
        self.send(
            ApiKey.FETCH,
            11,
            apis.FetchRequest(
                max_wait_ms=wait_ms,
                min_bytes=min_bytes,
                max_bytes=1 << 20,
                session_id=session_id,
                session_epoch=epoch,
                topics=tuple(
                    apis.FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()
                ),
            ),
        )

    def responses(self) -> list[Any]:
        frames = kcodec.FrameDecoder(1 << 30).feed(self.transport.value())
        self.transport.clear()
        out = []
        for payload in frames:
            (correlation,) = struct.unpack_from(">i", payload)
            key, version = self.sent[correlation]
            out.append(apis.decode_response(key, version, payload)[1])
        return out

    def lose(self) -> None:
        if not self.lost:
            self.lost = True
            self.proto.connectionLost(Failure(ConnectionDone()))


def values_in(part: apis.FetchPartitionResponse) -> list[bytes | None]:
    """The record values of the whole batches in one Kafka fetch partition."""
    data, out, pos = part.records or b"", [], 0
    while pos + 61 <= len(data):
        end = pos + 12 + read_header(data, pos).batch_length
        out += [r.value for r in decode_records(data[pos:end], max_uncompressed=1 << 20)]
        pos = end
    return out


def polled(response: messages.Response) -> list[tuple[int, bytes | None]]:
    assert isinstance(response, messages.LongPollFetchResponse), response
    return [(r.offset, r.value) for r in response.records]


class _HarnessCase(SynchronousTestCase):
    """A started harness with topic ``t`` (one partition) per test."""

    def setUp(self) -> None:
        # trial's mktemp() would create directories under the current directory.
        tmp = tempfile.TemporaryDirectory(prefix="brokerd-longpoll-")
        self.addCleanup(tmp.cleanup)
        self.tmp_path = Path(tmp.name)
        self.h = Harness(self.tmp_path / "data")
        self.addCleanup(self.h.close)
        self.h.create("t")


# -- native LongPollFetch ------------------------------------------------------------


class NativeLongPollTests(_HarnessCase):
    def test_native_timeout_answers_empty_exactly_at_max_wait(self) -> None:
        h = self.h
        c = h.native()
        c.poll("t", 0, 0, wait_ms=1500)
        h.clock.advance(1.499)
        assert c.responses() == []
        h.clock.advance(0.001)
        [response] = c.responses()
        assert polled(response) == []
        assert isinstance(response, messages.LongPollFetchResponse) and response.high_watermark == 0
        assert h.timers() == [] and h.broker.waiters.count == 0

    def test_native_append_before_timeout_answers_at_once(self) -> None:
        h = self.h
        consumer, producer = h.native(), h.native()
        consumer.poll("t", 0, 0, wait_ms=5000)
        h.clock.advance(1)
        assert consumer.responses() == []
        producer.send(RequestType.PRODUCE, client_codec.encode_produce("t", 0, [b"hello"]))
        assert [type(r) for r in producer.responses()] == [messages.ProduceResponse]
        assert [polled(r) for r in consumer.responses()] == [[(0, b"hello")]]
        assert h.timers() == [] and h.broker.waiters.count == 0

    def test_native_min_bytes_not_met_until_the_second_append(self) -> None:
        h = self.h
        c = h.native()
        c.poll("t", 0, 0, wait_ms=5000, min_bytes=8)
        h.produce("t", 0, b"abcd")
        assert c.responses() == []
        h.produce("t", 0, b"efgh")
        assert [polled(r) for r in c.responses()] == [[(0, b"abcd"), (1, b"efgh")]]

    def test_native_parked_fetch_holds_back_only_its_own_connection(self) -> None:
        h = self.h
        parked, other = h.native(), h.native()
        parked.poll("t", 0, 0, wait_ms=60_000)
        parked.send(RequestType.LIST_TOPICS, client_codec.encode_list_topics())  # queued behind it
        other.send(RequestType.LIST_TOPICS, client_codec.encode_list_topics())
        other.send(RequestType.LIST_OFFSETS, client_codec.encode_list_offsets("t", 0))
        other.send(RequestType.FETCH, client_codec.encode_fetch("t", 0, 0))
        assert [type(r) for r in other.responses()] == [
            messages.ListTopicsResponse,
            messages.ListOffsetsResponse,
            messages.FetchResponse,
        ]
        assert parked.responses() == []  # in order: the list waits for the poll
        other.send(RequestType.PRODUCE, client_codec.encode_produce("t", 0, [b"x"]))
        assert [type(r) for r in other.responses()] == [messages.ProduceResponse]
        first, second = parked.responses()
        assert polled(first) == [(0, b"x")]
        assert isinstance(second, messages.ListTopicsResponse)

    def test_native_one_parked_fetch_per_connection(self) -> None:
        h = self.h
        c = h.native()
        for _ in range(3):  # pipelined: the second waits unread until the first is answered
            c.poll("t", 0, 0, wait_ms=1000)
        assert h.broker.waiters.count == 1
        h.clock.advance(1)
        assert [polled(r) for r in c.responses()] == [[]]
        assert h.broker.waiters.count == 1  # the next one parked in its turn
        h.produce("t", 0, b"v")
        assert [polled(r) for r in c.responses()] == [[(0, b"v")], [(0, b"v")]]
        assert h.broker.waiters.count == 0

    def test_native_global_limit_is_an_error_not_a_hang(self) -> None:
        h = Harness(self.tmp_path / "limited", max_waiters=1)
        try:
            h.create("t")
            first, second = h.native(), h.native()
            first.poll("t", 0, 0, wait_ms=60_000)
            second.poll("t", 0, 0, wait_ms=60_000)
            [refused] = second.responses()
            assert isinstance(refused, messages.ErrorResponse)
            assert refused.code == ErrorCode.TOO_MANY_WAITERS
            # The refusal harms only that request: the connection serves the next one.
            second.send(RequestType.LIST_OFFSETS, client_codec.encode_list_offsets("t", 0))
            assert [type(r) for r in second.responses()] == [messages.ListOffsetsResponse]
            first.lose()  # frees the slot
            second.poll("t", 0, 0, wait_ms=60_000)
            assert second.responses() == [] and h.broker.waiters.count == 1
        finally:
            h.close()

    def test_native_close_while_parked_leaves_nothing_behind(self) -> None:
        h = self.h
        c = h.native()
        c.poll("t", 0, 0, wait_ms=60_000)
        assert h.broker.waiters.count == 1
        c.lose()
        assert h.broker.waiters.count == 0
        assert h.clock.getDelayedCalls() == []  # no wait timer, no idle timer
        h.produce("t", 0, b"late")  # nothing left to fire, nothing written
        assert c.transport.value() == b""

    def test_native_shutdown_answers_parked_fetches(self) -> None:
        h = self.h
        c = h.native()
        c.poll("t", 0, 0, wait_ms=60_000)
        h.broker.stopService()
        assert [polled(r) for r in c.responses()] == [[]]
        assert h.broker.waiters.count == 0 and h.timers() == []

    def test_one_append_wakes_exactly_the_waiters_it_satisfies(self) -> None:
        h = self.h
        n5, n100, k50, k200 = h.native(), h.native(), h.kafka(), h.kafka()
        n5.poll("t", 0, 0, wait_ms=60_000, min_bytes=5)
        n100.poll("t", 0, 0, wait_ms=60_000, min_bytes=100)
        k50.fetch([("t", 0, 0)], wait_ms=60_000, min_bytes=50)
        k200.fetch([("t", 0, 0)], wait_ms=60_000, min_bytes=200)
        assert h.broker.waiters.count == 4
        h.produce("t", 0, b"x" * 20)  # 20 bytes of values, a stored batch of 88 bytes
        assert [polled(r) for r in n5.responses()] == [[(0, b"x" * 20)]]
        assert [values_in(r.responses[0].partitions[0]) for r in k50.responses()] == [[b"x" * 20]]
        assert n100.responses() == [] and k200.responses() == []
        assert h.broker.waiters.count == 2


# -- Kafka Fetch in a fetch session -------------------------------------------------


class KafkaSessionFetchTests(_HarnessCase):
    """An incremental fetch parks on its session's standing watch (no waiter per
    partition), wakes on an append to any partition of the session, and is answered at
    a deletion or shutdown."""

    def session(self, c: KafkaConn) -> int:
        self.h.create("u")
        c.fetch([("t", 0, 0), ("u", 0, 0)], wait_ms=0, epoch=0)
        [full] = c.responses()
        assert full.error_code == 0 and full.session_id != 0
        sid: int = full.session_id
        return sid

    def test_an_append_to_any_partition_wakes_the_session(self) -> None:
        h = self.h
        c = h.kafka()
        sid = self.session(c)
        c.fetch([], wait_ms=60_000, session_id=sid, epoch=1)
        assert c.responses() == [] and h.broker.waiters.count == 0
        h.produce("u", 0, b"hello")
        [answer] = c.responses()
        assert [(t.topic, [values_in(p) for p in t.partitions]) for t in answer.responses] == [
            ("u", [[b"hello"]])]
        # Nothing new: it waits MaxWaitMs and answers nothing, leaving no timer.
        c.fetch([("u", 0, 1)], wait_ms=500, session_id=sid, epoch=2)
        h.clock.advance(0.5)
        [quiet] = c.responses()
        assert quiet.responses == () and h.timers() == []

    def test_a_deletion_answers_a_parked_session_fetch(self) -> None:
        h = self.h
        c = h.kafka()
        sid = self.session(c)
        c.fetch([], wait_ms=60_000, session_id=sid, epoch=1)
        h.broker.topic_registry.delete_topic("t")
        [answered] = c.responses()
        assert answered.error_code == 0
        # The next fetch reads the deleted partition and says so.
        c.fetch([], wait_ms=60_000, session_id=sid, epoch=2)
        [gone] = c.responses()
        assert [(t.topic, [p.error_code for p in t.partitions]) for t in gone.responses] == [
            ("t", [KafkaCode.UNKNOWN_TOPIC_OR_PARTITION])]

    def test_a_shutdown_answers_a_parked_session_fetch(self) -> None:
        h = self.h
        c = h.kafka()
        sid = self.session(c)
        c.fetch([], wait_ms=60_000, session_id=sid, epoch=1)
        assert c.responses() == []
        h.broker.stopService()
        [last] = c.responses()
        assert last.error_code == 0 and h.timers() == []


# -- Kafka Fetch ---------------------------------------------------------------------


class KafkaFetchTests(_HarnessCase):
    def test_kafka_fetch_times_out_with_an_empty_answer(self) -> None:
        h = self.h
        c = h.kafka()
        c.fetch([("t", 0, 0)], wait_ms=500)
        h.clock.advance(0.499)
        assert c.responses() == []
        h.clock.advance(0.001)
        [response] = c.responses()
        part = response.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark, part.records) == (0, 0, b"")
        assert h.clock.getDelayedCalls() == [] and h.broker.waiters.count == 0

    def test_kafka_fetch_wakes_on_any_partition_of_several(self) -> None:
        h = self.h
        h.create("u", 3)
        c = h.kafka()
        c.fetch([("t", 0, 0), ("u", 0, 0), ("u", 1, 0), ("u", 2, 0)], wait_ms=30_000)
        assert c.responses() == [] and h.broker.waiters.count == 1
        h.produce("u", 2, b"only here")
        [response] = c.responses()
        got = {
            (t.topic, p.partition_index): values_in(p)
            for t in response.responses
            for p in t.partitions
        }
        assert got == {("t", 0): [], ("u", 0): [], ("u", 1): [], ("u", 2): [b"only here"]}
        assert h.clock.getDelayedCalls() == [] and h.broker.waiters.count == 0

    def test_kafka_min_bytes_counts_across_partitions(self) -> None:
        h = self.h
        h.create("u", 2)
        c = h.kafka()
        c.fetch([("u", 0, 0), ("u", 1, 0)], wait_ms=30_000, min_bytes=100)
        h.produce("u", 0, b"a" * 60)  # a batch of about 130 bytes on the wire: enough
        [response] = c.responses()
        assert [values_in(p) for p in response.responses[0].partitions] == [[b"a" * 60], []]

    def test_kafka_min_bytes_not_met_until_the_second_append(self) -> None:
        h = self.h
        c = h.kafka()
        c.fetch([("t", 0, 0)], wait_ms=30_000, min_bytes=250)
        h.produce("t", 0, b"a" * 100)
        assert c.responses() == []
        h.produce("t", 0, b"b" * 100)
        [response] = c.responses()
        assert values_in(response.responses[0].partitions[0]) == [b"a" * 100, b"b" * 100]

    def test_kafka_close_while_parked_leaves_nothing_behind(self) -> None:
        h = self.h
        c = h.kafka()
        c.fetch([("t", 0, 0)], wait_ms=60_000)
        assert h.broker.waiters.count == 1
        c.lose()
        assert h.broker.waiters.count == 0 and h.clock.getDelayedCalls() == []
        h.produce("t", 0, b"late")
        assert c.transport.value() == b""

    def test_kafka_parked_fetch_holds_back_only_its_own_connection(self) -> None:
        h = self.h
        parked, other = h.kafka(), h.kafka()
        parked.fetch([("t", 0, 0)], wait_ms=60_000)
        parked.send(ApiKey.METADATA, 8, apis.MetadataRequest(topics=None))  # queued behind
        other.send(ApiKey.METADATA, 8, apis.MetadataRequest(topics=None))
        other.fetch([("t", 0, 0)], wait_ms=0)
        assert [type(r) for r in other.responses()] == [apis.MetadataResponse, apis.FetchResponse]
        assert parked.responses() == []
        h.produce("t", 0, b"x")
        fetched, metadata = parked.responses()
        assert values_in(fetched.responses[0].partitions[0]) == [b"x"]
        assert isinstance(metadata, apis.MetadataResponse)

    def test_kafka_one_parked_fetch_per_connection(self) -> None:
        h = self.h
        c = h.kafka()
        c.fetch([("t", 0, 0)], wait_ms=1000)
        c.fetch([("t", 0, 0)], wait_ms=1000)
        assert h.broker.waiters.count == 1
        h.clock.advance(1)
        assert len(c.responses()) == 1 and h.broker.waiters.count == 1
        h.clock.advance(1)
        assert len(c.responses()) == 1 and h.broker.waiters.count == 0

    def test_kafka_global_limit_answers_at_once(self) -> None:
        # Kafka has no error code for it; an immediate (empty) answer is not a hang.
        h = Harness(self.tmp_path / "limited", max_waiters=1)
        try:
            h.create("t")
            first, second = h.kafka(), h.kafka()
            first.fetch([("t", 0, 0)], wait_ms=60_000)
            second.fetch([("t", 0, 0)], wait_ms=60_000)
            [response] = second.responses()
            assert response.responses[0].partitions[0].records == b""
            assert first.responses() == [] and h.broker.waiters.count == 1
        finally:
            h.close()


# -- the read/append race --------------------------------------------------------------


class ReadAppendRaceTests(_HarnessCase):
    def test_append_landing_while_the_first_read_is_in_the_pool_is_not_missed(self) -> None:
        h = self.h
        # The poll's first read sees 4 bytes (short of 8); before its result reaches the
        # reactor, a second append completes and notifies nobody. The poll must not then
        # wait out max_wait for bytes that are already there.
        h.produce("t", 0, b"abcd")
        # Just-appended records are read from memory, without the pool
        # (tests/storage/log/test_stored_reads_known.py): forget where they lie, so this read is
        # pooled.
        h.logdir.get("t", 0)._state.tail.forget()
        c = h.native()
        h.reads.hold = True
        c.poll("t", 0, 0, wait_ms=60_000, min_bytes=8)
        assert len(h.reads.held) == 1
        h.produce("t", 0, b"efgh")
        h.reads.deliver()  # the stale first read: 4 bytes
        while h.reads.held:  # any re-read the core decides on
            h.reads.deliver()
        assert [polled(r) for r in c.responses()] == [[(0, b"abcd"), (1, b"efgh")]]
        assert h.timers() == [] and h.broker.waiters.count == 0

    def test_kafka_append_landing_while_the_first_read_is_in_the_pool_is_not_missed(self) -> None:
        h = self.h
        # As above, for a Kafka Fetch with MinBytes above one batch: the append that lands
        # while the first read is in the pool must wake the fetch (through the high
        # watermarks it saw), not leave it waiting out MaxWaitMs.
        h.produce("t", 0, b"a" * 100)
        c = h.kafka()
        h.reads.hold = True
        c.fetch([("t", 0, 0)], wait_ms=60_000, min_bytes=250)
        assert len(h.reads.held) == 1
        h.produce("t", 0, b"b" * 100)
        h.produce("t", 0, b"c" * 100)
        h.reads.deliver()  # the stale first read: one batch, short of 250 bytes
        while h.reads.held:
            h.reads.deliver()
        [response] = c.responses()
        assert values_in(response.responses[0].partitions[0]) == [
            b"a" * 100,
            b"b" * 100,
            b"c" * 100,
        ]
        assert h.timers() == [] and h.broker.waiters.count == 0

    def test_append_already_read_is_not_counted_twice(self) -> None:
        h = self.h
        # The append is published (readable) before the reactor hears of it: the poll reads
        # it, parks for more, and the late notification of that same append must not count.
        h.writes.hold = True
        h.broker.produce_values("t", 0, [b"abcd"])
        c = h.native()
        c.poll("t", 0, 0, wait_ms=60_000, min_bytes=8)
        assert c.responses() == [] and h.broker.waiters.count == 1
        h.writes.deliver()  # the reactor now learns of the 4 bytes the poll already has
        assert c.responses() == []
        h.writes.hold = False
        h.produce("t", 0, b"efgh")
        assert [polled(r) for r in c.responses()] == [[(0, b"abcd"), (1, b"efgh")]]


# -- measuring min_bytes ---------------------------------------------------------------


class TopicDeletedWhileParkedTests(_HarnessCase):
    """A topic deleted (and created again) while fetches wait on it: the deletion answers
    them at once, unknown, and nothing keeps the deleted topic's closed log, so the topic
    created again under the same name starts empty and takes appends."""

    def kafka_fetch(
        self, c: KafkaConn, offset: int, *, wait_ms: int = 60_000
    ) -> apis.FetchPartitionResponse | None:
        c.fetch([("t", 0, offset)], wait_ms=wait_ms)
        answers = c.responses()
        if not answers:
            return None
        [answer] = answers
        part: apis.FetchPartitionResponse = answer.responses[0].partitions[0]
        return part

    def test_native_parked_poll_answers_unknown_and_the_new_topic_is_fresh(self) -> None:
        h = self.h
        h.produce("t", 0, b"a", b"b", b"c")
        c = h.native()
        c.poll("t", 0, 3, wait_ms=60_000)
        assert c.responses() == [] and h.broker.waiters.count == 1
        h.writes.hold = True  # the directory's deletion is done, its answer not yet here
        h.broker.topic_registry.delete_topic("t")
        [answer] = c.responses()
        assert isinstance(answer, messages.ErrorResponse), answer
        assert answer.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert h.timers() == [] and h.broker.waiters.count == 0
        # Meanwhile the topic is unknown, not served from the log being closed.
        c.poll("t", 0, 3, wait_ms=60_000)
        [meanwhile] = c.responses()
        assert isinstance(meanwhile, messages.ErrorResponse), meanwhile
        assert "t" not in h.broker.topic_registry.topics()
        h.writes.hold = False
        h.writes.deliver()
        h.create("t")
        assert h.produce("t", 0, b"new") == 0
        c.poll("t", 0, 0, wait_ms=60_000)
        [fresh] = c.responses()
        assert polled(fresh) == [(0, b"new")]
        assert isinstance(fresh, messages.LongPollFetchResponse) and fresh.high_watermark == 1

    def test_kafka_parked_fetch_answers_unknown_and_the_new_topic_is_fresh(self) -> None:
        h = self.h
        h.create("u")
        h.produce("t", 0, b"a", b"b", b"c")
        c, other = h.kafka(), h.kafka()
        c.fetch([("t", 0, 3), ("u", 0, 0)], wait_ms=60_000)
        assert c.responses() == [] and h.broker.waiters.count == 1
        h.broker.topic_registry.delete_topic("t")
        [response] = c.responses()
        got = {
            (t.topic, p.partition_index): (p.error_code, p.high_watermark)
            for t in response.responses
            for p in t.partitions
        }
        assert got == {("t", 0): (KafkaCode.UNKNOWN_TOPIC_OR_PARTITION, -1), ("u", 0): (0, 0)}
        assert h.timers() == [] and h.broker.waiters.count == 0
        h.create("t")
        # The old end is out of range of the topic created again, which starts empty
        # (and its fetch at 0 parks as on any empty topic, until the append below).
        gone = self.kafka_fetch(other, 3)
        assert gone is not None and gone.error_code == KafkaCode.OFFSET_OUT_OF_RANGE
        assert self.kafka_fetch(other, 0) is None
        assert h.produce("t", 0, b"new") == 0
        [fresh] = other.responses()
        part = fresh.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark, values_in(part)) == (0, 1, [b"new"])

    def test_kafka_parked_fetch_by_topic_id_answers_unknown_topic_id(self) -> None:
        h = self.h
        h.create("u")
        ids = {name: info.topic_id for name, info in h.broker.topic_registry.topics().items()}
        c = h.kafka()
        c.send(ApiKey.FETCH, 16, apis.FetchRequest(
            max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20,
            topics=tuple(
                apis.FetchTopic(topic_id=ids[name], partitions=(apis.FetchPartition(
                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20),))
                for name in ("t", "u")
            ),
        ))
        assert c.responses() == [] and h.broker.waiters.count == 1
        h.broker.topic_registry.delete_topic("t")
        h.create("t")
        [response] = c.responses()
        got = {t.topic_id: [p.error_code for p in t.partitions] for t in response.responses}
        assert got == {ids["t"]: [KafkaCode.UNKNOWN_TOPIC_ID], ids["u"]: [0]}
        assert h.timers() == [] and h.broker.waiters.count == 0

    def test_an_auto_create_answered_after_the_deletion_keeps_nothing(self) -> None:
        h = self.h
        # A produce auto-creates topic n; the topic is deleted before the creation's
        # answer reaches the reactor (the deletion's answer comes first): the registry
        # must not take the log the deletion closed.
        h.writes.hold = True
        produced = h.broker.produce_values("n", 0, [b"lost"])
        h.broker.topic_registry.delete_topic("n")
        assert len(h.writes.held) == 2
        deletion, result = h.writes.held.pop(1)
        deletion.callback(result)
        h.writes.deliver()  # the creation's answer
        h.writes.hold = False
        self.failureResultOf(produced, UnknownTopicOrPartition)
        assert h.broker.topic_registry.get(("n", 0)) is None
        assert h.produce("n", 0, b"fresh") == 0  # auto-created again, empty
        c = h.native()
        c.poll("n", 0, 0, wait_ms=60_000)
        assert [polled(r) for r in c.responses()] == [[(0, b"fresh")]]

    def test_kafka_read_in_the_pool_across_the_deletion_does_not_park(self) -> None:
        h = self.h
        # The fetch's read is in the pool when the topic is deleted; it comes back short
        # of MinBytes, with the deleted log's high watermark: parking on it would wait
        # for a partition no append can reach, so it reads again and learns it is gone.
        h.produce("t", 0, b"a" * 100)
        h.logdir.get("t", 0)._state.tail.forget()  # so the read goes to the pool
        c = h.kafka()
        h.reads.hold = True
        c.fetch([("t", 0, 0)], wait_ms=60_000, min_bytes=1 << 20)
        assert len(h.reads.held) == 1
        h.broker.topic_registry.delete_topic("t")
        h.reads.deliver()
        [response] = c.responses()
        part = response.responses[0].partitions[0]
        assert part.error_code == KafkaCode.UNKNOWN_TOPIC_OR_PARTITION
        assert h.timers() == [] and h.broker.waiters.count == 0


class MinBytesMeasureTests(_HarnessCase):
    @given(st.lists(st.one_of(st.none(), st.binary(max_size=300)), min_size=1, max_size=300))
    @settings(max_examples=200, deadline=None)
    def test_stored_size_is_what_the_log_stores(self, values: list[bytes | None]) -> None:
        assert stored_size(values) == len(encode_batch(values, timestamp_ms=1_700_000_000_000))

    def test_stored_size_with_large_values(self) -> None:
        values: list[bytes | None] = [b"x" * 70_000, b"", None, b"y" * 200]
        assert stored_size(values) == len(encode_batch(values, timestamp_ms=0))

    def test_native_reader_rechecks_a_wake_by_a_kafka_batch(self) -> None:
        h = self.h
        # A Kafka batch's stored size over-states its values (and a compressed one hides
        # them): the wake-up is re-checked against the values read, and the wait keeps its
        # original deadline.
        c = h.native()
        c.poll("t", 0, 0, wait_ms=10_000, min_bytes=25)
        h.clock.advance(1)
        h.broker.produce_batches("t", 0, encode_batch([b"a" * 10], timestamp_ms=0))
        h.broker.produce_batches(
            "t", 0, encode_batch([b"b" * 10], timestamp_ms=0, compression=Compression.GZIP)
        )
        assert c.responses() == [] and h.broker.waiters.count == 1  # 20 bytes of values
        h.clock.advance(8.999)
        assert c.responses() == []
        h.clock.advance(0.001)  # the original 10 s, not extended by the re-parks
        assert [polled(r) for r in c.responses()] == [[(0, b"a" * 10), (1, b"b" * 10)]]
        assert h.timers() == []

    def test_native_reader_woken_by_a_compressed_batch_with_enough(self) -> None:
        h = self.h
        c = h.native()
        c.poll("t", 0, 0, wait_ms=10_000, min_bytes=1000)
        h.broker.produce_batches(
            "t", 0, encode_batch([b"z" * 2000], timestamp_ms=0, compression=Compression.GZIP)
        )
        assert [polled(r) for r in c.responses()] == [[(0, b"z" * 2000)]]


# -- the primitive on its own: WaiterRegistry and long_poll ----------------------------


class WaiterRegistryTests(SynchronousTestCase):
    """The registry and the one long-poll loop on a fake clock, with scripted reads."""

    def setUp(self) -> None:
        self.clock = task.Clock()
        self.high: dict[tuple[str, int], int] = {("t", 0): 0}
        self.registry = WaiterRegistry(self.clock, self.high.get, max_waiters=2)
        self.reads: list[int] = []  # the bytes each read finds
        self.found = 0

    def read(self) -> defer.Deferred[int]:
        self.reads.append(self.found)
        return defer.succeed(self.found)

    def short_of(self, have: int) -> Shortfall | None:
        return Shortfall(have, 10, {("t", 0): self.high[("t", 0)]})

    def poll(self, max_wait_ms: int = 1000) -> defer.Deferred[int]:
        return long_poll(
            self.read,
            self.short_of,
            lambda short, ms: self.registry.park_for(short, ms, values=True),
            clock=self.clock,
            max_wait_ms=max_wait_ms,
        )

    def append(self, size: int, base_offset: int) -> None:
        """An append of ``size`` value bytes lands at ``base_offset`` and is published."""
        self.found += size
        self.high[("t", 0)] = base_offset + 1
        self.registry.notify(
            ("t", 0), [(ValuesAppend((b"x" * size,)), AppendInfo(base_offset, base_offset, 0))]
        )

    def test_enough_at_once_does_not_park(self) -> None:
        self.found = 10
        self.assertEqual(self.successResultOf(self.poll()), 10)
        self.assertEqual(self.registry.count, 0)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_timeout_answers_with_the_last_read(self) -> None:
        d = self.poll(500)
        self.assertEqual(self.registry.count, 1)
        self.clock.advance(0.499)
        self.assertNoResult(d)
        self.clock.advance(0.001)
        self.assertEqual(self.successResultOf(d), 0)
        self.assertEqual(self.reads, [0, 0])  # woken by the timer: read once more
        self.assertEqual((self.registry.count, self.clock.getDelayedCalls()), (0, []))

    def test_wakes_when_enough_arrives_and_rereads(self) -> None:
        d = self.poll()
        self.append(4, 0)
        self.assertNoResult(d)
        self.append(6, 1)
        self.assertEqual(self.successResultOf(d), 10)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_one_deadline_across_reparks(self) -> None:
        d = self.poll(1000)
        self.clock.advance(0.4)
        # A wake-up the read does not confirm (the appends' sizes overstated it).
        self.registry.notify(("t", 0), [(ValuesAppend((b"x" * 10,)), AppendInfo(0, 0, 0))])
        self.assertNoResult(d)
        self.assertEqual(self.registry.count, 1)  # parked again
        self.clock.advance(0.599)
        self.assertNoResult(d)
        self.clock.advance(0.001)
        self.assertEqual(self.successResultOf(d), 0)

    def test_append_between_read_and_park_wakes_at_once(self) -> None:
        # The high watermark moved after the read: parking must not wait for it.
        seen = {("t", 0): 0}
        self.high[("t", 0)] = 1
        d = self.registry.park([("t", 0)], 10, 1000, seen=seen)
        self.successResultOf(d)
        self.assertEqual((self.registry.count, self.clock.getDelayedCalls()), (0, []))

    def test_append_already_read_is_not_counted_twice(self) -> None:
        self.high[("t", 0)] = 3
        d = self.registry.park([("t", 0)], 5, 1000, values=True, seen={("t", 0): 3})
        self.registry.notify(("t", 0), [(ValuesAppend((b"x" * 9,)), AppendInfo(2, 2, 0))])
        self.assertNoResult(d)  # below what the read saw: already counted
        self.registry.notify(("t", 0), [(ValuesAppend((b"x" * 5,)), AppendInfo(3, 3, 0))])
        self.successResultOf(d)

    def test_stored_and_value_bytes_are_measured_apart(self) -> None:
        values = self.registry.park([("t", 0)], 20, 1000, values=True)
        stored = self.registry.park([("t", 0)], 20, 1000)
        self.registry.notify(("t", 0), [(ValuesAppend((b"x" * 10,)), AppendInfo(0, 0, 0))])
        self.assertNoResult(values)  # 10 bytes of values
        self.successResultOf(stored)  # a stored batch of more than 20 bytes

    def test_too_many_waiters_on_the_first_park_fails(self) -> None:
        others = [self.registry.park([("t", 0)], 1, 1000) for _ in range(2)]
        self.failureResultOf(self.poll(), TooManyWaiters)
        for d in others:
            d.cancel()
            self.failureResultOf(d, defer.CancelledError)
        self.assertEqual(self.registry.count, 0)

    def test_too_many_waiters_on_a_later_park_answers(self) -> None:
        d = self.poll()
        other = self.registry.park([("u", 0)], 1, 1000)
        self.append(4, 0)
        self.assertNoResult(d)  # 4 of 10 bytes
        self.registry.max_waiters = 1  # the poll's slot is taken once it leaves it
        self.registry.wake(("t", 0))  # it reads, parks again, and is refused: it waited
        self.assertEqual(self.successResultOf(d), 4)
        self.assertEqual(self.reads, [0, 4])
        other.cancel()
        self.failureResultOf(other, defer.CancelledError)
        self.assertEqual((self.registry.count, self.clock.getDelayedCalls()), (0, []))

    def test_shutdown_answers_parked_polls_without_rereading(self) -> None:
        d = self.poll()
        self.registry.close()
        self.assertEqual(self.successResultOf(d), 0)
        self.assertEqual(self.reads, [0])
        self.successResultOf(self.registry.park([("t", 0)], 1, 1000))  # no more parking
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_a_partition_gone_since_the_read_answers_at_once(self) -> None:
        # Its topic was deleted after the read: no append can come to wake the park.
        del self.high[("t", 0)]
        d = self.registry.park([("t", 0)], 10, 1000, seen={("t", 0): 0})
        self.successResultOf(d)
        self.assertEqual((self.registry.count, self.clock.getDelayedCalls()), (0, []))

    def test_cancel_removes_timer_and_registration(self) -> None:
        d = self.poll()
        self.assertEqual(self.registry.count, 1)
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertEqual((self.registry.count, self.clock.getDelayedCalls()), (0, []))
        self.append(10, 0)  # nothing left to wake
        self.assertEqual(self.reads, [0])
