"""The client matrix with confluent-kafka (librdkafka 2.16) against a real ``twistd broker``:
CreateTopics and listing, produce with acks 0/1/all, consume from earliest, an offset and
the end, every codec, and a consumer group across a member leaving, a broker restart and a
broker crash.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import (
    CODECS,
    HEARTBEAT_MS,
    SESSION_TIMEOUT_MS,
    WAIT,
    Poller,
    Rec,
    check_group_records,
    committed_offsets,
    compressible_values,
    crash_and_restart,
    expected,
    module_broker,
    offset_inside_a_batch,
    small_values,
    stored_codecs,
    wait_until,
)

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "confluent")


#: A consumer outside any group (librdkafka still wants a group id) that reports the end of
#: a partition. The end is only reported after a fetch comes back empty, which the broker
#: holds for fetch.wait.max.ms: 100 ms instead of 500 keeps the tests quick.
READER: dict[str, Any] = {
    "group.id": "confluent-reader",
    "enable.auto.commit": False,
    "enable.partition.eof": True,
    "fetch.wait.max.ms": 100,
}


def _conf(broker: BrokerProcess, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.kafka_bootstrap,
        "topic.metadata.refresh.interval.ms": 1000,
        "socket.connection.setup.timeout.ms": 5000,
        **extra,
    }


def _produce(
    producer: Producer, topic: str, partition: int, values: Sequence[bytes]
) -> list[tuple[int, int | None]]:
    """Produce and flush; every delivery report must be a success. Returns the reported
    ``(partition, offset)`` of each record in order (offset None for acks=0)."""
    reports: list[tuple[int, int | None] | KafkaError] = []

    def delivered(err: KafkaError | None, msg: Any) -> None:
        reports.append(err if err is not None else (msg.partition(), msg.offset()))

    for v in values:
        producer.produce(topic, v, partition=partition, on_delivery=delivered)
    assert producer.flush(WAIT) == 0, "messages still undelivered"
    errors = [r for r in reports if isinstance(r, KafkaError)]
    assert not errors, errors
    return [r for r in reports if not isinstance(r, KafkaError)]


def _records(messages: Sequence[Any], eofs: set[tuple[int, int]] | None = None) -> list[Rec]:
    """Records of a consume() batch; partition-EOF events go to ``eofs``, other errors
    fail the test."""
    out: list[Rec] = []
    for m in messages:
        err = m.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF and eofs is not None:
                eofs.add((m.partition(), m.offset()))
                continue
            raise AssertionError(f"consumer error: {err}")
        out.append((m.partition(), m.offset(), m.value()))
    return out


def _read(broker: BrokerProcess, topic: str, partition: int, start: int) -> list[Rec]:
    """Everything from ``start`` (an offset or OFFSET_BEGINNING) to the partition's end."""
    c = Consumer(_conf(broker, **READER))
    try:
        c.assign([TopicPartition(topic, partition, start)])
        out: list[Rec] = []
        eofs: set[tuple[int, int]] = set()

        def at_end() -> bool:
            out.extend(_records(c.consume(num_messages=500, timeout=0.1), eofs))
            return bool(eofs)

        wait_until(at_end, f"the end of {topic}/{partition}", interval=0)
        return out
    finally:
        c.close()


def test_create_and_list_topics(kbroker: BrokerProcess) -> None:
    admin = AdminClient(_conf(kbroker))
    futures = admin.create_topics([NewTopic("cf-create", 3, 1)], operation_timeout=10)
    assert futures["cf-create"].result(WAIT) is None
    meta = admin.list_topics(timeout=WAIT)
    assert sorted(meta.topics["cf-create"].partitions) == [0, 1, 2]
    assert [b.id for b in meta.brokers.values()] == [0]
    # Creating it again is refused with Kafka's error.
    again = admin.create_topics([NewTopic("cf-create", 3, 1)])["cf-create"]
    with pytest.raises(KafkaException) as exc:
        again.result(WAIT)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_produce_acks_and_read_back(kbroker: BrokerProcess, acks: int) -> None:
    topic = f"cf-acks{acks}"
    values = small_values(f"cf{acks}", 20)
    producer = Producer(_conf(kbroker, acks=acks, **{"linger.ms": 20}))
    reports = _produce(producer, topic, 0, values)
    if acks == 0:
        # No answer, so no offsets: the delivery reports carry none.
        assert reports == [(0, None)] * 20
        wait_until(
            lambda: len(_read(kbroker, topic, 0, OFFSET_BEGINNING)) == 20,
            "the acks=0 records to be stored",
        )
    else:
        assert reports == [(0, i) for i in range(20)]
    assert _read(kbroker, topic, 0, OFFSET_BEGINNING) == expected(0, 0, values)


