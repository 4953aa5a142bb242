"""Share-group (queue) consumption on one partition: records/s with 1, 4 and 16 native
queue consumers and with 1 and 4 Kafka-protocol share consumers (confluent-kafka's
ShareConsumer), beside a classic consumer group's one member and one plain native reader
of the same partition.

Each share consumer is a separate process with its own connection, so its own
share-group member, and fetches then acknowledges in turn until a fetch finds nothing
for 200 ms (a ShareConsumer: until it has had no record for 2 s, not counted). A native
one (forked) acquires up to 100 records per QueueFetch and
acknowledges them ACCEPT in one QueueAcknowledge. A ShareConsumer (a fresh interpreter
running this module: librdkafka is not fork-safe) joins the group, polls up to 100
records (``max.poll.records``) and accepts them with ``commit_sync`` before the next poll
(implicit acknowledgement mode: two requests per poll; a ShareFetch acquires whole
stored batches, of 1,000 records here, which the client hands out 100 per poll); one
more row has 4 of them in
explicit acknowledgement mode, accepting each record with ``acknowledge`` so that the
next poll's ShareFetch carries the acknowledgements (one request per poll). The records
are produced first (the groups start at the log's start), so the figure is the broker's
acquire/acknowledge path, not a race with producers: all records acquired, each exactly
once (checked), over the time from the consumers' start (for ShareConsumers: before
joining) to the last acknowledgement. The classic group (one confluent-kafka Consumer,
group.protocol classic) is timed from its assignment to its offset commit after the last record; the
plain reader reads the same records with the native Fetch (no group, no
acknowledgements). Consumer processes are stopped by their PID when they do not finish.

Beside Apache Kafka (:func:`kafka_rows`, its own step after the Kafka peers' others):
Kafka's ShareConsumerPerformance with 4 consumers against brokerd's partition and against
a Kafka peer's, and the 4 explicit-acknowledgement ShareConsumers against the peer.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import select
import shutil
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from bench import kafka_tools
from bench.brokerd_runs import native_consume, native_produce
from bench.common import TOOL_TIMEOUT, Curve, Results, Row
from bench.kafka_peer import SYSTEM, KafkaPeer
from bench.scaling import SECTION
from brokerd.client import NativeClient
from brokerd.native.queue_messages import AckKind

from tests.brokerproc import REPO, BrokerProcess, env

SIZE = 100
BATCH = 100
CONSUMERS = (1, 4, 16)
#: Kafka-protocol share consumers: each a whole interpreter with librdkafka's threads, so
#: fewer than the native ones on a small machine.
KAFKA_CONSUMERS = (1, 4)
#: A consumer stops after an empty fetch of this long (the backlog is gone).
IDLE_MS = 200
#: A ShareConsumer that has had no record this long after joining stops (the others
#: drained the partition before its assignment came). Kafka initialises a new share
#: group's share-partition state through its share coordinator first: seconds on a busy
#: machine.
JOIN_GRACE = 30.0
#: A ShareConsumer stops after this long without a record once it has had some. Not
#: one empty poll: a fetch acquires whole stored batches (1,000 records here), so two
#: members' batches can fill the share-partition's 2,000 record locks and leave the others
#: waiting a moment for acknowledgements; the time after the last acknowledgement is not
#: counted.
QUIET_S = 2.0
START_TIMEOUT = 60.0
RUN_TIMEOUT = 300.0
CLASSIC_BATCH = 1000
SHARE_CHILD = "--share-child"
CLASSIC_WHAT = "classic group consume, confluent-kafka Consumer, one member, one partition"
KAFKA_SHARE_WHAT = "share-group consume, {n} confluent-kafka ShareConsumer(s), one partition"
KAFKA_EXPLICIT_WHAT = ("share-group consume, explicit acknowledgements, {n} confluent-kafka "
                       "ShareConsumer(s), one partition")
PERF_SHARE_WHAT = ("share-group consume, Kafka ShareConsumerPerformance, 4 consumers, "
                   "one partition")
#: Share consumers of Kafka's perf tool (its ``--threads``).
PERF_THREADS = 4
#: The peer's fill: batches of about as many 100 B records as brokerd's native produce
#: stores in one (1,000), one acknowledgement per batch (not measured).
PEER_BATCH_RECORDS = 1000
PEER_FILL_PROPS = ("acks=1", "linger.ms=50", f"batch.size={PEER_BATCH_RECORDS * 120}")
#: Kafka writes the share-group state (a topic) and the records without fsync.
PEER_DURABILITY = "OS flushes (Kafka default)"
#: ShareConsumer acknowledgement modes (:func:`_share_child`).
IMPLICIT = "implicit"
EXPLICIT = "explicit"


def _consume_child(port: int, group: str, topic: str, go: Event, out: Connection) -> None:
    try:
        with NativeClient("127.0.0.1", port, timeout=60) as client:
            client.list_topics()
            out.send("ready")
            go.wait(START_TIMEOUT)
            start = time.monotonic()
            last = start
            offsets: list[int] = []
            while True:
                records = client.queue_fetch(group, topic, 0, max_records=BATCH,
                                             max_wait_ms=IDLE_MS)
                if not records:
                    break
                client.queue_acknowledge(group, topic, 0, [
                    (records[0].offset, records[-1].offset, AckKind.ACCEPT)
                ] if records[-1].offset - records[0].offset + 1 == len(records) else [
                    (r.offset, r.offset, AckKind.ACCEPT) for r in records
                ])
                last = time.monotonic()
                offsets += [r.offset for r in records]
            out.send((start, last, offsets))
    except BaseException as exc:
        out.send(f"failed: {exc!r}")
        raise


def queue_rate(proc: BrokerProcess, consumers: int, records: int) -> float:
    """Records/s of ``consumers`` processes draining ``records`` from one partition."""
    topic = f"share-{consumers}"
    group = f"bench-share-{consumers}"
    with proc.client() as client:
        client.create_topic(topic, 1)
        # A new share-partition starts at the log end (share.auto.offset.reset=latest):
        # initialise it while the log is empty, so it starts at offset 0.
        client.queue_fetch(group, topic, 0, max_records=1, max_wait_ms=0)
    native_produce(proc, topic, records, SIZE)
    context = multiprocessing.get_context("fork")
    go = context.Event()
    children = []
    try:
        for _ in range(consumers):
            mine, theirs = context.Pipe(duplex=False)
            child = context.Process(
                target=_consume_child, args=(proc.native_port, group, topic, go, theirs),
                daemon=True,
            )
            child.start()
            children.append((child, mine))
        for _, pipe in children:
            if not pipe.poll(START_TIMEOUT) or pipe.recv() != "ready":
                raise RuntimeError("a queue consumer process did not connect")
        go.set()
        spans: list[tuple[float, float]] = []
        seen: list[int] = []
        for _, pipe in children:
            if not pipe.poll(RUN_TIMEOUT):
                raise RuntimeError("a queue consumer process did not finish")
            answer = pipe.recv()
            if not isinstance(answer, tuple):
                raise RuntimeError(str(answer))
            spans.append((float(answer[0]), float(answer[1])))
            seen += answer[2]
    finally:
        for child, _ in children:
            child.join(5)
            if child.is_alive() and child.pid is not None:
                child.kill()
                child.join()
    if sorted(seen) != list(range(records)):
        raise RuntimeError(
            f"{topic}: {len(seen)} deliveries of {records} records "
            f"({len(set(seen))} distinct)"
        )
    return records / (max(e for _, e in spans) - min(s for s, _ in spans))



def _share_child(bootstrap: str, group: str, topic: str, mode: str = IMPLICIT) -> None:
    """One ShareConsumer process: says "ready", joins once a line arrives on stdin, and
    prints one JSON line: start, first record and last acknowledgement times (monotonic,
    the system-wide clock) and the offsets it was given.

    ``mode`` :data:`IMPLICIT`: each poll's records are accepted with ``commit_sync``
    before the next poll (a ShareAcknowledge, then a ShareFetch). :data:`EXPLICIT`: each
    record is accepted with ``acknowledge`` and the next poll carries the
    acknowledgements in its ShareFetch; after an empty poll a ``commit_sync`` sends those
    it did not carry. It stops after :data:`QUIET_S` without a record."""
    from confluent_kafka import ShareConsumer

    # log_level 3: the client's "Preview" warning is said once, in the row's note.
    config = {"bootstrap.servers": bootstrap, "group.id": group,
              "max.poll.records": BATCH, "log_level": 3}
    if mode == EXPLICIT:
        config["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(config)
    try:
        print("ready", flush=True)
        sys.stdin.readline()
        start = time.monotonic()
        first = last = None
        consumer.subscribe([topic])
        offsets: list[int] = []
        unsent = False
        while time.monotonic() - start < RUN_TIMEOUT:
            polled = [m for m in consumer.poll(IDLE_MS / 1000) if m.error() is None]
            got = [m.offset() for m in polled]
            if not got:
                if unsent:
                    # The acknowledgements the idle poll did not carry go now.
                    _commit(consumer)
                    last = time.monotonic()
                    unsent = False
                now = time.monotonic()
                if (offsets and last is not None and now - last > QUIET_S) or (
                    not offsets and now - start > JOIN_GRACE
                ):
                    break
                continue
            first = first or time.monotonic()
            if mode == EXPLICIT:
                for message in polled:
                    consumer.acknowledge(message)
                last = time.monotonic()
                unsent = True
                offsets += [o for o in got if o is not None]
                continue
            # Implicit acknowledgement: this accepts every record of the poll above.
            for tp, error in consumer.commit_sync(RUN_TIMEOUT).items():
                if error is not None:
                    raise RuntimeError(f"acknowledging {tp}: {error}")
            last = time.monotonic()
            offsets += [o for o in got if o is not None]
        print(json.dumps({"start": start, "first": first, "last": last, "offsets": offsets}),
              flush=True)
    finally:
        consumer.close()


def _commit(consumer: Any) -> None:
    for tp, error in consumer.commit_sync(RUN_TIMEOUT).items():
        if error is not None:
            raise RuntimeError(f"acknowledging {tp}: {error}")


def _ready(child: subprocess.Popen[bytes], deadline: float) -> None:
    """Wait for the child's "ready" line (read unbuffered, so ``communicate`` later sees
    every later byte)."""
    assert child.stdout is not None
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([child.stdout], [], [], left)[0]:
            raise RuntimeError("a ShareConsumer process did not start")
        chunk = os.read(child.stdout.fileno(), 64)
        if not chunk:
            assert child.stderr is not None
            child.wait(5)
            raise RuntimeError(f"a ShareConsumer process exited before it was ready: "
                               f"{child.stderr.read().decode()[-500:]}")
        line += chunk
    if line != b"ready\n":
        raise RuntimeError(f"a ShareConsumer process said {line!r}")


def _share_children(bootstrap: str, group: str, topic: str,
                    consumers: int, mode: str = IMPLICIT) -> list[dict[str, Any]]:
    command = [sys.executable, "-m", "bench.share_groups", SHARE_CHILD, bootstrap, group,
               topic, mode]
    children: list[subprocess.Popen[bytes]] = []
    answers = []
    try:
        for _ in range(consumers):
            children.append(subprocess.Popen(command, cwd=REPO, env=env(),
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE))
        deadline = time.monotonic() + START_TIMEOUT
        for child in children:
            _ready(child, deadline)
        for child in children:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.flush()
        deadline = time.monotonic() + RUN_TIMEOUT
        for child in children:
            out, err = child.communicate(timeout=max(1.0, deadline - time.monotonic()))
            if child.returncode != 0:
                raise RuntimeError(f"a ShareConsumer process failed: {err.decode()[-500:]}")
            answers.append(json.loads(out))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return answers


def _set_earliest(bootstrap: str, group: str) -> None:
    # The package defines these in private modules and re-exports them without __all__.
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entry = ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(START_TIMEOUT)


def kafka_share_rate(proc: BrokerProcess | str, consumers: int, topic: str,
                     records: int, mode: str = IMPLICIT) -> tuple[float, str]:
    """Records/s of ``consumers`` ShareConsumer processes draining ``topic``'s one
    partition (``records`` already there) through a new share group, acknowledging as
    ``mode`` says (:func:`_share_child`), and a note: how long the first record took
    (the join) and how the records were split."""
    bootstrap = proc if isinstance(proc, str) else proc.kafka_bootstrap
    group = f"bench-kshare-{mode}-{consumers}"
    _set_earliest(bootstrap, group)
    answers = _share_children(bootstrap, group, topic, consumers, mode)
    seen = [o for a in answers for o in a["offsets"]]
    if sorted(seen) != list(range(records)):
        raise RuntimeError(f"{topic}, Kafka share group: {len(seen)} deliveries of "
                           f"{records} records ({len(set(seen))} distinct)")
    start = min(a["start"] for a in answers)
    first = min(a["first"] for a in answers if a["first"] is not None)
    last = max(a["last"] for a in answers if a["last"] is not None)
    split = "/".join(f"{n:,}" for n in sorted((len(a["offsets"]) for a in answers),
                                               reverse=True))
    return records / (last - start), (
        f"joining counted: first record after {(first - start) * 1000:.0f} ms; "
        f"records per member {split}"
    )


def classic_rate(proc: BrokerProcess, topic: str, records: int) -> tuple[float, str]:
    """Records/s of one confluent-kafka Consumer of a new classic group reading ``topic``'s
    one partition from the start, from its assignment until its offset commit after the
    last record, and a note with the join's time (not counted)."""
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": proc.kafka_bootstrap,
        "group.id": f"bench-classic-{topic}",
        "group.protocol": "classic",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    assigned: list[float] = []
    try:
        began = time.monotonic()
        consumer.subscribe([topic], on_assign=lambda c, parts: assigned.append(
            time.monotonic()))
        got = 0
        while got < records and time.monotonic() - began < RUN_TIMEOUT:
            # Never more than are left: consume() waits for its count or its timeout.
            batch = consumer.consume(min(CLASSIC_BATCH, records - got), IDLE_MS / 1000)
            got += sum(1 for m in batch if m.error() is None)
        consumer.commit(asynchronous=False)
        end = time.monotonic()
    finally:
        consumer.close()
    if got != records or not assigned:
        raise RuntimeError(f"classic group consumed {got} of {records} records")
    return records / (end - assigned[0]), (
        f"joining (JoinGroup, SyncGroup: {(assigned[0] - began) * 1000:.0f} ms) not "
        "counted; offsets committed after the last record; one member, since a classic "
        "group gives a partition to one member only: more members would idle"
    )


