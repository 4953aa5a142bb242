"""The ACL rules of the group describe APIs, run on their own: what the principal may not
DESCRIBE is taken out of the handlers' answers (ConsumerGroupDescribe, ShareGroupDescribe,
DescribeShareGroupOffsets), and each group id is answered once."""

from __future__ import annotations

import uuid
from typing import Any

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.acl_gate import Access
from brokerd.kafka.server.handlers import consumer_groups, share, share_offsets
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.messages import consumer_groups as cg
from brokerd.kafka.wire.messages import share as sm
from brokerd.kafka.wire.messages import share_offsets as so
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import (
    AclAuthorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    make_binding,
)

from tests.fake_core import FakeCore

TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GAF = ErrorCode.GROUP_AUTHORIZATION_FAILED


def alice() -> Access:
    """User:alice may DESCRIBE the groups ``g*`` and the topic ``open``."""
    authorizer = AclAuthorizer([
        make_binding(ResourceType.GROUP, "g", PatternType.PREFIXED, "User:alice", "*",
                     Operation.DESCRIBE, Permission.ALLOW),
        make_binding(ResourceType.TOPIC, "open", PatternType.LITERAL, "User:alice", "*",
                     Operation.DESCRIBE, Permission.ALLOW),
    ], [])
    return Access(authorizer, "User:alice", "10.1.2.3", FakeCore())  # type: ignore[arg-type]


def request(key: ApiKey, body: Any) -> Request:
    return Request(RequestHeader(int(key), 1, 1, "test"), body)


def assigned(*topics: str) -> cg.DescribedAssignment:
    return cg.DescribedAssignment(topic_partitions=tuple(
        cg.DescribedTopicPartitions(topic_id=uuid.UUID(int=i + 1), topic_name=t, partitions=(0,))
        for i, t in enumerate(topics)
    ))


def test_consumer_group_describe() -> None:
    gate = consumer_groups.describe_rule(alice(), request(
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        cg.ConsumerGroupDescribeRequest(group_ids=("g1", "x", "g2", "g1", "x", "g3")),
    ))
    assert gate.answer is None
    assert gate.request.body.group_ids == ("g1", "g2", "g3")
    described = cg.ConsumerGroupDescribeResponse(groups=(
        cg.DescribedConsumerGroup(group_id="g1", members=(cg.DescribedMember(
            member_id="a", assignment=assigned("open"), target_assignment=assigned("secret")),)),
        cg.DescribedConsumerGroup(group_id="g2", members=(cg.DescribedMember(
            member_id="b", subscribed_topic_names=("open", "secret")),)),
        cg.DescribedConsumerGroup(group_id="g3", members=(cg.DescribedMember(
            member_id="c", subscribed_topic_names=("open",), assignment=assigned("open")),)),
    ))
    answer = gate.finish(described)
    assert [(g.group_id, g.error_code, len(g.members)) for g in answer.groups] == [
        ("g1", TAF, 0), ("g2", TAF, 0), ("g3", 0, 1), ("x", GAF, 0)]
    assert answer.groups[0].error_message == (
        "The group has described topic(s) that the client is not authorized to describe.")


def test_share_group_describe() -> None:
    gate = share.describe_rule(alice(), request(
        ApiKey.SHARE_GROUP_DESCRIBE,
        sm.ShareGroupDescribeRequest(group_ids=("g1", "x", "g2", "x", "g1")),
    ))
    assert gate.request.body.group_ids == ("g1", "g2")
    described = sm.ShareGroupDescribeResponse(groups=(
        sm.ShareDescribedGroup(group_id="g1", members=(sm.ShareGroupMember(
            member_id="a", subscribed_topic_names=("open",), assignment=assigned("secret")),)),
        sm.ShareDescribedGroup(group_id="g2", members=(sm.ShareGroupMember(
            member_id="b", subscribed_topic_names=("open",), assignment=assigned("open")),)),
    ))
    answer = gate.finish(described)
    assert [(g.group_id, g.error_code, len(g.members)) for g in answer.groups] == [
        ("g1", TAF, 0), ("g2", 0, 1), ("x", GAF, 0)]


