"""The way out of one node: MirrorMaker 2 moves brokerd's topics and groups to Kafka.

A real ``twistd broker`` holds two topics (``orders``: 3 partitions with retention and
size overrides; ``customers``: compacted) and two applications' consumer groups: a Python
one (confluent-kafka, ``py-app``) and a Java one (Kafka's console consumer,
``java-app``). MirrorMaker 2 in dedicated mode (``org.apache.kafka.connect.mirror.
MirrorMaker``, ``mm2.properties`` as docs/migration.md shows) copies the topics, their
configs and the groups' committed offsets (checkpoints, ``sync.group.offsets.enabled``)
to a KRaft Kafka cluster on loopback (``tests/kraft_cluster.py``), under
``IdentityReplicationPolicy`` so names stay the same. Producers keep writing to brokerd
while it mirrors; then producers (confluent-kafka and Kafka's verifiable producer) and
consumers switch their bootstrap servers to the cluster, as an operator would.

Checked: every acknowledged record (on brokerd before and during the mirroring, on Kafka
after the switch) is read by both applications; the copies have the same records at the
same offsets; the configs arrived, a change made during mirroring too; each group resumes
at MirrorMaker's translated offsets, which never pass what the group had committed on
brokerd (no skipped record), and what each application reads a second time is exactly the
gap between its brokerd commit and the translation (measured, reported as a figure).
The way back: a second flow mirrors the cluster to a fresh brokerd (a standby), whose
groups get the translated offsets and whose consumers resume there.

brokerd -> a one-node cluster runs in ``make test`` (about 2.5 minutes on two shared
cores); with the way back, and brokerd -> a three-node cluster (a 3-voter quorum,
replication factor 3) and back, the runs (about 3 minutes each) are ``slow``
(``make test-long``). Without java or the jars (``make jvm-deps``) the tests skip.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.brokerproc import BrokerProcess
from tests.figures import record
from tests.judge_drivers import JVM_CONNECT_LIB, JVM_LIB, missing
from tests.kraft_cluster import TOOLS, KraftCluster

pytestmark = [pytest.mark.clients, pytest.mark.broker]

ORDERS = "orders"
CUSTOMERS = "customers"
#: The schema registry's topic, carried like the others (docs/schema-registry.md).
SCHEMAS = "_schemas"
PY_GROUP = "py-app"
JAVA_GROUP = "java-app"
#: MirrorMaker's first start makes its Connect herders join their groups and create its
#: internal topics on both clusters; the copy then follows within a few intervals.
MIRROR_TIMEOUT = 180.0
WAIT = 30.0
#: Kafka's broker default, which brokerd's topics do not override.
RETENTION_MS = "604800000"
RETENTION_MS_CHANGED = "259200000"
MAX_MESSAGE_BYTES = "2097152"
#: The offset-sync cadence: MirrorMaker writes an offset sync when the translation of the
#: newest record would be more than this many records stale. 0 = a sync per record, so a
#: consumer that had read to the end is translated exactly (see docs/migration.md).
OFFSET_LAG_MAX = 0


def require_mirror_maker() -> None:
    if shutil.which("java") is None:
        missing("java is not installed (CI installs JDK 17)")
    for lib, jar in ((JVM_CONNECT_LIB, "connect-mirror-*.jar"), (JVM_LIB, "kafka_2.13-*.jar"),
                     (JVM_LIB, "kafka-tools-*.jar")):
        if not any(lib.glob(jar)):
            missing(f"{jar} is missing from {lib.relative_to(JVM_LIB.parent.parent.parent)}: "
                    "run `make jvm-deps`")


def wait_until(
    what: str, check: Callable[[], bool], timeout: float, log: Callable[[], str]
) -> float:
    """Poll ``check``; return the seconds it took, or fail with ``log()``'s tail."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic() - start
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; log tail:\n{log()[-6000:]}")


