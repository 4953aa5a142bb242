"""``__consumer_offsets`` read as a lag monitor reads it (brokerd.kafka.server.offsets_topic),
against a real ``twistd broker``: a group commits with confluent-kafka, then a
confluent-kafka consumer and a kafka-python one read the group's partition of
``__consumer_offsets`` and decode its records with a decoder written in the tests from
Kafka's message schemas (OffsetCommitKey/Value, GroupMetadataKey/Value);
deleting the group writes tombstones; ListOffsets answers the partition's ends;
Produce to it stays refused; a kafka-python member's classic group shows as
GroupMetadata; offsets never go back across a restart. About 12 s (one broker, one
restart).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.control_plane_helpers import admin, confluent
from tests.kafka_helpers import (
    HEARTBEAT_MS,
    SESSION_TIMEOUT_MS,
    WAIT,
    module_broker,
    wait_until,
)
from tests.offsets_topic_schema import decode, java_partition

pytestmark = [pytest.mark.clients, pytest.mark.broker]

OFFSETS = "__consumer_offsets"
GROUP = "lag-watch"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "offsets-topic")


def _commit(
    broker: BrokerProcess, offsets: list[tuple[str, int, int]], group: str = GROUP
) -> None:
    ck = confluent()
    consumer = ck.Consumer({"bootstrap.servers": broker.kafka_bootstrap, "group.id": group,
                            "enable.auto.commit": False})
    try:
        consumer.commit(
            offsets=[ck.TopicPartition(t, p, o) for t, p, o in offsets],
            asynchronous=False,
        )
    finally:
        consumer.close()


def _read_confluent(broker: BrokerProcess, partition: int, until: int) -> list[tuple[Any, ...]]:
    """Every record of ``__consumer_offsets`` ``partition`` up to offset ``until``."""
    ck = confluent()
    consumer = ck.Consumer({"bootstrap.servers": broker.kafka_bootstrap,
                            "group.id": "offsets-reader", "enable.auto.commit": False,
                            "fetch.wait.max.ms": 100})
    out: list[tuple[Any, ...]] = []
    try:
        consumer.assign([ck.TopicPartition(OFFSETS, partition, ck.OFFSET_BEGINNING)])

        def read() -> bool:
            for m in consumer.consume(100, 0.2):
                assert m.error() is None, m.error()
                out.append((m.offset(), decode(m.key(), m.value())))
            return bool(out) and out[-1][0] >= until - 1

        wait_until(read, f"{OFFSETS}-{partition} read up to {until}")
    finally:
        consumer.close()
    return [r for _o, r in out]


def _latest(records: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], Any]:
    """What a compacting reader keeps: the last value of each key."""
    latest: dict[tuple[Any, ...], Any] = {}
    for r in records:
        latest[r[:-1]] = r[-1]
    return latest


def test_lag_monitor_reads_a_groups_commits(broker: BrokerProcess) -> None:
    ck = confluent()
    from confluent_kafka.admin import NewTopic

    client = admin(broker)
    for future in client.create_topics([NewTopic("orders", 3, 1)]).values():
        future.result(WAIT)
    _commit(broker, [("orders", 0, 5), ("orders", 2, 7)])
    _commit(broker, [("orders", 0, 9)])
    partition = java_partition(GROUP)

    from kafka import KafkaConsumer, TopicPartition

    reader: Any = KafkaConsumer(bootstrap_servers=broker.kafka_bootstrap,
                                enable_auto_commit=False, request_timeout_ms=10000,
                                exclude_internal_topics=False, fetch_max_wait_ms=100)
    try:
        tp = TopicPartition(OFFSETS, partition)
        ends = reader.end_offsets([tp])
        starts = reader.beginning_offsets([tp])
        # One batch per commit: three records, in two batches.
        assert (starts[tp], ends[tp]) == (0, 3)
        records = _read_confluent(broker, partition, ends[tp])
        offsets = {k[2:]: v for k, v in _latest(records).items() if k[0] == "offset"}
        assert {tp_: (v[0], v[1], v[2]) for tp_, v in offsets.items()} == {
            ("orders", 0): (9, -1, ""), ("orders", 2): (7, -1, ""),
        }
        assert all(r[1] == GROUP for r in records)

        # kafka-python reads the same records by topic name.
        reader.assign([tp])
        reader.seek(tp, 0)
        seen: list[tuple[Any, ...]] = []

        def poll() -> bool:
            for batch in reader.poll(timeout_ms=200).values():
                seen.extend(decode(m.key, m.value) for m in batch)
            return len(seen) >= 3

        wait_until(poll, "kafka-python read the group's commits")
        assert seen == records

        # Deleting the group writes the tombstones of its offsets and of the group.
        for future in client.delete_consumer_groups([GROUP]).values():
            future.result(WAIT)
        wait_until(lambda: poll() and len(seen) >= 6, "the tombstones")
        assert seen[3:] == [
            ("offset", GROUP, "orders", 0, None), ("offset", GROUP, "orders", 2, None),
            ("group", GROUP, None),
        ]
    finally:
        reader.close()

    # Other partitions hold nothing of this group's; writes stay refused.
    other = (partition + 1) % 50
    producer = ck.Producer({"bootstrap.servers": broker.kafka_bootstrap,
                            "message.timeout.ms": 5000})
    errors: list[Any] = []
    producer.produce(OFFSETS, b"x", partition=other, on_delivery=lambda e, _m: errors.append(e))
    producer.flush(WAIT)
    assert errors and errors[0] is not None


def _kafka_python(broker: BrokerProcess) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(bootstrap_servers=broker.kafka_bootstrap, enable_auto_commit=False,
                         request_timeout_ms=10000, fetch_max_wait_ms=100)


def test_offsets_never_go_back_across_a_restart(broker: BrokerProcess) -> None:
    from kafka import TopicPartition

    from brokerd.kafka.server.offsets_topic import RUN_SHIFT

    group = "lag-watch-restarted"
    tp = TopicPartition(OFFSETS, java_partition(group))
    _commit(broker, [("orders", 1, 4)], group)
    reader = _kafka_python(broker)
    try:
        stopped_at = reader.end_offsets([tp])[tp]
        assert stopped_at < 1 << RUN_SHIFT
    finally:
        reader.close()
    broker.restart()
    _commit(broker, [("orders", 1, 6)], group)
    reader = _kafka_python(broker)
    try:
        first = 1 << RUN_SHIFT  # the second run of this data directory
        assert reader.beginning_offsets([tp])[tp] == 0
        assert reader.end_offsets([tp])[tp] == first + 2
        # Resumed where it stopped: the live state again (from the journal), then news.
        reader.assign([tp])
        reader.seek(tp, stopped_at)
        got: list[tuple[int, tuple[Any, ...]]] = []

        def poll() -> bool:
            for batch in reader.poll(timeout_ms=200).values():
                got.extend((m.offset, decode(m.key, m.value)) for m in batch)
            return len(got) >= 2

        wait_until(poll, "the records of the new run")
        assert [(o, r[:4], r[4][0]) for o, r in got] == [
            (first, ("offset", group, "orders", 1), 4),
            (first + 1, ("offset", group, "orders", 1), 6),
        ]
    finally:
        reader.close()


def test_a_classic_groups_membership(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, TopicPartition

    group = "lag-watch-members"
    member: Any = KafkaConsumer(
        "orders", bootstrap_servers=broker.kafka_bootstrap, group_id=group,
        client_id="watched", enable_auto_commit=False, request_timeout_ms=10000,
        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_MS,
    )
    try:
        wait_until(lambda: member.poll(timeout_ms=100) is not None and member.assignment(),
                   "the member's assignment")
        reader = _kafka_python(broker)
        try:
            tp = TopicPartition(OFFSETS, java_partition(group))
            reader.assign([tp])
            reader.seek(tp, 0)
            groups: list[tuple[Any, ...]] = []

            def poll() -> bool:
                for batch in reader.poll(timeout_ms=200).values():
                    groups.extend(
                        r for r in (decode(m.key, m.value) for m in batch) if r[0] == "group"
                    )
                return bool(groups)

            wait_until(poll, "the group's metadata record")
        finally:
            reader.close()
    finally:
        member.close()
    (_kind, name, (protocol_type, generation, protocol, leader, members)) = groups[-1]
    assert (name, protocol_type) == (group, "consumer") and generation >= 1
    assert protocol in ("range", "roundrobin", "sticky", "cooperative-sticky")
    assert members == [leader] and leader.startswith("watched")


def test_partition_of_a_group_is_javas() -> None:
    from brokerd.kafka.server.offsets_topic import partition_for

    for group in ("", "a", "lag-watch", "payments-consumer", "grüße", "x" * 300):
        assert partition_for(group) == java_partition(group), group
