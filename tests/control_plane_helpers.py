"""Shared helpers of the control-plane tests (Faust, kafkajs, the Python AdminClients,
compaction end to end).

The one place that says which broker options make retention and the log cleaner act
within seconds (:data:`FAST_CLEANUP_OPTIONS`), topic configs
that make a compacted topic cleanable at once, a confluent-kafka producer of keyed records
and tombstones, and a reader that returns every stored ``(offset, key, value)`` of a
partition from its log start. Everything talks to a real ``twistd broker``
(:mod:`tests.brokerproc`); nothing is mocked.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import WAIT

#: Broker options (flag, value) that make time-based log maintenance happen within seconds
#: instead of minutes: tiny default retention, segments that roll after half a second, and
#: frequent retention passes (default every 300 s) and cleaner passes (default 15 s).
FAST_CLEANUP_OPTIONS: tuple[tuple[str, str], ...] = (
    ("--retention-ms", "2000"),
    ("--segment-ms", "500"),
    ("--log-retention-check-interval-ms", "500"),
    ("--cleaner-backoff-ms", "200"),
)

#: Topic configs that make every closed segment of a compacted topic cleanable at once.
FAST_COMPACT_CONFIGS: dict[str, str] = {
    "cleanup.policy": "compact",
    "segment.ms": "300",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "100",
}


def fast_cleanup_args() -> tuple[str, ...]:
    """:data:`FAST_CLEANUP_OPTIONS` as command-line arguments."""
    return tuple(f"{flag}={value}" for flag, value in FAST_CLEANUP_OPTIONS)


def fast_broker(data_dir: Path, *extra: str) -> BrokerProcess:
    """A started broker with :func:`fast_cleanup_args` (and ``extra``)."""
    return BrokerProcess(data_dir, args=(*fast_cleanup_args(), *extra)).start()


# -- confluent-kafka -------------------------------------------------------------------


def confluent() -> Any:
    return pytest.importorskip("confluent_kafka")


def admin(broker: BrokerProcess) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.kafka_bootstrap})


def kafka_error(exc: BaseException) -> Any:
    """The ``KafkaError`` inside a confluent-kafka ``KafkaException`` (or the exception)."""
    return exc.args[0] if exc.args else exc


def create_topic(
    broker: BrokerProcess, topic: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    """CreateTopics through confluent-kafka's AdminClient; fail with the broker's error."""
    from confluent_kafka.admin import NewTopic

    client = admin(broker)  # the futures fail if the client is collected before them
    futures = client.create_topics(
        [NewTopic(topic, partitions, 1, config=dict(config or {}))], operation_timeout=10
    )
    try:
        futures[topic].result(WAIT)
    except Exception as e:
        err = kafka_error(e)
        raise AssertionError(f"CreateTopics {topic} {config}: {err!r}") from e


#: A keyed record as produced: value None is a tombstone.
KeyValue = tuple[bytes, bytes | None]


def produce_keyed(
    broker: BrokerProcess, topic: str, records: Iterable[KeyValue], partition: int = 0
) -> None:
    """Produce keyed records (None values are tombstones), acks=all, and wait for each."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": broker.kafka_bootstrap, "linger.ms": 5, "acks": "all"}
    )
    failures: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    for count, (key, value) in enumerate(records, 1):
        producer.produce(topic, value=value, key=key, partition=partition, on_delivery=delivered)
        if count % 500 == 0:
            producer.poll(0)  # serve delivery reports before the local queue fills
    assert producer.flush(WAIT) == 0, "records still unsent"
    assert not failures, failures


def read_partition(
    broker: BrokerProcess, topic: str, partition: int = 0
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of the partition from its log start to its end, as
    ``(offset, key, value)``, read with confluent-kafka (no group)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.kafka_bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), WAIT)
        out: list[tuple[int, bytes | None, bytes | None]] = []
        if high <= 0:
            return out
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out  # at the high watermark
                raise AssertionError(f"reading {topic}-{partition}: {msg.error()!r}")
            out.append((msg.offset(), msg.key(), msg.value()))
        raise AssertionError(f"timed out reading {topic}-{partition} up to {high}: {out[-3:]}")
    finally:
        consumer.close()


