"""Metadata v10-13, CreateTopics v5-7, DeleteTopics v4-6 and DescribeCluster on the Kafka
listener, over StringTransport (topic IDs, the created topic's details, deletes by ID,
the cluster description and the ACL rules of each)."""

from __future__ import annotations

import uuid

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.wire.codec import ZERO_UUID, ApiKey
from brokerd.kafka.wire.messages.cluster import DescribeClusterRequest, DescribeClusterResponse
from brokerd.kafka.wire.messages.topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsRequestTopic,
    DescribeTopicPartitionsResponse,
    TopicPartitionsCursor,
)
from brokerd.kafka.wire.messages.topics import DeleteTopicState
from brokerd.kafka.wire.requests import apis
from brokerd.security.acl import CLUSTER_NAME, Operation, ResourceType
from brokerd.security.authorized_ops import SUPPORTED_OPERATIONS, operations_field
from brokerd.storage.config.topic_config import TOPIC_CONFIGS

from tests.kafka.listener.test_protocol import KafkaTestCase
from tests.kafka.server.handlers.test_acl import AclTestCase

OP = Operation
TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED
UNKNOWN_ID = uuid.UUID("5b0d1c3e-7a2f-4f7e-9c1d-2e3f4a5b6c7d")


def by_id(topic_id: uuid.UUID) -> apis.MetadataRequestTopic:
    return apis.MetadataRequestTopic(topic_id=topic_id, name=None)


def by_name(name: str) -> apis.MetadataRequestTopic:
    return apis.MetadataRequestTopic(name=name)


class MetadataTopicIdTests(KafkaTestCase):
    def topic_id(self, name: str) -> uuid.UUID:
        return self.core.topics()[name].topic_id

    def test_answers_carry_the_topics_ids(self) -> None:
        self.core.add_topic("a", 2)
        self.send(ApiKey.METADATA, 12, apis.MetadataRequest(
            topics=(by_name("a"), by_name("gone")), allow_auto_topic_creation=False))
        a, gone = self.one().topics
        self.assertEqual((a.name, a.topic_id, a.error_code), ("a", self.topic_id("a"), 0))
        self.assertNotEqual(a.topic_id, ZERO_UUID)
        # A name no topic has: the error, and the zero ID.
        self.assertEqual((gone.error_code, gone.topic_id),
                         (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ZERO_UUID))

    def test_by_id(self) -> None:
        self.core.add_topic("a", 3)
        self.send(ApiKey.METADATA, 12, apis.MetadataRequest(
            topics=(by_id(self.topic_id("a")), by_id(UNKNOWN_ID), by_id(self.topic_id("a")))))
        resp = self.one()
        found, unknown = resp.topics  # the repeated ID answered once
        self.assertEqual((found.name, found.topic_id, len(found.partitions)),
                         ("a", self.topic_id("a"), 3))
        self.assertEqual((unknown.error_code, unknown.name, unknown.topic_id),
                         (ErrorCode.UNKNOWN_TOPIC_ID, None, UNKNOWN_ID))

    def test_by_id_never_creates(self) -> None:
        self.send(ApiKey.METADATA, 13, apis.MetadataRequest(
            topics=(by_id(UNKNOWN_ID),), allow_auto_topic_creation=True))
        resp = self.one()
        self.assertEqual(resp.topics[0].error_code, ErrorCode.UNKNOWN_TOPIC_ID)
        self.assertEqual(resp.error_code, 0)
        self.assertEqual(self.core.topics(), {})

    def test_ids_before_v12_are_refused(self) -> None:
        # v10 and v11 carry the field, but Kafka answers topic IDs from v12 only.
        self.core.add_topic("a")
        for version in (10, 11):
            self.send(ApiKey.METADATA, version, apis.MetadataRequest(
                topics=(apis.MetadataRequestTopic(topic_id=self.topic_id("a"), name="a"),)))
            resp = self.one()
            self.assertEqual([(t.error_code, t.name) for t in resp.topics],
                             [(ErrorCode.INVALID_REQUEST, "a")])
            self.assertEqual(resp.brokers, ())

    def test_v13_top_level_error_of_a_refused_request(self) -> None:
        self.send(ApiKey.METADATA, 13, apis.MetadataRequest(
            topics=(apis.MetadataRequestTopic(name=None),)))
        resp = self.one()
        self.assertEqual(resp.error_code, ErrorCode.INVALID_REQUEST)
        self.assertEqual(resp.topics[0].error_code, ErrorCode.INVALID_REQUEST)

    def test_a_topic_created_again_has_a_new_id(self) -> None:
        # The entry is cached by name: a topic deleted and created again with the same
        # partition count must not be answered with the old ID (librdkafka keys its
        # partition count on it).
        self.core.add_topic("t", 2)
        self.send(ApiKey.METADATA, 12, apis.MetadataRequest(topics=(by_name("t"),)))
        first = self.one().topics[0].topic_id
        self.core.delete_topic("t")
        self.core.add_topic("t", 2)
        self.send(ApiKey.METADATA, 12, apis.MetadataRequest(topics=(by_name("t"),)))
        second = self.one().topics[0].topic_id
        self.assertNotEqual(first, second)
        self.assertEqual(second, self.topic_id("t"))

    def test_v11_has_no_cluster_authorized_operations(self) -> None:
        self.send(ApiKey.METADATA, 10, apis.MetadataRequest(
            topics=(), include_cluster_authorized_operations=True))
        self.assertEqual(self.one().cluster_authorized_operations,
                         operations_field(_cluster_ops()))
        # Decoded at v11 the flag is gone, and the answer has no such field.
        self.send(ApiKey.METADATA, 11, apis.MetadataRequest(
            topics=(), include_cluster_authorized_operations=True))
        self.assertEqual(self.one().cluster_authorized_operations,
                         apis.AUTHORIZED_OPERATIONS_OMITTED)


