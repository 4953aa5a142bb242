"""The Kafka client matrix against a real ``twistd broker``: every scenario runs with each
client (kcat, confluent-kafka, kafka-python, aiokafka) through its driver in
``tests/kafka_drivers.py``.

Scenarios: CreateTopics and listing, produce with acks 0/1/all, consume from the
earliest offset, an offset and the end, every codec (stored as sent, readable from inside
a compressed batch), and a consumer group across a member leaving, a clean restart and a
crash of the broker. kcat's own ways (topics created by producing, relative offsets) are
at the end. Broker behaviour no client shows deterministically is checked with raw
requests in test_kafka_clients.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from brokerd.kafka.errors import ErrorCode

from tests.brokerproc import BrokerProcess
from tests.kafka_drivers import DRIVERS, Driver, Producer
from tests.kafka_helpers import (
    CODECS,
    Rec,
    check_group_records,
    committed_offsets,
    compressible_values,
    crash_and_restart,
    expected,
    kcat_consume,
    kcat_produce,
    kcat_run,
    module_broker,
    need_kcat,
    offset_inside_a_batch,
    small_values,
    stored_codecs,
    wait_until,
)

pytestmark = [pytest.mark.clients, pytest.mark.broker]


def _clients(drivers: tuple[type[Driver], ...]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("client", drivers, ids=[d.name for d in drivers], indirect=True)


every_client = _clients(DRIVERS)
admin_clients = _clients(tuple(d for d in DRIVERS if d.creates_topics))


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the tests that need none of their own (each client uses topics of
    its own prefix). kcat has no CreateTopics: its topics are auto-created, with this
    partition count."""
    yield from module_broker(tmp_path_factory, "clients", "--default-partitions=2")


@pytest.fixture
def client(request: pytest.FixtureRequest) -> type[Driver]:
    """The driver class the test is parametrized with; skips if its client is missing."""
    cls: type[Driver] = request.param
    cls.require()
    return cls


@pytest.fixture
def driver(client: type[Driver], kbroker: BrokerProcess) -> Iterator[Driver]:
    with client(kbroker) as d:
        yield d


@admin_clients
def test_create_and_list_topics(driver: Driver) -> None:
    topic = f"{driver.prefix}-create"
    driver.create_topic(topic, 3)
    assert topic in driver.topic_names()
    assert driver.topic_partitions(topic) == [0, 1, 2]
    assert driver.broker_ids() == [0]
    # Creating it again is refused with Kafka's error.
    assert driver.create_topic_again(topic, 3) == ErrorCode.TOPIC_ALREADY_EXISTS


@every_client
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_acks_and_read_back(driver: Driver, acks: str) -> None:
    """Twenty records in two sends of one producer (kcat: two processes): the second
    appends after the first."""
    topic = f"{driver.prefix}-acks-{acks}"
    values = small_values(f"{driver.prefix}{acks}", 20)
    producer = driver.producer(acks=acks, linger_ms=20)
    try:
        first, second = producer.send(topic, 0, values[:10]), producer.send(topic, 0, values[10:])
    finally:
        producer.close()
    if acks == "0":
        driver.check_unacked_reports(first, 0)
        driver.check_unacked_reports(second, 0)
        # Nothing tells an acks=0 producer when the data is stored: wait for it.
        wait_until(
            lambda: len(driver.read(topic, 0, None)) == 20, "the acks=0 records to be stored"
        )
    elif first is not None and second is not None:
        assert first + second == [(0, i) for i in range(20)]
    assert driver.read(topic, 0, None) == expected(0, 0, values)


@every_client
def test_consume_from_earliest_offset_and_latest(driver: Driver) -> None:
    topic = f"{driver.prefix}-positions"
    values = small_values("pos", 10)
    producer = driver.producer()
    producer.send(topic, 0, values)
    assert driver.read(topic, 0, None) == expected(0, 0, values)
    assert driver.read(topic, 0, 6) == expected(0, 6, values[6:])
    # From the end: the consumer sees only what is produced after it found the end.
    tail = driver.tail(topic, 0, 3)
    assert tail.at_end() == 10
    later = small_values("later", 3)
    producer.send(topic, 0, later)
    assert tail.take(3) == expected(0, 10, later)


