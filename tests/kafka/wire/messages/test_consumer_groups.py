"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) on the wire, byte for byte
as Kafka 4.2's schemas lay them out (every version flexible; the heartbeat answer's
assignment a nullable struct: one byte, -1 null, 1 present), and their ACL rules.
"""

from __future__ import annotations

import uuid

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.handlers.consumer_groups import describe_rule, heartbeat_rule
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.messages.consumer_groups import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedAssignment,
    DescribedConsumerGroup,
    DescribedMember,
    DescribedTopicPartitions,
    HeartbeatAssignment,
    HeartbeatTopicPartitions,
)
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import Request

from tests.kafka.wire.test_codec import NO_TAGS, _flex_request, carr, cs, encoded, i8, i16, i32

TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def test_heartbeat_v1_request() -> None:
    body = (
        cs("g") + cs("m") + i32(0) + cs(None) + cs("r") + i32(30000)
        + carr(cs("t")) + cs(None) + cs("uniform")
        + carr(TOPIC.bytes + carr(i32(1), i32(2)) + NO_TAGS) + NO_TAGS
    )
    req = apis.decode_request(_flex_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)).body
    assert req == ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, rack_id="r", rebalance_timeout_ms=30000,
        subscribed_topic_names=("t",), server_assignor="uniform",
        topic_partitions=(HeartbeatTopicPartitions(topic_id=TOPIC, partitions=(1, 2)),),
    )


def test_heartbeat_v0_has_no_regex_and_nulls_mean_unchanged() -> None:
    body = cs("g") + cs("m") + i32(3) + cs(None) + cs(None) + i32(-1) + b"\x00" + cs(None)
    body += b"\x00" + NO_TAGS
    req = apis.decode_request(_flex_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body)).body
    assert req.subscribed_topic_names is None and req.topic_partitions is None
    assert req.subscribed_topic_regex is None


def test_heartbeat_response_with_and_without_assignment() -> None:
    head = NO_TAGS + i32(0) + i16(0) + cs(None) + cs("m") + i32(4) + i32(5000)
    none = ConsumerGroupHeartbeatResponse(member_id="m", member_epoch=4,
                                          heartbeat_interval_ms=5000)
    assert encoded(1, none) == head + i8(-1) + NO_TAGS
    some = ConsumerGroupHeartbeatResponse(
        member_id="m", member_epoch=4, heartbeat_interval_ms=5000,
        assignment=HeartbeatAssignment(topic_partitions=(
            HeartbeatTopicPartitions(topic_id=TOPIC, partitions=(0,)),
        )),
    )
    assert encoded(1, some) == (
        head + i8(1) + carr(TOPIC.bytes + carr(i32(0)) + NO_TAGS) + NO_TAGS + NO_TAGS
    )


def test_describe_request_and_v1_response() -> None:
    req = apis.decode_request(_flex_request(
        ApiKey.CONSUMER_GROUP_DESCRIBE, 1, carr(cs("g")) + b"\x01" + NO_TAGS
    )).body
    assert req == ConsumerGroupDescribeRequest(group_ids=("g",),
                                               include_authorized_operations=True)
    tp = DescribedTopicPartitions(topic_id=TOPIC, topic_name="t", partitions=(0,))
    member = DescribedMember(
        member_id="m", member_epoch=2, client_id="c", client_host="/h",
        subscribed_topic_names=("t",), assignment=DescribedAssignment(topic_partitions=(tp,)),
        member_type=1,
    )
    response = ConsumerGroupDescribeResponse(groups=(DescribedConsumerGroup(
        group_id="g", group_state="Stable", group_epoch=2, assignment_epoch=2,
        assignor_name="uniform", members=(member,),
    ),))
    tp_bytes = TOPIC.bytes + cs("t") + carr(i32(0)) + NO_TAGS
    member_bytes = (
        cs("m") + cs(None) + cs(None) + i32(2) + cs("c") + cs("/h") + carr(cs("t")) + cs(None)
        + carr(tp_bytes) + NO_TAGS + carr() + NO_TAGS + i8(1) + NO_TAGS
    )
    group_bytes = (
        i16(0) + cs(None) + cs("g") + cs("Stable") + i32(2) + i32(2) + cs("uniform")
        + carr(member_bytes) + i32(-(2**31)) + NO_TAGS
    )
    assert encoded(1, response) == NO_TAGS + i32(0) + carr(group_bytes) + NO_TAGS
    # v0 has no member type.
    assert encoded(0, response) == NO_TAGS + i32(0) + carr(
        group_bytes.replace(i8(1) + NO_TAGS + i32(-(2**31)), NO_TAGS + i32(-(2**31)))
    ) + NO_TAGS


class _Access:
    def __init__(self, groups: set[str], topics: set[str]) -> None:
        self.groups, self.topics = groups, topics

    def group(self, op: object, name: str) -> bool:
        return name in self.groups

    def topic(self, op: object, name: str) -> bool:
        return name in self.topics


def _req(key: ApiKey, body: object) -> Request:
    return Request(RequestHeader(int(key), 1, 1, "c"), body)


def test_heartbeat_rule_needs_the_group_and_the_named_topics() -> None:
    body = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0,
                                         subscribed_topic_names=("a", "b"))
    req = _req(ApiKey.CONSUMER_GROUP_HEARTBEAT, body)
    denied = heartbeat_rule(_Access(set(), {"a", "b"}), req)  # type: ignore[arg-type]
    assert denied.answer.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    topic = heartbeat_rule(_Access({"g"}, {"a"}), req)  # type: ignore[arg-type]
    assert topic.answer.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert "b" in topic.answer.error_message
    assert heartbeat_rule(_Access({"g"}, {"a", "b"}), req).answer is None  # type: ignore[arg-type]


def test_describe_rule_answers_denied_groups_itself() -> None:
    req = _req(ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest(group_ids=("a", "b")))
    gate = describe_rule(_Access({"a"}, set()), req)  # type: ignore[arg-type]
    assert gate.request.body.group_ids == ("a",)
    done = gate.finish(ConsumerGroupDescribeResponse(groups=(
        DescribedConsumerGroup(group_id="a"),
    )))
    assert [(g.group_id, g.error_code) for g in done.groups] == [
        ("a", 0), ("b", ErrorCode.GROUP_AUTHORIZATION_FAILED)
    ]
