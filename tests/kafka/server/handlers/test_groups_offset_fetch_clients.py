"""OffsetFetch ``require_stable`` with real clients against a real ``twistd broker``: a
read_committed confluent-kafka consumer asks for a group's committed offset while a
transaction holds an offset for it (sent with ``send_offsets_to_transaction``, not yet
committed). The broker answers UNSTABLE_OFFSET_COMMIT, which librdkafka retries, so the
call does not return the stale offset; once the transaction commits it returns the new
one. A read_uncommitted consumer and kafka-python (which never ask for stable offsets)
get the last completed offset throughout.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.control_plane_helpers import admin, create_topic
from tests.kafka_helpers import WAIT, module_broker
from tests.txn_helpers import conf, confluent, txn_producer

pytestmark = [pytest.mark.clients, pytest.mark.broker]

#: How long the read_committed consumer is given while the transaction is open: the
#: broker keeps answering UNSTABLE_OFFSET_COMMIT, so the call runs out of it.
OPEN_WAIT_S = 3.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    confluent()
    yield from module_broker(tmp_path_factory, "offset-fetch-clients")


def committed(broker: BrokerProcess, group: str, topic: str, isolation: str,
              timeout: float) -> int:
    ck = confluent()
    consumer = ck.Consumer(conf(broker, **{
        "group.id": group, "isolation.level": isolation, "enable.auto.commit": False,
    }))
    try:
        (tp,) = consumer.committed([ck.TopicPartition(topic, 0)], timeout=timeout)
        offset: int = tp.offset
        return offset
    finally:
        consumer.close()


def kafka_python_committed(broker: BrokerProcess, group: str, topic: str) -> Any:
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.kafka_bootstrap, group_id=group, enable_auto_commit=False
    )
    try:
        return consumer.committed(kafka.TopicPartition(topic, 0))
    finally:
        consumer.close()


def test_read_committed_waits_for_the_transactions_offset(broker: BrokerProcess) -> None:
    ck = confluent()
    topic, group = "of-stable", "of-stable-group"
    create_topic(broker, topic, 1)
    plain = ck.Consumer(conf(broker, **{"group.id": group, "enable.auto.commit": False}))
    plain.commit(offsets=[ck.TopicPartition(topic, 0, 2)], asynchronous=False)
    metadata = plain.consumer_group_metadata()
    plain.close()

    producer = txn_producer(broker, "of-stable-tx")
    producer.begin_transaction()
    producer.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 5)], metadata, WAIT)

    with pytest.raises(ck.KafkaException) as raised:
        committed(broker, group, topic, "read_committed", OPEN_WAIT_S)
    assert raised.value.args[0].code() == ck.KafkaError._TIMED_OUT, raised.value
    assert committed(broker, group, topic, "read_uncommitted", WAIT) == 2
    assert kafka_python_committed(broker, group, topic) == 2

    producer.commit_transaction(WAIT)
    assert committed(broker, group, topic, "read_committed", WAIT) == 5
    assert kafka_python_committed(broker, group, topic) == 5


def test_a_deleted_topics_committed_offsets_go_with_it(broker: BrokerProcess) -> None:
    """As Kafka: a topic created again under a deleted one's name has no committed
    offsets, so its consumers start by auto.offset.reset, not where the old one's
    stopped (other topics' offsets of the group stay)."""
    ck = confluent()
    create_topic(broker, "ephemeral")
    create_topic(broker, "lasting")
    consumer = ck.Consumer(conf(broker, **{"group.id": "keeper", "enable.auto.commit": False}))
    try:
        consumer.commit(offsets=[
            ck.TopicPartition("ephemeral", 0, 7), ck.TopicPartition("lasting", 0, 3),
        ], asynchronous=False)
    finally:
        consumer.close()
    assert committed(broker, "keeper", "ephemeral", "read_uncommitted", WAIT) == 7
    client = admin(broker)  # held: its futures fail once it is collected
    (deleted,) = client.delete_topics(["ephemeral"], operation_timeout=10).values()
    assert deleted.result(WAIT) is None
    create_topic(broker, "ephemeral")
    assert committed(broker, "keeper", "ephemeral", "read_uncommitted", WAIT) == ck.OFFSET_INVALID
    assert committed(broker, "keeper", "lasting", "read_uncommitted", WAIT) == 3
    broker.stop()
    broker.start()  # durably so
    assert committed(broker, "keeper", "ephemeral", "read_uncommitted", WAIT) == ck.OFFSET_INVALID
    assert committed(broker, "keeper", "lasting", "read_uncommitted", WAIT) == 3