@every_client
@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips(driver: Driver, kbroker: BrokerProcess, codec: str) -> None:
    topic = f"{driver.prefix}-codec-{codec}"
    values = compressible_values(f"{driver.prefix}-{codec}", 6)
    # The read from inside a batch needs a batch of several records: the topic exists
    # before the producer starts (no metadata answer lands mid-loop and flushes a
    # partial batch), and the linger is far above a loaded machine's scheduling stalls
    # (a 20 ms linger split the six records into six batches on a busy CI runner).
    if driver.creates_topics:
        driver.create_topic(topic, 2)
    else:
        with kbroker.client() as native:  # kcat only creates topics by producing
            native.create_topic(topic, 2)
    producer = driver.producer(compression=codec, linger_ms=500)
    try:
        reports = producer.send(topic, 0, values)
    finally:
        producer.close()
    if reports is not None:
        assert reports == [(0, i) for i in range(6)]
    assert driver.read(topic, 0, None) == expected(0, 0, values)
    # From inside a (compressed) batch: the records before the offset are skipped.
    inner = offset_inside_a_batch(kbroker, topic, 0)
    assert driver.read(topic, 0, inner) == expected(0, inner, values[inner:])
    # The broker stored what the client sent: batches really compressed with this codec.
    assert stored_codecs(kbroker, topic, 0) == {codec}


class _Topic:
    """The group test's topic: what was produced to each partition so far."""

    def __init__(self, producer: Producer, name: str, partitions: range) -> None:
        self.producer = producer
        self.name = name
        self.parts = partitions
        self.produced: dict[int, list[bytes]] = {p: [] for p in partitions}

    def produce(self, phase: str, counts: dict[int, int]) -> list[Rec]:
        out = []
        for p in self.parts:
            values = small_values(f"{phase}-p{p}", counts[p])
            reports = self.producer.send(self.name, p, values)
            if reports is not None:
                assert reports == [(p, len(self.produced[p]) + i) for i in range(len(values))]
            out += expected(p, len(self.produced[p]), values)
            self.produced[p] += values
        return out

    def ends(self) -> dict[int, int]:
        return {p: len(values) for p, values in self.produced.items()}


