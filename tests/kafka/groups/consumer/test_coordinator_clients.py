"""The consumer group protocol (KIP-848) against a real broker, judged by confluent-kafka
(librdkafka 2.16) with ``group.protocol=consumer``.

- A third member joins a group of two on a six-partition topic: the two members keep
  consuming the partitions they are not asked to give up throughout the join (records
  reach them inside the join window), each gives up one partition and keeps the others,
  and the final assignment is 2/2/2. The time from the third member's subscribe to the
  stable 2/2/2 assignment is recorded (:func:`tests.figures.record`).
- A member leaving: the others take its partitions.
- Offsets committed by a member (with its member epoch) are fetched back.
- ConsumerGroupDescribe through the admin client (``describe_consumer_groups``) and
  ListGroups with the group type.
- A broker restart (SIGKILL): the group is restored from the journal at the same group
  epoch and the members carry on without a rebalance.
- A regex and a name subscribed together: the named topic comes first, the regex's
  topics once the coordinator resolved it; again after an unsubscribe.

The broker runs with a 500 ms heartbeat interval (``--group-consumer-heartbeat-interval-ms``)
so a rebalance takes about a second.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages.consumer_groups import ConsumerGroupDescribeRequest

from tests.brokerproc import BrokerProcess
from tests.figures import record
from tests.kafka_helpers import (
    WAIT,
    Poller,
    RawKafka,
    Rec,
    RecordFeeder,
    close_consumer,
    module_broker,
    wait_until,
)

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.broker

PARTITIONS = 6


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(
        tmp_path_factory, "consumer-protocol",
        "--group-consumer-heartbeat-interval-ms", "500",
        "--group-consumer-session-timeout-ms", "6000",
    )


def _create_topic(broker: BrokerProcess, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    admin.create_topics([NewTopic(name, partitions)])[name].result(WAIT)


class _Member:
    """One consumer-protocol member, polled in its own thread; remembers when each
    record arrived."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str, name: str,
                 **extra: Any) -> None:
        self.consumer = ck.Consumer({
            "bootstrap.servers": broker.kafka_bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        })
        self.arrivals: list[tuple[float, int]] = []
        self.consumer.subscribe([topic])
        self.poller = Poller(name, self._poll)

    def _poll(self) -> list[Rec]:
        got: list[Rec] = []
        for m in self.consumer.consume(num_messages=500, timeout=0.1):
            if m.error() is None:
                got.append((m.partition(), m.offset(), m.value()))
                self.arrivals.append((time.monotonic(), m.partition()))
        return got

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.poller.call(self.consumer.assignment)}

    def received_between(self, start: float, end: float) -> set[int]:
        return {p for t, p in list(self.arrivals) if start <= t <= end}

    def close(self) -> None:
        self.poller.stop(lambda: close_consumer(self.consumer))


def _assignments(members: list[_Member]) -> list[set[int]]:
    return [m.assignment() for m in members]


def _balanced(members: list[_Member], sizes: list[int]) -> list[set[int]] | None:
    got = _assignments(members)
    everything = set().union(*got)
    disjoint = sum(len(a) for a in got) == len(everything)
    if sorted(len(a) for a in got) == sorted(sizes) and disjoint and (
        everything == set(range(PARTITIONS))
    ):
        return got
    return None


def test_a_joiner_does_not_stop_the_members_and_the_group_ends_balanced(
    broker: BrokerProcess,
) -> None:
    topic, group = "kip848-join", "kip848-join-group"
    _create_topic(broker, topic)
    feeder = RecordFeeder(broker.kafka_bootstrap, topic, PARTITIONS)
    members = [_Member(broker, group, topic, f"m{i}") for i in (1, 2)]
    try:
        before = wait_until(lambda: _balanced(members, [3, 3]), "two members with 3 each")
        # Both consume before the join.
        wait_until(lambda: all(m.arrivals for m in members), "records at both members")
        joined_at = time.monotonic()
        members.append(_Member(broker, group, topic, "m3"))
        after = wait_until(lambda: _balanced(members, [2, 2, 2]), "three members with 2 each")
        stable_at = time.monotonic()
        record("KIP-848 third member to a stable 2/2/2 assignment (confluent-kafka)",
               f"{(stable_at - joined_at) * 1000:.0f} ms")
        for old, new in zip(before, after[:2], strict=True):
            # Each old member only gave up one partition and kept the other two.
            assert new <= old and len(new) == 2
        # The two old members were never stopped: they kept receiving records from the
        # partitions they kept while the third member joined.
        for m, kept in zip(members[:2], after[:2], strict=True):
            seen = m.received_between(joined_at, stable_at)
            assert seen & kept, (m.arrivals[-5:], kept)
        # The joiner consumes too.
        wait_until(lambda: members[2].arrivals, "records at the third member")
    finally:
        feeder.stop()
        for m in members:
            m.close()


