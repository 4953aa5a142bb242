"""Shared helpers of the transaction tests (real clients, the crash test, the bench).

Everything talks to a real ``twistd broker`` (:mod:`tests.brokerproc`) through unmodified
clients: a confluent-kafka transactional producer, a reader that returns a topic's records
as a read_committed or a read_uncommitted consumer sees them, the last stable offset and
high watermark as ListOffsets reports them (raw requests, so the isolation level is the
test's choice and not the client's), and the Kafka error codes a fenced producer may see.
Nothing is mocked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import WAIT, RawKafka, Rec, wait_until

#: ListOffsets' timestamp for "the latest offset" (HW, or the LSO under read_committed).
LATEST = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
#: What a producer whose epoch is older than the transactional id's may be told:
#: PRODUCER_FENCED (90), INVALID_PRODUCER_EPOCH (47, older request versions), and
#: librdkafka's own "_FENCED" (-144) that it raises for either.
FENCED_CODES = frozenset({90, 47, -144})


def confluent() -> Any:
    return pytest.importorskip("confluent_kafka")


def conf(broker: BrokerProcess, **extra: Any) -> dict[str, Any]:
    """librdkafka settings every test client shares: quick metadata refresh and
    connection set-up on loopback."""
    return {
        "bootstrap.servers": broker.kafka_bootstrap,
        "topic.metadata.refresh.interval.ms": 1000,
        "socket.connection.setup.timeout.ms": 5000,
        **extra,
    }


def txn_producer(broker: BrokerProcess, transactional_id: str, **extra: Any) -> Any:
    """A confluent-kafka producer with ``transactional_id``, its transactions initialised
    (InitProducerId through the transaction coordinator)."""
    ck = confluent()
    producer = ck.Producer(conf(broker, **{"transactional.id": transactional_id, **extra}))
    producer.init_transactions(WAIT)
    return producer


def produce_values(
    producer: Any,
    topic: str,
    values: Iterable[tuple[int, bytes]],
    *,
    flush: bool = True,
    keyed: bool = False,
) -> None:
    """Produce ``(partition, value)`` pairs (``keyed``: with the value as the key too);
    with ``flush``, wait until every one is acknowledged (inside a transaction that makes
    them stored but not yet committed)."""
    failures: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    for partition, value in values:
        key = value if keyed else None
        producer.produce(topic, value=value, key=key, partition=partition, on_delivery=delivered)
    if flush:
        assert producer.flush(WAIT) == 0, "records still unsent"
        assert not failures, failures


def spread(tag: str, count: int, partitions: int) -> list[tuple[int, bytes]]:
    """``count`` distinct values ``tag-NNNN`` round-robin over ``partitions``."""
    return [(i % partitions, f"{tag}-{i:04d}".encode()) for i in range(count)]


def values_of(pairs: Iterable[tuple[int, bytes]]) -> list[bytes]:
    return sorted(v for _, v in pairs)


def read_topic(
    broker: BrokerProcess, topic: str, partitions: Sequence[int], *, committed: bool
) -> list[Rec]:
    """Every record of ``partitions`` from the log start to the end a consumer of that
    isolation level sees (the LSO under read_committed, the high watermark otherwise),
    read with confluent-kafka outside any group. Control records never reach the
    application, so only data records are returned."""
    ck = confluent()
    consumer = ck.Consumer(
        conf(
            broker,
            **{
                "group.id": "txn-reader",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 100,
                "isolation.level": "read_committed" if committed else "read_uncommitted",
            },
        )
    )
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
        out: list[Rec] = []
        at_end: set[int] = set()

        def done() -> bool:
            for m in consumer.consume(num_messages=1000, timeout=0.1):
                err = m.error()
                if err is None:
                    out.append((m.partition(), m.offset(), m.value()))
                    at_end.discard(m.partition())
                elif err.code() == ck.KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                else:
                    raise AssertionError(f"consumer error: {err}")
            return at_end >= set(partitions)

        wait_until(done, f"the end of {topic} {list(partitions)}", interval=0)
        return out
    finally:
        consumer.close()


def read_values(
    broker: BrokerProcess, topic: str, partitions: Sequence[int], *, committed: bool
) -> list[bytes]:
    return sorted(v for _, _, v in read_topic(broker, topic, partitions, committed=committed))


def latest_offsets(broker: BrokerProcess, topic: str, partition: int) -> tuple[int, int]:
    """``(last stable offset, high watermark)`` of one partition, as ListOffsets v2
    answers for isolation level 1 and 0."""
    out = []
    with RawKafka(broker) as conn:
        for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
            request = apis.ListOffsetsRequest(
                isolation_level=isolation,
                topics=(
                    apis.ListOffsetsTopic(
                        name=topic,
                        partitions=(
                            apis.ListOffsetsPartition(partition_index=partition, timestamp=LATEST),
                        ),
                    ),
                ),
            )
            response = conn.call(ApiKey.LIST_OFFSETS, 2, request)
            (answer,) = response.topics[0].partitions
            assert answer.error_code == 0, answer
            out.append(answer.offset)
    return out[0], out[1]


def error_code(exc: BaseException) -> int:
    """The Kafka error code of a confluent-kafka ``KafkaException``."""
    err = exc.args[0] if exc.args else None
    code: int = err.code() if err is not None and hasattr(err, "code") else -1
    return code


def is_fenced(exc: BaseException) -> bool:
    """Whether a confluent-kafka exception says the producer was fenced: a fenced code,
    or librdkafka's fatal error (a fenced transactional producer is unusable)."""
    err = exc.args[0] if exc.args else None
    if err is None or not hasattr(err, "code"):
        return False
    return err.code() in FENCED_CODES or bool(err.fatal())
