"""brokerd's throughput rows: produce and consume through the native client,
confluent-kafka, kcat and Kafka's own perf tests (ProducerPerformance and
ConsumerPerformance, bench/kafka_tools.py), at each record size, with ``--fsync always``
and ``--fsync never``.

Every produce row is checked afterwards: the partition's end offset must equal the number
of records sent, or the row fails instead of reporting a figure. Consume rows read what
the ``--fsync always`` broker's produce rows wrote (the page cache holds it: these rows
measure the broker and client, not the disk). The Kafka-protocol clients' functions take
any Kafka-protocol broker (``Target``): Apache Kafka's rows (bench/kafka_runs.py) run the
very same ones.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from bench import cost, kafka_tools
from bench.common import (
    NATIVE_BATCH,
    NATIVE_DEPTH,
    TOOL_TIMEOUT,
    Results,
    Row,
    scratch,
    tool,
    value,
)
from brokerd.native import client_codec, messages

from tests.brokerproc import BrokerProcess

FSYNC_MODES = ("always", "never")
CONSUME_DEADLINE = 300.0
# librdkafka's local queue; records beyond it wait in produce() (BufferError) for reports.
QUEUE_MESSAGES = 2_000_000

NATIVE_PRODUCE = f"native produce, {NATIVE_BATCH:,} values/request, {NATIVE_DEPTH} in flight"
NATIVE_CONSUME = "native consume (type-2 fetch, 1 MiB responses)"
CK_PRODUCE = "confluent-kafka produce, acks=all, linger.ms=5"
CK_CONSUME = "confluent-kafka consume (assigned partition, from offset 0)"
KCAT_PRODUCE = "kcat -P produce from a file, acks=all"
KCAT_CONSUME = "kcat -C -e -q consume, best of 3 reads"


class KafkaBroker(Protocol):
    """A broker other than brokerd that speaks Kafka's protocol (Apache Kafka's peer)."""

    @property
    def kafka_bootstrap(self) -> str: ...

    def end_offset(self, topic: str, partition: int) -> int: ...


Target = BrokerProcess | KafkaBroker
Produce = Callable[[Any, str, int, int], float]
Consume = Callable[[Any, str, int], float]


def end_offset(proc: Target, topic: str, partition: int = 0) -> int:
    """The partition's end offset: brokerd's through its native client."""
    if isinstance(proc, BrokerProcess):
        with proc.client() as client:
            return client.list_offsets(topic, partition)[1]
    return proc.end_offset(topic, partition)


def check_end(proc: Target, topic: str, expected: int, *, partition: int = 0) -> None:
    end = end_offset(proc, topic, partition)
    if end != expected:
        raise RuntimeError(
            f"{topic}/{partition}: end offset {end} after producing {expected} records"
        )


def native_produce(proc: BrokerProcess, topic: str, records: int, size: int) -> float:
    """Records/s producing ``records`` values of ``size`` bytes, pipelined requests."""
    frame = client_codec.encode_produce(topic, 0, [value(size)] * NATIVE_BATCH)
    requests = records // NATIVE_BATCH
    with proc.client(timeout=60) as client:
        start = time.perf_counter()
        sent = 0
        while sent < requests:
            n = min(NATIVE_DEPTH, requests - sent)
            for r in client.call_many([(messages.RequestType.PRODUCE, frame)] * n):
                if not isinstance(r, messages.ProduceResponse):
                    raise RuntimeError(f"native produce answered {r!r}")
            sent += n
        seconds = time.perf_counter() - start
    check_end(proc, topic, requests * NATIVE_BATCH)
    return requests * NATIVE_BATCH / seconds


def native_consume(proc: BrokerProcess, topic: str, records: int) -> float:
    with proc.client(timeout=60) as client:
        start = time.perf_counter()
        offset = 0
        while offset < records:
            values = client.fetch(topic, 0, offset)
            if not values:
                break
            offset += len(values)
        seconds = time.perf_counter() - start
    if offset != records:
        raise RuntimeError(f"native consume read {offset} of {records} records")
    return records / seconds


def produce_all(producer: Any, topic: str, payload: bytes, count: int, **kw: Any) -> None:
    """Queue ``count`` records, serving delivery reports whenever the local queue is full."""
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, **kw)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)


def ck_produce(proc: Target, topic: str, records: int, size: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": proc.kafka_bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "queue.buffering.max.messages": QUEUE_MESSAGES,
    })
    start = time.perf_counter()
    produce_all(producer, topic, value(size), records)
    if producer.flush(TOOL_TIMEOUT) != 0:
        raise RuntimeError("confluent-kafka: records still undelivered after flush")
    seconds = time.perf_counter() - start
    check_end(proc, topic, records)
    return records / seconds


def consume_partition(
    consumer: Any, topic: str, records: int, timeout: float
) -> tuple[int, float]:
    """Read partition 0 of ``topic`` from offset 0 with a confluent-kafka ``consumer``
    until ``records`` arrived or ``timeout`` passed; ``(records read, seconds)``. Closes
    the consumer."""
    from confluent_kafka import TopicPartition

    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = 0
        start = time.perf_counter()
        deadline = start + timeout
        while got < records and time.perf_counter() < deadline:
            # Never more than are left: consume() waits for its count or its timeout.
            batch = consumer.consume(min(10000, records - got), 1.0)
            got += sum(1 for m in batch if m.error() is None)
        return got, time.perf_counter() - start
    finally:
        consumer.close()


def ck_consume(proc: Target, topic: str, records: int) -> float:
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": proc.kafka_bootstrap,
        "group.id": f"bench-{topic}",
        "enable.auto.commit": False,
    })
    got, seconds = consume_partition(consumer, topic, records, CONSUME_DEADLINE)
    if got != records:
        raise RuntimeError(f"confluent-kafka consumed {got} of {records} records")
    return records / seconds


def kcat_produce(proc: Target, topic: str, records: int, size: int) -> float:
    kcat = tool("kcat")
    assert kcat is not None
    with scratch("bench-kcat-") as tmp:
        path = tmp / "values.txt"
        path.write_bytes((value(size) + b"\n") * records)
        command = [kcat, "-P", "-b", proc.kafka_bootstrap, "-t", topic, "-p", "0",
                   "-X", "acks=all", "-l", str(path)]
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, timeout=TOOL_TIMEOUT, check=True)
        seconds = time.perf_counter() - start
    check_end(proc, topic, records)
    return records / seconds


#: Whole kcat reads timed per consume row (each a new process: start-up, metadata,
#: connection and the read); the fastest stands, as redis-benchmark's figure is its
#: steady rate over many requests rather than one cold request.
KCAT_READS = 3


def kcat_consume(proc: Target, topic: str, records: int) -> float:
    kcat = tool("kcat")
    assert kcat is not None
    command = [kcat, "-C", "-b", proc.kafka_bootstrap, "-t", topic, "-p", "0",
               "-o", "beginning", "-e", "-q", "-f", "\\n"]
    best = float("inf")
    for _ in range(KCAT_READS):
        start = time.perf_counter()
        out = subprocess.run(command, capture_output=True, timeout=TOOL_TIMEOUT,
                             check=True).stdout
        best = min(best, time.perf_counter() - start)
        got = out.count(b"\n")
        if got != records:
            raise RuntimeError(f"kcat consumed {got} of {records} records")
    return records / best


def perf_produce(proc: Target, topic: str, records: int, size: int) -> float:
    figure = kafka_tools.producer_perf(proc.kafka_bootstrap, topic, records, size)
    check_end(proc, topic, records)
    return figure


def perf_consume(proc: Target, topic: str, records: int) -> float:
    return kafka_tools.consumer_perf(proc.kafka_bootstrap, topic, records)


def kafka_clients(jvm_missing: str) -> list[tuple[str, str, str, Produce, Consume, str]]:
    """The Kafka-protocol clients of the throughput rows: (topic prefix, produce row,
    consume row, produce, consume, why the client cannot run or "")."""
    return [
        ("ck", CK_PRODUCE, CK_CONSUME, ck_produce, ck_consume,
         "" if _has_confluent() else "confluent-kafka missing"),
        ("kcat", KCAT_PRODUCE, KCAT_CONSUME, kcat_produce, kcat_consume,
         "" if tool("kcat") is not None else "kcat missing"),
        ("perf", kafka_tools.PERF_PRODUCE, kafka_tools.PERF_CONSUME, perf_produce,
         perf_consume, jvm_missing),
    ]


def throughput(results: Results, brokers: dict[str, BrokerProcess], size: int,
               records: int, *, jvm_missing: str) -> None:
    """Every brokerd throughput row for ``size``-byte records (``brokers`` by fsync mode);
    ``jvm_missing`` says why Kafka's perf tools cannot run ("" when they can)."""
    section = f"throughput {size} B"
    note = f"{records:,} records"
    clients: list[tuple[str, str, str, Produce, Consume, str]] = [
        ("native", NATIVE_PRODUCE, NATIVE_CONSUME, native_produce, native_consume, ""),
        *kafka_clients(jvm_missing),
    ]
    for name, produce_what, consume_what, produce, consume, missing in clients:
        for mode in FSYNC_MODES:
            broker = brokers[mode]
            figure = cost.costed(
                results, broker_pid(broker), system="brokerd", size=size, what=produce_what,
                durability=f"fsync {mode}", served=records, missing=missing,
                run=None if missing else partial(produce, broker, f"{name}-{size}", records,
                                                 size))
            results.add(Row(section, "brokerd", produce_what, f"fsync {mode}", figure, "rec/s",
                            missing or note, size))
        always = brokers["always"]
        figure = cost.costed(
            results, broker_pid(always), system="brokerd", size=size, what=consume_what,
            durability="read (page cache)", served=records * reads_per_consume(consume),
            missing=missing,
            run=None if missing else partial(consume, always, f"{name}-{size}", records))
        results.add(Row(section, "brokerd", consume_what, "read (page cache)", figure, "rec/s",
                        missing or note, size))


def broker_pid(proc: BrokerProcess) -> int | None:
    return None if proc.proc is None else proc.proc.pid


def reads_per_consume(consume: Consume) -> int:
    """How many times a consume row reads its partition (kcat: the best of several)."""
    return KCAT_READS if consume is kcat_consume else 1


def _has_confluent() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True
