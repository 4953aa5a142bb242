"""Share groups through broker crashes: four confluent-kafka ShareConsumers on a
partitioned topic while the broker is killed with SIGKILL at random moments.

What must hold (docs/queues.md, "Durability"): every record is delivered at least once;
once the broker has confirmed a record's ACCEPT or REJECT it is never delivered again
(accepted exactly once as the broker counts it); no record is delivered more often than
the delivery-count limit; every record ends accepted, or archived (rejected or over the
limit); and after the last restart the share-state journal says every partition is done.
A few cycles run in ``make test``; ``make test-long`` runs a longer loop.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import defaultdict
from pathlib import Path

import attrs
import pytest

from brokerd.storage.stores.share_state import SHARE_STATE_FILE_NAME, ShareStateStore

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

TOPIC = "crashq"
PARTITIONS = 4
LIMIT = 5
GROUP = "crash-group"
#: Time each record takes to "process", so the kills fall while records are in flight.
PROCESSING_SECONDS = 0.01
#: The group's lock duration, and how long the consumers may see nothing before the run
#: ends once the kills are over (longer than a lock: an expired record comes back first).
LOCK_MS = 5000
IDLE_SECONDS = 2 * LOCK_MS / 1000


@attrs.define
class Figures:
    records: int
    kills: int = 0
    deliveries: int = 0
    redeliveries: int = 0
    max_delivery_count: int = 0
    confirmed_accepts: int = 0
    confirmed_rejects: int = 0
    #: Redeliveries the consumers asked for (RELEASE); the others came from crashes and
    #: lock expiries.
    releases: int = 0
    #: Records whose ACCEPT or REJECT was never confirmed to the consumer (its answer
    #: lost in a crash) although the broker applied it.
    unconfirmed: int = 0
    seconds: float = 0.0


def _admin_setup(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        f.result(10)
    res = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (
            ("share.auto.offset.reset", "earliest"),
            ("share.record.lock.duration.ms", str(LOCK_MS)),
        )
    ])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(10)


def _verdict(index: int, delivery_count: int) -> ck.AcknowledgeType:
    if index % 10 == 9:
        return ck.AcknowledgeType.REJECT
    if index % 10 == 8 and delivery_count == 1:
        return ck.AcknowledgeType.RELEASE
    return ck.AcknowledgeType.ACCEPT


def run_crash_loop(tmp_path: Path, *, records: int, kills: int, seconds: float) -> Figures:
    broker = BrokerProcess(tmp_path / "data").start()
    figures = Figures(records)
    started = time.monotonic()
    try:
        bs = broker.kafka_bootstrap
        _admin_setup(bs)
        # Batches of at most 20 records: a ShareFetch acquires whole stored batches (as
        # Kafka's batch-optimized mode does), and each acquisition must stay within what
        # these slow consumers process in one lock's duration.
        producer = ck.Producer({"bootstrap.servers": bs, "acks": "all", "log_level": 0,
                                "batch.num.messages": 20})
        for i in range(records):
            producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(20) == 0
        del producer
        broker.stop()  # the records are on disk before the crashes begin
        broker.start()

        stop_killing = threading.Event()

        def killer() -> None:
            rng = random.Random(932)
            for _ in range(kills):
                if stop_killing.wait(rng.uniform(0.5, 2.0)):
                    return
                broker.kill()
                figures.kills += 1
                time.sleep(rng.uniform(0.0, 0.3))
                broker.start()

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        consumers = [
            ck.ShareConsumer({
                "bootstrap.servers": bs, "group.id": GROUP,
                "share.acknowledgement.mode": "explicit",
                "reconnect.backoff.ms": "50", "reconnect.backoff.max.ms": "500",
                "log_level": 0, "max.poll.records": "20",
            })
            for _ in range(4)
        ]
        for c in consumers:
            c.subscribe([TOPIC])
        delivered: dict[int, list[int]] = defaultdict(list)
        done_at: dict[int, int] = {}  # record -> sequence number of its confirmed verdict
        violations: list[str] = []
        sequence = 0
        deadline = time.monotonic() + seconds
        wanted = set(range(records))
        last_delivery = time.monotonic()
        while time.monotonic() < deadline:
            if not thread.is_alive() and (
                wanted <= set(done_at) or time.monotonic() - last_delivery > IDLE_SECONDS
            ):
                # Everything confirmed, or nothing came for longer than a lock lasts: a
                # record still available would have been delivered again by now.
                break
            for c in consumers:
                try:
                    msgs = [m for m in c.poll(timeout=0.2) or () if m.error() is None]
                except ck.KafkaException:
                    continue
                pending: dict[tuple[str, int], list[tuple[int, ck.AcknowledgeType]]] = (
                    defaultdict(list)
                )
                if msgs:
                    last_delivery = time.monotonic()
                for m in msgs:
                    sequence += 1
                    index = int(m.value())
                    count = m.delivery_count()
                    delivered[index].append(count)
                    if index in done_at:
                        violations.append(f"record {index} delivered after its verdict")
                    verdict = _verdict(index, count)
                    time.sleep(PROCESSING_SECONDS)  # the consumers' work: crashes land mid-way
                    try:
                        c.acknowledge(m, verdict)
                    except ck.KafkaException:
                        continue
                    pending[(m.topic(), m.partition())].append((index, verdict))
                if not pending:
                    continue
                try:
                    results = c.commit_sync(timeout=5)
                except ck.KafkaException:
                    continue
                for tp, error in results.items():
                    if error is not None:
                        continue
                    for index, verdict in pending.get((tp.topic, tp.partition), ()):
                        if verdict is ck.AcknowledgeType.RELEASE:
                            figures.releases += 1
                            continue
                        sequence += 1
                        done_at.setdefault(index, sequence)
                        if verdict is ck.AcknowledgeType.ACCEPT:
                            figures.confirmed_accepts += 1
                        else:
                            figures.confirmed_rejects += 1
        stop_killing.set()
        thread.join()
        for c in consumers:
            with contextlib.suppress(ck.KafkaException):
                c.close()
        figures.deliveries = sum(len(v) for v in delivered.values())
        figures.redeliveries = figures.deliveries - len(delivered)
        figures.max_delivery_count = max((max(v) for v in delivered.values()), default=0)
        figures.seconds = round(time.monotonic() - started, 1)
        assert not violations, violations[:5]
        assert set(delivered) == wanted, sorted(wanted - set(delivered))[:10]
        assert figures.max_delivery_count <= LIMIT
        # A verdict the broker made durable but whose answer a kill cut off is not
        # confirmed here; the journal below must say it was applied.
        figures.unconfirmed = len(wanted - set(done_at))
    finally:
        broker.stop()
    store = ShareStateStore.open(str(tmp_path / "data" / SHARE_STATE_FILE_NAME))
    try:
        per_partition = records // PARTITIONS
        starts = {k[2]: v.start for k, v in store.partitions().items() if k[:2] == (GROUP, TOPIC)}
        # Every record reached a verdict: each share-partition starts at the log's end.
        assert starts == dict.fromkeys(range(PARTITIONS), per_partition), starts
    finally:
        store.close()
    return figures


def test_share_consumers_through_a_few_crashes(tmp_path: Path) -> None:
    figures = run_crash_loop(tmp_path, records=600, kills=3, seconds=90)
    print(figures)


@pytest.mark.slow
def test_share_consumers_through_many_crashes(tmp_path: Path) -> None:
    figures = run_crash_loop(tmp_path, records=10000, kills=40, seconds=600)
    print(figures)
