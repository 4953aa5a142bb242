"""The client matrix with kcat (librdkafka 2.0.2 on Debian 12), run as a subprocess
against a real ``twistd broker``: topic creation (kcat can only auto-create, by producing),
produce with acks 0/1/all, consume from earliest, an offset and the end, every codec, and a
consumer group across a member leaving, a broker restart and a broker crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import (
    CODECS,
    HEARTBEAT_MS,
    SESSION_TIMEOUT_MS,
    KcatProcess,
    Rec,
    check_group_records,
    committed_offsets,
    compressible_values,
    crash_and_restart,
    expected,
    kcat_consume,
    kcat_produce,
    kcat_run,
    module_broker,
    need_kcat,
    offset_inside_a_batch,
    small_values,
    stored_codecs,
    wait_until,
)

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    need_kcat()
    # kcat has no CreateTopics: its topics are auto-created, with this partition count.
    yield from module_broker(tmp_path_factory, "kcat", "--default-partitions=2")


def test_create_topic_by_producing_and_list(kbroker: BrokerProcess) -> None:
    kcat_produce(kbroker, "kcat-create", 1, [b"first"])
    done = kcat_run(kbroker, "-L", "-J", "-t", "kcat-create")
    meta = json.loads(done.stdout)
    assert [b["id"] for b in meta["brokers"]] == [0]
    [topic] = meta["topics"]
    assert topic["topic"] == "kcat-create"
    assert [p["partition"] for p in topic["partitions"]] == [0, 1]
    assert all(p["leader"] == 0 for p in topic["partitions"])
    assert kcat_consume(kbroker, "kcat-create", 1, "beginning") == [(1, 0, b"first")]
    assert kcat_consume(kbroker, "kcat-create", 0, "beginning") == []
    # The full listing (Metadata with every topic) shows it too.
    listing = json.loads(kcat_run(kbroker, "-L", "-J").stdout)
    assert "kcat-create" in {t["topic"] for t in listing["topics"]}


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_acks_and_read_back(kbroker: BrokerProcess, acks: str) -> None:
    topic = f"kcat-acks-{acks}"
    first, second = small_values(f"a{acks}", 10), small_values(f"a{acks}", 5, start=10)
    kcat_produce(kbroker, topic, 0, first, "-X", f"acks={acks}")
    kcat_produce(kbroker, topic, 0, second, "-X", f"acks={acks}")
    if acks == "0":
        # Nothing tells an acks=0 producer when the data is stored: wait for it.
        wait_until(
            lambda: len(kcat_consume(kbroker, topic, 0, "beginning")) == 15,
            "the acks=0 records to be stored",
        )
    assert kcat_consume(kbroker, topic, 0, "beginning") == expected(0, 0, first + second)


def test_consume_from_earliest_offset_and_latest(kbroker: BrokerProcess) -> None:
    topic = "kcat-positions"
    values = small_values("pos", 10)
    kcat_produce(kbroker, topic, 0, values)
    assert kcat_consume(kbroker, topic, 0, "beginning") == expected(0, 0, values)
    assert kcat_consume(kbroker, topic, 0, "6") == expected(0, 6, values[6:])
    assert kcat_consume(kbroker, topic, 0, "-3") == expected(0, 7, values[7:])  # relative
    # From the end: only what is produced after the consumer found the end.
    tail = KcatProcess(
        kbroker, "-C", "-t", topic, "-p", "0", "-o", "end", "-c", "3", "-f", "%p %o %s\\n"
    )
    try:
        wait_until(
            lambda: any("at offset 10" in line for line in tail.stderr()),
            "kcat to reach the end of the partition",
        )
        later = small_values("later", 3)
        kcat_produce(kbroker, topic, 0, later)
        wait_until(lambda: len(tail.records()) == 3, "kcat to read the 3 new records")
        assert tail.proc.wait(10) == 0
    finally:
        tail.kill()
    assert tail.records() == expected(0, 10, later)


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips(kbroker: BrokerProcess, codec: str) -> None:
    topic = f"kcat-codec-{codec}"
    values = compressible_values(f"kcat-{codec}", 6)
    kcat_produce(kbroker, topic, 0, values, "-z", codec)
    assert kcat_consume(kbroker, topic, 0, "beginning") == expected(0, 0, values)
    # From inside a (compressed) batch: the records before the offset are skipped.
    inner = offset_inside_a_batch(kbroker, topic, 0)
    assert kcat_consume(kbroker, topic, 0, str(inner)) == expected(0, inner, values[inner:])
    # The broker stored what kcat sent: batches really compressed with this codec.
    assert stored_codecs(kbroker, topic, 0) == {codec}


def _member(broker: BrokerProcess, group: str, topic: str) -> KcatProcess:
    # No -o: with -G, "-o beginning" would re-seek on every rebalance (kcat's doing);
    # auto.offset.reset=earliest only applies where nothing is committed. -E: kcat
    # otherwise exits on the first error, such as "all brokers down" during a restart.
    return KcatProcess(
        broker,
        "-E",
        "-G",
        group,
        "-f",
        "%p %o %s\\n",
        "-X",
        "auto.offset.reset=earliest",
        "-X",
        f"session.timeout.ms={SESSION_TIMEOUT_MS}",
        "-X",
        f"heartbeat.interval.ms={HEARTBEAT_MS}",
        "-X",
        "auto.commit.interval.ms=100",
        "-X",
        "topic.metadata.refresh.interval.ms=1000",
        topic,
    )


def test_group_split_leave_commit_restart_resume(make_broker: object) -> None:
    """Two members split a 4-partition topic and each reads exactly its share; one
    leaves and the other takes its partitions over from the leaver's commits; after a
    clean restart a new member starts exactly at the committed offsets; it then stays up
    through a crash of the broker (the group is restored), and reads what comes next.
    Every record is
    read once in all (check_group_records)."""
    need_kcat()
    # A broker of its own (it restarts), auto-creating 4-partition topics for kcat.
    broker: BrokerProcess = make_broker("--default-partitions=4")  # type: ignore[operator]
    topic, group = "kcat-group", "kcat-group-g"
    parts = range(4)
    produced: dict[int, list[bytes]] = {p: [] for p in parts}

    def produce(phase: str, counts: dict[int, int]) -> list[Rec]:
        out = []
        for p in parts:
            values = small_values(f"{phase}-p{p}", counts[p])
            kcat_produce(broker, topic, p, values)
            out += expected(p, len(produced[p]), values)
            produced[p] += values
        return out

    def has_all(member: KcatProcess, records: list[Rec]) -> bool:
        return set(records) <= set(member.records())

    produce("seed", {p: 1 for p in parts})  # creates the topic
    a = _member(broker, group, topic)
    b: KcatProcess | None = None
    c: KcatProcess | None = None
    try:
        wait_until(lambda: a.assignment() == set(parts), "member A to get all 4 partitions")
        wait_until(lambda: len(a.records()) == 4, "member A to read the seed records")
        b = _member(broker, group, topic)
        mb = b

        def split() -> bool:
            sa, sb = a.assignment(), mb.assignment()
            return bool(sa and sb and not sa & sb and sa | sb == set(parts))

        wait_until(split, "A and B to split the 4 partitions")
        a_parts, b_parts = a.assignment(), b.assignment()
        assert a_parts is not None and b_parts is not None
        phase1 = produce("one", {p: 10 for p in parts})
        wait_until(
            lambda: (
                has_all(a, [r for r in phase1 if r[0] in a_parts])
                and has_all(mb, [r for r in phase1 if r[0] in b_parts])
            ),
            "each member to read its partitions",
        )
        assert {r[0] for r in b.records()} == b_parts  # B only ever had its share

        # B leaves (SIGTERM: kcat closes its consumer, which commits what B read and
        # sends LeaveGroup). kcat commits automatically, every 5 s (its -X puts
        # auto.commit.interval.ms into the legacy topic config, so the interval cannot
        # be shortened), and whenever partitions are revoked: A commits in the rebalance.
        assert b.stop() == 0
        wait_until(lambda: a.assignment() == set(parts), "A to take over B's partitions")
        assert committed_offsets(broker, group, topic, parts) == {p: 11 for p in parts}
        phase2 = produce("two", {p: 3 + 2 * p for p in parts})
        wait_until(lambda: has_all(a, phase2), "A to read phase two on all partitions")
        assert a.stop() == 0  # commits on close
        committed = {p: len(produced[p]) for p in parts}
        assert committed_offsets(broker, group, topic, parts) == committed
        before = a.records() + b.records()

        produce("three", {p: 4 for p in parts})
        assert broker.restart() is broker
        assert committed_offsets(broker, group, topic, parts) == committed  # durable
        c = _member(broker, group, topic)
        mc = c
        wait_until(lambda: len(mc.records()) == 16, "C to read phase three after the restart")

        # C stays up while the broker crashes (SIGKILL) and starts again. The broker
        # restores the group from its journal (docs/kafka.md), so C carries on as a
        # member (a client may still choose to re-join) and keeps all four partitions;
        # then it reads what is produced after the restart.
        wait_until(
            lambda: (
                committed_offsets(broker, group, topic, parts)
                == {p: len(produced[p]) for p in parts}
            ),
            "C's auto-commit of phase three",
        )
        assert crash_and_restart(broker) is broker
        wait_until(
            lambda: mc.assignment() == set(parts),
            "C to hold its partitions after the restart",
        )
        phase4 = produce("four", {p: 5 for p in parts})
        wait_until(lambda: has_all(mc, phase4), "C to read phase four")
        assert c.stop() == 0
        assert committed_offsets(broker, group, topic, parts) == {
            p: len(produced[p]) for p in parts
        }
        check_group_records(before, c.records(), committed, produced)
    finally:
        for member in (a, b, c):
            if member is not None:
                member.kill()
