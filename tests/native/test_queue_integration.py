"""Share groups on the native protocol through a real ``twistd broker``: several native
queue consumers on one partition (each record delivered once unless released; RELEASE
redelivers with a higher delivery count; REJECT archives; the delivery count limit
archives), a closing connection's records going to the others, ``brokerctl queue work``
and ``brokerctl share-groups``, and the share-group series of /metrics."""

from __future__ import annotations

import json
import subprocess
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.client import NativeError
from brokerd.native.messages import ErrorCode
from brokerd.native.queue_messages import AckKind

from tests.brokerproc import BROKERCTL, BrokerProcess, env

pytestmark = pytest.mark.broker

CONSUMERS = 4
RECORDS = 400


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("queue") / "data").start()
    try:
        yield proc
    finally:
        proc.stop()


def start_group(broker: BrokerProcess, topic: str, group: str, records: int) -> None:
    """A one-partition topic whose share-partition starts at 0, holding ``records``."""
    with broker.client() as client:
        client.create_topic(topic, 1)
        # A new share-partition starts at the log end: initialise it while empty.
        assert client.queue_fetch(group, topic, 0, max_records=1, max_wait_ms=0) == []
        for start in range(0, records, 100):
            client.produce(topic, 0, [b"r%d" % i for i in range(start, min(records, start + 100))])


def brokerctl(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BROKERCTL), "--bootstrap", broker.native_bootstrap, *args],
        env=env(), capture_output=True, text=True, timeout=60,
    )


