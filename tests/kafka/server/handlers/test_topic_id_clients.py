"""Topic IDs and the cluster description through real clients, against a real ``twistd
broker``: kafka-python (CreateTopics v7, Metadata v12 by ID, DeleteTopics v6 by ID,
DescribeCluster v2) and confluent-kafka (Metadata v13 topic IDs, DescribeCluster).

Each test reads back what Kafka's semantics say (the ID a create answered is the one
Metadata answers, a deleted topic's ID is unknown, a re-created topic has a new ID).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.control_plane_helpers import confluent
from tests.kafka_helpers import WAIT, module_broker

pytestmark = [pytest.mark.clients, pytest.mark.broker]

UNKNOWN_TOPIC_ID = 100


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    confluent()
    yield from module_broker(tmp_path_factory, "topic-ids")


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


def _created(kp: Any, name: str, **options: Any) -> dict[str, Any]:
    answer = kp.create_topics({name: options})
    (topic,) = answer["topics"]
    assert topic["name"] == name and topic["error_code"] == 0, topic
    result: dict[str, Any] = topic
    return result


def _as_uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def test_kafka_python_create_answers_id_partitions_and_configs(kp: Any) -> None:
    topic = _created(kp, "kp-ids-create", num_partitions=3,
                     configs={"cleanup.policy": "compact"})
    topic_id = _as_uuid(topic["topic_id"])
    assert topic_id.int != 0
    assert (topic["num_partitions"], topic["replication_factor"]) == (3, 1)
    configs = topic["configs"]  # by name, each source named
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    # Metadata answers the same ID, by name and by ID.
    (by_name,) = kp.describe_topics(["kp-ids-create"])
    assert _as_uuid(by_name["topic_id"]) == topic_id
    (by_id,) = kp.describe_topics([topic_id])
    assert (by_id["name"], by_id["error_code"], len(by_id["partitions"])) == (
        "kp-ids-create", 0, 3)


def test_kafka_python_validate_only_has_no_id(kp: Any, broker: BrokerProcess) -> None:
    answer = kp.create_topics({"kp-ids-validate": {"num_partitions": 2}}, validate_only=True)
    (topic,) = answer["topics"]
    assert (topic["error_code"], topic["num_partitions"]) == (0, 2)
    assert topic["topic_id"] is None  # the zero ID: nothing was created
    assert "kp-ids-validate" not in [t["name"] for t in kp.describe_topics()]


def test_kafka_python_delete_by_id(kp: Any) -> None:
    topic_id = _as_uuid(_created(kp, "kp-ids-delete", num_partitions=1)["topic_id"])
    answer = kp.delete_topics([topic_id])
    (deleted,) = answer["topics"]
    assert (deleted["name"], _as_uuid(deleted["topic_id"]), deleted["error_code"]) == (
        "kp-ids-delete", topic_id, 0)
    (gone,) = kp.describe_topics([topic_id])
    assert gone["error_code"] == UNKNOWN_TOPIC_ID
    again = kp.delete_topics([topic_id], raise_errors=False)
    assert again["topics"][0]["error_code"] == UNKNOWN_TOPIC_ID


def test_kafka_python_recreated_topic_has_a_new_id(kp: Any) -> None:
    first = _as_uuid(_created(kp, "kp-ids-again", num_partitions=1)["topic_id"])
    kp.delete_topics(["kp-ids-again"])
    second = _as_uuid(_created(kp, "kp-ids-again", num_partitions=1)["topic_id"])
    assert first != second
    (old,) = kp.describe_topics([first])
    assert old["error_code"] == UNKNOWN_TOPIC_ID


def test_kafka_python_describe_cluster(kp: Any, broker: BrokerProcess) -> None:
    cluster = kp.describe_cluster()
    assert cluster["controller_id"] == 0
    assert cluster["cluster_id"]
    (node,) = cluster["brokers"]
    assert (node["broker_id"], node["host"], node["port"]) == (0, "127.0.0.1", broker.kafka_port)
    assert node.get("is_fenced") is False
    # No authorizer: every cluster operation.
    ops = {str(op).rsplit(".", 1)[-1] for op in cluster["authorized_operations"]}
    assert {"ALTER", "DESCRIBE", "CLUSTER_ACTION", "IDEMPOTENT_WRITE"} <= ops, ops


def test_confluent_metadata_and_describe_cluster(broker: BrokerProcess) -> None:
    confluent()  # skips when confluent-kafka is not installed
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    admin.create_topics([NewTopic("ck-ids", 2, 1)])["ck-ids"].result(WAIT)
    described = admin.describe_topics(TopicCollection(["ck-ids"]))["ck-ids"].result(WAIT)
    assert described.topic_id is not None and str(described.topic_id) != ""
    cluster = admin.describe_cluster(include_authorized_operations=True).result(WAIT)
    assert [(n.id, n.port) for n in cluster.nodes] == [(0, broker.kafka_port)]
    assert cluster.controller.id == 0
    assert cluster.cluster_id == admin.list_topics(timeout=WAIT).cluster_id


def test_kafka_python_describe_topic_partitions_pages(kp: Any) -> None:
    ids = {
        name: _as_uuid(_created(kp, name, num_partitions=n)["topic_id"])
        for name, n in (("kp-dtp-a", 5), ("kp-dtp-b", 2))
    }
    names = ["kp-dtp-b", "kp-dtp-a", "kp-dtp-none"]
    pages = []
    cursor = None
    while True:
        page = kp.describe_topic_partitions(names, response_partition_limit=3, cursor=cursor)
        pages.append([
            (t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
            for t in page["topics"]
        ])
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert len(pages) < 5, pages
    # Name order, three partitions a page, each page starting where the last stopped.
    assert pages == [
        [("kp-dtp-a", 0, [0, 1, 2])],
        [("kp-dtp-a", 0, [3, 4]), ("kp-dtp-b", 0, [0])],
        [("kp-dtp-b", 0, [1]), ("kp-dtp-none", 3, [])],
    ]
    first = kp.describe_topic_partitions(["kp-dtp-a"])["topics"][0]
    assert _as_uuid(first["topic_id"]) == ids["kp-dtp-a"]
    (p0, *_) = first["partitions"]
    assert (p0["leader_id"], p0["replica_nodes"], p0["isr_nodes"]) == (0, [0], [0])
