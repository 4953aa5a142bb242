"""A hostile subscription regex against a real ``twistd broker``: a confluent-kafka
consumer (``group.protocol=consumer``) subscribes to the issue's pattern
``"^" + ".{0,249}" * 16 + "x"`` while a 30-character topic exists. A backtracking engine
held the reactor for over a minute on it; with RE2 and sliced resolution another
client's Metadata and a ~900 KiB produce are answered promptly, and the member is
assigned exactly the topic the pattern matches.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages.consumer_groups import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)

from tests.brokerproc import BrokerProcess
from tests.core.test_topics_control_plane_load import MetadataProbe, percentile
from tests.figures import record
from tests.kafka_helpers import (
    WAIT,
    Poller,
    RawKafka,
    close_consumer,
    module_broker,
    wait_until,
)

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [pytest.mark.clients, pytest.mark.broker]

HOSTILE = "^" + ".{0,249}" * 16 + "x"
#: The names it is tried against: near misses of 30 characters (the costly case for a
#: backtracking engine), and one that matches.
NEAR = "a" * 30
MATCHING = "a" * 29 + "x"
OTHERS = [f"{n:04d}" + "a" * 26 for n in range(40)]
PAYLOAD = b"p" * (900 * 1024)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(
        tmp_path_factory, "hostile-regex",
        "--group-consumer-heartbeat-interval-ms", "500",
    )


def test_a_hostile_regex_does_not_stall_other_clients(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    names = [NEAR, MATCHING, "regex-own", "regex-big", *OTHERS]
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(WAIT)
    producer = ck.Producer({"bootstrap.servers": broker.kafka_bootstrap, "linger.ms": 0,
                            "message.max.bytes": 1_000_000})
    producer.produce("regex-big", PAYLOAD)
    producer.flush(WAIT)
    member = ck.Consumer({
        "bootstrap.servers": broker.kafka_bootstrap, "group.id": "hostile-regex",
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
    })

    def produce_for(seconds: float) -> list[float]:
        took = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            start = time.perf_counter()
            producer.produce("regex-big", PAYLOAD)
            assert producer.flush(WAIT) == 0
            took.append(time.perf_counter() - start)
            time.sleep(0.1)
        return took

    with MetadataProbe(broker, "regex-own", "regex-own") as probe:
        quiet_produce = produce_for(2)
        quiet = len(probe.samples)
        member.subscribe([HOSTILE])
        poller = Poller("hostile", lambda: [
            (m.partition(), m.offset(), m.value())
            for m in member.consume(10, timeout=0.1) if m.error() is None
        ])
        try:
            produce_s = produce_for(6)
            assigned = wait_until(lambda: {
                tp.topic for tp in poller.call(member.assignment)
            } or None, "the member's assignment")
        finally:
            poller.stop(lambda: close_consumer(member))
    assert assigned == {MATCHING}
    during = probe.samples[quiet:]

    def ms(samples: list[float]) -> str:
        return f"{percentile(samples, 0.99) * 1000:.1f} ms"

    record("Metadata p99 while a KIP-848 member subscribes to .{0,249}x16",
           f"{ms(during)} (max {max(during) * 1000:.1f} ms, {len(during)} requests; "
           f"{ms(probe.samples[:quiet])} before)")
    record("900 KiB produce p99 meanwhile",
           f"{ms(produce_s)} ({len(produce_s)} produces; {ms(quiet_produce)} before)")
    # Generous: the backtracking engine held every listener for over a minute.
    assert max(during) < 5 and max(produce_s) < 5


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("orders-(?=eu)", "invalid perl operator"), ("(o)\\1", "invalid escape sequence"),
     ("o*+", "bad repetition operator"), (".{0,249}" * 40, "pattern too large")],
)
def test_refused_regexes_are_invalid_regular_expression_on_the_wire(
    broker: BrokerProcess, pattern: str, why: str
) -> None:
    with RawKafka(broker) as raw:
        answer = raw.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, ConsumerGroupHeartbeatRequest(
            group_id="refused-regex", member_id="m-refused", member_epoch=0,
            rebalance_timeout_ms=30_000, subscribed_topic_names=(),
            subscribed_topic_regex=pattern, topic_partitions=(),
        ))
        # The connection serves on: only the request was refused.
        joined = raw.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, ConsumerGroupHeartbeatRequest(
            group_id="refused-regex", member_id="m-refused", member_epoch=0,
            rebalance_timeout_ms=30_000, subscribed_topic_names=(),
            subscribed_topic_regex="(^topic_a.*)|(^topic_b.*)|(^topic_c.*)|(^topic_d.*)",
            topic_partitions=(),
        ))
    assert answer.error_code == 128  # INVALID_REGULAR_EXPRESSION
    assert answer.error_message is not None and why in answer.error_message
    assert joined.error_code == 0


def test_with_acls_a_regex_member_gets_only_topics_it_may_describe(tmp_path: Path) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    anonymous = "User:ANONYMOUS"
    data = tmp_path / "data"
    data.mkdir()
    # As a super user: the topics, and READ on the group and one of them.
    broker = BrokerProcess(
        data, args=("--authorizer", "acl", "--super-users", anonymous, "--no-auto-create")
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
        for f in admin.create_topics(
            [NewTopic("acl-re-open", 1, 1), NewTopic("acl-re-secret", 1, 1)]
        ).values():
            f.result(WAIT)
        bindings = [
            AclBinding(rtype, name, ResourcePatternType.LITERAL, anonymous, "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
            for rtype, name in ((ResourceType.GROUP, "acl-re-group"),
                                (ResourceType.TOPIC, "acl-re-open"))
        ]
        for f in admin.create_acls(bindings).values():
            assert f.result(WAIT) is None
    finally:
        broker.stop()
    # No super users: User:ANONYMOUS may READ (so DESCRIBE) acl-re-open only.
    broker = BrokerProcess(data, args=("--authorizer", "acl", "--no-auto-create")).start()
    try:
        member = ck.Consumer({
            "bootstrap.servers": broker.kafka_bootstrap, "group.id": "acl-re-group",
            "group.protocol": "consumer", "auto.offset.reset": "earliest",
        })
        member.subscribe(["^acl-re-.*"])
        poller = Poller("acl-regex", lambda: [
            (m.partition(), m.offset(), m.value())
            for m in member.consume(10, timeout=0.1) if m.error() is None
        ])
        try:
            assigned = wait_until(lambda: {
                tp.topic for tp in poller.call(member.assignment)
            } or None, "the member's assignment")
            # The client cannot name a topic it may not describe, so ask the broker what
            # the group's target holds (its topic names), after some more heartbeats.
            time.sleep(2)
            with RawKafka(broker) as raw:
                answer = raw.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
                                  ConsumerGroupDescribeRequest(group_ids=("acl-re-group",)))
        finally:
            poller.stop(lambda: close_consumer(member))
        assert assigned == {"acl-re-open"}
        (group,) = answer.groups
        (described,) = group.members
        assert {t.topic_name for t in described.target_assignment.topic_partitions} == {
            "acl-re-open"}
    finally:
        broker.stop()