def test_consume_from_earliest_offset_and_latest(kbroker: BrokerProcess) -> None:
    topic = "cf-positions"
    producer = Producer(_conf(kbroker))
    values = small_values("pos", 10)
    _produce(producer, topic, 0, values)
    assert _read(kbroker, topic, 0, OFFSET_BEGINNING) == expected(0, 0, values)
    assert _read(kbroker, topic, 0, 6) == expected(0, 6, values[6:])
    # From the end: the consumer sees only what is produced after it found the end.
    c = Consumer(_conf(kbroker, **READER))
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_END)])
        eofs: set[tuple[int, int]] = set()
        got: list[Rec] = []

        def found_end() -> bool:
            got.extend(_records(c.consume(num_messages=10, timeout=0.1), eofs))
            return bool(eofs)

        wait_until(found_end, "the consumer to reach the end", interval=0)
        assert eofs == {(0, 10)} and got == []
        later = small_values("later", 3)
        _produce(producer, topic, 0, later)

        def read_three() -> bool:
            got.extend(_records(c.consume(num_messages=10, timeout=0.1), eofs))
            return len(got) >= 3

        wait_until(read_three, "the 3 new records", interval=0)
        assert got == expected(0, 10, later)
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips(kbroker: BrokerProcess, codec: str) -> None:
    topic = f"cf-codec-{codec}"
    values = compressible_values(f"cf-{codec}", 6)
    producer = Producer(_conf(kbroker, **{"compression.type": codec, "linger.ms": 20}))
    assert _produce(producer, topic, 0, values) == [(0, i) for i in range(6)]
    assert _read(kbroker, topic, 0, OFFSET_BEGINNING) == expected(0, 0, values)
    # From inside a (compressed) batch: the records before the offset are skipped.
    inner = offset_inside_a_batch(kbroker, topic, 0)
    assert _read(kbroker, topic, 0, inner) == expected(0, inner, values[inner:])
    assert stored_codecs(kbroker, topic, 0) == {codec}


