"""OffsetForLeaderEpoch (23) and DescribeQuorum (55) as one node answers them, through the
real listener protocol over a StringTransport (the fake core of test_protocol), with and
without ACLs; and the epoch lookup on its own."""

from __future__ import annotations

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.handlers.leadership import (
    METADATA_PARTITION,
    METADATA_TOPIC,
    epoch_end_offset,
    epoch_fence,
)
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import leadership as lead
from brokerd.kafka.wire.messages import placement as pl
from brokerd.security.acl import Operation, ResourceType

from tests.kafka.listener.test_protocol import KafkaTestCase, batch
from tests.kafka.server.handlers.test_acl import AclTestCase


def test_epoch_end_offset_is_kafkas_lookup_over_one_epoch() -> None:
    # The current epoch ends at the log end; an earlier one where epoch 0 starts.
    assert epoch_end_offset(0, 5, 42) == (0, 42)
    assert epoch_end_offset(-3, 5, 42) == (-3, 5)
    # An undefined or later epoch is unknown.
    assert epoch_end_offset(-1, 5, 42) == (-1, -1)
    assert epoch_end_offset(1, 5, 42) == (-1, -1)


def test_epoch_fence() -> None:
    assert epoch_fence(-1) is None
    assert epoch_fence(0) is None
    assert epoch_fence(1) is ErrorCode.UNKNOWN_LEADER_EPOCH
    assert epoch_fence(-2) is ErrorCode.FENCED_LEADER_EPOCH


def _epochs(*parts: tuple[str, int, int, int]) -> lead.OffsetForLeaderEpochRequest:
    topics: dict[str, list[lead.OffsetForLeaderPartition]] = {}
    for topic, partition, current, asked in parts:
        topics.setdefault(topic, []).append(lead.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=current, leader_epoch=asked))
    return lead.OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=tuple(lead.OffsetForLeaderTopic(topic=t, partitions=tuple(ps))
                     for t, ps in topics.items()),
    )


def _quorum(topic: str = METADATA_TOPIC, *partitions: int) -> lead.DescribeQuorumRequest:
    return lead.DescribeQuorumRequest(topics=(lead.DescribeQuorumTopic(
        topic_name=topic,
        partitions=tuple(lead.DescribeQuorumPartition(partition_index=p)
                         for p in partitions or (METADATA_PARTITION,)),
    ),))


