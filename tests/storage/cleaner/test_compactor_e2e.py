"""Log compaction end to end: a real client creates a compacted topic through CreateTopics
(``cleanup.policy=compact``), produces overwrites and tombstones, and a read from the start
must give exactly the latest value of every live key, in increasing offsets, once the
cleaner has run; and still after a clean restart and after ``kill -9``.

The broker runs with the options of :data:`tests.control_plane_helpers.FAST_CLEANUP_OPTIONS`
(a 2 s default retention, so a key older than that must survive only because the topic is
compacted, not deleted) and the topic with ``FAST_COMPACT_CONFIGS`` so that the cleaner
may clean every closed segment at once. Each test waits at most ``WAIT`` seconds for the
cleaner; the long variant is marked ``slow``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess
from tests.control_plane_helpers import (
    FAST_COMPACT_CONFIGS,
    KeyValue,
    compaction_verdict,
    confluent,
    create_topic,
    fast_broker,
    iter_keyed,
    latest_per_key,
    produce_keyed,
    read_partition,
    wait_compacted,
)
from tests.kafka_helpers import crash_and_restart

pytestmark = [pytest.mark.clients, pytest.mark.broker]

#: Seconds past the broker's default retention (2 s) and segment age (0.5 s).
PAST_RETENTION = 3.0


@pytest.fixture
def fast(tmp_path: Path) -> Iterator[BrokerProcess]:
    confluent()
    proc = fast_broker(tmp_path / "data")
    try:
        yield proc
    finally:
        proc.kill()


def workload(prefix: str, keys: int, rounds: int, tombstoned: int) -> list[KeyValue]:
    """Overwrites of every key, then tombstones for the first ``tombstoned`` keys, then
    one more value for one of them (a key may come back after a tombstone)."""
    records = list(iter_keyed(prefix, keys, rounds))
    records += [(f"{prefix}-{k:03d}".encode(), None) for k in range(tombstoned)]
    records.append((f"{prefix}-000".encode(), f"{prefix}-000-revived".encode()))
    return records


def close_dirty_segments(broker: BrokerProcess, topic: str, produced: list[KeyValue]) -> None:
    """Let the active segment age past ``segment.ms``, then append one more record: it
    rolls the segment, so everything produced before is in closed, cleanable segments
    (Kafka never cleans the active segment)."""
    time.sleep(float(FAST_COMPACT_CONFIGS["segment.ms"]) / 1000 + 0.3)
    # A key of its own each time: the active segment is never cleaned, so a key written
    # again there would rightly keep its older record in the cleaned segments too.
    marker = (f"zz-marker-{len(produced)}".encode(), b"roll")
    produce_keyed(broker, topic, [marker])
    produced.append(marker)


def compacted_topic(broker: BrokerProcess, topic: str) -> None:
    create_topic(broker, topic, 1, FAST_COMPACT_CONFIGS)


def test_compaction_keeps_the_latest_value_of_every_live_key(fast: BrokerProcess) -> None:
    topic = "compact-basic"
    compacted_topic(fast, topic)
    # A key written once, then left alone for longer than the broker's retention.
    produced: list[KeyValue] = [(b"aa-old-key", b"written-first")]
    produce_keyed(fast, topic, produced)
    time.sleep(PAST_RETENTION)
    batch = workload("k", keys=40, rounds=15, tombstoned=8)
    produce_keyed(fast, topic, batch)
    produced += batch
    close_dirty_segments(fast, topic, produced)

    stored = wait_compacted(fast, topic, produced)
    live = latest_per_key(produced)
    values = {k: v for _, k, v in stored if v is not None}
    assert values == live
    assert values[b"aa-old-key"] == b"written-first"
    assert values[b"k-000"] == b"k-000-revived"
    assert len(stored) < len(produced) / 5, f"{len(stored)} of {len(produced)} kept"


def test_compaction_survives_a_clean_restart(fast: BrokerProcess) -> None:
    topic = "compact-restart"
    compacted_topic(fast, topic)
    produced = workload("r", keys=30, rounds=10, tombstoned=5)
    produce_keyed(fast, topic, produced)
    close_dirty_segments(fast, topic, produced)
    before = wait_compacted(fast, topic, produced)

    fast.restart()
    after = read_partition(fast, topic)
    assert compaction_verdict(after, produced) == []
    assert [(o, k, v) for o, k, v in after if v is not None] == [
        (o, k, v) for o, k, v in before if v is not None
    ]

    # The restarted broker goes on compacting what arrives next.
    more = workload("r", keys=30, rounds=3, tombstoned=0)
    produce_keyed(fast, topic, more)
    produced += more
    close_dirty_segments(fast, topic, produced)
    wait_compacted(fast, topic, produced)


def test_compaction_survives_kill_9(fast: BrokerProcess) -> None:
    topic = "compact-crash"
    compacted_topic(fast, topic)
    produced = workload("c", keys=30, rounds=10, tombstoned=5)
    produce_keyed(fast, topic, produced)
    close_dirty_segments(fast, topic, produced)
    wait_compacted(fast, topic, produced)

    # Crash while new dirty data waits to be cleaned; acknowledged records are durable
    # (--fsync always), so after recovery the cleaner must produce the same answer.
    more = workload("c", keys=30, rounds=4, tombstoned=3)
    produce_keyed(fast, topic, more)
    produced += more
    crash_and_restart(fast)
    assert not [p for p in compaction_verdict(read_partition(fast, topic), produced) if "lost" in p]
    close_dirty_segments(fast, topic, produced)
    wait_compacted(fast, topic, produced)

    crash_and_restart(fast)
    assert compaction_verdict(read_partition(fast, topic), produced) == []


@pytest.mark.slow
def test_compaction_soak_with_repeated_crashes(fast: BrokerProcess) -> None:
    """Many keys and rounds, several crashes in between; every cycle ends compacted."""
    topic = "compact-soak"
    compacted_topic(fast, topic)
    produced: list[KeyValue] = []
    for cycle in range(5):
        batch = workload(f"s{cycle % 2}", keys=500, rounds=8, tombstoned=50 * cycle)
        produce_keyed(fast, topic, batch)
        produced += batch
        crash_and_restart(fast)
        close_dirty_segments(fast, topic, produced)
        wait_compacted(fast, topic, produced, timeout=120)