def mirror_properties(
    source: str, target: str, bootstraps: dict[str, str], replication: dict[str, int]
) -> str:
    """An mm2.properties with one enabled flow, ``source->target``."""
    other = f"{target}->{source}"
    lines = [
        f"clusters = {', '.join(bootstraps)}",
        *(f"{alias}.bootstrap.servers = {servers}" for alias, servers in bootstraps.items()),
        f"{source}->{target}.enabled = true",
        f"{source}->{target}.topics = {ORDERS}, {CUSTOMERS}, {SCHEMAS}",
        f"{source}->{target}.groups = {PY_GROUP}, {JAVA_GROUP}",
        f"{other}.enabled = false",
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "sync.group.offsets.enabled = true",
        "sync.group.offsets.interval.seconds = 1",
        "emit.checkpoints.interval.seconds = 1",
        "emit.heartbeats.interval.seconds = 1",
        "refresh.topics.interval.seconds = 2",
        "refresh.groups.interval.seconds = 2",
        "sync.topic.configs.interval.seconds = 2",
        "sync.topic.acls.enabled = false",
        f"offset.lag.max = {OFFSET_LAG_MAX}",
        # Copies and MirrorMaker's checkpoint/heartbeat topics live on the target ...
        f"replication.factor = {replication[target]}",
        f"checkpoints.topic.replication.factor = {replication[target]}",
        f"heartbeats.topic.replication.factor = {replication[target]}",
        # Dedicated mode runs the disabled flow's heartbeat connector too, which creates
        # its heartbeats topic on this flow's source.
        f"{other}.heartbeats.topic.replication.factor = {replication[source]}",
        # ... the offset syncs on the source.
        f"offset-syncs.topic.replication.factor = {replication[source]}",
        # Each cluster holds the Connect topics of the herder that writes to it.
        *(
            f"{alias}.{kind}.storage.replication.factor = {factor}"
            for alias, factor in replication.items()
            for kind in ("config", "offset", "status")
        ),
        # Kafka's producer default is 5 s of lingering for acks from a 3-node cluster;
        # the copy is small, so send at once.
        "producer.linger.ms = 5",
        "",
    ]
    return "\n".join(lines)


class MirrorMaker:
    """One ``connect-mirror-maker.sh mm2.properties`` process."""

    def __init__(self, workdir: Path, name: str, properties: str) -> None:
        self.properties = workdir / f"{name}.properties"
        self.properties.write_text(properties)
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> MirrorMaker:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(TOOLS / "connect-mirror-maker.sh"), str(self.properties)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={
                    **os.environ,
                    "KAFKA_HEAP_OPTS": "-Xmx384m",
                    "KAFKA_TOOLS_LOG_LEVEL": "info",
                },
            )
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Ledger:
    """Every acknowledged record, by value: what the applications must all read."""

    def __init__(self) -> None:
        self.acked: set[str] = set()

    def python_produce(self, bootstrap: str, prefix: str, count: int) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        failures: list[str] = []

        def delivered(err: object, msg: object) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                self.acked.add(msg.value().decode())  # type: ignore[attr-defined]

        for i in range(count):
            producer.produce(
                ORDERS,
                f"{prefix}-{i:04d}".encode(),
                key=f"k{i % 17}".encode(),
                on_delivery=delivered,
            )
            producer.poll(0)
        assert producer.flush(WAIT) == 0
        assert not failures, failures[:3]

    def java_produce(self, bootstrap: str, prefix: int, count: int) -> None:
        """Kafka's verifiable producer: each acknowledgement is a JSON line on stdout."""
        done = subprocess.run(
            [
                str(TOOLS / "kafka-verifiable-producer.sh"),
                "--bootstrap-server",
                bootstrap,
                "--topic",
                ORDERS,
                "--max-messages",
                str(count),
                "--acks",
                "-1",
                "--value-prefix",
                str(prefix),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        acked = [
            event["value"]
            for event in map(json.loads, done.stdout.splitlines())
            if event.get("name") == "producer_send_success"
        ]
        assert len(acked) == count, done.stdout[-2000:]
        self.acked.update(acked)


def python_consume(bootstrap: str, limit: int | None) -> list[str]:
    """``py-app``: read up to ``limit`` records (None: to the end), commit, leave."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": PY_GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([ORDERS])
    values: list[str] = []
    idle_until = time.monotonic() + WAIT
    try:
        while limit is None or len(values) < limit:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                if time.monotonic() > idle_until:
                    break
                continue
            values.append(msg.value().decode())
            consumer.commit(message=msg, asynchronous=False)
            # To the end = five seconds without a record once some were read.
            idle_until = time.monotonic() + 5
    finally:
        consumer.close()
    return values


def java_consume(bootstrap: str, limit: int | None) -> list[str]:
    """``java-app``: Kafka's console consumer; it commits its position as it closes."""
    bound = ["--max-messages", str(limit)] if limit else ["--timeout-ms", "15000"]
    done = subprocess.run(
        [
            str(TOOLS / "kafka-console-consumer.sh"),
            "--bootstrap-server",
            bootstrap,
            "--topic",
            ORDERS,
            "--group",
            JAVA_GROUP,
            "--from-beginning",
            *bound,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout.splitlines()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's end offset ({} while the topic does not exist).

    A topic MirrorMaker has just created on Kafka may answer NOT_LEADER_FOR_PARTITION for
    a moment, until its leaders are known: that is retried for a few seconds.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        for attempt in range(20):
            metadata = consumer.list_topics(topic, timeout=10)
            if topic not in metadata.topics or metadata.topics[topic].error is not None:
                return {}
            try:
                return {
                    p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    for p in metadata.topics[topic].partitions
                }
            except KafkaException:
                if attempt == 19:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets of ``orders`` (partitions without one left out)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([TopicPartition(ORDERS, p) for p in range(partitions)], timeout=10)
    except KafkaException:
        return {}
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


def records(bootstrap: str, topic: str) -> dict[tuple[int, int], bytes | None]:
    """(partition, offset) -> value of every record of ``topic``."""
    ends = end_offsets(bootstrap, topic)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False}
    )
    out: dict[tuple[int, int], bytes | None] = {}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
        remaining = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + WAIT
        while remaining and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            out[(msg.partition(), msg.offset())] = msg.value()
            if msg.offset() + 1 >= ends[msg.partition()]:
                remaining.discard(msg.partition())
    finally:
        consumer.close()
    return out


def keyed_records(bootstrap: str, topic: str) -> dict[int, tuple[bytes | None, bytes | None]]:
    """Offset -> (key, value) of every record of partition 0 of ``topic``."""
    ends = end_offsets(bootstrap, topic)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False}
    )
    out: dict[int, tuple[bytes | None, bytes | None]] = {}
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + WAIT
        while len(out) < ends.get(0, 0) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out[msg.offset()] = (msg.key(), msg.value())
    finally:
        consumer.close()
    return out


