"""Kafka transactions (KIP-98, KIP-447) with real clients against a real ``twistd broker``:
confluent-kafka (librdkafka), kafka-python and aiokafka, each unmodified.

What each test checks is Kafka's semantics as a client sees them: records of a committed
transaction reach read_committed consumers whole, those of an aborted one never do (a
read_uncommitted consumer sees both); the offsets a transaction sends for a group are
the group's committed offsets only once it commits; a second producer with the same
transactional id fences the first; a transaction left open past its timeout is aborted by
the broker; and an open transaction holds read_committed consumers at its first offset
(the last stable offset) while read_uncommitted ones read on. kafkajs and Faust have
modules of their own (test_transactions_kafkajs.py, test_transactions_faust.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.control_plane_helpers import create_topic
from tests.kafka_helpers import (
    HEARTBEAT_MS,
    SESSION_TIMEOUT_MS,
    WAIT,
    close_consumer,
    committed_offsets,
    module_broker,
    wait_until,
)
from tests.txn_helpers import (
    conf,
    confluent,
    is_fenced,
    latest_offsets,
    produce_values,
    read_values,
    spread,
    txn_producer,
    values_of,
)

pytestmark = [pytest.mark.clients, pytest.mark.broker]

#: Short enough that the broker's abort (checked every second) comes within seconds.
SHORT_TXN_TIMEOUT_MS = 3000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    confluent()
    yield from module_broker(tmp_path_factory, "txn-clients")


def plain_producer(broker: BrokerProcess) -> Any:
    return confluent().Producer(conf(broker, acks="all"))


# -- confluent-kafka -------------------------------------------------------------------


def test_commit_and_abort_across_three_partitions(broker: BrokerProcess) -> None:
    topic = "txn-cf-basic"
    create_topic(broker, topic, 3)
    producer = txn_producer(broker, "cf-basic")
    first, aborted, last = spread("c1", 12, 3), spread("a2", 9, 3), spread("c3", 6, 3)
    for values, commit in ((first, True), (aborted, False), (last, True)):
        producer.begin_transaction()
        produce_values(producer, topic, values)
        if commit:
            producer.commit_transaction(WAIT)
        else:
            producer.abort_transaction(WAIT)

    committed = read_values(broker, topic, [0, 1, 2], committed=True)
    assert committed == values_of(first + last)
    everything = read_values(broker, topic, [0, 1, 2], committed=False)
    assert everything == values_of(first + aborted + last)
    # Each transaction ended with one marker per partition: the partition's end is past
    # its data by three offsets, and nothing is open (LSO = HW).
    for partition in range(3):
        lso, hw = latest_offsets(broker, topic, partition)
        assert (lso, hw) == (9 + 3, 9 + 3), (partition, lso, hw)


def test_consume_transform_produce_offsets_follow_the_transaction(
    broker: BrokerProcess,
) -> None:
    ck = confluent()
    source, sink, group = "txn-cf-ctp-in", "txn-cf-ctp-out", "txn-cf-ctp"
    create_topic(broker, source, 2)
    create_topic(broker, sink, 2)
    inputs = spread("in", 20, 2)
    plain = plain_producer(broker)
    produce_values(plain, source, inputs)

    consumer = ck.Consumer(
        conf(
            broker,
            **{
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
            },
        )
    )
    producer = txn_producer(broker, "cf-ctp")
    try:
        consumer.subscribe([source])
        consumed: list[tuple[int, bytes]] = []

        def all_consumed() -> bool:
            for m in consumer.consume(num_messages=100, timeout=0.2):
                assert m.error() is None, m.error()
                consumed.append((m.partition(), m.value()))
            return len(consumed) >= len(inputs)

        wait_until(all_consumed, "the group member to read every input")
        assert sorted(consumed) == sorted(inputs)
        outputs = [(p, b"out-" + v) for p, v in consumed]

        def transform(commit: bool) -> None:
            producer.begin_transaction()
            produce_values(producer, sink, outputs)
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(
                positions, consumer.consumer_group_metadata(), WAIT
            )
            if commit:
                producer.commit_transaction(WAIT)
            else:
                producer.abort_transaction(WAIT)

        transform(commit=False)
        assert committed_offsets(broker, group, source, [0, 1]) == {0: -1, 1: -1}
        assert read_values(broker, sink, [0, 1], committed=True) == []

        transform(commit=True)
        assert committed_offsets(broker, group, source, [0, 1]) == {0: 10, 1: 10}
        assert read_values(broker, sink, [0, 1], committed=True) == values_of(outputs)
        assert read_values(broker, sink, [0, 1], committed=False) == values_of(outputs * 2)
        # The member itself sees the offsets the transaction committed.
        got = consumer.committed([ck.TopicPartition(source, p) for p in (0, 1)], timeout=WAIT)
        assert sorted((tp.partition, tp.offset) for tp in got) == [(0, 10), (1, 10)]
    finally:
        close_consumer(consumer)


def test_second_producer_with_the_same_id_fences_the_first(broker: BrokerProcess) -> None:
    ck = confluent()
    topic = "txn-cf-fence"
    create_topic(broker, topic, 2)
    zombie = txn_producer(broker, "cf-fence")
    zombie.begin_transaction()
    unfinished = spread("zombie", 6, 2)
    produce_values(zombie, topic, unfinished)

    # The new instance's InitProducerId aborts the zombie's open transaction and bumps
    # the epoch; it returns once that abort is complete.
    successor = txn_producer(broker, "cf-fence")
    with pytest.raises(ck.KafkaException) as raised:
        produce_values(zombie, topic, spread("late", 2, 2), flush=False)
        zombie.commit_transaction(WAIT)
    assert is_fenced(raised.value), raised.value

    successor.begin_transaction()
    fresh = spread("successor", 4, 2)
    produce_values(successor, topic, fresh)
    successor.commit_transaction(WAIT)

    assert read_values(broker, topic, [0, 1], committed=True) == values_of(fresh)
    everything = read_values(broker, topic, [0, 1], committed=False)
    assert not any(v.startswith(b"late") for v in everything), everything
    assert everything == values_of(unfinished + fresh)


def test_transaction_left_open_past_its_timeout_is_aborted(broker: BrokerProcess) -> None:
    ck = confluent()
    topic = "txn-cf-timeout"
    create_topic(broker, topic, 1)
    producer = txn_producer(
        broker, "cf-timeout", **{"transaction.timeout.ms": SHORT_TXN_TIMEOUT_MS}
    )
    # Before the transaction's first request: the broker's clock for it starts there.
    began = time.monotonic()
    producer.begin_transaction()
    stale = spread("stale", 5, 1)
    produce_values(producer, topic, stale)
    lso, hw = latest_offsets(broker, topic, 0)
    assert (lso, hw) == (0, 5)

    # The broker aborts it (an ABORT marker: the LSO moves to the end) once it is older
    # than its timeout; not before.
    def released() -> bool:
        lso, hw = latest_offsets(broker, topic, 0)
        return lso == hw == 6

    wait_until(released, "the broker to abort the expired transaction", interval=0.2)
    assert time.monotonic() - began > SHORT_TXN_TIMEOUT_MS / 1000 - 0.5

    with pytest.raises(ck.KafkaException) as raised:
        producer.commit_transaction(WAIT)
    assert is_fenced(raised.value) or raised.value.args[0].txn_requires_abort(), raised.value
    assert read_values(broker, topic, [0], committed=True) == []
    assert read_values(broker, topic, [0], committed=False) == values_of(stale)

    # The id is usable again by a new producer.
    again = txn_producer(broker, "cf-timeout")
    again.begin_transaction()
    produce_values(again, topic, [(0, b"after-timeout")])
    again.commit_transaction(WAIT)
    assert read_values(broker, topic, [0], committed=True) == [b"after-timeout"]


def test_open_transaction_holds_read_committed_consumers_at_the_lso(
    broker: BrokerProcess,
) -> None:
    ck = confluent()
    topic = "txn-cf-lso"
    create_topic(broker, topic, 1)
    plain = plain_producer(broker)
    before, after = spread("before", 3, 1), spread("after", 2, 1)
    produce_values(plain, topic, before)
    producer = txn_producer(broker, "cf-lso")
    producer.begin_transaction()
    pending = spread("pending", 4, 1)
    produce_values(producer, topic, pending)
    produce_values(plain, topic, after)  # not transactional, but behind the open one

    assert latest_offsets(broker, topic, 0) == (3, 9)
    assert read_values(broker, topic, [0], committed=False) == values_of(before + pending + after)
    assert read_values(broker, topic, [0], committed=True) == values_of(before)

    # A read_committed consumer waiting at the LSO gets the rest when the commit lands.
    tail = ck.Consumer(
        conf(
            broker,
            **{
                "group.id": "txn-cf-lso-tail",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 500,
            },
        )
    )
    try:
        tail.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        seen: list[bytes] = []

        def take(count: int) -> bool:
            for m in tail.consume(num_messages=100, timeout=0.2):
                assert m.error() is None, m.error()
                seen.append(m.value())
            return len(seen) >= count

        wait_until(lambda: take(3), "the records before the open transaction")
        time.sleep(0.5)
        take(0)
        assert sorted(seen) == values_of(before), "read past the LSO"
        producer.commit_transaction(WAIT)
        wait_until(lambda: take(9), "the committed transaction and the records after it")
        assert sorted(seen) == values_of(before + pending + after)
    finally:
        close_consumer(tail)
    assert latest_offsets(broker, topic, 0) == (10, 10)


def test_interleaved_transactions_of_two_producers(broker: BrokerProcess) -> None:
    """Batches of an aborted and a committed transaction alternate in one partition: the
    read_committed reader must drop exactly the aborted producer's records (the fetch's
    aborted-transactions list names that producer from its first offset on)."""
    topic = "txn-cf-interleaved"
    create_topic(broker, topic, 1)
    doomed, kept = txn_producer(broker, "cf-doomed"), txn_producer(broker, "cf-kept")
    doomed.begin_transaction()
    kept.begin_transaction()
    for round_ in range(4):
        produce_values(doomed, topic, spread(f"doomed{round_}", 3, 1))
        produce_values(kept, topic, spread(f"kept{round_}", 2, 1))
    plain = plain_producer(broker)
    produce_values(plain, topic, [(0, b"plain-middle")])
    doomed.abort_transaction(WAIT)
    produce_values(kept, topic, [(0, b"kept-last")])
    kept.commit_transaction(WAIT)

    want = [v for r in range(4) for _, v in spread(f"kept{r}", 2, 1)]
    want += [b"plain-middle", b"kept-last"]
    assert read_values(broker, topic, [0], committed=True) == sorted(want)
    assert len(read_values(broker, topic, [0], committed=False)) == len(want) + 12
    assert kp_read_committed(broker, topic, [0]) == sorted(want)


# -- kafka-python ----------------------------------------------------------------------


def kafka_python() -> Any:
    return pytest.importorskip("kafka")


def kp_read_committed(broker: BrokerProcess, topic: str, partitions: list[int]) -> list[bytes]:
    """Everything kafka-python's read_committed consumer returns up to each partition's
    LSO (its position passes the markers too)."""
    kafka = kafka_python()
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.kafka_bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        consumer_timeout_ms=1000,
    )
    try:
        tps = [kafka.TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = {tp: latest_offsets(broker, topic, tp.partition)[0] for tp in tps}
        out: list[bytes] = []

        def at_end() -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(r.value for r in records)
            return all(consumer.position(tp) >= end for tp, end in ends.items())

        wait_until(at_end, f"kafka-python to reach the LSO of {topic}")
        return sorted(out)
    finally:
        consumer.close()


def test_kafka_python_transactions(broker: BrokerProcess) -> None:
    kafka = kafka_python()
    from kafka.structs import OffsetAndMetadata

    topic, source, group = "txn-kp", "txn-kp-in", "txn-kp-group"
    create_topic(broker, topic, 2)
    create_topic(broker, source, 1)
    produce_values(plain_producer(broker), source, spread("kp-in", 10, 1))
    producer = kafka.KafkaProducer(
        bootstrap_servers=broker.kafka_bootstrap, transactional_id="kp-txn", max_block_ms=30000
    )
    try:
        producer.init_transactions()
        tp = kafka.TopicPartition(source, 0)

        def transaction(values: list[tuple[int, bytes]], offset: int, commit: bool) -> None:
            producer.begin_transaction()
            for partition, value in values:
                producer.send(topic, value=value, partition=partition)
            producer.flush(WAIT)
            producer.send_offsets_to_transaction({tp: OffsetAndMetadata(offset, "", -1)}, group)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()

        first, aborted = spread("kp-c1", 6, 2), spread("kp-a2", 6, 2)
        transaction(first, 4, commit=True)
        assert committed_offsets(broker, group, source, [0]) == {0: 4}
        transaction(aborted, 7, commit=False)
        assert committed_offsets(broker, group, source, [0]) == {0: 4}
        last = spread("kp-c3", 4, 2)
        transaction(last, 10, commit=True)
        assert committed_offsets(broker, group, source, [0]) == {0: 10}
    finally:
        producer.close(timeout=WAIT)

    assert kp_read_committed(broker, topic, [0, 1]) == values_of(first + last)
    assert read_values(broker, topic, [0, 1], committed=False) == values_of(first + aborted + last)


# -- aiokafka --------------------------------------------------------------------------


def aiokafka() -> Any:
    return pytest.importorskip("aiokafka")


async def _aiokafka_scenario(bootstrap: str, topic: str, source: str, group: str) -> list[bytes]:
    """Commit, abort by exception, commit with offsets; then what a read_committed
    aiokafka consumer reads."""
    aio = aiokafka()
    from aiokafka.structs import TopicPartition

    producer = aio.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-txn")
    await producer.start()
    try:
        async with producer.transaction():
            for partition, value in spread("aio-c1", 6, 2):
                await producer.send_and_wait(topic, value, partition=partition)

        class Rollback(Exception):
            pass

        with pytest.raises(Rollback):
            async with producer.transaction():
                for partition, value in spread("aio-a2", 6, 2):
                    await producer.send_and_wait(topic, value, partition=partition)
                await producer.send_offsets_to_transaction({TopicPartition(source, 0): 3}, group)
                raise Rollback

        async with producer.transaction():
            # Queued, not awaited one by one: the commit waits for them to be delivered.
            sent = [
                await producer.send(topic, value, partition=partition)
                for partition, value in spread("aio-c3", 4, 2)
            ]
            await producer.send_offsets_to_transaction({TopicPartition(source, 0): 8}, group)
        assert all(future.done() for future in sent)
    finally:
        await producer.stop()

    consumer = aio.AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        out: list[bytes] = []
        deadline = time.monotonic() + WAIT
        while any([await consumer.position(tp) < ends[tp] for tp in tps]):
            assert time.monotonic() < deadline, "aiokafka never reached the end"
            got = await consumer.getmany(timeout_ms=200)
            out.extend(r.value for records in got.values() for r in records)
        return sorted(out)
    finally:
        await consumer.stop()


def test_aiokafka_transactions(broker: BrokerProcess) -> None:
    aiokafka()
    topic, source, group = "txn-aio", "txn-aio-in", "txn-aio-group"
    create_topic(broker, topic, 2)
    create_topic(broker, source, 1)
    produce_values(plain_producer(broker), source, spread("aio-in", 10, 1))
    got = asyncio.run(
        asyncio.wait_for(_aiokafka_scenario(broker.kafka_bootstrap, topic, source, group), 4 * WAIT)
    )
    first, aborted, last = spread("aio-c1", 6, 2), spread("aio-a2", 6, 2), spread("aio-c3", 4, 2)
    assert got == values_of(first + last)
    assert read_values(broker, topic, [0, 1], committed=True) == values_of(first + last)
    assert read_values(broker, topic, [0, 1], committed=False) == values_of(first + aborted + last)
    assert committed_offsets(broker, group, source, [0]) == {0: 8}
