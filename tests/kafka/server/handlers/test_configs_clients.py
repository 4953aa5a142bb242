"""Topic configs through real Kafka admin clients against a real ``twistd broker``:
confluent-kafka's AdminClient (CreateTopics with configs and validate_only,
DescribeConfigs for a topic and the broker, AlterConfigs, IncrementalAlterConfigs),
kafka-python's KafkaAdminClient and aiokafka's AIOKafkaAdminClient; and a restart:
the configs survive it and retention follows them, topic by topic."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import WAIT, module_broker, wait_until

pytestmark = [pytest.mark.clients, pytest.mark.broker]

DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "configs", "--log-cleanup-policy", "delete",
                             "--retention-bytes", "1000000000")


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.kafka_bootstrap})


def results(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: f.result(WAIT) for key, f in futures.items()}


def describe(client: AdminClient, kind: ResourceType, name: str) -> dict[str, Any]:
    (entries,) = results(client.describe_configs([ConfigResource(kind, name)])).values()
    return dict(entries)


def test_confluent_create_with_configs_and_validate_only(broker: BrokerProcess) -> None:
    client = admin(broker)
    results(client.create_topics(
        [NewTopic("cfk-changelog", 2, 1, config={"cleanup.policy": "compact",
                                                  "retention.ms": "3600000"})]
    ))
    results(client.create_topics(
        [NewTopic("cfk-dry", 1, 1, config={"retention.ms": "5"})], validate_only=True
    ))
    assert "cfk-dry" not in client.list_topics(timeout=WAIT).topics
    with pytest.raises(KafkaException) as info:
        results(client.create_topics([NewTopic("cfk-bad", 1, 1, config={"retention.ms": "x"})]))
    error = info.value.args[0]
    assert error.code() == 40 and "retention.ms" in error.str()
    with pytest.raises(KafkaException, match="Unknown topic config name: nope"):
        results(client.create_topics([NewTopic("cfk-bad", 1, 1, config={"nope": "1"})]))
    configs = describe(client, ResourceType.TOPIC, "cfk-changelog")
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == DYNAMIC_TOPIC_CONFIG
    assert configs["retention.ms"].value == "3600000"
    synonyms = [(s.name, s.value, s.source) for s in configs["retention.ms"].synonyms.values()]
    assert synonyms == [
        ("retention.ms", "3600000", DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "604800000", DEFAULT_CONFIG),
    ]
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].source == DEFAULT_CONFIG and configs["segment.bytes"].is_default
    assert configs["retention.bytes"].value == "1000000000"
    assert configs["retention.bytes"].source == STATIC_BROKER_CONFIG
    assert not configs["retention.ms"].is_read_only


def test_a_topic_without_overrides_is_described_with_brokerds_real_defaults(
    broker: BrokerProcess,
) -> None:
    """segment.ms is Kafka's 7 days and flush.messages the 1 that the default
    ``--fsync always`` amounts to, both as defaults (no operator set them); a topic
    that sets them shows its values as topic overrides."""
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    client = admin(broker)
    results(client.create_topics([
        NewTopic("cfk-plain", 1, 1),
        NewTopic("cfk-set", 1, 1, config={"segment.ms": "3600000", "flush.messages": "5"}),
    ]))
    plain = describe(client, ResourceType.TOPIC, "cfk-plain")
    for name, value, broker_name in (
        ("segment.ms", "604800000", "log.roll.ms"),
        ("flush.messages", "1", "log.flush.interval.messages"),
    ):
        entry = plain[name]
        assert (entry.value, entry.source, entry.is_default) == (value, DEFAULT_CONFIG, True)
        assert [(s.name, s.value, s.source) for s in entry.synonyms.values()] == [
            (broker_name, value, DEFAULT_CONFIG)]
    overridden = describe(client, ResourceType.TOPIC, "cfk-set")
    assert overridden["segment.ms"].value == "3600000"
    assert overridden["flush.messages"].value == "5"
    for name in ("segment.ms", "flush.messages"):
        assert overridden[name].source == DYNAMIC_TOPIC_CONFIG and not overridden[name].is_default
    brokers = describe(client, ResourceType.BROKER, "0")
    assert (brokers["log.roll.ms"].value, brokers["log.roll.ms"].source) == (
        "604800000", DEFAULT_CONFIG)
    assert brokers["log.flush.interval.messages"].source == DEFAULT_CONFIG

    kp = KafkaAdminClient(bootstrap_servers=broker.kafka_bootstrap)
    try:
        # kafka-python lists only modified configs by default: none for the plain topic.
        got = kp.describe_configs([KpResource(ConfigResourceType.TOPIC, "cfk-plain")])
        assert got["topic"]["cfk-plain"] == {}
        got = kp.describe_configs([KpResource(ConfigResourceType.TOPIC, "cfk-set")])
        assert {k: v["value"] for k, v in got["topic"]["cfk-set"].items()} == {
            "segment.ms": "3600000", "flush.messages": "5"}
        every = kp.describe_configs(
            [KpResource(ConfigResourceType.TOPIC, "cfk-plain")], config_filter="all"
        )["topic"]["cfk-plain"]
        assert every["segment.ms"]["value"] == "604800000"
        assert every["segment.ms"]["config_source"] == "DEFAULT_CONFIG"
        assert every["flush.messages"]["config_source"] == "DEFAULT_CONFIG"
    finally:
        kp.close()


def test_confluent_describe_broker(broker: BrokerProcess) -> None:
    configs = describe(admin(broker), ResourceType.BROKER, "0")
    assert configs["log.retention.bytes"].value == "1000000000"
    assert configs["log.retention.bytes"].source == STATIC_BROKER_CONFIG
    assert configs["log.cleanup.policy"].value == "delete"
    assert configs["log.cleanup.policy"].source == DEFAULT_CONFIG
    assert configs["message.max.bytes"].value == "1048588"
    assert configs["broker.id"].value == "0"
    assert all(entry.is_read_only for entry in configs.values())


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_confluent_alter_and_incremental_alter(broker: BrokerProcess) -> None:
    client = admin(broker)
    results(client.create_topics([NewTopic("cfk-alter", 1, 1,
                                           config={"retention.ms": "1000"})]))
    resource = ConfigResource(ResourceType.TOPIC, "cfk-alter",
                              set_config={"segment.bytes": "4096"})
    results(client.alter_configs([resource]))
    configs = describe(client, ResourceType.TOPIC, "cfk-alter")
    # AlterConfigs replaces the whole set: retention.ms is back to the default.
    assert configs["segment.bytes"].value == "4096"
    assert configs["retention.ms"].source == DEFAULT_CONFIG
    ops = [
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("max.message.bytes", "2000000",
                    incremental_operation=AlterConfigOpType.SET),
    ]
    results(client.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, "cfk-alter", incremental_configs=ops)]
    ))
    configs = describe(client, ResourceType.TOPIC, "cfk-alter")
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["segment.bytes"].source == DEFAULT_CONFIG
    assert configs["max.message.bytes"].value == "2000000"
    bad = [ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)]
    with pytest.raises(KafkaException, match="append is not allowed"):
        results(client.incremental_alter_configs(
            [ConfigResource(ResourceType.TOPIC, "cfk-alter", incremental_configs=bad)]
        ))
    with pytest.raises(KafkaException) as info:
        results(client.alter_configs([ConfigResource(
            ResourceType.BROKER, "0", set_config={"log.retention.ms": "1"})]))
    assert info.value.args[0].code() == 40
    with pytest.raises(KafkaException) as info:
        describe(client, ResourceType.TOPIC, "cfk-missing")
    assert info.value.args[0].code() == 3


def test_kafka_python_admin(broker: BrokerProcess) -> None:
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KpTopic

    client = KafkaAdminClient(bootstrap_servers=broker.kafka_bootstrap)
    try:
        client.create_topics([KpTopic("kp-configs", 1, 1, topic_configs={
            "cleanup.policy": "compact,delete", "retention.ms": "86400000"})])
        got = client.describe_configs([KpResource(ConfigResourceType.TOPIC, "kp-configs")])
        modified = got["topic"]["kp-configs"]
        assert {k: v["value"] for k, v in modified.items()} == {
            "cleanup.policy": "compact,delete", "retention.ms": "86400000"}
        outcome = client.alter_configs([KpResource(
            ConfigResourceType.TOPIC, "kp-configs", configs={"retention.ms": "1000"})])
        assert outcome == {"topic": {"kp-configs": "OK"}}
        got = client.describe_configs([KpResource(ConfigResourceType.TOPIC, "kp-configs")])
        assert got["topic"]["kp-configs"]["retention.ms"]["value"] == "1000"
        broker_cfg = client.describe_configs(
            [KpResource(ConfigResourceType.BROKER, "0")], config_filter="all")
        assert broker_cfg["broker"]["0"]["log.retention.ms"]["value"] == "604800000"
    finally:
        client.close()


def test_aiokafka_describe_configs(broker: BrokerProcess) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioTopic
    from aiokafka.admin.config_resource import ConfigResource as AioResource
    from aiokafka.admin.config_resource import ConfigResourceType as AioType

    async def run() -> dict[str, str]:
        client = AIOKafkaAdminClient(bootstrap_servers=broker.kafka_bootstrap)
        await client.start()
        try:
            await client.create_topics([AioTopic("aio-configs", 1, 1, topic_configs={
                "message.timestamp.type": "LogAppendTime"})])
            (response,) = await client.describe_configs(
                [AioResource(AioType.TOPIC, "aio-configs")])
            (resource,) = response.resources
            assert resource[0] == 0, resource
            return {entry[0]: entry[1] for entry in resource[4]}
        finally:
            await client.close()

    configs = asyncio.run(run())
    assert configs["message.timestamp.type"] == "LogAppendTime"
    assert configs["cleanup.policy"] == "delete"


def test_log_append_time_topic_reports_the_broker_time(broker: BrokerProcess) -> None:
    client = admin(broker)
    results(client.create_topics([NewTopic(
        "cfk-lat", 1, 1, config={"message.timestamp.type": "LogAppendTime"})]))
    producer = Producer({"bootstrap.servers": broker.kafka_bootstrap})
    producer.produce("cfk-lat", b"v", timestamp=1_000)
    assert producer.flush(WAIT) == 0
    consumer = Consumer({"bootstrap.servers": broker.kafka_bootstrap, "group.id": "cfk-lat",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition("cfk-lat", 0, 0)])
        msg = wait_until(lambda: consumer.poll(0.5), "a record")
        kind, timestamp = msg.timestamp()
        assert kind == 2  # TIMESTAMP_LOG_APPEND_TIME
        assert abs(timestamp - time.time() * 1000) < 60_000
    finally:
        consumer.close()


def test_configs_survive_a_restart_and_retention_follows_them(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", args=(
        "--log-retention-check-interval-ms", "200", "--segment-bytes", "1024",
    )).start()
    try:
        client = admin(proc)
        small = {"retention.ms": "60000"}
        results(client.create_topics([
            NewTopic("r-short", 1, 1, config=small),
            NewTopic("r-default", 1, 1),
            NewTopic("r-compact", 1, 1, config={**small, "cleanup.policy": "compact"}),
        ]))
        proc.restart()
        client = admin(proc)
        configs = describe(client, ResourceType.TOPIC, "r-compact")
        assert configs["cleanup.policy"].value == "compact"
        assert configs["retention.ms"].value == "60000"
        # An hour old: beyond r-short's retention, well within the 7-day default.
        old = int(time.time() * 1000) - 3_600_000
        producer = Producer({"bootstrap.servers": proc.kafka_bootstrap, "linger.ms": 0})
        for topic in ("r-short", "r-default", "r-compact"):
            for i in range(40):
                producer.produce(topic, b"v" * 200, key=b"k%d" % i, timestamp=old)
                producer.flush(WAIT)
        consumer = Consumer({"bootstrap.servers": proc.kafka_bootstrap, "group.id": "r"})
        try:
            def low(topic: str) -> int:
                lo, _hi = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT)
                return int(lo)

            wait_until(lambda: low("r-short") > 0, "retention on r-short")
            time.sleep(1.0)  # several more retention passes
            assert low("r-default") == 0
            assert low("r-compact") == 0
        finally:
            consumer.close()
    finally:
        proc.stop()
