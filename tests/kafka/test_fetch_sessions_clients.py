"""Fetch sessions (KIP-227) with real clients against a real ``twistd broker``: the
consumers that use them by default (kafka-python's ``enable_incremental_fetch_sessions``,
Kafka's Java 4.4 consumer) read every record exactly once while the broker answers their
incremental fetches; partitions added to and dropped from an assignment; a session
closed under a consumer (FETCH_SESSION_ID_NOT_FOUND: it starts over with a full fetch);
a broker restart (every session lost); franz-go (kgo) reads in a session too. librdkafka
(confluent-kafka) sends no session (session ID 0, epoch -1, every fetch a full one): it
is served as before.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis

from tests.brokerproc import BrokerProcess
from tests.control_plane_helpers import admin, confluent
from tests.kafka_helpers import WAIT, RawKafka, module_broker, wait_until

pytestmark = [pytest.mark.clients, pytest.mark.broker]

PARTITIONS = 60


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "fetch-sessions")


def _create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    confluent()
    from confluent_kafka.admin import NewTopic

    client = admin(broker)  # kept until the answers are in
    for future in client.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(WAIT)


def _produce(broker: BrokerProcess, topic: str, records: list[tuple[int, bytes]]) -> None:
    producer = confluent().Producer({"bootstrap.servers": broker.kafka_bootstrap,
                                     "linger.ms": 0})
    for partition, value in records:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(WAIT) == 0


def _incremental(broker: BrokerProcess) -> float:
    return broker.metric("brokerd_fetch_session_incremental_fetches_total")


class _Reader:
    """A kafka-python consumer on an explicit assignment, fetching in sessions."""

    def __init__(self, broker: BrokerProcess, topic: str, partitions: range) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.topic = topic
        self._tp = TopicPartition
        self.consumer: Any = KafkaConsumer(
            bootstrap_servers=broker.kafka_bootstrap, enable_auto_commit=False,
            auto_offset_reset="earliest", fetch_max_wait_ms=100,
            enable_incremental_fetch_sessions=True, request_timeout_ms=10000,
            reconnect_backoff_max_ms=500,
        )
        self.assign(partitions)
        self.got: list[tuple[int, bytes]] = []

    def assign(self, partitions: range | list[int]) -> None:
        self.consumer.assign([self._tp(self.topic, p) for p in partitions])

    def until(self, count: int) -> list[tuple[int, bytes]]:
        def enough() -> bool:
            for records in self.consumer.poll(timeout_ms=200).values():
                self.got.extend((r.partition, r.value) for r in records)
            return len(self.got) >= count

        wait_until(enough, f"{count} records (have {len(self.got)})")
        return self.got

    def session_id(self) -> int:
        """The session the client is in now (read off its session handler)."""
        handlers = self.consumer._fetcher._session_handlers
        [handler] = handlers.values()
        sid: int = handler.next_metadata.session_id
        return sid

    def close(self) -> None:
        self.consumer.close()


def _round(tag: str, partitions: list[int]) -> list[tuple[int, bytes]]:
    return [(p, f"{tag}-{p}".encode()) for p in partitions]


def test_kafka_python_reads_a_trickle_in_sessions(broker: BrokerProcess) -> None:
    pytest.importorskip("kafka")
    topic = "sessions-trickle"
    _create(broker, topic, PARTITIONS)
    reader = _Reader(broker, topic, range(PARTITIONS))
    try:
        reader.until(0)
        before = _incremental(broker)
        sent: list[tuple[int, bytes]] = []
        # A trickle: a few partitions at a time, each round read before the next.
        for n in range(6):
            batch = _round(f"r{n}", [(n * 7 + k * 11) % PARTITIONS for k in range(3)])
            _produce(broker, topic, batch)
            sent.extend(batch)
            reader.until(len(sent))
        assert sorted(reader.got) == sorted(sent)
        assert _incremental(broker) > before  # the rounds were read in a session
        assert reader.session_id() != 0
        assert broker.metric("brokerd_fetch_sessions") >= 1

        # Partitions dropped from the assignment are forgotten (not read, not answered);
        # partitions added to the topic join the session.
        odd = range(1, PARTITIONS, 2)
        positions = {p: reader.consumer.position(reader._tp(topic, p)) for p in odd}
        reader.assign(list(range(0, PARTITIONS, 2)))
        dropped, kept = _round("dropped", [1, 3]), _round("kept", [0, 2])
        _produce(broker, topic, dropped + kept)
        sent.extend(kept)
        reader.until(len(sent))
        from confluent_kafka.admin import NewPartitions

        client = admin(broker)
        for future in client.create_partitions([NewPartitions(topic, PARTITIONS + 4)]).values():
            future.result(WAIT)
        reader.assign([*range(0, PARTITIONS, 2), *range(PARTITIONS, PARTITIONS + 4)])
        added = _round("added", list(range(PARTITIONS, PARTITIONS + 4)))
        _produce(broker, topic, added)
        sent.extend(added)
        reader.until(len(sent))
        assert sorted(reader.got) == sorted(sent)  # nothing of the dropped ones
        # The dropped partitions come back where the client left them.
        reader.assign(list(range(PARTITIONS + 4)))
        for p, offset in positions.items():
            reader.consumer.seek(reader._tp(topic, p), offset)
        sent.extend(dropped)
        reader.until(len(sent))
        assert sorted(reader.got) == sorted(sent)
    finally:
        reader.close()


def test_a_consumer_whose_session_is_closed_starts_over(broker: BrokerProcess) -> None:
    pytest.importorskip("kafka")
    topic = "sessions-closed"
    _create(broker, topic, 8)
    reader = _Reader(broker, topic, range(8))
    try:
        sent = _round("a", list(range(8)))
        _produce(broker, topic, sent)
        reader.until(len(sent))
        sid = wait_until(reader.session_id, "a fetch session")
        created = broker.metric("brokerd_fetch_sessions_created_total")
        # Another connection closes the session (a full fetch naming it, epoch -1):
        # the consumer's next incremental fetch is FETCH_SESSION_ID_NOT_FOUND.
        with RawKafka(broker) as conn:
            answer = conn.call(ApiKey.FETCH, 12, apis.FetchRequest(
                max_wait_ms=0, min_bytes=1, session_id=sid, session_epoch=-1))
            assert (answer.error_code, answer.session_id) == (0, 0)
        more = _round("b", [0, 5])
        _produce(broker, topic, more)
        sent.extend(more)
        reader.until(len(sent))
        assert sorted(reader.got) == sorted(sent)
        # It opened a new session with a full fetch.
        wait_until(lambda: reader.session_id() not in (0, sid), "a new session")
        assert broker.metric("brokerd_fetch_sessions_created_total") > created
    finally:
        reader.close()


@pytest.mark.slow  # a broker restart: about 15 s on a shared machine
def test_sessions_are_lost_with_a_restart_and_consumers_recover(
    broker: BrokerProcess,
) -> None:
    pytest.importorskip("kafka")
    topic = "sessions-restart"
    _create(broker, topic, 12)
    reader = _Reader(broker, topic, range(12))
    try:
        sent = _round("before", list(range(12)))
        _produce(broker, topic, sent)
        reader.until(len(sent))
        old = wait_until(reader.session_id, "a fetch session")
        broker.restart()
        assert broker.metric("brokerd_fetch_sessions_created_total") == 0
        more = _round("after", [3, 4, 11])
        _produce(broker, topic, more)
        sent.extend(more)
        reader.until(len(sent))
        assert sorted(reader.got) == sorted(sent)
        wait_until(lambda: reader.session_id() not in (0, old), "a session after the restart")
    finally:
        reader.close()


def test_librdkafka_sends_no_session(broker: BrokerProcess) -> None:
    ck = confluent()
    topic = "sessions-librdkafka"
    _create(broker, topic, 4)
    sent = _round("x", [0, 1, 2, 3])
    _produce(broker, topic, sent)
    created = broker.metric("brokerd_fetch_sessions_created_total")
    consumer = ck.Consumer({"bootstrap.servers": broker.kafka_bootstrap,
                            "group.id": "sessions-librdkafka", "auto.offset.reset": "earliest",
                            "fetch.wait.max.ms": 50})
    got: list[tuple[int, bytes]] = []
    try:
        consumer.subscribe([topic])

        def enough() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append((msg.partition(), msg.value()))
            return len(got) >= len(sent)

        wait_until(enough, "librdkafka's records")
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent)
    assert broker.metric("brokerd_fetch_sessions_created_total") == created


def test_the_java_consumer_reads_in_sessions(broker: BrokerProcess) -> None:
    from tests.e2e.test_kafka_tools import TOOLS, tool_ready

    tool_ready()
    topic = "sessions-java"
    _create(broker, topic, PARTITIONS)
    first = _round("j0", list(range(PARTITIONS)))
    _produce(broker, topic, first)
    before = _incremental(broker)
    later = [_round(f"j{n}", [n, n + 20, n + 40]) for n in range(1, 4)]
    total = len(first) + sum(len(r) for r in later)
    proc = subprocess.Popen(
        [str(TOOLS / "kafka-console-consumer.sh"), "--bootstrap-server",
         broker.kafka_bootstrap, "--topic", topic, "--from-beginning",
         "--max-messages", str(total), "--timeout-ms", "60000",
         "--command-property", "fetch.max.wait.ms=100"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**__import__("os").environ, "KAFKA_HEAP_OPTS": "-Xmx256m"},
    )
    try:
        # Each round waits for the consumer's fetches to go on in the session.
        for batch in later:
            mark = _incremental(broker)
            wait_until(lambda m=mark: _incremental(broker) > m, "an incremental fetch")
            _produce(broker, topic, batch)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    expected = [v.decode() for _p, v in first] + [
        v.decode() for batch in later for _p, v in batch]
    assert sorted(out.split()) == sorted(expected)
    assert _incremental(broker) - before >= len(later)


def test_franz_go_reads_in_a_session(broker: BrokerProcess) -> None:
    from tests.judge_drivers import GO_BINARY, FranzJudge

    FranzJudge.require()
    topic = "sessions-franz"
    _create(broker, topic, 1)
    first = _round("f0", [0])
    _produce(broker, topic, first)
    later = [_round(f"f{n}", [0]) for n in range(1, 4)]
    total = len(first) + sum(len(r) for r in later)
    # franz-go's consume scenario reads COUNT records from the start, outside a group.
    proc = subprocess.Popen([str(GO_BINARY), "franz", "consume", broker.kafka_bootstrap,
                             topic, "0", str(total)], stdout=subprocess.PIPE, text=True)
    try:
        for batch in later:
            mark = _incremental(broker)
            wait_until(lambda m=mark: _incremental(broker) > m, "an incremental fetch")
            _produce(broker, topic, batch)
        out, _err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    got = json.loads(out.strip().splitlines()[-1])
    assert "ok" in got, got
    # Each record is [partition, offset, key, value]: every value once, in offset order.
    records = got["ok"]["records"]
    assert [r[1] for r in records] == list(range(total))
    assert [r[3] for r in records] == [
        v.decode() for batch in (first, *later) for _p, v in batch]
