"""The Python admin clients, unmodified, against a real ``twistd broker``: one test per
call of confluent-kafka's ``AdminClient``, kafka-python's ``KafkaAdminClient`` and
aiokafka's ``AIOKafkaAdminClient``.

Each test asserts Kafka's semantics for its call (the values read back, the error codes),
not merely that no exception was raised. Records and group commits a test needs come from
confluent-kafka (tests/control_plane_helpers.py); the call under test is made with the
client the test is named after. One broker serves the module; every test uses its own
topic and group names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.control_plane_helpers import (
    admin,
    advertised_api_keys,
    confluent,
    create_topic,
    group_with_commits,
    kafka_error,
    produce_keyed,
    read_partition,
)
from tests.kafka_helpers import WAIT, committed_offsets, module_broker

pytestmark = [pytest.mark.clients, pytest.mark.broker]

#: Kafka's error codes the tests expect.
INVALID_PARTITIONS, INVALID_CONFIG = 37, 40
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 68, 69
OFFSET_OUT_OF_RANGE = 1
#: DescribeConfigs config sources (Kafka's numbers).
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
#: Kafka's default segment size, which brokerd also uses (every topic here inherits it).
SEGMENT_BYTES = "1073741824"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    confluent()
    yield from module_broker(tmp_path_factory, "admin-clients")


def fill(broker: BrokerProcess, topic: str, count: int, partition: int = 0) -> None:
    produce_keyed(
        broker,
        topic,
        [(f"k{i}".encode(), f"v{i}".encode()) for i in range(count)],
        partition=partition,
    )


def log_range(broker: BrokerProcess, topic: str, partition: int = 0) -> tuple[int, int]:
    """(log start, high watermark) through confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.kafka_bootstrap, "group.id": "unused"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), WAIT)
        return low, high
    finally:
        consumer.close()


def partition_count(broker: BrokerProcess, topic: str) -> int:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": broker.kafka_bootstrap}).list_topics(
        topic, timeout=WAIT
    )
    return len(metadata.topics[topic].partitions)


def topic_exists(broker: BrokerProcess, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": broker.kafka_bootstrap}).list_topics(timeout=WAIT)
    return topic in metadata.topics


# == confluent-kafka ===================================================================


class Confluent:
    """confluent-kafka's AdminClient and the futures it returns."""

    def __init__(self, broker: BrokerProcess) -> None:
        from confluent_kafka.admin import AdminClient

        self.client = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})

    @staticmethod
    def result(future: Any) -> Any:
        return future.result(WAIT)

    @staticmethod
    def error_code(future: Any) -> int:
        """The Kafka error code the future failed with."""
        with pytest.raises(Exception) as raised:
            future.result(WAIT)
        code: int = kafka_error(raised.value).code()
        return code

    def configs(self, resource_type: Any, name: str) -> dict[str, Any]:
        from confluent_kafka.admin import ConfigResource

        (future,) = self.client.describe_configs([ConfigResource(resource_type, name)]).values()
        described: dict[str, Any] = future.result(WAIT)
        return described


@pytest.fixture
def ck(broker: BrokerProcess) -> Confluent:
    return Confluent(broker)


def test_confluent_create_topics_with_config(broker: BrokerProcess, ck: Confluent) -> None:
    from confluent_kafka.admin import NewTopic

    config = {"cleanup.policy": "compact", "retention.ms": "60000"}
    futures = ck.client.create_topics([NewTopic("ck-compact", 2, 1, config=config)])
    assert ck.result(futures["ck-compact"]) is None
    assert partition_count(broker, "ck-compact") == 2


def test_confluent_create_topics_rejects_a_bad_config(broker: BrokerProcess, ck: Confluent) -> None:
    from confluent_kafka.admin import NewTopic

    futures = ck.client.create_topics(
        [NewTopic("ck-bad-config", 1, 1, config={"cleanup.policy": "shred"})]
    )
    assert ck.error_code(futures["ck-bad-config"]) == INVALID_CONFIG
    assert not topic_exists(broker, "ck-bad-config")


def test_confluent_create_topics_validate_only(broker: BrokerProcess, ck: Confluent) -> None:
    from confluent_kafka.admin import NewTopic

    futures = ck.client.create_topics(
        [NewTopic("ck-validate", 1, 1, config={"cleanup.policy": "compact"})],
        validate_only=True,
    )
    assert ck.result(futures["ck-validate"]) is None
    assert not topic_exists(broker, "ck-validate")


