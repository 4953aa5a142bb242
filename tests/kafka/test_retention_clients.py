"""Time retention of a quiet topic on a real ``twistd broker``, seen through real clients:
a topic with ``retention.ms=3000`` that got 5 records and nothing after loses them at the
first retention check after they are all 3 s old, though they are in its active segment
(Kafka rolls a new empty segment at the log end offset and deletes the old one). The log
end offset stays 5 and the log start becomes 5: confluent-kafka's ListOffsets says so,
a consumer from the beginning gets nothing, the native protocol refuses a fetch below the
start with OFFSET_OUT_OF_RANGE, and the idempotent producer that wrote them goes on at 5.
A compact-only topic beside it keeps its records (no time retention for it), and a
kill -9 after the deletion changes none of this (long form)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from brokerd.client import NativeError
from brokerd.native.messages import ErrorCode

from tests.brokerproc import BrokerProcess
from tests.figures import record
from tests.kafka_helpers import WAIT, module_broker, wait_until

pytestmark = [pytest.mark.clients, pytest.mark.broker]

#: The broker's retention check interval (``--log-retention-check-interval-ms``).
CHECK_MS = 1000
RETENTION_MS = 3000
RECORDS = 5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(
        tmp_path_factory, "retention", "--log-retention-check-interval-ms", str(CHECK_MS)
    )


def create(broker: BrokerProcess, configs: dict[str, dict[str, str]]) -> None:
    client = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    futures = client.create_topics([NewTopic(t, 1, 1, config=c) for t, c in configs.items()])
    for future in futures.values():
        future.result(WAIT)


def produce(producer: Producer, topic: str, values: list[bytes]) -> list[tuple[int, int]]:
    """``(offset, timestamp ms)`` of each value (its own key, for a compacted topic),
    as the broker acknowledged them."""
    acked: list[tuple[int, int]] = []

    def delivered(error: Any, msg: Any) -> None:
        assert error is None, error
        acked.append((msg.offset(), msg.timestamp()[1]))

    for value in values:
        producer.produce(topic, value, key=value, on_delivery=delivered)
    assert producer.flush(WAIT) == 0
    assert len(acked) == len(values)
    return acked


def offsets(broker: BrokerProcess, topic: str) -> tuple[int, int]:
    """(earliest, latest) through confluent-kafka's ListOffsets."""
    client = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    tp = TopicPartition(topic, 0)
    earliest = client.list_offsets({tp: OffsetSpec.earliest()})[tp].result(WAIT).offset
    latest = client.list_offsets({tp: OffsetSpec.latest()})[tp].result(WAIT).offset
    return int(earliest), int(latest)


def read_from_beginning(broker: BrokerProcess, topic: str, *, quiet_s: float) -> list[Any]:
    """Every record a consumer from the log start gets before ``quiet_s`` seconds pass
    without one."""
    consumer = Consumer({
        "bootstrap.servers": broker.kafka_bootstrap, "group.id": f"read-{topic}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    try:
        consumer.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
        got = []
        while (msg := consumer.poll(quiet_s)) is not None:
            assert msg.error() is None, msg.error()
            got.append(msg)
        return got
    finally:
        consumer.close()


def log_files(broker: BrokerProcess, topic: str) -> list[str]:
    return sorted(p.name for p in (broker.data_dir / f"{topic}-0").glob("*.log"))


def expire_quiet_topic(broker: BrokerProcess, topic: str) -> Producer:
    """Create ``topic`` (retention.ms=3000) beside ``<topic>-compact`` (compact only,
    the same retention.ms), write 5 records to each and wait for the quiet topic's to
    be deleted; records the seconds from their expiry to the deletion. Returns the
    idempotent producer that wrote them."""
    create(broker, {
        topic: {"retention.ms": str(RETENTION_MS)},
        f"{topic}-compact": {"retention.ms": str(RETENTION_MS), "cleanup.policy": "compact"},
    })
    producer = Producer({
        "bootstrap.servers": broker.kafka_bootstrap, "enable.idempotence": True,
        "linger.ms": 0,
    })
    values = [b"quiet-%d" % i for i in range(RECORDS)]
    produce(producer, f"{topic}-compact", values)
    acked = produce(producer, topic, values)
    assert [offset for offset, _ts in acked] == list(range(RECORDS))
    assert offsets(broker, topic) == (0, RECORDS)
    # Deletable once the newest record is older than retention.ms by the broker's clock
    # (the same machine's as the producer's timestamps).
    expired_at = max(ts for _offset, ts in acked) / 1000.0 + RETENTION_MS / 1000.0
    # Watched on one native connection: cheap enough to poll often.
    with broker.client() as native:
        wait_until(
            lambda: native.list_offsets(topic, 0)[0] == RECORDS,
            "retention to delete the quiet topic's records",
            timeout=RETENTION_MS / 1000.0 + 2 * CHECK_MS / 1000.0 + WAIT,
            interval=0.02,
        )
        late = max(0.0, time.time() - expired_at)
    record(
        f"{topic}: records deleted after expiry",
        f"{late:.2f} s (check interval {CHECK_MS / 1000.0:.1f} s)",
    )
    # Two check intervals, with room for a loaded machine (the figure is the measure).
    assert late < 2 * CHECK_MS / 1000.0 + 10.0
    return producer


def check_deleted(broker: BrokerProcess, topic: str) -> None:
    """The quiet topic's records are gone, its end offset kept; its compact-only twin
    kept everything."""
    assert offsets(broker, topic) == (RECORDS, RECORDS)
    assert read_from_beginning(broker, topic, quiet_s=1.0) == []
    assert log_files(broker, topic) == [f"{RECORDS:020d}.log"]
    with broker.client() as native:
        assert native.list_offsets(topic, 0) == (RECORDS, RECORDS)
        with pytest.raises(NativeError) as info:
            native.fetch(topic, 0, 0)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert native.fetch(topic, 0, RECORDS) == []
    assert offsets(broker, f"{topic}-compact") == (0, RECORDS)


def test_a_quiet_topics_records_are_deleted_within_two_check_intervals(
    broker: BrokerProcess,
) -> None:
    producer = expire_quiet_topic(broker, "quiet")
    check_deleted(broker, "quiet")
    # The producer's idempotence state outlived its records: its next batch goes on at
    # the kept end offset, and is the only record a new reader gets.
    assert produce(producer, "quiet", [b"after"])[0][0] == RECORDS
    got = read_from_beginning(broker, "quiet", quiet_s=1.0)
    assert [(m.offset(), m.value()) for m in got] == [(RECORDS, b"after")]


@pytest.mark.slow
def test_a_quiet_topics_deletion_survives_kill_9(tmp_path: Path) -> None:
    """kill -9 right after the deletion: the restarted broker has the same log start
    and end, and the producer that wrote the records goes on at the end offset."""
    proc = BrokerProcess(
        tmp_path / "data", args=("--log-retention-check-interval-ms", str(CHECK_MS))
    ).start()
    try:
        producer = expire_quiet_topic(proc, "crashed")
        proc.kill()
        proc.start()
        check_deleted(proc, "crashed")
        assert produce(producer, "crashed", [b"after"])[0][0] == RECORDS
        assert offsets(proc, "crashed") == (RECORDS, RECORDS + 1)
    finally:
        proc.kill()