SCHEMA_V1 = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}]})
SCHEMA_V2 = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""}]})


def register_schemas(registry_url: str) -> dict[tuple[str, int], int]:
    """Two versions of orders-value and one of customers-value (sharing v1's text, so
    its id): (subject, version) -> id, as the registry answers."""
    from tests.registry.rest_helpers import Rest

    rest = Rest(registry_url)
    rest.wait_ready()
    for subject, schema in (("orders-value", SCHEMA_V1), ("orders-value", SCHEMA_V2),
                            ("customers-value", SCHEMA_V1)):
        status, body = rest("POST", f"/subjects/{subject}/versions", {"schema": schema})
        assert status == 200, body
    ids = {}
    for subject, version in (("orders-value", 1), ("orders-value", 2), ("customers-value", 1)):
        ids[(subject, version)] = rest("GET", f"/subjects/{subject}/versions/{version}")[1]["id"]
    assert ids[("orders-value", 1)] == ids[("customers-value", 1)]
    return ids


def schema_ids(bootstrap: str) -> dict[tuple[str, int], int]:
    """(subject, version) -> id, as the records of ``_schemas`` on ``bootstrap`` say."""
    from brokerd.registry.records import SchemaRecord, decode_record

    out = {}
    for key, value in keyed_records(bootstrap, SCHEMAS).values():
        record = decode_record(key, value)
        if isinstance(record, SchemaRecord):
            r = record.registered
            out[(r.subject, r.version)] = r.schema_id
    return out


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    client = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic)
    entries = client.describe_configs([resource])[resource].result(WAIT)
    return {name: entry.value for name, entry in entries.items()}


def set_config(bootstrap: str, topic: str, name: str, value: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    client = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)],
    )
    client.incremental_alter_configs([resource])[resource].result(WAIT)


