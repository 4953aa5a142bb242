"""Share groups' dead-letter topics (KIP-1191) through a real ``twistd broker``:
confluent-kafka's ShareConsumer rejecting a record and exhausting another's deliveries,
a plain consumer reading the dead-letter records (Kafka's headers, the copied key and
value); the native queue's reject; a missing topic without auto-create archiving the
record unwritten; a name outside the prefix refused. One broker for the module."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from brokerd.native.queue_messages import AckKind

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import module_broker

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
ENABLE = {"errors.deadletterqueue.group.enable": "true"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "dlq", "--fsync", "never")


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.kafka_bootstrap})


def make_topic(broker: BrokerProcess, name: str, configs: dict[str, str] | None = None) -> None:
    client = admin(broker)  # kept alive until answered
    for f in client.create_topics([NewTopic(name, 1, 1, config=configs or {})]).values():
        f.result(30)


def group_configs(broker: BrokerProcess, group: str, configs: dict[str, str]) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()
    ])
    client = admin(broker)
    for f in client.incremental_alter_configs([res]).values():
        f.result(10)


def read_all(broker: BrokerProcess, topic: str, want: int) -> list[ck.Message]:
    c = ck.Consumer({"bootstrap.servers": broker.kafka_bootstrap, "group.id": f"r-{topic}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[ck.Message] = []
    end = time.monotonic() + DEADLINE
    try:
        while len(got) < want and time.monotonic() < end:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg)
    finally:
        c.close()
    return got


def share_poll(c: ck.ShareConsumer, want: int) -> list[ck.Message]:
    got: list[ck.Message] = []
    end = time.monotonic() + DEADLINE
    while len(got) < want and time.monotonic() < end:
        got += [m for m in c.poll(timeout=1.0) or () if m.error() is None]
    return got


def test_rejected_and_exhausted_records_reach_the_dead_letter_topic(
    broker: BrokerProcess,
) -> None:
    make_topic(broker, "orders")
    make_topic(broker, "dlq.orders", ENABLE)
    group_configs(broker, "workers", {
        "share.auto.offset.reset": "earliest",
        "share.delivery.count.limit": "2",
        "errors.deadletterqueue.topic.name": "dlq.orders",
        "errors.deadletterqueue.copy.record.enable": "true",
    })
    p = ck.Producer({"bootstrap.servers": broker.kafka_bootstrap})
    for i in range(3):
        p.produce("orders", key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(10) == 0
    c = ck.ShareConsumer({"bootstrap.servers": broker.kafka_bootstrap, "group.id": "workers",
                          "share.acknowledgement.mode": "explicit"})
    c.subscribe(["orders"])
    try:
        first = share_poll(c, 3)
        assert sorted(m.offset() for m in first) == [0, 1, 2]
        verdicts = {0: ck.AcknowledgeType.ACCEPT, 1: ck.AcknowledgeType.REJECT,
                    2: ck.AcknowledgeType.RELEASE}
        for m in first:
            c.acknowledge(m, verdicts[m.offset()])
        c.commit_sync()
        (again,) = share_poll(c, 1)
        assert (again.offset(), again.delivery_count()) == (2, 2)
        c.acknowledge(again, ck.AcknowledgeType.RELEASE)  # the limit: archived
        c.commit_sync()
    finally:
        c.close()
    dead = read_all(broker, "dlq.orders", 2)
    assert [(m.key(), m.value()) for m in dead] == [(b"k1", b"v1"), (b"k2", b"v2")]
    headers = [{k: v for k, v in m.headers() or ()} for m in dead]
    assert headers[0] == {
        "__dlq.errors.topic": b"orders", "__dlq.errors.partition": b"0",
        "__dlq.errors.offset": b"1", "__dlq.errors.group": b"workers",
        "__dlq.errors.delivery.count": b"1",
        "__dlq.errors.message": b"Offset rejected by client.",
    }
    assert headers[1]["__dlq.errors.offset"] == b"2"
    assert headers[1]["__dlq.errors.delivery.count"] == b"2"
    assert headers[1]["__dlq.errors.message"] == b"Offset delivery count exceeded the threshold."
    with broker.client() as native:
        (part,) = native.describe_share_group("workers")["partitions"]  # type: ignore[misc]
        assert (part["archived"], part["dead_lettered"], part["start_offset"]) == (2, 2, 3)
    assert broker.metric("brokerd_share_group_dead_lettered_total",
                         group="workers", topic="orders", partition="0") == 2


def test_native_reject_writes_headers_only_by_default(broker: BrokerProcess) -> None:
    with broker.client() as client:
        client.create_topic("jobs", 1)
        client.create_topic("dlq.jobs", 1)
        client.alter_topic_configs("dlq.jobs", ENABLE)
        group_configs(broker, "runners", {"errors.deadletterqueue.topic.name": "dlq.jobs"})
        assert client.queue_fetch("runners", "jobs", 0, max_records=1, max_wait_ms=0) == []
        client.produce("jobs", 0, [b"a", b"b"])
        got = client.queue_fetch("runners", "jobs", 0, max_records=2, max_wait_ms=0)
        assert [r.offset for r in got] == [0, 1]
        client.queue_acknowledge("runners", "jobs", 0, [
            (0, 0, AckKind.ACCEPT), (1, 1, AckKind.REJECT),
        ])
    (dead,) = read_all(broker, "dlq.jobs", 1)
    assert (dead.key(), dead.value()) == (None, None)
    assert dict(dead.headers() or ())["__dlq.errors.offset"] == b"1"


def test_a_missing_topic_without_auto_create_archives_unwritten(broker: BrokerProcess) -> None:
    # A name outside the dlq. prefix is refused too; both archive the record all the same.
    for group, name in (("lost", "dlq.nowhere"), ("misnamed", "elsewhere")):
        make_topic(broker, f"src-{group}")
        group_configs(broker, group, {"errors.deadletterqueue.topic.name": name})
        with broker.client() as client:
            assert client.queue_fetch(group, f"src-{group}", 0, max_records=1,
                                      max_wait_ms=0) == []
            client.produce(f"src-{group}", 0, [b"x"])
            (held,) = client.queue_fetch(group, f"src-{group}", 0, max_records=1,
                                         max_wait_ms=0)
            assert held.offset == 0
            client.queue_acknowledge(group, f"src-{group}", 0, [(0, 0, AckKind.REJECT)])
            end = time.monotonic() + DEADLINE
            while True:
                (part,) = client.describe_share_group(group)["partitions"]  # type: ignore[misc]
                if part["start_offset"] == 1:
                    break
                assert time.monotonic() < end, part
                time.sleep(0.05)
            assert "dlq.nowhere" not in {t.name for t in client.list_topics()}
            assert part["dead_lettered"] == 0
