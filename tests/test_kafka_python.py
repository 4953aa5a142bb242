"""The client matrix with kafka-python 3 against a real ``twistd broker``: CreateTopics and
listing, produce with acks 0/1/all, consume from earliest, an offset and the end, every
codec, and a consumer group across a member leaving, a broker restart and a broker crash.
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

kafka = pytest.importorskip("kafka")
from kafka import (  # noqa: E402
    ConsumerRebalanceListener,
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    TopicPartition,
)
from kafka.admin import NewTopic  # noqa: E402
from kafka.errors import TopicAlreadyExistsError  # noqa: E402

pytestmark = pytest.mark.clients

#: Quick metadata refreshes and short request timeouts for every client object.
COMMON: dict[str, Any] = {"metadata_max_age_ms": 1000, "request_timeout_ms": 10_000}


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "kafka-python")


def _produce(
    producer: KafkaProducer, topic: str, partition: int, values: Sequence[bytes]
) -> list[tuple[int, int]]:
    """Send, wait for every future, return the reported ``(partition, offset)``s."""
    futures = [producer.send(topic, v, partition=partition) for v in values]
    producer.flush(WAIT)
    return [(md.partition, md.offset) for md in (f.get(WAIT) for f in futures)]


def _records(polled: dict[Any, list[Any]]) -> list[Rec]:
    out = [(r.partition, r.offset, r.value) for rs in polled.values() for r in rs]
    return sorted(out)


def _read(broker: BrokerProcess, topic: str, partition: int, start: int | None) -> list[Rec]:
    """Everything from ``start`` (None: the beginning) to the partition's end, with a
    consumer outside any group."""
    c = KafkaConsumer(bootstrap_servers=broker.kafka_bootstrap, group_id=None, **COMMON)
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        if start is None:
            c.seek_to_beginning(tp)
        else:
            c.seek(tp, start)
        end = c.end_offsets([tp])[tp]
        out: list[Rec] = []

        def at_end() -> bool:
            out.extend(_records(c.poll(timeout_ms=100)))
            return c.position(tp) >= end

        wait_until(at_end, f"the end of {topic}/{partition}", interval=0)
        return out
    finally:
        c.close()


def test_create_and_list_topics(kbroker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kbroker.kafka_bootstrap, **COMMON)
    try:
        admin.create_topics([NewTopic("kp-create", 3, 1)])
        assert "kp-create" in admin.list_topics()
        [described] = admin.describe_topics(["kp-create"])
        assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("kp-create", 3, 1)], raise_errors=True)
    finally:
        admin.close()


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_produce_acks_and_read_back(kbroker: BrokerProcess, acks: int | str) -> None:
    topic = f"kp-acks-{acks}"
    values = small_values(f"kp{acks}", 20)
    # acks=all keeps kafka-python's default, the idempotent producer; it cannot be
    # idempotent with acks 0/1, so those turn it off (as its docs ask).
    extra = {} if acks == "all" else {"enable_idempotence": False}
    producer = KafkaProducer(
        bootstrap_servers=kbroker.kafka_bootstrap, acks=acks, linger_ms=20, **extra, **COMMON
    )
    try:
        reports = _produce(producer, topic, 0, values)
    finally:
        producer.close(WAIT)
    if acks == 0:
        # No answer, so the offsets kafka-python reports are its own guesses.
        assert [p for p, _ in reports] == [0] * 20
        wait_until(
            lambda: len(_read(kbroker, topic, 0, None)) == 20, "the acks=0 records to be stored"
        )
    else:
        assert reports == [(0, i) for i in range(20)]
    assert _read(kbroker, topic, 0, None) == expected(0, 0, values)


def test_consume_from_earliest_offset_and_latest(kbroker: BrokerProcess) -> None:
    topic = "kp-positions"
    producer = KafkaProducer(bootstrap_servers=kbroker.kafka_bootstrap, **COMMON)
    try:
        values = small_values("pos", 10)
        _produce(producer, topic, 0, values)
        assert _read(kbroker, topic, 0, None) == expected(0, 0, values)
        assert _read(kbroker, topic, 0, 6) == expected(0, 6, values[6:])
        c = KafkaConsumer(bootstrap_servers=kbroker.kafka_bootstrap, group_id=None, **COMMON)
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek_to_end(tp)
            assert c.position(tp) == 10  # resolved through ListOffsets (latest)
            later = small_values("later", 3)
            _produce(producer, topic, 0, later)
            got: list[Rec] = []

            def read_three() -> bool:
                got.extend(_records(c.poll(timeout_ms=100)))
                return len(got) >= 3

            wait_until(read_three, "the 3 new records", interval=0)
            assert got == expected(0, 10, later)
        finally:
            c.close()
    finally:
        producer.close(WAIT)


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips(kbroker: BrokerProcess, codec: str) -> None:
    topic = f"kp-codec-{codec}"
    values = compressible_values(f"kp-{codec}", 6)
    producer = KafkaProducer(
        bootstrap_servers=kbroker.kafka_bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=20,
        **COMMON,
    )
    try:
        assert _produce(producer, topic, 0, values) == [(0, i) for i in range(6)]
    finally:
        producer.close(WAIT)
    assert _read(kbroker, topic, 0, None) == expected(0, 0, values)
    # From inside a (compressed) batch: the records before the offset are skipped.
    inner = offset_inside_a_batch(kbroker, topic, 0)
    assert _read(kbroker, topic, 0, inner) == expected(0, inner, values[inner:])
    assert stored_codecs(kbroker, topic, 0) == {codec}


class _Member:
    """A group member polled by its own thread (kafka-python rejoins only in poll)."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str, name: str) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=broker.kafka_bootstrap,
            group_id=group,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            **COMMON,
        )
        #: Completed assignments (rebalances this member went through).
        self.assigned = 0
        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.assigned += 1

        self.consumer.subscribe([topic], listener=Listener())
        self.poller = Poller(name, lambda: _records(self.consumer.poll(timeout_ms=100)))

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.poller.call(self.consumer.assignment)}

    def commit(self) -> None:
        self.poller.call(self.consumer.commit)

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
    topic, group = "kp-group", "kp-group-g"
    parts = range(4)
    admin = KafkaAdminClient(bootstrap_servers=broker.kafka_bootstrap, **COMMON)
    try:
        admin.create_topics([NewTopic(topic, 4, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.kafka_bootstrap, linger_ms=5, **COMMON)
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
        seen = a.poller.call(
            lambda: {p: a.consumer.committed(TopicPartition(topic, p)) for p in parts}
        )
        assert seen == ends
        a.close()
        members.remove(a)
        before = a.records() + b.records()

        produce("three", {p: 4 for p in parts})
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
        producer.close(WAIT)