def test_a_member_leaving_hands_its_partitions_to_the_others(broker: BrokerProcess) -> None:
    topic, group = "kip848-leave", "kip848-leave-group"
    _create_topic(broker, topic)
    members = [_Member(broker, group, topic, f"l{i}") for i in (1, 2, 3)]
    try:
        wait_until(lambda: _balanced(members, [2, 2, 2]), "three members with 2 each")
        leaving = members.pop()
        leaving.close()
        wait_until(lambda: _balanced(members, [3, 3]), "the two left with 3 each")
    finally:
        for m in members:
            m.close()


def test_offsets_committed_with_the_member_epoch_are_fetched(broker: BrokerProcess) -> None:
    topic, group = "kip848-commit", "kip848-commit-group"
    _create_topic(broker, topic, 2)
    producer = ck.Producer({"bootstrap.servers": broker.kafka_bootstrap})
    for i in range(10):
        producer.produce(topic, f"c{i}".encode(), partition=i % 2)
    producer.flush(WAIT)
    member = _Member(broker, group, topic, "c1")
    try:
        wait_until(lambda: len(member.poller.records()) == 10, "10 records")
        member.poller.call(lambda: member.consumer.commit(asynchronous=False))
        tps = [ck.TopicPartition(topic, p) for p in (0, 1)]
        seen = member.poller.call(lambda: member.consumer.committed(tps, timeout=10))
        assert {tp.partition: tp.offset for tp in seen} == {0: 5, 1: 5}
    finally:
        member.close()
    # A new member of the group resumes from the committed offsets.
    producer.produce(topic, b"after", partition=0)
    producer.flush(WAIT)
    again = _Member(broker, group, topic, "c2")
    try:
        got = wait_until(lambda: again.poller.records(), "the record after the commit")
        assert [(p, o, v) for p, o, v in got] == [(0, 5, b"after")]
    finally:
        again.close()


def test_admin_describes_and_lists_a_consumer_group(broker: BrokerProcess) -> None:
    topic, group = "kip848-describe", "kip848-describe-group"
    _create_topic(broker, topic, 3)
    member = _Member(broker, group, topic, "d1")
    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    try:
        wait_until(lambda: member.assignment() == {0, 1, 2}, "the three partitions")

        def described() -> Any:
            (future,) = admin.describe_consumer_groups([group]).values()
            d = future.result(WAIT)
            return d if str(d.state).endswith("STABLE") else None

        d = wait_until(described, "a stable description")
        assert str(d.type).endswith("CONSUMER")
        (m,) = d.members
        assert m.client_id == "d1"
        assert {tp.partition for tp in m.assignment.topic_partitions} == {0, 1, 2}
        listed = admin.list_consumer_groups().result(WAIT)
        (found,) = [g for g in listed.valid if g.group_id == group]
        assert str(found.type).endswith("CONSUMER")
    finally:
        member.close()