def _cluster_ops() -> frozenset[Operation]:
    """Every cluster operation (what a broker without an authorizer allows)."""
    return frozenset(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])


class CreateTopicsTests(KafkaTestCase):
    def create(self, version: int, *topics: apis.CreatableTopic,
               validate_only: bool = False) -> tuple[apis.CreatableTopicResult, ...]:
        self.send(ApiKey.CREATE_TOPICS, version, apis.CreateTopicsRequest(
            topics=topics, validate_only=validate_only))
        result: tuple[apis.CreatableTopicResult, ...] = self.one().topics
        return result

    def test_v7_answers_the_created_topic(self) -> None:
        (r,) = self.create(7, apis.CreatableTopic(
            name="t", num_partitions=-1, replication_factor=-1,
            configs=(apis.CreatableTopicConfig(name="retention.ms", value="3600000"),)))
        self.assertEqual(r.error_code, 0)
        self.assertEqual(r.topic_id, self.core.topics()["t"].topic_id)
        self.assertNotEqual(r.topic_id, ZERO_UUID)
        # The defaults the broker chose, so the client need not ask.
        self.assertEqual((r.num_partitions, r.replication_factor), (1, 1))
        assert r.configs is not None
        configs = {c.name: c for c in r.configs}
        self.assertEqual(set(configs), set(TOPIC_CONFIGS))
        retention = configs["retention.ms"]
        self.assertEqual((retention.value, retention.config_source, retention.read_only,
                          retention.is_sensitive), ("3600000", 1, False, False))
        self.assertEqual(configs["cleanup.policy"].config_source, 5)  # DEFAULT_CONFIG

    def test_validate_only_creates_nothing_and_has_no_id(self) -> None:
        (r,) = self.create(7, apis.CreatableTopic(
            name="t", num_partitions=4, replication_factor=1,
            configs=(apis.CreatableTopicConfig(name="cleanup.policy", value="compact"),)),
            validate_only=True)
        self.assertEqual(self.core.topics(), {})
        self.assertEqual((r.error_code, r.topic_id, r.num_partitions), (0, ZERO_UUID, 4))
        assert r.configs is not None
        self.assertEqual({c.name: c.value for c in r.configs}["cleanup.policy"], "compact")

    def test_a_failed_topic_has_no_details(self) -> None:
        self.core.add_topic("exists")
        (r,) = self.create(7, apis.CreatableTopic(name="exists", num_partitions=1))
        self.assertEqual((r.error_code, r.topic_id, r.num_partitions, r.replication_factor,
                          r.configs), (ErrorCode.TOPIC_ALREADY_EXISTS, ZERO_UUID, -1, -1, ()))
        self.assertIsNotNone(r.error_message)


