"""Share groups (KIP-932) against a real broker with confluent-kafka's ShareConsumer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

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
        f.result(10)


def produce(bootstrap: str, topic: str, n: int, partitions: int = 1) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(10) == 0


def consumer(bootstrap: str, group: str, **extra: str) -> ck.ShareConsumer:
    conf = {
        "bootstrap.servers": bootstrap, "group.id": group,
        **extra,
    }
    return ck.ShareConsumer(conf)


def set_earliest(bootstrap: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ck.admin.ConfigResource(
        ck.admin.ResourceType.GROUP, group,
        incremental_configs=[ck.admin.ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=ck.admin.AlterConfigOpType.SET,
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
    # latest by default: records produced before the first fetch are not delivered
    produce_later = time.monotonic()
    got = poll_all(c, 1, 5.0)
    assert got == []
    produce(bs, "q1", 20)
    got = poll_all(c, 20)
    assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(20))
    assert produce_later
    c.close()