class _Member:
    """A group member polled by its own thread."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str, name: str) -> None:
        self.consumer = Consumer(
            _conf(
                broker,
                **{
                    "group.id": group,
                    "client.id": name,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": SESSION_TIMEOUT_MS,
                    "heartbeat.interval.ms": HEARTBEAT_MS,
                },
            )
        )
        #: Completed assignments (rebalances this member went through).
        self.assigned = 0

        def on_assign(_consumer: Any, _partitions: Any) -> None:
            self.assigned += 1

        self.consumer.subscribe([topic], on_assign=on_assign)
        self.poller = Poller(
            name, lambda: _records(self.consumer.consume(num_messages=500, timeout=0.1))
        )

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.poller.call(self.consumer.assignment)}

    def commit(self) -> None:
        def commit() -> None:
            try:
                self.consumer.commit(asynchronous=False)
            except KafkaException as e:
                # Nothing consumed since the last commit: nothing to do.
                if e.args[0].code() != KafkaError._NO_OFFSET:
                    raise

        self.poller.call(commit)

    def records(self) -> list[Rec]:
        return self.poller.records()

    def close(self) -> None:
        self.poller.stop(self.consumer.close)


def test_group_split_leave_commit_restart_resume(make_broker: object) -> None:
    """Two members split a 4-partition topic and each reads exactly its share; one
    leaves and the other takes its partitions over from the leaver's commits; after a
    clean restart a new member starts exactly at the committed offsets; it then stays up
    through a crash of the broker (the group is restored), and reads what comes next.
    Every record is
    read once in all (check_group_records)."""
    broker: BrokerProcess = make_broker()  # type: ignore[operator]
    topic, group = "cf-group", "cf-group-g"
    parts = range(4)
    admin = AdminClient(_conf(broker))
    assert admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(WAIT) is None
    producer = Producer(_conf(broker, **{"linger.ms": 5}))
    produced: dict[int, list[bytes]] = {p: [] for p in parts}

    def produce(phase: str, counts: dict[int, int]) -> list[Rec]:
        out = []
        for p in parts:
            values = small_values(f"{phase}-p{p}", counts[p])
            offsets = _produce(producer, topic, p, values)
            assert offsets == [(p, len(produced[p]) + i) for i in range(len(values))]
            out += expected(p, len(produced[p]), values)
            produced[p] += values
        return out

    members: list[_Member] = []
    try:
        a = _Member(broker, group, topic, "member-a")
        members.append(a)
        wait_until(lambda: a.assignment() == set(parts), "member A to get all 4 partitions")
        b = _Member(broker, group, topic, "member-b")
        members.append(b)

        def split() -> bool:
            sa, sb = a.assignment(), b.assignment()
            return bool(sa and sb and not sa & sb and sa | sb == set(parts))

        wait_until(split, "A and B to split the 4 partitions")
        a_parts, b_parts = a.assignment(), b.assignment()
        phase1 = produce("one", {p: 10 for p in parts})
        wait_until(
            lambda: (
                set(a.records()) == {r for r in phase1 if r[0] in a_parts}
                and set(b.records()) == {r for r in phase1 if r[0] in b_parts}
            ),
            "each member to read exactly its partitions",
        )
        a.commit()
        b.commit()
        assert committed_offsets(broker, group, topic, parts) == {p: 10 for p in parts}

        b.close()  # LeaveGroup
        members.remove(b)
        wait_until(lambda: a.assignment() == set(parts), "A to take over B's partitions")
        phase2 = produce("two", {p: 3 + 2 * p for p in parts})
        wait_until(lambda: set(phase2) <= set(a.records()), "A to read phase two")
        a.commit()
        ends = {p: len(produced[p]) for p in parts}
        assert committed_offsets(broker, group, topic, parts) == ends
        committed_seen = a.poller.call(
            lambda: a.consumer.committed([TopicPartition(topic, p) for p in parts], timeout=10)
        )
        assert {tp.partition: tp.offset for tp in committed_seen} == ends
        a.close()
        members.remove(a)
        before = a.records() + b.records()

        produce("three", {p: 4 for p in parts})
        producer.flush(WAIT)
        assert broker.restart() is broker
        assert committed_offsets(broker, group, topic, parts) == ends  # durable
        c = _Member(broker, group, topic, "member-c")
        members.append(c)
        wait_until(lambda: len(c.records()) >= 16, "C to read phase three after the restart")
        c.commit()

        # C stays up while the broker crashes (SIGKILL) and starts again. The broker
        # restores the group from its journal (docs/kafka.md), so C carries on as a
        # member (a client may still choose to re-join) and keeps all four partitions;
        # then it reads what is produced after the restart.
        assert crash_and_restart(broker) is broker
        wait_until(
            lambda: c.assignment() == set(parts),
            "C to hold its partitions after the restart",
        )
        phase4 = produce("four", {p: 5 for p in parts})
        wait_until(lambda: set(phase4) <= set(c.records()), "C to read phase four")
        c.commit()
        assert committed_offsets(broker, group, topic, parts) == {
            p: len(produced[p]) for p in parts
        }
        c.close()
        members.remove(c)
        check_group_records(before, c.records(), ends, produced)
    finally:
        for m in members:
            m.close()