def wait_for_translation(
    bootstrap: str, source_commits: dict[str, dict[int, int]], partitions: int,
    at_end: set[str],
) -> tuple[dict[str, dict[int, int]], float]:
    """The groups' offsets on the target once MirrorMaker has synced them, and how long.

    Done when they equal the source's commits, or when the groups of ``at_end`` (they
    had read to the end, where every record has its own sync) equal theirs and nothing
    moved for ``settle`` seconds (many checkpoint intervals): MirrorMaker translates an
    offset behind the end only as exactly as the offset syncs it kept allow, and writes
    none for a partition it cannot translate, which may be every partition of a group
    far behind, depending on when its checkpoint task started (see docs/migration.md).
    """
    settle = 10.0
    # A partition committed at 0 needs no translation: the consumer starts there anyway.
    expected = {g: {p: o for p, o in c.items() if o > 0} for g, c in source_commits.items()}
    seen: dict[str, dict[int, int]] = {}
    start = changed = time.monotonic()
    while time.monotonic() - start < MIRROR_TIMEOUT:
        now = {group: committed(bootstrap, group, partitions) for group in source_commits}
        if now != seen:
            seen, changed = now, time.monotonic()
        exact = {g for g, c in expected.items() if {p: now[g].get(p) for p in c} == c}
        if exact == set(expected) or (
            at_end <= exact and time.monotonic() - changed > settle
        ):
            return now, time.monotonic() - start
        time.sleep(1)
    raise AssertionError(f"no group offsets synced: {seen} (source {source_commits})")


def reread(first: list[str], second: list[str]) -> int:
    return len(set(first) & set(second))


def assert_read_everything(name: str, reads: list[str], acked: set[str]) -> None:
    lost = acked - set(reads)
    assert not lost, f"{name} never read {len(lost)} acknowledged record(s): {sorted(lost)[:10]}"
    invented = set(reads) - acked
    assert not invented, f"{name} read records nobody produced: {sorted(invented)[:10]}"


def create_topics(bootstrap: str) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})
    futures = client.create_topics(
        [
            NewTopic(
                ORDERS,
                num_partitions=3,
                replication_factor=1,
                config={"retention.ms": RETENTION_MS, "max.message.bytes": MAX_MESSAGE_BYTES},
            ),
            NewTopic(
                CUSTOMERS,
                num_partitions=1,
                replication_factor=1,
                config={"cleanup.policy": "compact"},
            ),
        ]
    )
    for future in futures.values():
        future.result(WAIT)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(40):
        producer.produce(CUSTOMERS, f"name-{i}".encode(), key=f"customer-{i % 10}".encode())
    assert producer.flush(WAIT) == 0