def test_consumers_on_one_partition_get_each_record_once(broker: BrokerProcess) -> None:
    start_group(broker, "work", "crew", RECORDS)
    seen: list[tuple[int, int, bytes]] = []
    lock = threading.Lock()
    failures: list[BaseException] = []

    def consume() -> None:
        try:
            with broker.client() as client:
                while True:
                    records = client.queue_fetch("crew", "work", 0, max_records=25,
                                                 max_wait_ms=300)
                    if not records:
                        return
                    client.queue_acknowledge("crew", "work", 0, [
                        (r.offset, r.offset, AckKind.ACCEPT) for r in records
                    ])
                    with lock:
                        seen.extend((r.offset, r.delivery_count, r.value) for r in records)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=consume) for _ in range(CONSUMERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures
    assert sorted(o for o, _, _ in seen) == list(range(RECORDS))
    assert {d for _, d, _ in seen} == {1}
    assert all(v == b"r%d" % o for o, _, v in seen)
    with broker.client() as client:
        (part,) = client.describe_share_group("crew")["partitions"]  # type: ignore[misc]
    assert (part["start_offset"], part["backlog"], part["in_flight"]) == (RECORDS, 0, 0)


def test_release_redelivers_reject_and_the_limit_archive(broker: BrokerProcess) -> None:
    start_group(broker, "verdicts", "judges", 3)
    a, b = broker.client(), broker.client()
    try:
        got = a.queue_fetch("judges", "verdicts", 0, max_records=3, max_wait_ms=0)
        assert [(r.offset, r.delivery_count) for r in got] == [(0, 1), (1, 1), (2, 1)]
        # Nothing is left for b while a holds every record.
        assert b.queue_fetch("judges", "verdicts", 0, max_records=3, max_wait_ms=0) == []
        a.queue_acknowledge("judges", "verdicts", 0, [
            (0, 0, AckKind.REJECT), (1, 1, AckKind.RELEASE), (2, 2, AckKind.ACCEPT),
        ])
        # Offset 1 goes round until the default limit (5 deliveries) archives it: its
        # fifth release archives it.
        counts = []
        for _ in range(4):
            (r,) = b.queue_fetch("judges", "verdicts", 0, max_records=3, max_wait_ms=0)
            counts.append((r.offset, r.delivery_count))
            b.queue_acknowledge("judges", "verdicts", 0, [(1, 1, AckKind.RELEASE)])
        assert counts == [(1, d) for d in (2, 3, 4, 5)]
        assert a.queue_fetch("judges", "verdicts", 0, max_records=3, max_wait_ms=0) == []
        # A record no longer held cannot be acknowledged.
        with pytest.raises(NativeError) as caught:
            a.queue_acknowledge("judges", "verdicts", 0, [(2, 2, AckKind.ACCEPT)])
        assert caught.value.code == ErrorCode.INVALID_RECORD_STATE
        (part,) = a.describe_share_group("judges")["partitions"]  # type: ignore[misc]
        assert (part["archived"], part["backlog"], part["start_offset"]) == (2, 0, 3)
    finally:
        a.close()
        b.close()


def test_a_closed_connections_records_go_to_another(broker: BrokerProcess) -> None:
    start_group(broker, "handover", "relay", 5)
    a = broker.client()
    assert len(a.queue_fetch("relay", "handover", 0, max_records=5, max_wait_ms=0)) == 5
    with broker.client() as b:
        assert b.queue_fetch("relay", "handover", 0, max_records=5, max_wait_ms=0) == []
        a.close()
        got = b.queue_fetch("relay", "handover", 0, max_records=5, max_wait_ms=2000)
        assert [(r.offset, r.delivery_count) for r in got] == [(i, 2) for i in range(5)]


def test_brokerctl_queue_work_and_share_groups(broker: BrokerProcess, tmp_path: Path) -> None:
    topic, group = "tasks", "workers"
    with broker.client() as client:
        client.create_topic(topic, 1)
        client.queue_fetch(group, topic, 0, max_records=1, max_wait_ms=0)
        client.produce(topic, 0, [b"ok-1", b"bad", b"again", b"ok-2"])
    script = tmp_path / "handle.sh"
    script.write_text(
        'v=$(cat)\ncase "$v" in ok-*) exit 0;; bad) exit 65;; *) exit 1;; esac\n'
    )
    done = brokerctl(broker, "queue", "work", group, topic, "--exec", f"sh {script}",
                     "--max-records", "20", "--timeout", "2")
    assert done.returncode == 0, done.stderr
    # "again" is released five times, then archived; "bad" is rejected.
    listed = brokerctl(broker, "share-groups", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = [g for g in json.loads(listed.stdout) if g["group_id"] == group]
    assert (row["backlog"], row["in_flight"], row["archived"], row["redelivered_total"]) == (
        0, 0, 2, 4
    )
    table = brokerctl(broker, "share-groups", "describe", group)
    assert table.returncode == 0, table.stderr
    assert "BACKLOG" in table.stdout and "tasks" in table.stdout
    missing = brokerctl(broker, "share-groups", "describe", "nobody")
    assert missing.returncode == 1 and "GROUP_ID_NOT_FOUND" in missing.stderr
    # Without --exec the values are printed and accepted.
    with broker.client() as client:
        client.produce(topic, 0, [b"x", b"y"])
    printed = brokerctl(broker, "queue", "work", group, topic, "--max-records", "2",
                        "--print-offsets")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.splitlines() == ["4\t1\tx", "5\t1\ty"]


def test_metrics_carry_the_share_group_series(broker: BrokerProcess) -> None:
    start_group(broker, "watched", "observers", 3)
    with broker.client() as client:
        client.queue_fetch("observers", "watched", 0, max_records=1, max_wait_ms=0)
        text = urllib.request.urlopen(
            f"http://127.0.0.1:{broker.http_port}/metrics", timeout=10
        ).read().decode()
    labels = 'group="observers",partition="0",topic="watched"'
    lines = Counter(line.split(" ")[0] for line in text.splitlines() if labels in line)
    for name in ("backlog", "in_flight", "acquired", "redelivered_total", "archived_total"):
        assert lines[f"brokerd_share_group_{name}{{{labels}}}"] == 1, name
    assert f"brokerd_share_group_backlog{{{labels}}} 3.0" in text
    assert f"brokerd_share_group_in_flight{{{labels}}} 1.0" in text


def test_a_topic_deleted_and_created_again_starts_a_fresh_share_partition(
    broker: BrokerProcess,
) -> None:
    """Deleting a topic deletes every group's share state of it (as Kafka does): the
    topic created again under the name is delivered from its start with count 1, at
    once, not after the old acquisition locks."""
    start_group(broker, "reborn", "phoenix", 3)
    with broker.client() as a, broker.client() as b:
        held = a.queue_fetch("phoenix", "reborn", 0, max_records=3, max_wait_ms=0)
        assert [(r.offset, r.delivery_count) for r in held] == [(0, 1), (1, 1), (2, 1)]
        a.delete_topic("reborn")
        start_group(broker, "reborn", "phoenix", 3)
        fresh = b.queue_fetch("phoenix", "reborn", 0, max_records=3, max_wait_ms=0)
        assert [(r.offset, r.delivery_count, r.value) for r in fresh] == [
            (0, 1, b"r0"), (1, 1, b"r1"), (2, 1, b"r2"),
        ]
        with pytest.raises(NativeError):  # a's records were the old topic's
            a.queue_acknowledge("phoenix", "reborn", 0, [(0, 2, AckKind.ACCEPT)])
        b.queue_acknowledge("phoenix", "reborn", 0, [(0, 2, AckKind.ACCEPT)])