def test_a_broker_restart_keeps_the_group_and_its_epoch(tmp_path: Any) -> None:
    proc = BrokerProcess(tmp_path / "data", args=(
        "--group-consumer-heartbeat-interval-ms", "500",
        "--group-consumer-session-timeout-ms", "6000",
    )).start()
    topic, group = "kip848-restart", "kip848-restart-group"
    try:
        _create_topic(proc, topic, 2)
        # Back within the restored sessions (6 s): librdkafka's reconnect backoff grows
        # to 10 s by default while the broker is down.
        members = [_Member(proc, group, topic, f"r{i}", **{"reconnect.backoff.max.ms": 500})
                   for i in (1, 2)]

        def epoch() -> int | None:
            with RawKafka(proc) as raw:
                answer = raw.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
                                  ConsumerGroupDescribeRequest(group_ids=(group,)))
            (d,) = answer.groups
            return d.group_epoch if d.group_state == "Stable" else None

        try:
            wait_until(lambda: sorted(len(a) for a in _assignments(members)) == [1, 1],
                       "one partition each")
            before = wait_until(epoch, "a stable group")
            proc.kill()
            proc.start()
            after = wait_until(epoch, "the group stable again after the restart")
            # Restored, not rebuilt: the members went on with their epochs.
            assert after == before
            assert sorted(len(a) for a in _assignments(members)) == [1, 1]
        finally:
            for m in members:
                m.close()
    finally:
        proc.kill()


def test_new_partitions_and_a_new_matching_topic_are_assigned(broker: BrokerProcess) -> None:
    """Topic metadata changes move the group epoch: partitions added to a subscribed
    topic, and a topic created later that the member's regex matches, are assigned
    without the member doing anything."""
    from confluent_kafka.admin import NewPartitions

    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    _create_topic(broker, "kip848-re-a", 1)
    member = ck.Consumer({
        "bootstrap.servers": broker.kafka_bootstrap, "group.id": "kip848-regex-group",
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 1000,
    })
    member.subscribe(["^kip848-re-.*"])
    poller = Poller("regex", lambda: [
        (m.partition(), m.offset(), m.value())
        for m in member.consume(100, timeout=0.1) if m.error() is None
    ])

    def assigned() -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in poller.call(member.assignment)}

    try:
        wait_until(lambda: assigned() == {("kip848-re-a", 0)}, "the first topic")
        admin.create_partitions([NewPartitions("kip848-re-a", 3)])["kip848-re-a"].result(WAIT)
        wait_until(lambda: assigned() == {("kip848-re-a", p) for p in range(3)},
                   "the new partitions")
        _create_topic(broker, "kip848-re-b", 2)
        _create_topic(broker, "kip848-other", 1)
        wait_until(
            lambda: assigned() == {("kip848-re-a", p) for p in range(3)}
            | {("kip848-re-b", 0), ("kip848-re-b", 1)},
            "the new matching topic (and not the other one)",
        )
    finally:
        poller.stop(lambda: close_consumer(member))


def test_a_regex_subscription_gets_its_named_topic_first_then_the_matches(
    broker: BrokerProcess,
) -> None:
    """librdkafka's 0045_resubscribe_with_regex: a member subscribing to a regex and a
    name gets the named topic in its first assignment and the regex's topics once the
    coordinator resolved the regex (a later heartbeat), as Kafka resolves regexes
    asynchronously; after an unsubscribe, subscribing again resolves the regex again."""
    for name, count in (("kip848-rs-1", 2), ("kip848-rs-2", 2), ("kip848-lit", 1)):
        _create_topic(broker, name, count)
    everything = {("kip848-rs-1", 0), ("kip848-rs-1", 1), ("kip848-rs-2", 0),
                  ("kip848-rs-2", 1), ("kip848-lit", 0)}
    member = ck.Consumer({
        "bootstrap.servers": broker.kafka_bootstrap, "group.id": "kip848-resubscribe",
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
    })
    assigns: list[set[tuple[str, int]]] = []

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        assigns.append({(tp.topic, tp.partition) for tp in partitions})

    poller = Poller("resubscribe", lambda: [
        (m.partition(), m.offset(), m.value())
        for m in member.consume(100, timeout=0.1) if m.error() is None
    ])

    def assigned() -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in poller.call(member.assignment)}

    try:
        for round_ in range(2):
            del assigns[:]
            poller.call(lambda: member.subscribe(["^kip848-rs-.*", "kip848-lit"],
                                                 on_assign=on_assign))
            wait_until(lambda: assigned() == everything, f"round {round_}: every topic")
            assert assigns[0] == {("kip848-lit", 0)}, assigns
            assert set().union(*assigns[1:]) == everything - {("kip848-lit", 0)}
            poller.call(member.unsubscribe)
            wait_until(lambda: assigned() == set(), f"round {round_}: nothing")
    finally:
        poller.stop(lambda: close_consumer(member))