def offsets(name: str, *partitions: int) -> so.DescribedShareOffsetsTopic:
    return so.DescribedShareOffsetsTopic(topic_name=name, partitions=tuple(
        so.DescribedShareOffsetsPartition(partition_index=p, start_offset=5, lag=1)
        for p in partitions
    ))


def test_describe_share_group_offsets() -> None:
    secret = so.DescribeShareOffsetsTopic(topic_name="secret", partitions=(0, 1))
    opened = so.DescribeShareOffsetsTopic(topic_name="open", partitions=(0,))
    gate = share_offsets.describe_rule(alice(), request(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        so.DescribeShareGroupOffsetsRequest(groups=(
            so.DescribeShareOffsetsGroup(group_id="g-all"),
            so.DescribeShareOffsetsGroup(group_id="g-named", topics=(secret,)),
            so.DescribeShareOffsetsGroup(group_id="x"),
            so.DescribeShareOffsetsGroup(group_id="g-named", topics=(opened,)),
            so.DescribeShareOffsetsGroup(group_id="x"),
        )),
    ))
    # Each group asked once; the named topic it may not DESCRIBE is not asked at all.
    assert gate.request.body.groups == (
        so.DescribeShareOffsetsGroup(group_id="g-all"),
        so.DescribeShareOffsetsGroup(group_id="g-named", topics=(opened,)),
    )
    answer = gate.finish(so.DescribeShareGroupOffsetsResponse(groups=(
        so.DescribedShareOffsetsGroup(
            group_id="g-all", topics=(offsets("secret", 0, 1), offsets("open", 0))),
        so.DescribedShareOffsetsGroup(group_id="g-named", topics=(offsets("open", 0),)),
    )))
    every, named, refused = answer.groups
    assert [t.topic_name for t in every.topics] == ["open"]
    assert [(t.topic_name, [(p.partition_index, p.error_code, p.start_offset)
                            for p in t.partitions]) for t in named.topics] == [
        ("open", [(0, 0, 5)]), ("secret", [(0, TAF, -1), (1, TAF, -1)])]
    assert (refused.group_id, refused.error_code) == ("x", GAF)


def test_distinct_groups_merge_what_each_entry_asks() -> None:
    t = so.DescribeShareOffsetsTopic
    g = so.DescribeShareOffsetsGroup
    merged = share_offsets.distinct_groups([
        g(group_id="a", topics=(t(topic_name="t", partitions=(0,)),)),
        g(group_id="b", topics=(t(topic_name="t", partitions=(0,)),)),
        g(group_id="a", topics=(t(topic_name="t", partitions=(1, 0)),
                                t(topic_name="u", partitions=(2,)))),
        g(group_id="b"),
    ])
    assert merged == (
        g(group_id="a", topics=(t(topic_name="t", partitions=(0, 1)),
                                t(topic_name="u", partitions=(2,)))),
        g(group_id="b"),
    )


def test_a_group_named_thousands_of_times_is_merged_in_one_pass() -> None:
    # Merging entry by entry rebuilt the whole topic list per repeat: 8,000 repeats of
    # one group, each naming a new topic, held the reactor for 91 s.
    t = so.DescribeShareOffsetsTopic
    g = so.DescribeShareOffsetsGroup
    repeats = 20_000
    (merged,) = share_offsets.distinct_groups(
        g(group_id="g", topics=(t(topic_name=f"t{n}", partitions=(0, 1)),))
        for n in range(repeats)
    )
    assert merged.topics is not None and len(merged.topics) == repeats
    assert merged.topics[-1] == t(topic_name=f"t{repeats - 1}", partitions=(0, 1))