@every_client
def test_group_split_leave_commit_restart_resume(
    client: type[Driver], make_broker: object
) -> None:
    """Two members split a 4-partition topic and each reads exactly its share; one
    leaves and the other takes its partitions over from the leaver's commits; after a
    clean restart a new member starts exactly at the committed offsets; it then stays up
    through a crash of the broker (the group is restored), and reads what comes next.
    Every record is read once in all (check_group_records)."""
    # A broker of its own (it restarts), auto-creating 4-partition topics for kcat.
    broker: BrokerProcess = make_broker("--default-partitions=4")  # type: ignore[operator]
    parts = range(4)
    with client(broker) as driver:
        group = f"{driver.prefix}-group-g"

        def committed() -> dict[int, int]:
            return committed_offsets(broker, group, topic.name, parts)

        driver.create_topic(f"{driver.prefix}-group", 4)
        topic = _Topic(driver.producer(linger_ms=5), f"{driver.prefix}-group", parts)
        seed = topic.produce("seed", {p: 1 for p in parts})  # kcat: creates the topic

        a = driver.member(group, topic.name, "member-a")
        wait_until(lambda: a.assignment() == set(parts), "member A to get all 4 partitions")
        wait_until(lambda: set(seed) <= set(a.records()), "member A to read the seed records")
        a.commit()  # kcat: commits when its partitions are revoked, as B joins
        b = driver.member(group, topic.name, "member-b")

        def split() -> bool:
            sa, sb = a.assignment(), b.assignment()
            return bool(sa and sb and not sa & sb and sa | sb == set(parts))

        wait_until(split, "A and B to split the 4 partitions")
        a_parts, b_parts = a.assignment(), b.assignment()
        phase1 = topic.produce("one", {p: 10 for p in parts})
        wait_until(
            lambda: (
                set(a.records()) == {*seed, *(r for r in phase1 if r[0] in a_parts)}
                and set(b.records()) == {r for r in phase1 if r[0] in b_parts}
            ),
            "each member to read exactly its partitions",
        )
        a.commit()
        b.commit()
        if driver.commits_on_request:
            assert committed() == {p: 11 for p in parts}

        # B leaves (LeaveGroup; kcat commits what B read as it closes, and A commits in
        # the rebalance), and A takes its partitions over from B's commits.
        b.close()
        wait_until(lambda: a.assignment() == set(parts), "A to take over B's partitions")
        assert committed() == {p: 11 for p in parts}
        phase2 = topic.produce("two", {p: 3 + 2 * p for p in parts})
        wait_until(lambda: set(phase2) <= set(a.records()), "A to read phase two")
        a.commit()
        ends = topic.ends()
        if driver.commits_on_request:
            assert committed() == ends
            assert a.committed(topic.name, parts) == ends
        a.close()  # kcat: commits on close
        assert committed() == ends
        before = a.records() + b.records()

        topic.produce("three", {p: 4 for p in parts})
        assert broker.restart() is broker
        assert committed() == ends  # durable
        c = driver.member(group, topic.name, "member-c")
        wait_until(lambda: len(c.records()) >= 16, "C to read phase three after the restart")
        c.commit()
        wait_until(lambda: committed() == topic.ends(), "C's commit of phase three")

        # C (and the producer) stay up while the broker crashes (SIGKILL) and starts
        # again. The broker restores the group from its journal (docs/kafka.md), so C
        # carries on as a member (a client may still choose to re-join) and keeps all
        # four partitions; then it reads what is produced after the restart.
        assert crash_and_restart(broker) is broker
        wait_until(
            lambda: c.assignment() == set(parts), "C to hold its partitions after the restart"
        )
        phase4 = topic.produce("four", {p: 5 for p in parts})
        wait_until(lambda: set(phase4) <= set(c.records()), "C to read phase four")
        c.commit()
        if driver.commits_on_request:
            assert committed() == topic.ends()
        c.close()
        assert committed() == topic.ends()
        check_group_records(before, c.records(), ends, topic.produced)


# -- kcat's own ways -----------------------------------------------------------------


def test_kcat_creates_a_topic_by_producing_and_lists_it(kbroker: BrokerProcess) -> None:
    need_kcat()
    kcat_produce(kbroker, "kcat-create", 1, [b"first"])
    done = kcat_run(kbroker, "-L", "-J", "-t", "kcat-create")
    meta = json.loads(done.stdout)
    assert [b["id"] for b in meta["brokers"]] == [0]
    [topic] = meta["topics"]
    assert topic["topic"] == "kcat-create"
    assert [p["partition"] for p in topic["partitions"]] == [0, 1]
    assert all(p["leader"] == 0 for p in topic["partitions"])
    assert kcat_consume(kbroker, "kcat-create", 1, "beginning") == [(1, 0, b"first")]
    assert kcat_consume(kbroker, "kcat-create", 0, "beginning") == []
    # The full listing (Metadata with every topic) shows it too.
    listing = json.loads(kcat_run(kbroker, "-L", "-J").stdout)
    assert "kcat-create" in {t["topic"] for t in listing["topics"]}


def test_kcat_reads_from_an_offset_relative_to_the_end(kbroker: BrokerProcess) -> None:
    need_kcat()
    values = small_values("rel", 10)
    kcat_produce(kbroker, "kcat-relative", 0, values)
    assert kcat_consume(kbroker, "kcat-relative", 0, "-3") == expected(0, 7, values[7:])
