"""Share groups (KIP-932) against a real broker with confluent-kafka's ShareConsumer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.client import NativeError

from tests.brokerproc import BrokerProcess

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

pytestmark = pytest.mark.broker

DEADLINE = 40.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.stop()


def make_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, n: int, partitions: int = 1, *,
            batch: int | None = None) -> None:
    """``n`` records; with ``batch``, flushed every ``batch`` records so that the log
    holds batches of that many (a ShareFetch acquires whole batches)."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=i % partitions)
        if batch is not None and (i + 1) % batch == 0:
            assert p.flush(10) == 0
    assert p.flush(10) == 0


def consumer(bootstrap: str, group: str, **extra: str) -> ck.ShareConsumer:
    conf = {
        "bootstrap.servers": bootstrap, "group.id": group,
        **extra,
    }
    return ck.ShareConsumer(conf)


def set_earliest(bootstrap: str, group: str, reset: str = "earliest") -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(
        ResourceType.GROUP, group,
        incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", reset,
            incremental_operation=AlterConfigOpType.SET,
        )],
    )
    for f in admin.incremental_alter_configs([res]).values():
        f.result(10)


def poll_all(c: ck.ShareConsumer, want: int, deadline: float = DEADLINE) -> list[ck.Message]:
    got: list[ck.Message] = []
    end = time.monotonic() + deadline
    while len(got) < want and time.monotonic() < end:
        for msg in c.poll(timeout=1.0) or ():
            if msg.error() is None:
                got.append(msg)
    return got


def test_implicit_acknowledgement_consumes_everything_once(broker: BrokerProcess) -> None:
    bs = broker.kafka_bootstrap
    make_topic(bs, "q1")
    produce(bs, "q1", 50)
    c = consumer(bs, "g1")
    c.subscribe(["q1"])
    # latest by default: records produced before the first fetch are not delivered.
    # Polled until the first fetch placed the share-partition (at the log's end, 50).
    produce_later = time.monotonic()
    got: list[ck.Message] = []
    with broker.client() as native:

        def placed() -> list[dict[str, object]]:
            try:
                return native.describe_share_group("g1")["partitions"]  # type: ignore[return-value]
            except NativeError:  # not known before its first heartbeat
                return []

        while not placed():
            assert time.monotonic() - produce_later < DEADLINE, "the consumer never fetched"
            got += poll_all(c, 1, 0.5)
        (part,) = placed()
    assert part["start_offset"] == 50
    assert got + poll_all(c, 1, 1.0) == []
    produce(bs, "q1", 20)
    got = poll_all(c, 20)
    assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(20))
    assert produce_later
    c.close()


def test_explicit_accept_release_reject(broker: BrokerProcess) -> None:
    bs = broker.kafka_bootstrap
    make_topic(bs, "q2")
    set_earliest(bs, "g2")
    produce(bs, "q2", 6)
    c = consumer(bs, "g2", **{"share.acknowledgement.mode": "explicit"})
    c.subscribe(["q2"])
    first = poll_all(c, 6)
    assert sorted(m.offset() for m in first) == list(range(6))
    assert {m.delivery_count() for m in first} == {1}
    verdicts = {0: ck.AcknowledgeType.ACCEPT, 1: ck.AcknowledgeType.RELEASE,
                2: ck.AcknowledgeType.REJECT}
    for m in first:
        c.acknowledge(m, verdicts[m.offset() % 3])
    c.commit_sync()
    again = poll_all(c, 2)
    # Released ones come back (1 and 4), with their delivery count raised.
    assert sorted(m.offset() for m in again) == [1, 4]
    assert {m.delivery_count() for m in again} == {2}
    for m in again:
        c.acknowledge(m, ck.AcknowledgeType.ACCEPT)
    c.commit_sync()
    assert poll_all(c, 1, 3.0) == []  # rejected ones (2, 5) never come back
    c.close()