def test_confluent_describe_configs_topic_and_broker(broker: BrokerProcess, ck: Confluent) -> None:
    from confluent_kafka.admin import ConfigSource, ResourceType

    create_topic(broker, "ck-describe", 1, {"cleanup.policy": "compact", "retention.ms": "60000"})
    topic = ck.configs(ResourceType.TOPIC, "ck-describe")
    assert topic["cleanup.policy"].value == "compact"
    assert topic["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not topic["cleanup.policy"].is_default
    assert topic["retention.ms"].value == "60000"
    assert topic["segment.bytes"].value == SEGMENT_BYTES
    assert topic["segment.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    brokers = ck.configs(ResourceType.BROKER, "0")
    assert brokers["log.cleanup.policy"].value == "delete"
    assert brokers["log.segment.bytes"].value == SEGMENT_BYTES


def test_confluent_alter_configs(broker: BrokerProcess, ck: Confluent) -> None:
    from confluent_kafka.admin import ConfigResource, ResourceType

    create_topic(broker, "ck-alter", 1, {"cleanup.policy": "compact", "retention.ms": "60000"})
    resource = ConfigResource(ResourceType.TOPIC, "ck-alter", set_config={"retention.ms": "120000"})
    (future,) = ck.client.alter_configs([resource]).values()
    ck.result(future)
    topic = ck.configs(ResourceType.TOPIC, "ck-alter")
    assert topic["retention.ms"].value == "120000"
    # AlterConfigs replaces the topic's whole config: cleanup.policy is back to "delete".
    assert topic["cleanup.policy"].value == "delete"
    assert topic["cleanup.policy"].is_default or topic["cleanup.policy"].source != 1


def test_confluent_incremental_alter_configs(broker: BrokerProcess, ck: Confluent) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    create_topic(broker, "ck-incr", 1, {"cleanup.policy": "compact", "retention.ms": "60000"})
    resource = ConfigResource(
        ResourceType.TOPIC,
        "ck-incr",
        incremental_configs=[
            ConfigEntry("retention.ms", "90000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    (future,) = ck.client.incremental_alter_configs([resource]).values()
    ck.result(future)
    topic = ck.configs(ResourceType.TOPIC, "ck-incr")
    assert topic["retention.ms"].value == "90000"
    assert topic["cleanup.policy"].value == "compact"  # untouched: incremental

    resource = ConfigResource(
        ResourceType.TOPIC,
        "ck-incr",
        incremental_configs=[
            ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    (future,) = ck.client.incremental_alter_configs([resource]).values()
    ck.result(future)
    topic = ck.configs(ResourceType.TOPIC, "ck-incr")
    assert topic["cleanup.policy"].value == "delete"
    assert topic["retention.ms"].value == "90000"


def test_confluent_create_partitions(broker: BrokerProcess, ck: Confluent) -> None:
    from confluent_kafka.admin import NewPartitions

    create_topic(broker, "ck-grow", 1)
    ck.result(ck.client.create_partitions([NewPartitions("ck-grow", 3)])["ck-grow"])
    assert partition_count(broker, "ck-grow") == 3
    fill(broker, "ck-grow", 2, partition=2)
    assert log_range(broker, "ck-grow", 2) == (0, 2)
    future = ck.client.create_partitions([NewPartitions("ck-grow", 2)])["ck-grow"]
    assert ck.error_code(future) == INVALID_PARTITIONS


def test_confluent_delete_records(broker: BrokerProcess, ck: Confluent) -> None:
    from confluent_kafka import TopicPartition

    create_topic(broker, "ck-truncate", 1)
    fill(broker, "ck-truncate", 10)
    (future,) = ck.client.delete_records([TopicPartition("ck-truncate", 0, 4)]).values()
    deleted = ck.result(future)
    assert deleted.low_watermark == 4
    assert log_range(broker, "ck-truncate") == (4, 10)
    assert [o for o, _, _ in read_partition(broker, "ck-truncate")] == list(range(4, 10))
    (future,) = ck.client.delete_records([TopicPartition("ck-truncate", 0, 11)]).values()
    assert ck.error_code(future) == OFFSET_OUT_OF_RANGE


def test_confluent_list_and_describe_consumer_groups(broker: BrokerProcess, ck: Confluent) -> None:
    from confluent_kafka import ConsumerGroupState

    create_topic(broker, "ck-groups", 2)
    group_with_commits(broker, "ck-group", "ck-groups", {0: 0, 1: 0})
    listed = ck.result(ck.client.list_consumer_groups())
    assert not listed.errors
    (ours,) = [g for g in listed.valid if g.group_id == "ck-group"]
    # librdkafka learns a group's state from ListGroups v4+ (flexible): the group has
    # only committed offsets, so it is Empty.
    assert ours.state == ConsumerGroupState.EMPTY
    assert not ours.is_simple_consumer_group
    # The states filter (ListGroups v4 states_filter) is applied by the broker.
    empty = ck.result(ck.client.list_consumer_groups(states={ConsumerGroupState.EMPTY}))
    assert "ck-group" in [g.group_id for g in empty.valid]
    stable = ck.result(ck.client.list_consumer_groups(states={ConsumerGroupState.STABLE}))
    assert "ck-group" not in [g.group_id for g in stable.valid]

    described = ck.result(ck.client.describe_consumer_groups(["ck-group"])["ck-group"])
    assert described.group_id == "ck-group"
    assert described.state == ConsumerGroupState.EMPTY
    assert described.members == []
    assert not described.is_simple_consumer_group


def test_confluent_list_and_alter_consumer_group_offsets(
    broker: BrokerProcess, ck: Confluent
) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    create_topic(broker, "ck-offsets", 2)
    fill(broker, "ck-offsets", 10, partition=0)
    group_with_commits(broker, "ck-offsets-group", "ck-offsets", {0: 7, 1: 0})
    request = [ConsumerGroupTopicPartitions("ck-offsets-group")]
    listed = ck.result(ck.client.list_consumer_group_offsets(request)["ck-offsets-group"])
    assert {(tp.topic, tp.partition, tp.offset) for tp in listed.topic_partitions} == {
        ("ck-offsets", 0, 7),
        ("ck-offsets", 1, 0),
    }

    altered = ck.client.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("ck-offsets-group", [TopicPartition("ck-offsets", 0, 2)])]
    )
    result = ck.result(altered["ck-offsets-group"])
    assert [(tp.partition, tp.offset, tp.error) for tp in result.topic_partitions] == [(0, 2, None)]
    assert committed_offsets(broker, "ck-offsets-group", "ck-offsets", [0, 1]) == {0: 2, 1: 0}


#: Kafka's API key of DeleteGroups.
DELETE_GROUPS = 42


def test_confluent_delete_consumer_groups(broker: BrokerProcess, ck: Confluent) -> None:
    # librdkafka (confluent-kafka 2.16) aborts the whole process (assertion in
    # rd_kafka_q_destroy0, when the result is garbage-collected) after a
    # delete_consumer_groups that the broker does not support: fail plainly instead.
    assert DELETE_GROUPS in advertised_api_keys(broker), (
        "the broker does not advertise DeleteGroups (API key 42); not calling "
        "delete_consumer_groups, which would abort the test process"
    )
    create_topic(broker, "ck-delete-group", 1)
    group_with_commits(broker, "ck-doomed", "ck-delete-group", {0: 0})
    ck.result(ck.client.delete_consumer_groups(["ck-doomed"])["ck-doomed"])
    listed = ck.result(ck.client.list_consumer_groups())
    assert "ck-doomed" not in [g.group_id for g in listed.valid]
    assert committed_offsets(broker, "ck-doomed", "ck-delete-group", [0]) == {0: -1}
    future = ck.client.delete_consumer_groups(["ck-never-seen"])["ck-never-seen"]
    assert ck.error_code(future) == GROUP_ID_NOT_FOUND


# == kafka-python ======================================================================


@pytest.fixture
def kp(broker: BrokerProcess) -> Iterator[Any]:
    kafka = pytest.importorskip("kafka")
    client = kafka.KafkaAdminClient(
        bootstrap_servers=broker.kafka_bootstrap, request_timeout_ms=int(WAIT * 1000)
    )
    try:
        yield client
    finally:
        client.close()


def kp_configs(kp: Any, resource_type: Any, name: str) -> dict[str, dict[str, Any]]:
    """kafka-python's describe_configs of one resource, every config (not just modified)."""
    from kafka.admin import ConfigResource

    described = kp.describe_configs([ConfigResource(resource_type, name)], config_filter="all")
    (by_name,) = described.values()
    configs: dict[str, dict[str, Any]] = by_name[name]
    return configs


def value_of(entry: dict[str, Any]) -> Any:
    return entry.get("value", entry.get("config_value"))


def test_kafka_python_create_topics_with_topic_configs(broker: BrokerProcess, kp: Any) -> None:
    from kafka.errors import InvalidConfigurationError

    configs = {"cleanup.policy": "compact", "retention.ms": "60000"}
    kp.create_topics(
        {"kp-compact": {"num_partitions": 2, "replication_factor": 1, "configs": configs}}
    )
    assert partition_count(broker, "kp-compact") == 2
    with pytest.raises(InvalidConfigurationError):
        kp.create_topics({"kp-bad": {"num_partitions": 1, "configs": {"cleanup.policy": "shred"}}})
    kp.create_topics({"kp-validate": {"num_partitions": 1, "configs": configs}}, validate_only=True)
    assert not topic_exists(broker, "kp-validate")


def test_kafka_python_describe_configs(broker: BrokerProcess, kp: Any) -> None:
    from kafka.admin import ConfigResourceType

    create_topic(broker, "kp-describe", 1, {"cleanup.policy": "compact", "retention.ms": "60000"})
    topic = kp_configs(kp, ConfigResourceType.TOPIC, "kp-describe")
    assert value_of(topic["cleanup.policy"]) == "compact"
    assert value_of(topic["retention.ms"]) == "60000"
    assert value_of(topic["segment.bytes"]) == SEGMENT_BYTES
    brokers = kp_configs(kp, ConfigResourceType.BROKER, "0")
    assert value_of(brokers["log.cleanup.policy"]) == "delete"


def test_kafka_python_alter_configs(broker: BrokerProcess, kp: Any) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    create_topic(broker, "kp-alter", 1, {"cleanup.policy": "compact", "retention.ms": "60000"})
    # kafka-python sends IncrementalAlterConfigs where the broker has it (SET of one key).
    kp.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "kp-alter", configs={"retention.ms": "120000"})]
    )
    topic = kp_configs(kp, ConfigResourceType.TOPIC, "kp-alter")
    assert value_of(topic["retention.ms"]) == "120000"
    assert value_of(topic["cleanup.policy"]) == "compact"


def test_kafka_python_create_partitions(broker: BrokerProcess, kp: Any) -> None:
    from kafka.errors import InvalidPartitionsError

    create_topic(broker, "kp-grow", 1)
    kp.create_partitions({"kp-grow": 3})
    assert partition_count(broker, "kp-grow") == 3
    with pytest.raises(InvalidPartitionsError):
        kp.create_partitions({"kp-grow": 2})


def test_kafka_python_delete_records(broker: BrokerProcess, kp: Any) -> None:
    from kafka import TopicPartition

    create_topic(broker, "kp-truncate", 1)
    fill(broker, "kp-truncate", 10)
    result = kp.delete_records({TopicPartition("kp-truncate", 0): 4})
    (meta,) = result.values()
    assert meta["low_watermark"] == 4
    assert log_range(broker, "kp-truncate") == (4, 10)


def test_kafka_python_list_and_describe_groups(broker: BrokerProcess, kp: Any) -> None:
    create_topic(broker, "kp-groups", 1)
    group_with_commits(broker, "kp-group", "kp-groups", {0: 0})
    listed = {g["group_id"]: g for g in kp.list_groups()}
    assert listed["kp-group"]["protocol_type"] == "consumer"
    # kafka-python 3 picks ListGroups v4 (flexible), which carries each group's state.
    assert listed["kp-group"]["group_state"] == "Empty"
    assert "kp-group" not in [g["group_id"] for g in kp.list_groups(states_filter=["Stable"])]
    described = kp.describe_groups(["kp-group"])["kp-group"]
    assert described["error"] is None
    assert described["group_state"] == "Empty"
    assert described["protocol_type"] == "consumer"
    assert described["members"] == []


def test_kafka_python_list_group_offsets(broker: BrokerProcess, kp: Any) -> None:
    from kafka import TopicPartition

    create_topic(broker, "kp-offsets", 2)
    fill(broker, "kp-offsets", 10)
    group_with_commits(broker, "kp-offsets-group", "kp-offsets", {0: 7, 1: 0})
    offsets = kp.list_group_offsets({"kp-offsets-group": None})["kp-offsets-group"]
    assert {tp: om.offset for tp, om in offsets.items()} == {
        TopicPartition("kp-offsets", 0): 7,
        TopicPartition("kp-offsets", 1): 0,
    }


def test_kafka_python_delete_groups(broker: BrokerProcess, kp: Any) -> None:
    create_topic(broker, "kp-delete-group", 1)
    group_with_commits(broker, "kp-doomed", "kp-delete-group", {0: 0})
    # kafka-python reports each group's outcome as "OK" or the error class's name.
    deleted = dict(kp.delete_groups(["kp-doomed", "kp-never-seen"]))
    assert deleted == {"kp-doomed": "OK", "kp-never-seen": "GroupIdNotFoundError"}
    assert "kp-doomed" not in [g["group_id"] for g in kp.list_groups()]
    assert committed_offsets(broker, "kp-doomed", "kp-delete-group", [0]) == {0: -1}


# == aiokafka ==========================================================================


def aio(broker: BrokerProcess, body: Any) -> Any:
    """Run ``body(admin)`` on a started AIOKafkaAdminClient in a fresh event loop."""
    admin_module = pytest.importorskip("aiokafka.admin")

    async def main() -> Any:
        client = admin_module.AIOKafkaAdminClient(
            bootstrap_servers=broker.kafka_bootstrap, request_timeout_ms=int(WAIT * 1000)
        )
        await client.start()
        try:
            return await body(client)
        finally:
            await client.close()

    return asyncio.run(asyncio.wait_for(main(), 2 * WAIT))


def aio_configs(broker: BrokerProcess, resource_type: Any, name: str) -> dict[str, str | None]:
    """aiokafka's describe_configs of one resource: config name -> value."""
    from aiokafka.admin.config_resource import ConfigResource

    async def body(client: Any) -> Any:
        return await client.describe_configs([ConfigResource(resource_type, name)])

    (response,) = aio(broker, body)
    (resource,) = response.to_object()["resources"]
    assert resource["error_code"] == 0, resource
    return {e["config_names"]: e["config_value"] for e in resource["config_entries"]}


def test_aiokafka_create_topics_with_configs(broker: BrokerProcess) -> None:
    from aiokafka.admin import NewTopic

    configs = {"cleanup.policy": "compact", "retention.ms": "60000"}

    async def body(client: Any) -> Any:
        return await client.create_topics(
            [
                NewTopic("aio-compact", 2, 1, topic_configs=configs),
                NewTopic("aio-bad", 1, 1, topic_configs={"cleanup.policy": "shred"}),
            ]
        )

    errors = {t[0]: t[1] for t in aio(broker, body).topic_errors}
    assert errors["aio-compact"] == 0, errors
    assert errors["aio-bad"] == INVALID_CONFIG, errors
    assert partition_count(broker, "aio-compact") == 2


def test_aiokafka_describe_configs(broker: BrokerProcess) -> None:
    from aiokafka.admin.config_resource import ConfigResourceType

    create_topic(broker, "aio-describe", 1, {"cleanup.policy": "compact", "retention.ms": "60000"})
    topic = aio_configs(broker, ConfigResourceType.TOPIC, "aio-describe")
    assert topic["cleanup.policy"] == "compact"
    assert topic["retention.ms"] == "60000"
    assert topic["segment.bytes"] == SEGMENT_BYTES
    assert aio_configs(broker, ConfigResourceType.BROKER, "0")["log.cleanup.policy"] == "delete"


def test_aiokafka_alter_configs(broker: BrokerProcess) -> None:
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    create_topic(broker, "aio-alter", 1, {"cleanup.policy": "compact", "retention.ms": "60000"})
    resource = ConfigResource(
        ConfigResourceType.TOPIC, "aio-alter", configs={"retention.ms": "120000"}
    )

    async def body(client: Any) -> Any:
        return await client.alter_configs([resource])

    (response,) = aio(broker, body)
    assert [r["error_code"] for r in response.to_object()["resources"]] == [0]
    topic = aio_configs(broker, ConfigResourceType.TOPIC, "aio-alter")
    assert topic["retention.ms"] == "120000"
    assert topic["cleanup.policy"] == "delete"  # AlterConfigs replaces the whole config


def test_aiokafka_create_partitions(broker: BrokerProcess) -> None:
    from aiokafka.admin import NewPartitions

    create_topic(broker, "aio-grow", 1)

    async def grow(client: Any) -> Any:
        return await client.create_partitions({"aio-grow": NewPartitions(3)})

    (result,) = aio(broker, grow).to_object()["topic_errors"]
    assert result["error_code"] == 0, result
    assert partition_count(broker, "aio-grow") == 3

    async def shrink(client: Any) -> Any:
        return await client.create_partitions({"aio-grow": NewPartitions(2)})

    from aiokafka.errors import InvalidPartitionsError

    # aiokafka raises the error of a failed topic instead of returning it.
    with pytest.raises(InvalidPartitionsError):
        aio(broker, shrink)


def test_aiokafka_delete_records(broker: BrokerProcess) -> None:
    from aiokafka.admin import RecordsToDelete
    from aiokafka.structs import TopicPartition

    create_topic(broker, "aio-truncate", 1)
    fill(broker, "aio-truncate", 10)

    async def body(client: Any) -> Any:
        return await client.delete_records(
            {TopicPartition("aio-truncate", 0): RecordsToDelete(before_offset=4)}
        )

    assert aio(broker, body) == {TopicPartition("aio-truncate", 0): 4}
    assert log_range(broker, "aio-truncate") == (4, 10)


def test_aiokafka_list_and_describe_consumer_groups(broker: BrokerProcess) -> None:
    create_topic(broker, "aio-groups", 1)
    group_with_commits(broker, "aio-group", "aio-groups", {0: 0})

    async def body(client: Any) -> Any:
        return await client.list_consumer_groups(), await client.describe_consumer_groups(
            ["aio-group"]
        )

    listed, described = aio(broker, body)
    assert ("aio-group", "consumer") in [tuple(g[:2]) for g in listed]
    (response,) = described
    (group,) = response.to_object()["groups"]
    assert group["error_code"] == 0
    assert group["group"] == "aio-group"
    assert group["state"] == "Empty"
    assert group["protocol_type"] == "consumer"
    assert group["members"] == []


def test_aiokafka_list_consumer_group_offsets(broker: BrokerProcess) -> None:
    from aiokafka.structs import TopicPartition

    create_topic(broker, "aio-offsets", 2)
    fill(broker, "aio-offsets", 10)
    group_with_commits(broker, "aio-offsets-group", "aio-offsets", {0: 7, 1: 0})

    async def body(client: Any) -> Any:
        return await client.list_consumer_group_offsets("aio-offsets-group")

    assert {tp: om.offset for tp, om in aio(broker, body).items()} == {
        TopicPartition("aio-offsets", 0): 7,
        TopicPartition("aio-offsets", 1): 0,
    }


def test_internal_topics_as_confluent_kafka_sees_them(broker: BrokerProcess) -> None:
    """After a consumer group looked its coordinator up, `__consumer_offsets` is listed and
    described as an internal topic of 50 partitions; a produce to it fails with
    INVALID_TOPIC_EXCEPTION, as against Kafka."""
    ck = confluent()
    from confluent_kafka import TopicCollection

    consumer = ck.Consumer({
        "bootstrap.servers": broker.kafka_bootstrap, "group.id": "internal-topics-group",
        "enable.auto.commit": False,
    })
    try:
        # The group's first step: FindCoordinator for the group.
        consumer.list_topics(timeout=WAIT)
        consumer.committed([ck.TopicPartition("internal-topics-any", 0)], timeout=WAIT)
    finally:
        consumer.close()
    client = admin(broker)
    listed = client.list_topics(timeout=WAIT).topics
    assert "__consumer_offsets" in listed
    assert len(listed["__consumer_offsets"].partitions) == 50
    (future,) = client.describe_topics(TopicCollection(["__consumer_offsets"])).values()
    described = future.result(WAIT)
    assert described.is_internal and len(described.partitions) == 50
    producer = ck.Producer({"bootstrap.servers": broker.kafka_bootstrap,
                            "message.timeout.ms": 10000})
    failed: list[Any] = []
    producer.produce("__consumer_offsets", b"v", partition=0,
                     on_delivery=lambda err, msg: failed.append(err))
    producer.flush(WAIT)
    (err,) = failed
    assert err is not None and err.code() == ck.KafkaError.TOPIC_EXCEPTION, err