def _kafka_share_missing() -> str:
    try:
        from confluent_kafka import ShareConsumer  # noqa: F401
    except ImportError:
        return "confluent-kafka with ShareConsumer (2.16+) missing"
    return ""


def consumption(results: Results, proc: BrokerProcess, records: int) -> None:
    """The share-group rows and curve, the classic group's row and the plain reader's
    reference row."""
    curve = Curve("Share-group consumption, one partition", "consumer processes",
                  "records/s", logx=True)
    note = f"{records:,} records, {BATCH} per fetch"
    for n in CONSUMERS:
        rate = queue_rate(proc, n, records)
        curve.series.setdefault("native queue consumers", []).append((n, rate))
        results.add(Row(SECTION, "brokerd",
                        f"share-group consume, {n} native queue consumer(s), one partition",
                        "fsync always", rate, "rec/s", f"{note}, acknowledged", SIZE))
    # The Kafka-protocol rows read the records of the one-consumer native row's partition.
    topic = f"share-{CONSUMERS[0]}"
    missing = _kafka_share_missing()
    for n in KAFKA_CONSUMERS:
        figure: float | None = None
        note = missing
        if not missing:
            figure, how = kafka_share_rate(proc, n, topic, records)
            curve.series.setdefault("confluent-kafka ShareConsumers", []).append((n, figure))
            note = (f"{records:,} records, up to {BATCH} per poll, each poll's accepted with "
                    f"commit_sync (ShareConsumer is a preview API in confluent-kafka 2.16); "
                    f"{how}")
        results.add(Row(SECTION, "brokerd", KAFKA_SHARE_WHAT.format(n=n), "fsync always",
                        figure, "rec/s", note, SIZE))
    if not missing:
        n = KAFKA_CONSUMERS[-1]
        figure, how = kafka_share_rate(proc, n, topic, records, EXPLICIT)
        curve.series.setdefault("ShareConsumers, explicit acknowledgements", []).append(
            (n, figure))
        results.add(Row(SECTION, "brokerd", KAFKA_EXPLICIT_WHAT.format(n=n), "fsync always",
                        figure, "rec/s",
                        f"{records:,} records, up to {BATCH} per poll, each record accepted "
                        f"with acknowledge, sent with the next poll's ShareFetch; {how}",
                        SIZE))
    classic, how = classic_rate(proc, topic, records)
    curve.series["classic group, one member"] = [(1, classic)]
    results.add(Row(SECTION, "brokerd", CLASSIC_WHAT, "read (page cache)", classic, "rec/s",
                    f"{records:,} records; {how}", SIZE))
    reference = native_consume(proc, topic, records)
    results.add(Row(SECTION, "brokerd",
                    "plain native consume of the same partition, one reader",
                    "read (page cache)", reference, "rec/s", f"{records:,} records", SIZE))
    results.curves["share_groups"] = curve


