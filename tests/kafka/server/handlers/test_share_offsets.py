"""The share group offsets APIs (:mod:`brokerd.kafka.server.handlers.share_offsets`) on
a StringTransport and task.Clock: describe, alter and delete a share group's start
offsets, their refusals, and the merging of a group named twice."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.handlers.share_offsets import distinct_groups
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import share_offsets as so

from tests.kafka.server.handlers.test_share import ShareHandlerCase


class ShareOffsetsTests(ShareHandlerCase):
    def test_alter_creates_the_share_group_as_kafka_does(self) -> None:
        """AlterShareGroupOffsets of a group that does not exist yet succeeds (Kafka 4.4:
        offsets may be set before the first member joins); the group then exists."""
        self.send(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, so.AlterShareGroupOffsetsRequest(
            group_id="fresh", topics=(so.AlterShareOffsetsTopic(topic_name="t", partitions=(
                so.AlterShareOffsetsPartition(partition_index=0, start_offset=3),)),)))
        altered = self.one()
        assert altered.error_code == 0
        assert [(p.partition_index, p.error_code)
                for t in altered.responses for p in t.partitions] == [(0, 0)]
        self.send(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, so.DescribeShareGroupOffsetsRequest(
            groups=(so.DescribeShareOffsetsGroup(group_id="fresh", topics=(
                so.DescribeShareOffsetsTopic(topic_name="t", partitions=(0,)),)),)))
        (group,) = self.one().groups
        assert group.error_code == 0
        assert [(p.partition_index, p.start_offset) for t in group.topics
                for p in t.partitions] == [(0, 3)]
        # An empty id is still refused.
        self.send(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, so.AlterShareGroupOffsetsRequest(
            group_id="", topics=()))
        assert self.one().error_code == ErrorCode.INVALID_GROUP_ID

    def alter(self, group: str, offset: int, topic: str = "t", partition: int = 0) -> object:
        self.send(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, so.AlterShareGroupOffsetsRequest(
            group_id=group, topics=(so.AlterShareOffsetsTopic(topic_name=topic, partitions=(
                so.AlterShareOffsetsPartition(partition_index=partition,
                                              start_offset=offset),)),)))
        return self.one()

    def describe(self, group: str) -> so.DescribedShareOffsetsGroup:
        self.send(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, so.DescribeShareGroupOffsetsRequest(
            groups=(so.DescribeShareOffsetsGroup(group_id=group, topics=(
                so.DescribeShareOffsetsTopic(topic_name="t", partitions=(0, 7)),
                so.DescribeShareOffsetsTopic(topic_name="nope", partitions=(0,)),
            )),)))
        (group_answer,) = self.one().groups
        return group_answer

    def test_describe_an_unknown_group_or_partition(self) -> None:
        unknown = self.describe("nobody")
        self.assertEqual(unknown.error_code, ErrorCode.GROUP_ID_NOT_FOUND)
        self.alter("h", 2)
        known = self.describe("h")
        rows = {(t.topic_name, p.partition_index): (p.error_code, p.start_offset, p.lag)
                for t in known.topics for p in t.partitions}
        self.assertEqual(rows[("t", 0)], (0, 2, 3))  # five records, from offset 2
        self.assertEqual(rows[("t", 7)][0], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self.assertEqual(rows[("nope", 0)][0], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def test_alter_refuses_bad_partitions_and_a_group_with_members(self) -> None:
        negative = self.alter("h", -1)
        unknown = self.alter("h", 1, topic="nope")
        self.assertEqual([p.error_code for t in negative.responses for p in t.partitions],
                         [ErrorCode.INVALID_REQUEST])
        self.assertEqual([p.error_code for t in unknown.responses for p in t.partitions],
                         [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
        self.join()
        busy = self.alter("g", 1)
        self.assertEqual(busy.error_code, ErrorCode.NON_EMPTY_GROUP)

    def test_delete_forgets_the_groups_topics(self) -> None:
        self.alter("h", 4)
        self.send(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, so.DeleteShareGroupOffsetsRequest(
            group_id="h", topics=(so.DeleteShareOffsetsTopic(topic_name="t"),
                                  so.DeleteShareOffsetsTopic(topic_name="nope"))))
        deleted = self.one()
        self.assertEqual([(t.topic_name, t.error_code) for t in deleted.responses],
                         [("t", 0), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
        self.assertNotIn(("t", 0), self.service.describe("h"))
        self.send(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, so.DeleteShareGroupOffsetsRequest(
            group_id="nobody", topics=()))
        self.assertEqual(self.one().error_code, ErrorCode.GROUP_ID_NOT_FOUND)


def topic(name: str, *partitions: int) -> so.DescribeShareOffsetsTopic:
    return so.DescribeShareOffsetsTopic(topic_name=name, partitions=partitions)


class DistinctGroupsTests(SynchronousTestCase):
    def test_a_group_named_twice_is_asked_once_for_both(self) -> None:
        G = so.DescribeShareOffsetsGroup
        merged = distinct_groups([
            G(group_id="a", topics=(topic("t", 0, 1),)),
            G(group_id="b", topics=(topic("t", 0),)),
            G(group_id="a", topics=(topic("t", 1, 2), topic("u", 0))),
            G(group_id="b", topics=None),
        ])
        self.assertEqual([g.group_id for g in merged], ["a", "b"])
        a, b = merged
        assert a.topics is not None
        self.assertEqual([(t.topic_name, t.partitions) for t in a.topics],
                         [("t", (0, 1, 2)), ("u", (0,))])
        self.assertIsNone(b.topics)  # every topic, as the second entry asked