def test_several_consumers_split_one_partition(broker: BrokerProcess) -> None:
    bs = broker.kafka_bootstrap
    make_topic(bs, "q3")
    set_earliest(bs, "g3")
    produce(bs, "q3", 300, batch=10)
    consumers = [consumer(bs, "g3", **{"max.poll.records": "10"}) for _ in range(3)]
    for c in consumers:
        c.subscribe(["q3"])
    seen: dict[int, list[int]] = {i: [] for i in range(3)}
    end = time.monotonic() + DEADLINE
    while sum(len(v) for v in seen.values()) < 300 and time.monotonic() < end:
        for i, c in enumerate(consumers):
            for m in c.poll(timeout=0.2) or ():
                if m.error() is None:
                    seen[i].append(m.offset())
    every = [o for v in seen.values() for o in v]
    assert sorted(every) == list(range(300))  # each record once
    assert sum(1 for v in seen.values() if v) >= 2  # shared, not one consumer alone
    for c in consumers:
        c.close()


def test_a_classic_group_id_is_not_a_share_group(broker: BrokerProcess) -> None:
    bs = broker.kafka_bootstrap
    make_topic(bs, "q4")
    classic = ck.Consumer({"bootstrap.servers": bs, "group.id": "dual"})
    classic.commit(offsets=[ck.TopicPartition("q4", 0, 0)], asynchronous=False)
    classic.close()
    c = consumer(bs, "dual")
    c.subscribe(["q4"])
    with pytest.raises(ck.KafkaException, match="GROUP_ID_NOT_FOUND"):
        end = time.monotonic() + 10
        while time.monotonic() < end:
            c.poll(timeout=0.5)
    c.close()


