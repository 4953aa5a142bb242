"""Kafka's naming rules for new topics on every way in, against a real ``twistd broker``:
no internal topic name (``__consumer_offsets``, ``__transaction_state``) may be created
or written to by a client, and no topic whose name equals an existing one once '.' and
'_' are taken as the same character. Kafka answers INVALID_TOPIC_EXCEPTION (17); the
native protocol INVALID_TOPIC (3). Ways in: Kafka CreateTopics (confluent-kafka and
kafka-python admin clients), Kafka Metadata and Produce auto-create (by hand on the
wire), native create and produce auto-create (brokerd.client), and brokerctl."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from brokerd.client import NativeError
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis
from brokerd.native.messages import ErrorCode as NativeCode
from brokerd.storage.record.encode import encode_batch

from tests.brokerproc import BROKERCTL, BrokerProcess, env
from tests.control_plane_helpers import admin, confluent, create_topic, kafka_error
from tests.kafka_helpers import WAIT, RawKafka, module_broker

pytestmark = [pytest.mark.clients, pytest.mark.broker]

INVALID_TOPIC_EXCEPTION = 17
INTERNAL = ("__consumer_offsets", "__transaction_state")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    confluent()
    yield from module_broker(tmp_path_factory, "topic-names")


def confluent_create(broker: BrokerProcess, name: str) -> Any:
    """The KafkaError of a CreateTopics through confluent-kafka (None on success)."""
    from confluent_kafka.admin import NewTopic

    client = admin(broker)
    future = client.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name]
    try:
        future.result(WAIT)
    except Exception as e:
        return kafka_error(e)
    return None


def metadata_topic(broker: BrokerProcess, name: str) -> apis.MetadataTopic:
    """One topic of a Metadata v8 request that allows auto-create."""
    with RawKafka(broker) as conn:
        response = conn.call(ApiKey.METADATA, 8, apis.MetadataRequest(
            topics=(apis.MetadataRequestTopic(name=name),), allow_auto_topic_creation=True))
    (topic,) = response.topics
    assert isinstance(topic, apis.MetadataTopic)
    return topic


def produce_error(broker: BrokerProcess, name: str) -> tuple[int, str | None]:
    batch = encode_batch([b"v"], timestamp_ms=int(time.time() * 1000))
    with RawKafka(broker) as conn:
        response = conn.call(ApiKey.PRODUCE, 8, apis.ProduceRequest(
            acks=-1, timeout_ms=5000, topic_data=(apis.ProduceTopicData(
                name=name, partition_data=(apis.ProducePartitionData(index=0, records=batch),)),)))
    part = response.responses[0].partition_responses[0]
    return part.error_code, part.error_message


def brokerctl(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BROKERCTL), "--bootstrap", broker.native_bootstrap, *args],
        capture_output=True, text=True, env=env(), timeout=WAIT, check=False,
    )


@pytest.mark.parametrize("name", INTERNAL)
def test_internal_names_refused_on_every_way_in(broker: BrokerProcess, name: str) -> None:
    err = confluent_create(broker, name)
    assert err is not None and err.code() == INVALID_TOPIC_EXCEPTION
    assert "reserved for Kafka's internal topics" in err.str()

    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidTopicError

    kp = KafkaAdminClient(bootstrap_servers=broker.kafka_bootstrap, request_timeout_ms=10000)
    try:
        with pytest.raises(InvalidTopicError):
            kp.create_topics([NewTopic(name, 1, 1)])
    finally:
        kp.close()

    # Metadata presents the name as Kafka's internal topic (docs/kafka.md, "Internal
    # topics"); what it names is still no topic any client can create or write.
    presented = metadata_topic(broker, name)
    assert presented.error_code == 0 and presented.is_internal
    code, text = produce_error(broker, name)
    assert code == INVALID_TOPIC_EXCEPTION and "internal" in (text or "")

    with broker.client() as client:
        for attempt in (
            lambda: client.create_topic(name, 1),
            lambda: client.produce(name, 0, [b"v"]),
        ):
            with pytest.raises(NativeError) as caught:
                attempt()
            assert caught.value.code == NativeCode.INVALID_TOPIC
            assert "internal" in caught.value.message
    done = brokerctl(broker, "topics", "create", name)
    assert done.returncode == 1 and "reserved for Kafka's internal topics" in done.stderr
    # Nothing was created by any of them.
    assert name not in brokerctl(broker, "topics", "list").stdout


def test_dot_underscore_collisions_refused_on_every_way_in(broker: BrokerProcess) -> None:
    create_topic(broker, "orders.eu")
    err = confluent_create(broker, "orders_eu")
    assert err is not None and err.code() == INVALID_TOPIC_EXCEPTION
    assert "collides with existing topic 'orders.eu'" in err.str()

    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidTopicError

    kp = KafkaAdminClient(bootstrap_servers=broker.kafka_bootstrap, request_timeout_ms=10000)
    try:
        with pytest.raises(InvalidTopicError):
            kp.create_topics([NewTopic("orders_eu", 1, 1)])
    finally:
        kp.close()

    topic = metadata_topic(broker, "orders_eu")
    assert (topic.error_code, topic.partitions) == (INVALID_TOPIC_EXCEPTION, ())
    code, text = produce_error(broker, "orders_eu")
    assert code == INVALID_TOPIC_EXCEPTION and "collides" in (text or "")

    with broker.client() as client:
        client.create_topic("native_one", 1)
        for attempt in (
            lambda: client.create_topic("native.one", 1),
            lambda: client.produce("native.one", 0, [b"v"]),  # auto-create
            lambda: client.produce("orders_eu", 0, [b"v"]),
        ):
            with pytest.raises(NativeError) as caught:
                attempt()
            assert caught.value.code == NativeCode.INVALID_TOPIC
            assert "collides with existing topic" in caught.value.message
        assert client.produce("orders.eu", 0, [b"v"]) == 0  # the existing one works

    refused = brokerctl(broker, "topics", "create", "native-one.x")
    assert refused.returncode == 0  # no collision: created, with Kafka's warning
    assert "could collide" in refused.stderr
    refused = brokerctl(broker, "topics", "create", "native-one_x")
    assert refused.returncode == 1
    assert "collides with existing topic 'native-one.x'" in refused.stderr
    listed = brokerctl(broker, "topics", "list").stdout.split()
    assert "orders_eu" not in listed and "native.one" not in listed


def test_a_name_without_dot_or_underscore_gets_no_warning(broker: BrokerProcess) -> None:
    done = brokerctl(broker, "topics", "create", "plain-name")
    assert done.returncode == 0 and done.stderr == ""


def test_no_package_or_module_shadows_a_standard_library_module() -> None:
    """A script run as a file (``python tests/some_child.py``) has its folder first on
    ``sys.path``: a ``tests/operator`` package there hid the standard library's
    ``operator`` from everything the child imported. (brokerd's own folders are never
    first on ``sys.path``: its children run with ``-m`` or ``-c``.)"""
    import sys
    from pathlib import Path

    top = Path(__file__).resolve().parent.parent
    shadows = [
        str(path.relative_to(top))
        for path in (top / "tests").iterdir()
        if ((path.is_dir() and (path / "__init__.py").exists()) or path.suffix == ".py")
        and path.stem in sys.stdlib_module_names
    ]
    assert shadows == [], f"named as standard library modules: {shadows}"
