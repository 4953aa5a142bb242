"""The consumer-group admin APIs (ListGroups, DescribeGroups, DeleteGroups, OffsetDelete,
and the admin use of OffsetCommit/OffsetFetch) and static membership, driven by the real
Python clients' admin interfaces against a real ``twistd broker``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import (
    HEARTBEAT_MS,
    SESSION_TIMEOUT_MS,
    WAIT,
    Poller,
    RawKafka,
    close_consumer,
    module_broker,
    wait_until,
)

pytestmark = [pytest.mark.clients, pytest.mark.broker]

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, ConsumerGroupState, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "group-admin", "--default-partitions=2")


def _admin(broker: BrokerProcess) -> Any:
    return AdminClient({"bootstrap.servers": broker.kafka_bootstrap})


def _create_topic(broker: BrokerProcess, topic: str, partitions: int = 2) -> None:
    admin = _admin(broker)  # kept alive until the answer: a destroyed client cancels it
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions)])
    futures[topic].result(WAIT)


def _commit_simple(broker: BrokerProcess, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as a client outside the group protocol (generation -1)."""
    with RawKafka(broker) as conn:
        response = conn.call(
            ApiKey.OFFSET_COMMIT,
            2,
            apis.OffsetCommitRequest(
                group_id=group,
                topics=(
                    apis.OffsetCommitTopic(
                        name=topic,
                        partitions=tuple(
                            apis.OffsetCommitPartition(partition_index=p, committed_offset=o)
                            for p, o in offsets.items()
                        ),
                    ),
                ),
            ),
        )
    assert all(p.error_code == 0 for t in response.topics for p in t.partitions), response


def _consumer(broker: BrokerProcess, group: str, **extra: Any) -> Any:
    return Consumer(
        {
            "bootstrap.servers": broker.kafka_bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            **extra,
        }
    )