def share_perf(bootstrap: str, topic: str, records: int, threads: int) -> float:
    """Records/s Kafka's ShareConsumerPerformance reports (``nMsg.sec``: from its start,
    the join counted, to the last record) for ``threads`` share consumers of a new share
    group draining ``topic`` (``records`` already there; the tool's default
    acknowledgement mode, implicit, and its other defaults)."""
    group = f"perf-share-{topic}-{threads}"
    _set_earliest(bootstrap, group)
    done = subprocess.run(
        kafka_tools.command(
            "org.apache.kafka.tools.ShareConsumerPerformance", "--bootstrap-server",
            bootstrap, "--topic", topic, "--group", group, "--num-records", str(records),
            "--threads", str(threads), "--timeout", str(kafka_tools.PERF_TIMEOUT_MS),
        ),
        capture_output=True, text=True, timeout=TOOL_TIMEOUT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ShareConsumerPerformance exited {done.returncode}: "
                           f"{(done.stderr or done.stdout)[-400:]}")
    lines = [x for x in done.stdout.splitlines() if x.strip()]
    head = next((i for i, x in enumerate(lines) if x.startswith("start.time")), None)
    if head is None or head + 1 >= len(lines):
        raise RuntimeError(f"ShareConsumerPerformance printed no figures: "
                           f"{done.stdout[-300:]!r}")
    fields = dict(zip([c.strip() for c in lines[head].split(",")],
                      [c.strip() for c in lines[head + 1].split(",")], strict=False))
    got = int(float(fields["data.consumed.in.nMsg"]))
    if got != records:
        raise RuntimeError(f"ShareConsumerPerformance consumed {got} of {records} records")
    return float(fields["nMsg.sec"])