class OffsetForLeaderEpochTests(KafkaTestCase):
    def test_the_current_epoch_ends_at_the_log_end(self) -> None:
        self.core.add_topic("t", 2)
        for _ in range(3):
            self.produce("t", 0, batch())
        self.responses()
        for version in (2, 3, 4):
            self.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, _epochs(
                ("t", 0, 0, 0), ("t", 1, -1, 0), ("t", 0, -1, 1), ("t", 0, -1, -1)))
            (topic,) = self.one().topics
            self.assertEqual(topic.topic, "t")
            self.assertEqual(
                [(p.partition, p.error_code, p.leader_epoch, p.end_offset)
                 for p in topic.partitions],
                [(0, 0, 0, 3), (1, 0, 0, 0), (0, 0, -1, -1), (0, 0, -1, -1)],
            )

    def test_a_stale_or_future_current_epoch_and_an_unknown_partition(self) -> None:
        self.core.add_topic("t")
        self.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, _epochs(
            ("t", 0, -5, 0), ("t", 0, 3, 0), ("t", 9, -1, 0), ("gone", 0, -1, 0)))
        codes = [(t.topic, p.partition, p.error_code)
                 for t in self.one().topics for p in t.partitions]
        self.assertEqual(codes, [
            ("t", 0, ErrorCode.FENCED_LEADER_EPOCH),
            ("t", 0, ErrorCode.UNKNOWN_LEADER_EPOCH),
            ("t", 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("gone", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ])

    def test_v1_is_refused_as_kafka_4_refuses_it(self) -> None:
        self.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, 1, _epochs(("t", 0, -1, 0)))
        self.assertTrue(self.tr.disconnecting)


class DescribeQuorumTests(KafkaTestCase):
    def test_one_voter_itself_the_leader(self) -> None:
        self.clock.advance(5)
        for version in (0, 1, 2):
            self.send(ApiKey.DESCRIBE_QUORUM, version, _quorum())
            resp = self.one()
            self.assertEqual(resp.error_code, 0)
            (topic,) = resp.topics
            (part,) = topic.partitions
            self.assertEqual(
                (topic.topic_name, part.partition_index, part.error_code, part.leader_id,
                 part.leader_epoch, part.high_watermark, part.observers),
                (METADATA_TOPIC, 0, 0, 0, 0, 0, ()),
            )
            (voter,) = part.current_voters
            self.assertEqual((voter.replica_id, voter.log_end_offset), (0, 0))
            if version >= 1:
                self.assertEqual(
                    (voter.last_fetch_timestamp, voter.last_caught_up_timestamp),
                    (-1, 5000),
                )
            if version >= 2:
                (node,) = resp.nodes
                (listener,) = node.listeners
                self.assertEqual(
                    (node.node_id, listener.host, listener.port),
                    (0, "broker.example", 19092),
                )

    def test_any_other_partition_is_unknown(self) -> None:
        for request in (_quorum("t"), _quorum(METADATA_TOPIC, 1), _quorum(METADATA_TOPIC, 0, 0)):
            self.send(ApiKey.DESCRIBE_QUORUM, 2, request)
            resp = self.one()
            self.assertEqual(resp.error_code, 0)
            codes = {p.error_code for t in resp.topics for p in t.partitions}
            self.assertEqual(codes, {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
            self.assertEqual(resp.nodes, ())


class LeadershipAclTests(AclTestCase):
    def test_offset_for_leader_epoch_needs_describe_on_the_topic(self) -> None:
        self.core.add_topic("seen")
        self.core.add_topic("hidden")
        self.grant(ResourceType.TOPIC, "seen", Operation.DESCRIBE)
        self.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, _epochs(
            ("seen", 0, -1, 0), ("hidden", 0, -1, 0)))
        codes = {t.topic: t.partitions[0].error_code for t in self.one().topics}
        self.assertEqual(codes, {"seen": 0, "hidden": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
        # A follower's right, CLUSTER_ACTION, covers every topic.
        self.grant(ResourceType.CLUSTER, "kafka-cluster", Operation.CLUSTER_ACTION)
        self.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, _epochs(("hidden", 0, -1, 0)))
        self.assertEqual(self.one().topics[0].partitions[0].error_code, 0)

    def test_describe_quorum_needs_describe_on_the_cluster(self) -> None:
        self.send(ApiKey.DESCRIBE_QUORUM, 2, _quorum())
        resp = self.one()
        self.assertEqual((resp.error_code, resp.topics),
                         (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ()))
        self.grant(ResourceType.CLUSTER, "kafka-cluster", Operation.DESCRIBE)
        self.send(ApiKey.DESCRIBE_QUORUM, 2, _quorum())
        self.assertEqual(self.one().topics[0].partitions[0].leader_id, 0)


class PlacementTests(KafkaTestCase):
    """ElectLeaders and the reassignment APIs: one replica per partition, this node."""

    def test_no_election_is_ever_needed(self) -> None:
        self.core.add_topic("t", 2)
        for version in (0, 1, 2):
            self.send(ApiKey.ELECT_LEADERS, version, pl.ElectLeadersRequest(
                topic_partitions=(pl.ElectionTopicPartitions(topic="t", partitions=(0, 1, 5)),
                                  pl.ElectionTopicPartitions(topic="nope", partitions=(0,)))))
            got = [(r.topic, p.partition_id, p.error_code)
                   for r in self.one().replica_election_results for p in r.partition_result]
            self.assertEqual(got, [
                ("t", 0, ErrorCode.ELECTION_NOT_NEEDED), ("t", 1, ErrorCode.ELECTION_NOT_NEEDED),
                ("t", 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ])
        self.send(ApiKey.ELECT_LEADERS, 2, pl.ElectLeadersRequest(
            election_type=pl.UNCLEAN_ELECTION, topic_partitions=None))
        resp = self.one()
        self.assertEqual((resp.error_code, resp.replica_election_results), (0, ()))
        self.send(ApiKey.ELECT_LEADERS, 2, pl.ElectLeadersRequest(election_type=7))
        self.assertEqual(self.one().error_code, ErrorCode.INVALID_REQUEST)

    def test_reassignments(self) -> None:
        self.core.add_topic("t", 1)

        def alter(replicas: tuple[int, ...] | None, partition: int = 0,
                  allow_rf: bool = True) -> tuple[int, str | None]:
            self.send(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 1,
                      pl.AlterPartitionReassignmentsRequest(
                          allow_replication_factor_change=allow_rf,
                          topics=(pl.ReassignableTopic(name="t", partitions=(
                              pl.ReassignablePartition(partition_index=partition,
                                                       replicas=replicas),)),)))
            resp = self.one()
            self.assertEqual(resp.error_code, 0)
            part = resp.responses[0].partitions[0]
            return part.error_code, part.error_message

        self.assertEqual(alter((0,)), (0, None))  # where it is already
        self.assertEqual(alter(None)[0], ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
        self.assertEqual(alter((0, 1)), (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 1, but no such broker is "
            "registered."))
        self.assertEqual(alter((0, 1), allow_rf=False)[0], ErrorCode.INVALID_REPLICATION_FACTOR)
        self.assertEqual(alter((0, 0))[0], ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        self.assertEqual(alter(())[0], ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        self.assertEqual(alter((0,), partition=3)[0], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self.send(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                  pl.ListPartitionReassignmentsRequest(topics=None))
        resp = self.one()
        self.assertEqual((resp.error_code, resp.topics), (0, ()))


class PlacementAclTests(AclTestCase):
    def test_alter_on_the_cluster_to_elect_or_reassign_describe_to_list(self) -> None:
        self.core.add_topic("t")
        self.send(ApiKey.ELECT_LEADERS, 2, pl.ElectLeadersRequest(
            topic_partitions=(pl.ElectionTopicPartitions(topic="t", partitions=(0,)),)))
        resp = self.one()
        self.assertEqual(resp.error_code, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        self.assertEqual(resp.replica_election_results[0].partition_result[0].error_code,
                         ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        self.send(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0,
                  pl.AlterPartitionReassignmentsRequest())
        self.assertEqual(self.one().error_code, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        self.send(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, pl.ListPartitionReassignmentsRequest())
        self.assertEqual(self.one().error_code, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        self.grant(ResourceType.CLUSTER, "kafka-cluster", Operation.ALTER)
        self.send(ApiKey.ELECT_LEADERS, 2, pl.ElectLeadersRequest(
            topic_partitions=(pl.ElectionTopicPartitions(topic="t", partitions=(0,)),)))
        self.assertEqual(self.one().replica_election_results[0].partition_result[0].error_code,
                         ErrorCode.ELECTION_NOT_NEEDED)
