"""Both worlds: what brokerctl's admin commands do is what unmodified Kafka admin clients
(confluent-kafka's AdminClient, kafka-python's KafkaAdminClient) see, and the other way
round, on one real ``twistd broker``; and a group whose offsets brokerctl reset resumes,
with a real consumer, at the reset offset."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from brokerd.cli import brokerctl as cli

from tests.brokerproc import BrokerProcess
from tests.cli.test_topics_groups import Ctl
from tests.control_plane_helpers import admin, confluent, create_topic, produce_keyed
from tests.kafka_helpers import HEARTBEAT_MS, SESSION_TIMEOUT_MS, WAIT, module_broker

pytestmark = [pytest.mark.clients, pytest.mark.broker]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    confluent()
    yield from module_broker(tmp_path_factory, "admin-both-worlds")


@pytest.fixture
def ctl(broker: BrokerProcess, capsys: pytest.CaptureFixture[str]) -> Ctl:
    return Ctl(broker.native_bootstrap, capsys)


def fill(broker: BrokerProcess, topic: str, count: int, partition: int = 0) -> None:
    produce_keyed(broker, topic, [(b"k%d" % i, b"v%d" % i) for i in range(count)],
                  partition=partition)


def configs(broker: BrokerProcess, topic: str) -> dict[str, Any]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    client = admin(broker)
    (future,) = client.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    described: dict[str, Any] = future.result(WAIT)
    return described


def partition_count(broker: BrokerProcess, topic: str) -> int | None:
    client = admin(broker)
    metadata = client.list_topics(timeout=WAIT)
    found = metadata.topics.get(topic)
    return None if found is None else len(found.partitions)


def confluent_offsets(broker: BrokerProcess, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    client = admin(broker)
    (future,) = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {(tp.topic, tp.partition): tp.offset for tp in future.result(WAIT).topic_partitions}


def consumer(broker: BrokerProcess, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({
        "bootstrap.servers": broker.kafka_bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS,
    })


def first_records(c: Any, count: int) -> list[tuple[int, int, bytes]]:
    """Poll until ``count`` records arrived: ``(partition, offset, value)``."""
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + WAIT
    while len(got) < count and time.monotonic() < deadline:
        message = c.poll(0.2)
        if message is not None and message.error() is None:
            got.append((message.partition(), message.offset(), message.value()))
    return got


# -- topics -------------------------------------------------------------------------------


def test_configs_both_ways(broker: BrokerProcess, ctl: Ctl) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    create_topic(broker, "bw-configs")
    ctl.json("topics", "alter", "bw-configs", "--config", "retention.ms=123456",
             "--config", "cleanup.policy=compact")
    seen = configs(broker, "bw-configs")
    assert seen["retention.ms"].value == "123456"
    assert seen["cleanup.policy"].value == "compact"
    assert not seen["retention.ms"].is_default

    client = admin(broker)
    resource = ConfigResource(ResourceType.TOPIC, "bw-configs", incremental_configs=[
        ConfigEntry("segment.ms", "600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    (future,) = client.incremental_alter_configs([resource]).values()
    future.result(WAIT)
    doc = ctl.json("topics", "describe", "bw-configs")
    assert doc["overrides"] == ["retention.ms", "segment.ms"]
    assert doc["configs"]["segment.ms"] == "600000"
    assert doc["configs"]["cleanup.policy"] == "delete"

    ctl.json("topics", "alter", "bw-configs", "--config", "retention.ms=")
    assert configs(broker, "bw-configs")["retention.ms"].is_default


def test_partitions_both_ways(broker: BrokerProcess, ctl: Ctl) -> None:
    from confluent_kafka.admin import NewPartitions

    create_topic(broker, "bw-parts", 2)
    ctl.json("topics", "add-partitions", "bw-parts", "--count", "2")
    assert partition_count(broker, "bw-parts") == 4
    client = admin(broker)
    client.create_partitions([NewPartitions("bw-parts", 6)])["bw-parts"].result(WAIT)
    assert len(ctl.json("topics", "describe", "bw-parts")["partitions"]) == 6
    # A record in a partition brokerctl added, read back through brokerctl's view.
    fill(broker, "bw-parts", 2, partition=3)
    assert ctl.json("topics", "describe", "bw-parts")["partitions"][3]["high_watermark"] == 2


def test_delete_topic_both_ways(broker: BrokerProcess, ctl: Ctl) -> None:
    create_topic(broker, "bw-del-a")
    create_topic(broker, "bw-del-b")
    ctl.json("topics", "delete", "bw-del-a")
    assert partition_count(broker, "bw-del-a") is None
    client = admin(broker)  # kept alive until the answer: a destroyed client cancels it
    client.delete_topics(["bw-del-b"])["bw-del-b"].result(WAIT)
    code, _, err = ctl("topics", "describe", "bw-del-b")
    assert code == cli.EXIT_ERROR and "UNKNOWN_TOPIC_OR_PARTITION" in err


# -- groups -------------------------------------------------------------------------------


def test_reset_seen_by_both_admin_clients_and_a_consumer_resumes_there(
    broker: BrokerProcess, ctl: Ctl
) -> None:
    from kafka import KafkaAdminClient

    create_topic(broker, "bw-reset", 2)
    fill(broker, "bw-reset", 10, partition=0)
    fill(broker, "bw-reset", 4, partition=1)
    ctl.json("groups", "reset-offsets", "bw-group", "--topic", "bw-reset", "--to-offset", "7")
    assert confluent_offsets(broker, "bw-group") == {("bw-reset", 0): 7, ("bw-reset", 1): 4}
    kp = KafkaAdminClient(bootstrap_servers=broker.kafka_bootstrap)
    try:
        listed = kp.list_group_offsets({"bw-group": None})["bw-group"]
        assert {(tp.topic, tp.partition): m.offset for tp, m in listed.items()} == {
            ("bw-reset", 0): 7, ("bw-reset", 1): 4}
        groups = kp.list_groups()
        assert "bw-group" in {g["group_id"] for g in groups}
    finally:
        kp.close()

    c = consumer(broker, "bw-group")
    try:
        c.subscribe(["bw-reset"])
        got = first_records(c, 3)
        assert sorted((p, o) for p, o, _ in got) == [(0, 7), (0, 8), (0, 9)]
        assert {v for p, o, v in got if (p, o) == (0, 7)} == {b"v7"}
        # While it is a member: brokerctl sees it, and refuses to move its offsets.
        doc = ctl.json("groups", "describe", "bw-group")
        assert doc["state"] == "Stable"
        (member,) = doc["members"]
        assert sorted(tuple(a) for a in member["assignment"]) == [
            ("bw-reset", 0), ("bw-reset", 1)]
        code, _, err = ctl("groups", "reset-offsets", "bw-group", "--topic", "bw-reset",
                           "--to-earliest")
        assert code == cli.EXIT_ERROR and "NON_EMPTY_GROUP" in err and "inactive" in err
        code, _, err = ctl("groups", "delete", "bw-group")
        assert code == cli.EXIT_ERROR and "NON_EMPTY_GROUP" in err
    finally:
        c.close()
    assert confluent_offsets(broker, "bw-group") == {("bw-reset", 0): 7, ("bw-reset", 1): 4}

    # Once it left: reset to a time, and a new consumer resumes there.
    wait = time.monotonic() + WAIT
    while ctl.json("groups", "describe", "bw-group")["state"] != "Empty":
        assert time.monotonic() < wait, "the group did not become Empty"
        time.sleep(0.2)
    rows = ctl.json("groups", "reset-offsets", "bw-group", "--topic", "bw-reset:0",
                    "--to-earliest")
    assert [(r["previous_offset"], r["new_offset"]) for r in rows] == [(7, 0)]
    c = consumer(broker, "bw-group")
    try:
        c.subscribe(["bw-reset"])
        got = first_records(c, 10)
        assert sorted(o for p, o, _ in got if p == 0) == list(range(10))
        assert [o for p, o, _ in got if p == 1] == []  # partition 1 stays at its end
    finally:
        c.close()


def test_groups_listed_and_deleted_both_ways(broker: BrokerProcess, ctl: Ctl) -> None:
    create_topic(broker, "bw-glist")
    fill(broker, "bw-glist", 3)
    for group in ("bw-a", "bw-b"):
        ctl.json("groups", "reset-offsets", group, "--topic", "bw-glist", "--to-latest")
    client = admin(broker)
    listed = client.list_consumer_groups().result(WAIT)
    ids = {g.group_id for g in listed.valid}
    assert {"bw-a", "bw-b"} <= ids
    (described,) = client.describe_consumer_groups(["bw-a"]).values()
    assert described.result(WAIT).state.name == "EMPTY"

    ctl.json("groups", "delete", "bw-a")
    listed = client.list_consumer_groups().result(WAIT)
    assert "bw-a" not in {g.group_id for g in listed.valid}
    client.delete_consumer_groups(["bw-b"])["bw-b"].result(WAIT)
    assert not {"bw-a", "bw-b"} & {g["group_id"] for g in ctl.json("groups", "list")}
