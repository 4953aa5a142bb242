"""Kafka's ``kafka-consumer-groups.sh`` (Kafka 4.2's admin client, through the JVM kit)
on a consumer-protocol group (KIP-848): ``--describe`` (offsets, lag and the member owning
each partition, from ConsumerGroupDescribe), ``--describe --state`` and ``--members``,
``--list --type``, and ``--delete`` once the member has left.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokerproc import BrokerProcess
from tests.e2e.test_kafka_tools import tool, tool_ready
from tests.kafka_helpers import WAIT, close_consumer, module_broker, wait_until

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tool_ready()
    yield from module_broker(
        tmp_path_factory, "consumer-protocol-tools",
        "--group-consumer-heartbeat-interval-ms", "500",
    )


def test_consumer_groups_tool_on_a_consumer_protocol_group(broker: BrokerProcess) -> None:
    bs = broker.kafka_bootstrap
    topic, group = "kip848-tools", "kip848-tools-group"
    admin = AdminClient({"bootstrap.servers": bs})  # kept: a dropped client cancels futures
    admin.create_topics([NewTopic(topic, 2)])[topic].result(WAIT)
    producer = ck.Producer({"bootstrap.servers": bs})
    for i in range(6):
        producer.produce(topic, f"v{i}".encode(), partition=i % 2)
    producer.flush(WAIT)
    member = ck.Consumer({
        "bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
        "client.id": "kip848-cli", "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    member.subscribe([topic])
    seen: list[object] = []

    def consumed() -> bool:
        seen.extend(m for m in member.consume(10, timeout=0.2) if m.error() is None)
        return len(seen) >= 5

    try:
        wait_until(consumed, "five records")
        member.commit(offsets=[ck.TopicPartition(topic, 0, 2), ck.TopicPartition(topic, 1, 3)],
                      asynchronous=False)
        described = tool("kafka-consumer-groups.sh", "--bootstrap-server", bs, "--describe",
                         "--group", group)
        rows = {(*line.split()[1:6], line.split()[-1])
                for line in described.splitlines() if line.startswith(group + " ")}
        # topic, partition, current offset, log end offset, lag, client id
        assert rows == {(topic, "0", "2", "3", "1", "kip848-cli"),
                        (topic, "1", "3", "3", "0", "kip848-cli")}, described
        state = tool("kafka-consumer-groups.sh", "--bootstrap-server", bs, "--describe",
                     "--group", group, "--state")
        assert "uniform" in state and "Stable" in state, state
        members = tool("kafka-consumer-groups.sh", "--bootstrap-server", bs, "--describe",
                       "--group", group, "--members", "--verbose")
        assert "kip848-cli" in members and f"{topic}:0,1" in members, members
        listed = tool("kafka-consumer-groups.sh", "--bootstrap-server", bs, "--list",
                      "--type")
        assert any(line.split()[:2] == [group, "Consumer"] for line in listed.splitlines()), listed
    finally:
        close_consumer(member)
    out = tool("kafka-consumer-groups.sh", "--bootstrap-server", bs, "--delete",
               "--group", group)
    assert "successful" in out, out