class _Member:
    """A confluent consumer polled in its own thread, counting its rebalance callbacks."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str, **extra: Any) -> None:
        self.assigned: list[set[int]] = []
        self.revoked: list[set[int]] = []
        self.consumer = _consumer(broker, group, **extra)

        def on_assign(_c: Any, parts: list[Any]) -> None:
            self.assigned.append({p.partition for p in parts})

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            self.revoked.append({p.partition for p in parts})

        self.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

        def poll_once() -> list[Any]:
            self.consumer.poll(0.05)
            return []

        self.poller = Poller(f"member-{group}", poll_once)

    def assignment(self) -> set[int]:
        return {p.partition for p in self.poller.call(self.consumer.assignment)}

    def close(self) -> None:
        self.poller.stop(self.consumer.close)


# -- confluent-kafka (librdkafka) AdminClient ------------------------------------------


def test_confluent_list_describe_delete(kbroker: BrokerProcess) -> None:
    topic, group, simple = "ga-confluent", "ga-confluent-group", "ga-confluent-simple"
    _create_topic(kbroker, topic)
    _commit_simple(kbroker, simple, topic, {0: 3})
    admin = _admin(kbroker)
    member = _Member(kbroker, group, topic)
    try:
        wait_until(lambda: member.assigned, "the member got its assignment")
        listed = admin.list_consumer_groups().result(WAIT)
        assert not listed.errors, listed.errors
        by_id = {g.group_id: g for g in listed.valid}
        assert {group, simple} <= set(by_id)
        assert by_id[simple].is_simple_consumer_group
        assert not by_id[group].is_simple_consumer_group

        futures = admin.describe_consumer_groups([group])
        described = futures[group].result(WAIT)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        assert len(described.members) == 1
        parts = {tp.partition for tp in described.members[0].assignment.topic_partitions}
        assert parts == {0, 1}

        # A group with a member cannot be deleted.
        with pytest.raises(confluent_kafka.KafkaException) as failed:
            admin.delete_consumer_groups([group])[group].result(WAIT)
        assert failed.value.args[0].code() == confluent_kafka.KafkaError.NON_EMPTY_GROUP
    finally:
        member.close()
    wait_until(
        lambda: admin.describe_consumer_groups([group])[group].result(WAIT).state
        == ConsumerGroupState.EMPTY,
        "the group went Empty",
    )
    admin.delete_consumer_groups([group, simple])[group].result(WAIT)
    remaining = {g.group_id for g in admin.list_consumer_groups().result(WAIT).valid}
    assert group not in remaining and simple not in remaining
    with pytest.raises(confluent_kafka.KafkaException) as failed:
        admin.delete_consumer_groups(["ga-never-seen"])["ga-never-seen"].result(WAIT)
    assert failed.value.args[0].code() == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND


def test_confluent_lists_groups_by_type(kbroker: BrokerProcess) -> None:
    """ListGroups v5 (librdkafka sends it with a types filter): every brokerd group is a
    classic one; a filter for the KIP-848 "consumer" type matches none of them."""
    from confluent_kafka import ConsumerGroupType

    topic, group = "ga-confluent-types", "ga-confluent-types-group"
    _create_topic(kbroker, topic)
    _commit_simple(kbroker, group, topic, {0: 1})
    admin = _admin(kbroker)

    def listed(*types: Any) -> dict[str, Any]:
        kw = {"types": set(types)} if types else {}
        result = admin.list_consumer_groups(**kw).result(WAIT)
        assert not result.errors, result.errors
        return {g.group_id: g for g in result.valid}

    every = listed()
    assert every[group].type == ConsumerGroupType.CLASSIC
    assert group in listed(ConsumerGroupType.CLASSIC)
    assert group not in listed(ConsumerGroupType.CONSUMER)
    assert group in listed(ConsumerGroupType.CONSUMER, ConsumerGroupType.CLASSIC)


def test_confluent_alter_and_list_offsets(kbroker: BrokerProcess) -> None:
    topic, group = "ga-confluent-offsets", "ga-confluent-offsets-group"
    _create_topic(kbroker, topic)
    admin = _admin(kbroker)
    from confluent_kafka import ConsumerGroupTopicPartitions

    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)]
    )
    altered = admin.alter_consumer_group_offsets([request])[group].result(WAIT)
    assert {(tp.partition, tp.error) for tp in altered.topic_partitions} == {(0, None), (1, None)}
    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])]
    )[group].result(WAIT)
    assert sorted((tp.partition, tp.offset) for tp in listed.topic_partitions) == [(0, 5), (1, 7)]
    # A consumer of the group starts where the admin put it.
    consumer = _consumer(kbroker, group)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=WAIT)
        assert committed[0].offset == 5
    finally:
        close_consumer(consumer)


# -- kafka-python KafkaAdminClient ------------------------------------------------------


def test_kafka_python_admin(kbroker: BrokerProcess) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTopicPartition

    topic, group = "ga-kafka-python", "ga-kafka-python-group"
    _create_topic(kbroker, topic)
    admin = kafka.KafkaAdminClient(bootstrap_servers=kbroker.kafka_bootstrap)
    try:
        admin.alter_group_offsets(
            group,
            {
                KTopicPartition(topic, 0): OffsetAndMetadata(4, "", -1),
                KTopicPartition(topic, 1): OffsetAndMetadata(6, "", -1),
            },
        )
        got = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: m.offset for tp, m in got.items()} == {0: 4, 1: 6}
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert group in listed and listed[group]["protocol_type"] == ""
        described = admin.describe_groups([group])[group]
        assert described["error"] is None
        assert described["group_state"] == "Empty" and described["members"] == []
        admin.delete_group_offsets(group, [KTopicPartition(topic, 1)])
        got = admin.list_group_offsets({group: None})[group]
        assert {tp.partition for tp in got} == {0}
        admin.delete_groups([group])
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.describe_groups([group])[group]["group_state"] == "Dead"
    finally:
        admin.close()


# -- aiokafka AIOKafkaAdminClient -------------------------------------------------------


def test_aiokafka_admin(kbroker: BrokerProcess) -> None:
    pytest.importorskip("aiokafka")
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient

    topic, group = "ga-aiokafka", "ga-aiokafka-group"
    _create_topic(kbroker, topic)
    _commit_simple(kbroker, group, topic, {0: 9})

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kbroker.kafka_bootstrap)
        await admin.start()
        try:
            listed = await admin.list_consumer_groups()
            assert (group, "") in [tuple(g) for g in listed]
            described = await admin.describe_consumer_groups([group])
            assert described[0].groups[0][2] == "Empty"  # (error, id, state, ...)
            offsets = await admin.list_consumer_group_offsets(group)
            assert {tp.partition: m.offset for tp, m in offsets.items()} == {0: 9}
            if hasattr(admin, "delete_consumer_groups"):
                await admin.delete_consumer_groups([group])
                listed = await admin.list_consumer_groups()
                assert group not in [g[0] for g in listed]
        finally:
            await admin.close()

    asyncio.run(run())


# -- static membership (KIP-345) --------------------------------------------------------


def test_static_member_restart_keeps_its_assignment_without_a_rebalance(
    kbroker: BrokerProcess,
) -> None:
    topic, group = "ga-static", "ga-static-group"
    _create_topic(kbroker, topic)
    a = _Member(kbroker, group, topic, **{"group.instance.id": "static-a"})
    b = _Member(kbroker, group, topic, **{"group.instance.id": "static-b"})
    try:
        wait_until(
            lambda: a.assigned and b.assigned and len(a.assignment() | b.assignment()) == 2
            and a.assignment().isdisjoint(b.assignment()),
            "both members got a partition",
        )
        b_parts = b.assignment()
        revokes_of_a = len(a.revoked)
        assigns_of_a = len(a.assigned)
        # B's process stops (a static member sends no LeaveGroup) and comes back as a new
        # process, well within its session timeout.
        b.close()
        b = _Member(kbroker, group, topic, **{"group.instance.id": "static-b"})
        wait_until(lambda: b.assigned, "the restarted member got its assignment")
        assert b.assignment() == b_parts
        # A keeps polling a while: no rebalance reaches it.
        deadline = time.monotonic() + SESSION_TIMEOUT_MS / 1000 / 2
        while time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(a.revoked) == revokes_of_a
        assert len(a.assigned) == assigns_of_a
        admin = _admin(kbroker)
        described = admin.describe_consumer_groups([group])[group].result(WAIT)
        assert described.state == ConsumerGroupState.STABLE
        assert sorted(m.group_instance_id for m in described.members) == [
            "static-a",
            "static-b",
        ]
    finally:
        a.close()
        b.close()


# -- DeleteGroups v3: a message per group not deleted ---------------------------------


def test_delete_groups_v3_says_why_a_group_was_not_deleted(kbroker: BrokerProcess) -> None:
    topic, group = "ga-delete-v3", "ga-delete-v3-group"
    _create_topic(kbroker, topic)
    _commit_simple(kbroker, group, topic, {0: 1})
    with RawKafka(kbroker) as conn:
        answer = conn.call(ApiKey.DELETE_GROUPS, 3, apis.DeleteGroupsRequest(
            groups_names=(group, "ga-delete-v3-nope")))
        again = conn.call(ApiKey.DELETE_GROUPS, 2, apis.DeleteGroupsRequest(
            groups_names=(group,)))
    results = {r.group_id: (r.error_code, r.error_message) for r in answer.results}
    assert results == {
        group: (0, None),
        "ga-delete-v3-nope": (69, "Group ga-delete-v3-nope does not exist."),
    }
    # v2 has no message on the wire: the code alone.
    assert [(r.error_code, r.error_message) for r in again.results] == [(69, None)]
