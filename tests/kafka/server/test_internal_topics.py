"""Kafka's internal topics as clients see them (brokerd.kafka.server.internal_topics),
through the real listener protocol over a StringTransport: created at the first
coordinator lookup or when asked for by name, internal in Metadata and
DescribeTopicPartitions, refused for writes as Kafka refuses them."""

from __future__ import annotations

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.internal_topics import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    InternalTopics,
    internal_topic_id,
)
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages.topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsRequestTopic,
)
from brokerd.kafka.wire.requests import apis

from tests.kafka.listener.test_protocol import KafkaTestCase, batch


def test_ids_are_stable_per_cluster_and_name() -> None:
    a = internal_topic_id("cluster-a", OFFSETS_TOPIC)
    assert a == internal_topic_id("cluster-a", OFFSETS_TOPIC)
    assert a != internal_topic_id("cluster-b", OFFSETS_TOPIC)
    assert a != internal_topic_id("cluster-a", TRANSACTION_STATE_TOPIC)
    topics = InternalTopics(lambda: "cluster-a")
    assert topics.create("__share_group_state") is None  # no share coordinator
    assert topics.create("orders") is None
    info = topics.create(OFFSETS_TOPIC)
    assert info is not None and info.partitions == 50 and info.topic_id == a
    assert topics.by_id(a) is info and topics.create(OFFSETS_TOPIC) is info


class InternalTopicsTests(KafkaTestCase):
    def all_topics(self) -> dict[str, apis.MetadataTopic]:
        self.send(ApiKey.METADATA, 12, apis.MetadataRequest(topics=None))
        return {t.name: t for t in self.one().topics}

    def find_coordinator(self, key_type: int, key: str) -> None:
        self.send(ApiKey.FIND_COORDINATOR, 4, apis.FindCoordinatorRequest(
            key_type=key_type, coordinator_keys=(key,)))
        assert self.one().coordinators[0].error_code == 0

    def test_created_by_the_first_coordinator_lookup(self) -> None:
        self.core.add_topic("orders")
        self.assertEqual(set(self.all_topics()), {"orders"})
        self.find_coordinator(0, "g")
        topics = self.all_topics()
        self.assertEqual(set(topics), {"orders", OFFSETS_TOPIC})
        offsets = topics[OFFSETS_TOPIC]
        self.assertTrue(offsets.is_internal)
        self.assertFalse(topics["orders"].is_internal)
        self.assertEqual(len(offsets.partitions), 50)
        self.assertEqual({p.leader_id for p in offsets.partitions}, {0})
        self.find_coordinator(1, "tx")
        self.assertEqual(set(self.all_topics()), {"orders", OFFSETS_TOPIC,
                                                  TRANSACTION_STATE_TOPIC})

    def test_asked_for_by_name_or_by_id(self) -> None:
        self.send(ApiKey.METADATA, 12, apis.MetadataRequest(
            topics=(apis.MetadataRequestTopic(name=TRANSACTION_STATE_TOPIC),),
            allow_auto_topic_creation=False))
        (refused,) = self.one().topics
        self.assertEqual(refused.error_code, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self.send(ApiKey.METADATA, 12, apis.MetadataRequest(
            topics=(apis.MetadataRequestTopic(name=TRANSACTION_STATE_TOPIC),
                    apis.MetadataRequestTopic(name="__share_group_state")),
            allow_auto_topic_creation=True))
        created, share_state = self.one().topics
        self.assertEqual((created.error_code, created.is_internal), (0, True))
        self.assertEqual(share_state.error_code, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self.send(ApiKey.METADATA, 12, apis.MetadataRequest(
            topics=(apis.MetadataRequestTopic(name=None, topic_id=created.topic_id),)))
        (by_id,) = self.one().topics
        self.assertEqual((by_id.name, by_id.is_internal), (TRANSACTION_STATE_TOPIC, True))
        self.send(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, DescribeTopicPartitionsRequest(
            topics=(DescribeTopicPartitionsRequestTopic(name=TRANSACTION_STATE_TOPIC),)))
        (described,) = self.one().topics
        self.assertEqual((described.is_internal, len(described.partitions)), (True, 50))

    def test_writes_are_refused_as_kafka_refuses_them(self) -> None:
        self.find_coordinator(0, "g")
        self.produce(OFFSETS_TOPIC, 0, batch())
        (topic,) = self.one().responses
        (part,) = topic.partition_responses
        self.assertEqual(part.error_code, ErrorCode.INVALID_TOPIC_EXCEPTION)
        self.assertEqual(part.error_message, f"Cannot append to internal topic {OFFSETS_TOPIC}")
        self.assertNotIn(OFFSETS_TOPIC, self.core.topics())