def latest_per_key(records: Sequence[KeyValue]) -> dict[bytes, bytes]:
    """What a compacted topic must keep: the latest value of every key not tombstoned."""
    latest: dict[bytes, bytes | None] = {}
    for key, value in records:
        latest[key] = value
    return {k: v for k, v in latest.items() if v is not None}


def compaction_verdict(
    stored: Sequence[tuple[int, bytes | None, bytes | None]], produced: Sequence[KeyValue]
) -> list[str]:
    """What is wrong with ``stored`` as the compacted form of ``produced`` (empty: right).

    Right means: offsets strictly increase; every live key appears exactly once, with its
    latest value; a tombstoned key appears at most once, as a tombstone (Kafka keeps
    tombstones for ``delete.retention.ms``).
    """
    problems: list[str] = []
    offsets = [o for o, _, _ in stored]
    if offsets != sorted(set(offsets)):
        problems.append(f"offsets do not strictly increase: {offsets[:20]}")
    want = latest_per_key(produced)
    seen: dict[bytes, list[bytes | None]] = {}
    for _, key, value in stored:
        assert key is not None, "a record without a key in a compacted topic"
        seen.setdefault(key, []).append(value)
    for key, values in sorted(seen.items()):
        if len(values) > 1:
            problems.append(f"key {key!r} kept {len(values)} times")
        if key in want:
            if values[-1] != want[key]:
                problems.append(f"key {key!r}: {values[-1]!r}, latest is {want[key]!r}")
        elif values[-1] is not None:
            problems.append(f"tombstoned key {key!r} still has value {values[-1]!r}")
    for key in sorted(set(want) - set(seen)):
        problems.append(f"live key {key!r} lost")
    return problems


def wait_compacted(
    broker: BrokerProcess,
    topic: str,
    produced: Sequence[KeyValue],
    *,
    timeout: float = WAIT,
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Read the partition until it is the compacted form of ``produced``; fail with what
    is still wrong after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        stored = read_partition(broker, topic)
        problems = compaction_verdict(stored, produced)
        if not problems:
            return stored
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{topic} not compacted after {timeout:.0f}s ({len(stored)} records stored "
                f"for {len(latest_per_key(produced))} live keys): " + "; ".join(problems[:8])
            )
        time.sleep(0.5)


def iter_keyed(prefix: str, keys: int, rounds: int) -> Iterator[KeyValue]:
    """``rounds`` overwrites of ``keys`` keys, round-major (every key, then again)."""
    for r in range(rounds):
        for k in range(keys):
            yield f"{prefix}-{k:03d}".encode(), f"{prefix}-{k:03d}-v{r:03d}".encode()


def group_with_commits(
    broker: BrokerProcess, group: str, topic: str, offsets: dict[int, int]
) -> None:
    """Leave ``group`` Empty (protocol type "consumer") with ``offsets`` committed on
    ``topic``: a confluent-kafka member subscribes, waits for its assignment, commits and
    closes (LeaveGroup)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.kafka_bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT
        while not consumer.assignment():
            assert time.monotonic() < deadline, f"{group} got no assignment"
            consumer.poll(0.1)
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in sorted(offsets.items())],
            asynchronous=False,
        )
    finally:
        consumer.close()


def advertised_api_keys(broker: BrokerProcess) -> set[int]:
    """The API keys the broker's ApiVersions (v2) advertises."""
    from brokerd.kafka.wire.codec import ApiKey
    from brokerd.kafka.wire.requests import apis

    from tests.kafka_helpers import RawKafka

    with RawKafka(broker) as conn:
        response = conn.call(ApiKey.API_VERSIONS, 2, apis.ApiVersionsRequest())
    assert response.error_code == 0, response
    return {r.api_key for r in response.api_keys}