def _first_error(c: ck.Consumer, seconds: float = 15.0) -> ck.KafkaError:
    """The first error a consumer reports (from poll, or raised)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            msg = c.poll(timeout=0.5)
        except ck.KafkaException as exc:
            error: ck.KafkaError = exc.args[0]
            return error
        if msg is not None and msg.error() is not None:
            found: ck.KafkaError = msg.error()
            return found
    raise AssertionError("the consumer reported no error")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_share_group_id_is_not_a_consumer_group(
    broker: BrokerProcess, protocol: str
) -> None:
    """Kafka's answers: JoinGroup for a share group's id is INCONSISTENT_GROUP_PROTOCOL,
    ConsumerGroupHeartbeat GROUP_ID_NOT_FOUND; the share group keeps working."""
    bs = broker.kafka_bootstrap
    make_topic(bs, "q5")
    produce(bs, "q5", 4)
    set_earliest(bs, "owned")
    share = consumer(bs, "owned")
    share.subscribe(["q5"])
    assert len(poll_all(share, 2)) >= 2
    other = ck.Consumer({
        "bootstrap.servers": bs, "group.id": "owned", "group.protocol": protocol,
        "auto.offset.reset": "earliest",
    })
    try:
        other.subscribe(["q5"])
        error = _first_error(other)
        if protocol == "classic":
            assert error.name() == "INCONSISTENT_GROUP_PROTOCOL", error
        else:
            # librdkafka makes GROUP_ID_NOT_FOUND on a heartbeat fatal, as against Kafka.
            assert error.name() == "_FATAL" and "group id does not exist" in error.str(), error
        assert other.assignment() == []
    finally:
        other.close()
    # Committed offsets are not a share group's: commit, fetch and delete are refused.
    plain = ck.Consumer({"bootstrap.servers": bs, "group.id": "owned"})
    try:
        with pytest.raises(ck.KafkaException, match="GROUP_ID_NOT_FOUND"):
            plain.commit(offsets=[ck.TopicPartition("q5", 0, 1)], asynchronous=False)
        with pytest.raises(ck.KafkaException, match="GROUP_ID_NOT_FOUND"):
            plain.committed([ck.TopicPartition("q5", 0)], timeout=10)
    finally:
        plain.close()
    kafka = pytest.importorskip("kafka")
    kp_admin = kafka.KafkaAdminClient(bootstrap_servers=bs)
    try:
        with pytest.raises(kafka.errors.GroupIdNotFoundError):
            kp_admin.delete_group_offsets("owned", [kafka.TopicPartition("q5", 0)])
    finally:
        kp_admin.close()
    admin = AdminClient({"bootstrap.servers": bs})
    # No classic or consumer group of that id came into being (librdkafka lists those
    # only), and the share group still hands out records.
    groups = admin.list_consumer_groups().result(10)
    assert [g.group_id for g in groups.valid] == []
    produce(bs, "q5", 2)
    assert poll_all(share, 1)
    share.close()


def test_broker_options_set_every_share_groups_defaults(tmp_path: Path) -> None:
    """``--group-share-*`` are Kafka's ``group.share.*`` broker configs: the defaults of
    the group configs, described as the broker's (STATIC_BROKER_CONFIG) and obeyed: a
    1 s lock times out, and the second timeout archives the record (limit 2)."""
    proc = BrokerProcess(tmp_path / "data", args=(
        "--group-share-record-lock-duration-ms=1000", "--group-share-delivery-count-limit=2",
    )).start()
    try:
        bs = proc.kafka_bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        (described,) = admin.describe_configs(
            [ConfigResource(ResourceType.GROUP, "timed")]
        ).values()
        entries = described.result(10)
        lock = entries["share.record.lock.duration.ms"]
        static = ck.admin.ConfigSource.STATIC_BROKER_CONFIG.value
        assert (lock.value, lock.source) == ("1000", static)
        limit = entries["share.delivery.count.limit"]
        assert limit.value == "2"
        assert entries["share.session.timeout.ms"].source == (
            ck.admin.ConfigSource.DEFAULT_CONFIG.value
        )
        (broker_configs,) = admin.describe_configs(
            [ConfigResource(ResourceType.BROKER, "0")]
        ).values()
        assert broker_configs.result(10)["group.share.record.lock.duration.ms"].value == "1000"
        with proc.client() as a, proc.client() as b:
            a.create_topic("slow", 1)
            assert a.queue_fetch("timed", "slow", 0, max_records=1, max_wait_ms=0) == []
            a.produce("slow", 0, [b"job"])
            (first,) = a.queue_fetch("timed", "slow", 0, max_records=1, max_wait_ms=1000)
            assert first.delivery_count == 1
            # Answered when the 1 s lock times out (the wait is only a ceiling).
            (second,) = b.queue_fetch("timed", "slow", 0, max_records=1, max_wait_ms=15000)
            assert (second.offset, second.delivery_count) == (0, 2)
            # The second lock timing out reaches the limit: archived, never delivered again.
            assert b.queue_fetch("timed", "slow", 0, max_records=1, max_wait_ms=2500) == []

            def archived() -> bool:
                (part,) = b.describe_share_group("timed")["partitions"]  # type: ignore[misc]
                return (part["archived"], part["start_offset"]) == (1, 1)

            deadline = time.monotonic() + DEADLINE
            while not archived():
                assert time.monotonic() < deadline, "the record was never archived"
                time.sleep(0.1)
    finally:
        proc.stop()


def test_by_duration_delivers_the_records_of_the_last_hour(broker: BrokerProcess) -> None:
    bs = broker.kafka_bootstrap
    make_topic(bs, "qd")
    now_ms = int(time.time() * 1000)
    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(10):
        age_ms = 2 * 3_600_000 if i < 5 else 600_000  # five of two hours ago, five of ten minutes
        p.produce("qd", value=b"v%d" % i, partition=0, timestamp=now_ms - age_ms)
    assert p.flush(10) == 0
    with pytest.raises(ck.KafkaException, match="by_duration"):
        set_earliest(bs, "gd", "by_duration:-PT1H")
    set_earliest(bs, "gd", "by_duration:PT1H")
    c = consumer(bs, "gd")
    c.subscribe(["qd"])
    got = poll_all(c, 5)
    assert sorted(m.offset() for m in got) == [5, 6, 7, 8, 9]
    assert poll_all(c, 1, 3.0) == []
    c.close()