def kafka_rows(results: Results, root: Path, proc: BrokerProcess, records: int, *,
               why: str) -> None:
    """Apache Kafka's share-group rows beside brokerd's: Kafka's ShareConsumerPerformance
    (:data:`PERF_THREADS` consumers) against brokerd and against a Kafka peer, and the
    explicit-acknowledgement ShareConsumer row against the peer. ``why`` says why no JVM
    can run ("" when it can). The peer's records are made by ProducerPerformance in
    batches of about :data:`PEER_BATCH_RECORDS` records, as brokerd's native produce
    stores them."""
    missing = why or _kafka_share_missing()
    note = f"{records:,} records, {PERF_THREADS} consumers (threads), joining counted"
    if missing:
        for system in ("brokerd", SYSTEM):
            results.add(Row(SECTION, system, PERF_SHARE_WHAT, "", None, "rec/s", missing,
                            SIZE))
        results.add(Row(SECTION, SYSTEM, KAFKA_EXPLICIT_WHAT.format(n=KAFKA_CONSUMERS[-1]),
                        "", None, "rec/s", missing, SIZE))
        return
    topic = f"share-{CONSUMERS[0]}"
    figure = share_perf(proc.kafka_bootstrap, topic, records, PERF_THREADS)
    results.add(Row(SECTION, "brokerd", PERF_SHARE_WHAT, "fsync always", figure, "rec/s",
                    note, SIZE))
    home = root / "kafka-share"
    peer = KafkaPeer(home)
    try:
        peer.start()
        peer.create_topic(topic, 1)
        kafka_tools.producer_perf(peer.kafka_bootstrap, topic, records, SIZE,
                                  props=PEER_FILL_PROPS)
        figure = share_perf(peer.kafka_bootstrap, topic, records, PERF_THREADS)
        results.add(Row(SECTION, SYSTEM, PERF_SHARE_WHAT, PEER_DURABILITY, figure, "rec/s",
                        note, SIZE))
        n = KAFKA_CONSUMERS[-1]
        figure, how = kafka_share_rate(peer.kafka_bootstrap, n, topic, records, EXPLICIT)
        results.add(Row(SECTION, SYSTEM, KAFKA_EXPLICIT_WHAT.format(n=n), PEER_DURABILITY,
                        figure, "rec/s",
                        f"{records:,} records, up to {BATCH} per poll, each record accepted "
                        f"with acknowledge; {how}", SIZE))
    finally:
        peer.kill()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__" and sys.argv[1:2] == [SHARE_CHILD]:
    _share_child(*sys.argv[2:6])