def run_migration(tmp_path: Path, size: int, way_back: bool) -> None:
    require_mirror_maker()
    started = time.monotonic()
    (tmp_path / "brokerd").mkdir()
    brokerd = BrokerProcess(tmp_path / "brokerd").start()
    cluster = KraftCluster(tmp_path / "kafka", size)
    mirrors: list[MirrorMaker] = []
    standby: BrokerProcess | None = None
    try:
        cluster.start()
        cluster_up = time.monotonic() - started
        source, target = brokerd.kafka_bootstrap, cluster.bootstrap
        create_topics(source)
        registered = register_schemas(brokerd.schema_registry_url)
        ledger = Ledger()

        # Before MirrorMaker: both applications produce and consume on brokerd; py-app
        # stops part-way, java-app further behind.
        ledger.python_produce(source, "py-a", 300)
        ledger.java_produce(source, 2, 200)
        py_reads = python_consume(source, 350)
        java_reads = java_consume(source, 150)
        assert len(py_reads) == 350 and len(java_reads) == 150

        forward = MirrorMaker(
            tmp_path,
            "mm2",
            mirror_properties(
                "brokerd",
                "kafka",
                {"brokerd": source, "kafka": target},
                {"brokerd": 1, "kafka": cluster.replication},
            ),
        ).start()
        mirrors.append(forward)
        mirror_started = time.monotonic()

        # While it mirrors: producers carry on on brokerd; py-app catches up to the end
        # and leaves; a config changes.
        ledger.python_produce(source, "py-b", 200)
        py_reads += python_consume(source, None)
        wait_until(
            "the copies on Kafka",
            lambda: bool(end_offsets(target, ORDERS)),
            MIRROR_TIMEOUT,
            forward.log,
        )
        set_config(source, ORDERS, "retention.ms", RETENTION_MS_CHANGED)

        max_lag = 0

        def caught_up() -> bool:
            nonlocal max_lag
            src, dst = end_offsets(source, ORDERS), end_offsets(target, ORDERS)
            lag = sum(src.values()) - sum(dst.get(p, 0) for p in src)
            max_lag = max(max_lag, lag)
            return lag == 0 and all(
                end_offsets(source, t) == end_offsets(target, t) for t in (CUSTOMERS, SCHEMAS)
            )

        wait_until("MirrorMaker's lag to reach 0", caught_up, MIRROR_TIMEOUT, forward.log)
        copy_seconds = time.monotonic() - mirror_started
        copied = sum(end_offsets(target, ORDERS).values()) + sum(
            end_offsets(target, CUSTOMERS).values()
        )

        # Same records at the same offsets: the identity policy keeps offsets too, on a
        # fresh target topic with one writer.
        assert records(target, ORDERS) == records(source, ORDERS)
        assert records(target, CUSTOMERS) == records(source, CUSTOMERS)
        wait_until(
            "the config change on Kafka",
            lambda: topic_configs(target, ORDERS)["retention.ms"] == RETENTION_MS_CHANGED,
            MIRROR_TIMEOUT,
            forward.log,
        )
        target_orders = topic_configs(target, ORDERS)
        assert target_orders["max.message.bytes"] == MAX_MESSAGE_BYTES
        assert topic_configs(target, CUSTOMERS)["cleanup.policy"] == "compact"
        # The schemas arrived as they were written: the same keys and values at the same
        # offsets, compacted, one partition; so a registry reading them serves the ids.
        assert keyed_records(target, SCHEMAS) == keyed_records(source, SCHEMAS)
        assert schema_ids(target) == registered
        assert topic_configs(target, SCHEMAS)["cleanup.policy"] == "compact"
        assert list(end_offsets(target, SCHEMAS)) == [0]

        brokerd_commits = {
            PY_GROUP: committed(source, PY_GROUP, 3),
            JAVA_GROUP: committed(source, JAVA_GROUP, 3),
        }
        wait_for_translation(target, brokerd_commits, 3, at_end={PY_GROUP})
        sync_seconds = time.monotonic() - mirror_started

        # Switch: producers first, then (MirrorMaker stopped) the consumers.
        ledger.python_produce(target, "py-c", 100)
        ledger.java_produce(target, 3, 100)
        forward.stop()
        # What the groups resume from: MirrorMaker's last sync before it stopped.
        translated = {group: committed(target, group, 3) for group in brokerd_commits}
        for group, offsets in translated.items():
            for partition, offset in offsets.items():
                # Never past the source commit: a translated offset that overshoots
                # would skip records.
                assert offset <= brokerd_commits[group].get(partition, 0), (group, translated)
        py_after = python_consume(target, None)
        java_after = java_consume(target, None)
        py_reread, java_reread = reread(py_reads, py_after), reread(java_reads, java_after)
        assert_read_everything(PY_GROUP, py_reads + py_after, ledger.acked)
        assert_read_everything(JAVA_GROUP, java_reads + java_after, ledger.acked)
        # What an application re-reads is exactly the gap left by the translation.
        for group, reads in ((PY_GROUP, py_reread), (JAVA_GROUP, java_reread)):
            gap = sum(brokerd_commits[group].values()) - sum(translated[group].values())
            assert reads == gap, (group, reads, gap, brokerd_commits, translated)
        # py-app had read to the end, where each record has its own sync: exact.
        assert py_reread == 0, (brokerd_commits, translated)
        mirrored = sum(end_offsets(source, ORDERS).values())
        record(
            f"MirrorMaker 2 brokerd -> {size}-node Kafka",
            f"cluster up in {cluster_up:.0f} s; {copied} records copied, lag 0 "
            f"{copy_seconds:.0f} s after MM2 start (max lag seen {max_lag}); groups translated "
            f"{sync_seconds:.0f} s after MM2 start; re-read after the switch: py-app "
            f"{py_reread} (read to the end), java-app {java_reread} of {mirrored} "
            f"(committed {sum(brokerd_commits[JAVA_GROUP].values())}, translated "
            f"{sum(translated[JAVA_GROUP].values())})",
        )

        if not way_back:
            return

        # The way back: the cluster mirrored to a fresh brokerd, a standby. Producers
        # carry on on Kafka meanwhile; at the fall-back they move first, the consumers
        # drain Kafka, and MirrorMaker's last sync hands their offsets to the standby.
        (tmp_path / "standby").mkdir()
        standby = BrokerProcess(tmp_path / "standby").start()
        back = MirrorMaker(
            tmp_path,
            "mm2-back",
            mirror_properties(
                "kafka",
                "brokerd",
                {"brokerd": standby.kafka_bootstrap, "kafka": target},
                {"brokerd": 1, "kafka": cluster.replication},
            ),
        ).start()
        mirrors.append(back)
        back_started = time.monotonic()
        ledger.python_produce(target, "py-d", 100)
        ledger.java_produce(target, 4, 100)
        py_after += python_consume(target, None)
        java_after += java_consume(target, None)

        def standby_caught_up() -> bool:
            return all(
                end_offsets(standby.kafka_bootstrap, t) == end_offsets(target, t)
                for t in (ORDERS, CUSTOMERS, SCHEMAS)
            )

        wait_until("the standby to catch up", standby_caught_up, MIRROR_TIMEOUT, back.log)
        back_copy = time.monotonic() - back_started
        standby_copied = sum(end_offsets(standby.kafka_bootstrap, ORDERS).values())
        assert records(standby.kafka_bootstrap, ORDERS) == records(target, ORDERS)
        standby_orders = topic_configs(standby.kafka_bootstrap, ORDERS)
        assert standby_orders["retention.ms"] == RETENTION_MS_CHANGED
        assert standby_orders["max.message.bytes"] == MAX_MESSAGE_BYTES
        assert topic_configs(standby.kafka_bootstrap, CUSTOMERS)["cleanup.policy"] == "compact"
        # The standby's registry finds the mirrored _schemas and serves the same ids.
        from tests.registry.rest_helpers import Rest

        standby_registry = Rest(standby.schema_registry_url)

        def standby_serves_the_ids() -> bool:
            return all(
                standby_registry("GET", f"/subjects/{s}/versions/{v}")[1].get("id") == sid
                for (s, v), sid in registered.items()
            )

        wait_until("the standby's registry to serve the schemas", standby_serves_the_ids,
                   WAIT, back.log)
        kafka_commits = {
            PY_GROUP: committed(target, PY_GROUP, 3),
            JAVA_GROUP: committed(target, JAVA_GROUP, 3),
        }
        _, back_sync = wait_for_translation(
            standby.kafka_bootstrap, kafka_commits, 3, at_end={PY_GROUP, JAVA_GROUP}
        )
        back.stop()
        back_translated = {
            group: committed(standby.kafka_bootstrap, group, 3) for group in kafka_commits
        }
        for group, offsets in back_translated.items():
            for partition, offset in offsets.items():
                assert offset <= kafka_commits[group].get(partition, 0), (group, back_translated)
        ledger.python_produce(standby.kafka_bootstrap, "py-e", 50)
        ledger.java_produce(standby.kafka_bootstrap, 5, 50)
        py_back = python_consume(standby.kafka_bootstrap, None)
        java_back = java_consume(standby.kafka_bootstrap, None)
        assert_read_everything(PY_GROUP, py_reads + py_after + py_back, ledger.acked)
        assert_read_everything(JAVA_GROUP, java_reads + java_after + java_back, ledger.acked)
        back_rereads = {
            PY_GROUP: reread(py_reads + py_after, py_back),
            JAVA_GROUP: reread(java_reads + java_after, java_back),
        }
        for group, reads in back_rereads.items():
            gap = sum(kafka_commits[group].values()) - sum(back_translated[group].values())
            assert reads == gap, (group, reads, kafka_commits, back_translated)
            # Both had drained Kafka before the fall-back.
            assert reads == 0, (group, kafka_commits, back_translated)
        record(
            f"MirrorMaker 2 {size}-node Kafka -> standby brokerd",
            f"{standby_copied} records of {ORDERS} on the standby {back_copy:.0f} s after "
            "MM2 start, groups translated "
            f"in {back_sync:.0f} s more; re-read on the way back: py-app "
            f"{back_rereads[PY_GROUP]}, java-app {back_rereads[JAVA_GROUP]}; whole run "
            f"{time.monotonic() - started:.0f} s",
        )
    finally:
        for mirror in mirrors:
            mirror.stop()
        cluster.stop()
        brokerd.kill()
        if standby is not None:
            standby.kill()


def test_migrate_to_one_kafka_node(tmp_path: Path) -> None:
    run_migration(tmp_path, 1, way_back=False)


@pytest.mark.slow
def test_migrate_to_one_kafka_node_and_back(tmp_path: Path) -> None:
    run_migration(tmp_path, 1, way_back=True)


@pytest.mark.slow
def test_migrate_to_three_node_kraft_cluster_and_back(tmp_path: Path) -> None:
    run_migration(tmp_path, 3, way_back=True)
