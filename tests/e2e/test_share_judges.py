"""Share groups (KIP-932) judged by Kafka's Java client and tools: KafkaShareConsumer with
explicit ACCEPT / RELEASE / REJECT, and ``kafka-share-groups.sh`` describing the group,
its members and start offsets, resetting and deleting them.

Needs ``make jvm-deps``; without java or the jars the tests skip (fail on CI).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.brokerproc import BrokerProcess
from tests.e2e.test_kafka_tools import tool
from tests.judge_drivers import JavaJudge

pytestmark = [pytest.mark.clients, pytest.mark.broker]

ck = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("share") / "data").start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def java(broker: BrokerProcess) -> Iterator[JavaJudge]:
    JavaJudge.require()
    judge = JavaJudge(broker)
    try:
        yield judge
    finally:
        judge.close()


def make_topic(bootstrap: str, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, 1, 1)]).values():
        f.result(10)


def test_java_share_consumer_accept_release_reject(
    broker: BrokerProcess, java: JavaJudge
) -> None:
    make_topic(broker.kafka_bootstrap, "jq")
    got = java.run("share", "jq", "jgroup", 9)
    deliveries = [(d["offset"], d["delivery_count"]) for d in got["deliveries"]]
    first = sorted(o for o, c in deliveries if c == 1)
    assert first == list(range(9))
    # Released on the first delivery: back once with count 2; rejected: never again.
    assert sorted(o for o, c in deliveries if c == 2) == [1, 4, 7]
    assert len(deliveries) == 12


def test_java_admin_sees_share_version_finalized(java: JavaJudge) -> None:
    got = java.run("share_features")
    assert got["finalized"] == {"share.version": [2, 2]}
    assert got["supported"] == {"share.version": [0, 2]}
    assert got["epoch"] == 1


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.startswith("dgroup")]


def test_kafka_share_groups_list_describe_reset_delete(broker: BrokerProcess) -> None:
    bs = broker.kafka_bootstrap
    make_topic(bs, "dq")
    p = ck.Producer({"bootstrap.servers": bs})
    for i in range(10):
        p.produce("dq", value=b"%d" % i)
    p.flush(10)
    c = ck.ShareConsumer({"bootstrap.servers": bs, "group.id": "dgroup"})
    c.subscribe(["dq"])
    end = time.monotonic() + 20
    while time.monotonic() < end:
        c.poll(timeout=0.5)  # joins; latest: the share-partition starts at the log's end
        if _rows(tool("kafka-share-groups.sh", "--bootstrap-server", bs, "--describe",
                      "--group", "dgroup")):
            break
    share = ("kafka-share-groups.sh", "--bootstrap-server", bs)
    assert "dgroup" in tool(*share, "--list").split()
    assert _rows(tool(*share, "--describe", "--group", "dgroup")) == [
        ["dgroup", "dq", "0", "10", "0"]
    ]
    (member,) = _rows(tool(*share, "--describe", "--group", "dgroup", "--members"))
    assert member[-2:] == ["1", "dq:0"]
    (state,) = _rows(tool(*share, "--describe", "--group", "dgroup", "--state"))
    assert state[-2:] == ["Stable", "1"]
    c.close()
    assert _rows(tool(*share, "--reset-offsets", "--group", "dgroup", "--topic", "dq",
                      "--to-earliest", "--execute")) == [["dgroup", "dq", "0", "0"]]
    assert _rows(tool(*share, "--describe", "--group", "dgroup")) == [
        ["dgroup", "dq", "0", "0", "10"]
    ]
    assert "Successful" in tool(*share, "--delete-offsets", "--group", "dgroup", "--topic", "dq")
    assert "no offset information" in tool(*share, "--describe", "--group", "dgroup")
    assert "was successful" in tool(*share, "--delete", "--group", "dgroup")
    assert "dgroup" not in tool(*share, "--list").split()
