"""Share-group (queue) consumption on one partition: records/s with 1, 4 and 16 native
queue consumers, beside one plain native reader of the same partition.

Each consumer is a separate process (forked) with its own native connection, so its
own share-group member: it acquires up to 100 records per QueueFetch and acknowledges
them ACCEPT in one QueueAcknowledge, until a fetch finds nothing for 200 ms. The
records are produced first (the group is initialised at the log's start before that),
so the figure is the broker's acquire/acknowledge path, not a race with producers: all
records acquired, each exactly once (checked), over the time from the first consumer's
start to the last acknowledgement. The reference row reads the same records with the
native Fetch (no group, no acknowledgements). Consumer processes are stopped by their
PID when they do not finish.
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event

from bench.brokerd_runs import native_consume, native_produce
from bench.common import Curve, Results, Row
from bench.scaling import SECTION
from brokerd.client import NativeClient
from brokerd.native.queue_messages import AckKind

from tests.brokerproc import BrokerProcess

SIZE = 100
BATCH = 100
CONSUMERS = (1, 4, 16)
#: A consumer stops after an empty fetch of this long (the backlog is gone).
IDLE_MS = 200
START_TIMEOUT = 60.0
RUN_TIMEOUT = 300.0


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


def consumption(results: Results, proc: BrokerProcess, records: int) -> None:
    """The share-group rows and curve, and the plain reader's reference row."""
    curve = Curve("Share-group consumption, one partition", "queue consumer processes",
                  "records/s", logx=True)
    note = f"{records:,} records, {BATCH} per fetch"
    for n in CONSUMERS:
        rate = queue_rate(proc, n, records)
        curve.series.setdefault("native queue consumers", []).append((n, rate))
        results.add(Row(SECTION, "brokerd",
                        f"share-group consume, {n} native queue consumer(s), one partition",
                        "fsync always", rate, "rec/s", f"{note}, acknowledged", SIZE))
    reference = native_consume(proc, f"share-{CONSUMERS[0]}", records)
    results.add(Row(SECTION, "brokerd",
                    "plain native consume of the same partition, one reader",
                    "read (page cache)", reference, "rec/s", f"{records:,} records", SIZE))
    results.curves["share_groups"] = curve
