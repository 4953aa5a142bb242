"""Cross-protocol reads against a real ``twistd broker``, both ways, with each of the four
Kafka clients:

- what a Kafka client produces, with every codec, is read through the native protocol as
  plain values at the right offsets (both native fetch types);
- what the native protocol produces is read by the Kafka client, exactly;
- a partition where both protocols wrote, compressed Kafka batches between native ones,
  reads the same on both sides.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import (
    CODECS,
    WAIT,
    compressible_values,
    kcat_consume,
    kcat_produce,
    module_broker,
    native_records,
    need_kcat,
    small_values,
    stored_codecs,
    wait_until,
)

pytestmark = [pytest.mark.clients, pytest.mark.broker]

#: One partition's records as ``(offset, value)``.
Records = list[tuple[int, bytes]]
Produce = Callable[[BrokerProcess, str, Sequence[bytes], str], None]
Consume = Callable[[BrokerProcess, str], Records]


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "cross")


# -- each client's produce (partition 0, with a codec) and read-to-the-end --------------


def _kcat_produce(broker: BrokerProcess, topic: str, values: Sequence[bytes], codec: str) -> None:
    kcat_produce(broker, topic, 0, values, "-z", codec)


def _kcat_consume(broker: BrokerProcess, topic: str) -> Records:
    return [(o, v) for _, o, v in kcat_consume(broker, topic, 0, "beginning")]


def _confluent_produce(
    broker: BrokerProcess, topic: str, values: Sequence[bytes], codec: str
) -> None:
    ck = pytest.importorskip("confluent_kafka")
    producer = ck.Producer(
        {"bootstrap.servers": broker.kafka_bootstrap, "compression.type": codec,
         "linger.ms": 20}
    )
    failed: list[Any] = []
    for v in values:
        producer.produce(topic, v, key=b"key", headers=[("h", b"1")], partition=0,
                         on_delivery=lambda err, _m: err and failed.append(err))
    assert producer.flush(WAIT) == 0
    assert failed == []


def _confluent_consume(broker: BrokerProcess, topic: str) -> Records:
    ck = pytest.importorskip("confluent_kafka")
    # The end is reported after an empty fetch, held for fetch.wait.max.ms: keep it short.
    c = ck.Consumer({"bootstrap.servers": broker.kafka_bootstrap, "group.id": "cross",
                     "enable.auto.commit": False, "enable.partition.eof": True,
                     "fetch.wait.max.ms": 100})
    try:
        c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        out: Records = []
        done = []

        def at_end() -> bool:
            for m in c.consume(num_messages=500, timeout=0.1):
                if m.error() is None:
                    out.append((m.offset(), m.value()))
                elif m.error().code() == ck.KafkaError._PARTITION_EOF:
                    done.append(m.offset())
                else:
                    raise AssertionError(m.error())
            return bool(done)

        wait_until(at_end, f"the end of {topic}", interval=0)
        return out
    finally:
        c.close()


def _kafka_python_produce(
    broker: BrokerProcess, topic: str, values: Sequence[bytes], codec: str
) -> None:
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(
        bootstrap_servers=broker.kafka_bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=20,
    )
    try:
        futures = [producer.send(topic, v, key=b"key", headers=[("h", b"1")], partition=0)
                   for v in values]
        for f in futures:
            f.get(WAIT)
    finally:
        producer.close(WAIT)


def _kafka_python_consume(broker: BrokerProcess, topic: str) -> Records:
    kafka = pytest.importorskip("kafka")
    c = kafka.KafkaConsumer(bootstrap_servers=broker.kafka_bootstrap, group_id=None)
    try:
        tp = kafka.TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        out: Records = []

        def at_end() -> bool:
            for records in c.poll(timeout_ms=100).values():
                out.extend((r.offset, r.value) for r in records)
            return c.position(tp) >= end

        wait_until(at_end, f"the end of {topic}", interval=0)
        return out
    finally:
        c.close()


def _aiokafka_produce(
    broker: BrokerProcess, topic: str, values: Sequence[bytes], codec: str
) -> None:
    aiokafka = pytest.importorskip("aiokafka")

    async def main() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=broker.kafka_bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=20,
        )
        await producer.start()
        try:
            futures = [await producer.send(topic, v, key=b"key", headers=[("h", b"1")],
                                           partition=0) for v in values]
            for f in futures:
                await asyncio.wait_for(f, WAIT)
        finally:
            await producer.stop()

    asyncio.run(main())


def _aiokafka_consume(broker: BrokerProcess, topic: str) -> Records:
    aiokafka = pytest.importorskip("aiokafka")

    async def main() -> Records:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.kafka_bootstrap)
        await c.start()
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            end = (await c.end_offsets([tp]))[tp]
            out: Records = []
            deadline = asyncio.get_running_loop().time() + WAIT
            while await c.position(tp) < end:
                assert asyncio.get_running_loop().time() < deadline, f"stuck reading {topic}"
                for records in (await c.getmany(tp, timeout_ms=100)).values():
                    out.extend((r.offset, r.value) for r in records)
            return out
        finally:
            await c.stop()

    return asyncio.run(main())


CLIENTS: dict[str, tuple[Produce, Consume]] = {
    "kcat": (_kcat_produce, _kcat_consume),
    "confluent": (_confluent_produce, _confluent_consume),
    "kafka-python": (_kafka_python_produce, _kafka_python_consume),
    "aiokafka": (_aiokafka_produce, _aiokafka_consume),
}


@pytest.fixture(params=sorted(CLIENTS))
def client(request: pytest.FixtureRequest) -> tuple[str, Produce, Consume]:
    name = request.param
    if name == "kcat":
        need_kcat()
    produce, consume = CLIENTS[name]
    return name, produce, consume


# -- the tests ---------------------------------------------------------------------


def test_kafka_produced_read_natively(
    kbroker: BrokerProcess, client: tuple[str, Produce, Consume]
) -> None:
    name, produce, _ = client
    topic = f"to-native-{name}"
    want: list[bytes] = []
    for codec in CODECS:
        values = compressible_values(f"{name}-{codec}", 3)
        values += small_values(f"{name}-{codec}-small", 2)
        produce(kbroker, topic, values, codec)
        want += values
    # Every codec really reached the log (a fallback to none would not test anything).
    assert stored_codecs(kbroker, topic, 0) == set(CODECS)
    # LongPollFetch, which reports offsets: every value once, at its offset.
    assert native_records(kbroker, topic, 0) == list(enumerate(want))
    # The pinned Fetch (values only), from the start and from the middle of a batch.
    with kbroker.client() as native:
        got: list[bytes] = []
        while len(got) < len(want):
            chunk = native.fetch(topic, 0, len(got))
            assert chunk, f"native fetch stalled at {len(got)}"
            got += chunk
        assert got == want
        assert native.fetch(topic, 0, 6) == want[6:]  # all fit in one answer (< 1 MiB)


def test_native_produced_read_by_kafka_client(
    kbroker: BrokerProcess, client: tuple[str, Produce, Consume]
) -> None:
    name, _, consume = client
    topic = f"from-native-{name}"
    values = [*small_values("native", 5), b"x" * 100_000, *small_values("more", 3)]
    if name != "kcat":
        values.append(b"")  # kcat reads lines; the others see an empty value
    with kbroker.client() as native:
        native.create_topic(topic, 1)
        assert native.produce(topic, 0, values[:5]) == 0
        assert native.produce(topic, 0, values[5:6]) == 5
        assert native.produce(topic, 0, values[6:]) == 6
    assert consume(kbroker, topic) == list(enumerate(values))


def test_mixed_partition_reads_the_same_both_ways(
    kbroker: BrokerProcess, client: tuple[str, Produce, Consume]
) -> None:
    name, produce, consume = client
    topic = f"mixed-{name}"
    want: list[bytes] = []
    with kbroker.client() as native:
        native.create_topic(topic, 1)
        for i, codec in enumerate(("gzip", "zstd", "lz4", "snappy")):
            native_values = small_values(f"native{i}", 2)
            assert native.produce(topic, 0, native_values) == len(want)
            want += native_values
            kafka_values = compressible_values(f"{name}{i}", 2)
            produce(kbroker, topic, kafka_values, codec)
            want += kafka_values
    assert stored_codecs(kbroker, topic, 0) == {"none", "gzip", "zstd", "lz4", "snappy"}
    assert native_records(kbroker, topic, 0) == list(enumerate(want))
    assert consume(kbroker, topic) == list(enumerate(want))
