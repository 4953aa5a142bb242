"""Online migration of a group between the classic protocol and the consumer group
protocol (KIP-848) against a real broker, judged by confluent-kafka (librdkafka 2.16)
and kafka-python.

Two ``group.protocol=classic`` consumers share a four-partition topic (2/2) and consume
(confluent-kafka with the eager ``range`` assignor, again with ``cooperative-sticky``,
and kafka-python);
a ``group.protocol=consumer`` member joins: the group becomes a consumer group (ListGroups
says so), the three end with 2/1/1 and every one of them receives records afterwards.
Then the consumer-protocol member leaves: the group is classic again, the two classic
members end 2/2 and keep receiving records.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.figures import record
from tests.kafka_helpers import (
    HEARTBEAT_MS,
    SESSION_TIMEOUT_MS,
    WAIT,
    Poller,
    Rec,
    RecordFeeder,
    close_consumer,
    module_broker,
    wait_until,
)

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.broker

PARTITIONS = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(
        tmp_path_factory, "migration",
        "--group-consumer-heartbeat-interval-ms", "500",
        "--group-consumer-session-timeout-ms", "6000",
    )


class _Member:
    """One consumer polled in its own thread; remembers when each record arrived."""

    def __init__(self, broker: BrokerProcess, name: str, protocol: str, topic: str,
                 strategy: str = "range") -> None:
        config: dict[str, Any] = {
            "bootstrap.servers": broker.kafka_bootstrap,
            "group.id": f"{topic}-g",
            "group.protocol": protocol,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 500,
        }
        if protocol == "classic":
            config.update({"session.timeout.ms": SESSION_TIMEOUT_MS,
                           "heartbeat.interval.ms": HEARTBEAT_MS,
                           "partition.assignment.strategy": strategy})
        self.consumer = ck.Consumer(config)
        self.arrivals: list[float] = []
        self.consumer.subscribe([topic])
        self.poller = Poller(name, self._poll)

    def _poll(self) -> list[Rec]:
        got: list[Rec] = []
        for m in self.consumer.consume(num_messages=500, timeout=0.1):
            if m.error() is None:
                got.append((m.partition(), m.offset(), m.value()))
                self.arrivals.append(time.monotonic())
        return got

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.poller.call(self.consumer.assignment)}

    def received_since(self, start: float) -> bool:
        return any(t >= start for t in list(self.arrivals))

    def close(self) -> None:
        self.poller.stop(lambda: close_consumer(self.consumer))


class _KafkaPythonMember(_Member):
    """A kafka-python classic consumer (eager, its range assignor), polled the same way."""

    def __init__(self, broker: BrokerProcess, name: str, topic: str) -> None:
        import kafka

        self.consumer = kafka.KafkaConsumer(
            topic,
            bootstrap_servers=broker.kafka_bootstrap,
            group_id=f"{topic}-g",
            client_id=name,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            auto_commit_interval_ms=500,
        )
        self.arrivals = []
        self.poller = Poller(name, self._poll_kafka_python)

    def _poll_kafka_python(self) -> list[Rec]:
        got: list[Rec] = []
        for records in self.consumer.poll(timeout_ms=100).values():
            for m in records:
                got.append((m.partition, m.offset, m.value))
                self.arrivals.append(time.monotonic())
        return got

    def close(self) -> None:
        self.poller.stop(self.consumer.close)


def _balanced(members: list[_Member], sizes: list[int]) -> list[set[int]] | None:
    got = [m.assignment() for m in members]
    everything = set().union(*got)
    if (sorted(len(a) for a in got) == sorted(sizes)
            and sum(len(a) for a in got) == len(everything) == PARTITIONS):
        return got
    return None


def _group_type(admin: AdminClient, group: str) -> str | None:
    listed = admin.list_consumer_groups().result(WAIT)
    for g in listed.valid:
        if g.group_id == group:
            return str(g.type).rsplit(".", 1)[-1]
    return None


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky", "kafka-python"])
def test_classic_group_upgrades_and_downgrades_online(
    broker: BrokerProcess, strategy: str
) -> None:
    topic = f"migration-{strategy}"
    group = f"{topic}-g"
    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(WAIT)
    feeder = RecordFeeder(broker.kafka_bootstrap, topic, PARTITIONS)
    classic = [
        _KafkaPythonMember(broker, f"classic-{i}", topic) if strategy == "kafka-python"
        else _Member(broker, f"classic-{i}", "classic", topic, strategy)
        for i in range(2)
    ]
    joiner: _Member | None = None
    try:
        wait_until(lambda: _balanced(classic, [2, 2]), "two classic members with 2 each")
        start = time.monotonic()
        wait_until(lambda: all(m.received_since(start) for m in classic),
                   "records at both classic members")
        assert _group_type(admin, group) == "CLASSIC"

        subscribed = time.monotonic()
        joiner = _Member(broker, "kip848", "consumer", topic)
        wait_until(lambda: _group_type(admin, group) == "CONSUMER", "the group upgraded")
        members = [*classic, joiner]
        wait_until(lambda: _balanced(members, [1, 1, 2]), "three members, 2/1/1")
        record(f"online upgrade, subscribe to a balanced 2/1/1 ({strategy} classic members)",
               f"{(time.monotonic() - subscribed) * 1000:.0f} ms")
        start = time.monotonic()
        wait_until(lambda: all(m.received_since(start) for m in members),
                   "records at all three members")

        left = time.monotonic()
        joiner.close()
        joiner = None
        wait_until(lambda: _group_type(admin, group) == "CLASSIC", "the group downgraded")
        wait_until(lambda: _balanced(classic, [2, 2]), "the two classic members, 2/2")
        record(f"online downgrade, close to a balanced 2/2 ({strategy} classic members)",
               f"{(time.monotonic() - left) * 1000:.0f} ms")
        start = time.monotonic()
        wait_until(lambda: all(m.received_since(start) for m in classic),
                   "records at both classic members after the downgrade")
    finally:
        feeder.stop()
        for m in ([joiner] if joiner is not None else []) + classic:
            m.close()