class DeleteTopicsTests(KafkaTestCase):
    def delete(self, version: int, body: apis.DeleteTopicsRequest) -> list[tuple[object, ...]]:
        self.send(ApiKey.DELETE_TOPICS, version, body)
        return [(r.name, r.topic_id, r.error_code) for r in self.one().responses]

    def test_v6_by_name_or_by_id(self) -> None:
        self.core.add_topic("a")
        self.core.add_topic("b")
        a_id, b_id = (self.core.topics()[n].topic_id for n in ("a", "b"))
        got = self.delete(6, apis.DeleteTopicsRequest(topics=(
            DeleteTopicState(name="a"),
            DeleteTopicState(topic_id=b_id),
            DeleteTopicState(topic_id=UNKNOWN_ID),
            DeleteTopicState(name="nope"),
        )))
        self.assertEqual(got, [
            ("a", a_id, 0), ("b", b_id, 0),  # each answered with both name and ID
            (None, UNKNOWN_ID, ErrorCode.UNKNOWN_TOPIC_ID),
            ("nope", ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ])
        self.assertEqual(self.core.deleted, ["a", "b"])

    def test_v6_refuses_entries_naming_nothing_or_twice(self) -> None:
        self.core.add_topic("a")
        a_id = self.core.topics()["a"].topic_id
        got = self.delete(6, apis.DeleteTopicsRequest(topics=(
            DeleteTopicState(),
            DeleteTopicState(topic_id=a_id),
            DeleteTopicState(topic_id=a_id),
        )))
        self.assertEqual([code for _, _, code in got], [ErrorCode.INVALID_REQUEST] * 3)
        self.assertEqual(self.core.deleted, [])

    def test_v5_error_message(self) -> None:
        self.send(ApiKey.DELETE_TOPICS, 5, apis.DeleteTopicsRequest(topic_names=("nope",)))
        (r,) = self.one().responses
        self.assertEqual(r.error_code, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self.assertIn("nope", r.error_message or "")


class DescribeClusterTests(KafkaTestCase):
    def describe(
        self, version: int, *, endpoint_type: int = 1, include_ops: bool = False
    ) -> DescribeClusterResponse:
        self.send(ApiKey.DESCRIBE_CLUSTER, version, DescribeClusterRequest(
            include_cluster_authorized_operations=include_ops, endpoint_type=endpoint_type))
        resp: DescribeClusterResponse = self.one()
        return resp

    def test_the_one_broker(self) -> None:
        resp = self.describe(2, include_ops=True)
        self.assertEqual(resp.error_code, 0)
        (b,) = resp.brokers
        self.assertEqual((b.broker_id, b.host, b.port, b.rack, b.is_fenced),
                         (0, "broker.example", 19092, None, False))
        self.assertEqual((resp.controller_id, resp.endpoint_type),
                         (0, 1))
        self.assertTrue(resp.cluster_id)
        # No authorizer: every cluster operation.
        self.assertEqual(resp.cluster_authorized_operations,
                         operations_field(_cluster_ops()))

    def test_operations_only_when_asked(self) -> None:
        resp = self.describe(0)
        self.assertEqual(resp.cluster_authorized_operations,
                         apis.AUTHORIZED_OPERATIONS_OMITTED)

    def test_endpoint_types(self) -> None:
        # A broker asked for the controllers: MISMATCHED_ENDPOINT_TYPE (v1+); an
        # unknown type: UNSUPPORTED_ENDPOINT_TYPE; v0 cannot name one (INVALID_REQUEST).
        got = [
            self.describe(1, endpoint_type=2).error_code,
            self.describe(2, endpoint_type=7).error_code,
            self.describe(0, endpoint_type=2).error_code,
        ]
        self.assertEqual(got, [ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                               ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, 0])
        # (v0 has no endpoint_type on the wire: the broker decodes the default, 1.)


def partitions_request(
    *names: str, limit: int = 2000, cursor: tuple[str, int] | None = None
) -> DescribeTopicPartitionsRequest:
    return DescribeTopicPartitionsRequest(
        topics=tuple(DescribeTopicPartitionsRequestTopic(name=n) for n in names),
        response_partition_limit=limit,
        cursor=None if cursor is None else TopicPartitionsCursor(
            topic_name=cursor[0], partition_index=cursor[1]),
    )


class DescribeTopicPartitionsTests(KafkaTestCase):
    def ask(self, body: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
        self.send(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body)
        resp: DescribeTopicPartitionsResponse = self.one()
        return resp

    def test_every_topic_in_name_order_with_ids(self) -> None:
        self.core.add_topic("b", 2)
        self.core.add_topic("a", 1)
        resp = self.ask(partitions_request())
        self.assertEqual([(t.name, t.topic_id, len(t.partitions)) for t in resp.topics],
                         [("a", self.core.topics()["a"].topic_id, 1),
                          ("b", self.core.topics()["b"].topic_id, 2)])
        self.assertIsNone(resp.next_cursor)
        p = resp.topics[1].partitions[1]
        self.assertEqual((p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes,
                          p.eligible_leader_replicas), (1, 0, (0,), (0,), ()))
        # Always filled: no authorizer, every topic operation.
        self.assertNotEqual(resp.topics[0].topic_authorized_operations,
                            apis.AUTHORIZED_OPERATIONS_OMITTED)

    def test_limit_and_cursor(self) -> None:
        self.core.add_topic("a", 3)
        self.core.add_topic("b", 1)
        self.core.add_topic("c", 1)
        # The limit ends exactly with b: the cursor names the next topic, c, at 0.
        resp = self.ask(partitions_request(limit=4))
        self.assertEqual([t.name for t in resp.topics], ["a", "b"])
        self.assertEqual(resp.next_cursor, TopicPartitionsCursor(topic_name="c"))
        resp = self.ask(partitions_request(limit=2, cursor=("a", 1)))
        self.assertEqual([(t.name, [p.partition_index for p in t.partitions])
                          for t in resp.topics], [("a", [1, 2])])
        self.assertEqual(resp.next_cursor, TopicPartitionsCursor(topic_name="b"))
        # A limit below 1 is 1.
        resp = self.ask(partitions_request("a", limit=0))
        self.assertEqual(resp.next_cursor,
                         TopicPartitionsCursor(topic_name="a", partition_index=1))

    def test_unknown_and_invalid_names(self) -> None:
        resp = self.ask(partitions_request("nope", "bad/name"))
        self.assertEqual({t.name: (t.error_code, t.topic_id) for t in resp.topics}, {
            "nope": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ZERO_UUID),
            "bad/name": (ErrorCode.INVALID_TOPIC_EXCEPTION, ZERO_UUID),
        })
        self.assertEqual(self.core.topics(), {})  # never auto-created

    def test_bad_cursors_are_refused(self) -> None:
        self.core.add_topic("a", 2)
        for body in (partitions_request("a", cursor=("b", 0)),
                     partitions_request("a", cursor=("a", -1))):
            resp = self.ask(body)
            self.assertEqual([(t.name, t.error_code, t.partitions) for t in resp.topics],
                             [("a", ErrorCode.INVALID_REQUEST, ())])


class TopicIdAclTests(AclTestCase):
    def test_describe_topic_partitions_filters_before_counting(self) -> None:
        for name in ("a", "hidden", "z"):
            self.core.add_topic(name, 2)
        self.grant(ResourceType.TOPIC, "a", OP.DESCRIBE)
        self.grant(ResourceType.TOPIC, "z", OP.READ)  # READ implies DESCRIBE
        self.send(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, partitions_request(limit=2))
        resp = self.one()
        # The hidden topic neither takes the budget nor appears in the cursor.
        self.assertEqual([t.name for t in resp.topics], ["a"])
        self.assertEqual(resp.next_cursor, TopicPartitionsCursor(topic_name="z"))
        self.send(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, partitions_request("hidden", "z"))
        got = {t.name: (t.error_code, t.topic_id, len(t.partitions))
               for t in self.one().topics}
        self.assertEqual(got, {"hidden": (TAF, ZERO_UUID, 0),
                               "z": (0, self.core.topics()["z"].topic_id, 2)})

    def test_metadata_by_id(self) -> None:
        self.core.add_topic("hidden")
        self.core.add_topic("visible")
        self.grant(ResourceType.TOPIC, "visible", OP.DESCRIBE)
        hidden, visible = (self.core.topics()[n].topic_id for n in ("hidden", "visible"))
        self.send(ApiKey.METADATA, 12, apis.MetadataRequest(
            topics=(by_id(hidden), by_id(visible), by_id(UNKNOWN_ID))))
        got = {t.topic_id: (t.error_code, t.name) for t in self.one().topics}
        # IDs are not secret: a topic refused is TOPIC_AUTHORIZATION_FAILED, nameless.
        self.assertEqual(got, {hidden: (TAF, None), visible: (0, "visible"),
                               UNKNOWN_ID: (ErrorCode.UNKNOWN_TOPIC_ID, None)})

    def test_delete_by_id(self) -> None:
        for name in ("unseen", "seen", "mine"):
            self.core.add_topic(name)
        self.grant(ResourceType.TOPIC, "seen", OP.DESCRIBE)
        self.grant(ResourceType.TOPIC, "mine", OP.DESCRIBE)
        self.grant(ResourceType.TOPIC, "mine", OP.DELETE)
        ids = {n: self.core.topics()[n].topic_id for n in ("unseen", "seen", "mine")}
        self.send(ApiKey.DELETE_TOPICS, 6, apis.DeleteTopicsRequest(
            topics=tuple(DeleteTopicState(topic_id=i) for i in ids.values())))
        got = {r.topic_id: (r.name, r.error_code) for r in self.one().responses}
        self.assertEqual(got, {
            # A topic it may not see is not there for it.
            ids["unseen"]: (None, ErrorCode.UNKNOWN_TOPIC_ID),
            ids["seen"]: ("seen", TAF),
            ids["mine"]: ("mine", 0),
        })
        self.assertEqual(self.core.deleted, ["mine"])

    def test_describe_cluster_needs_no_right_but_tells_none(self) -> None:
        self.send(ApiKey.DESCRIBE_CLUSTER, 2, DescribeClusterRequest(
            include_cluster_authorized_operations=True))
        resp = self.one()
        self.assertEqual((resp.error_code, len(resp.brokers)), (0, 1))
        self.assertEqual(resp.cluster_authorized_operations, 0)
        self.grant(ResourceType.CLUSTER, CLUSTER_NAME, OP.DESCRIBE)
        self.grant(ResourceType.CLUSTER, CLUSTER_NAME, OP.ALTER)
        self.send(ApiKey.DESCRIBE_CLUSTER, 2, DescribeClusterRequest(
            include_cluster_authorized_operations=True))
        self.assertEqual(self.one().cluster_authorized_operations,
                         operations_field(frozenset({OP.DESCRIBE, OP.ALTER})))
