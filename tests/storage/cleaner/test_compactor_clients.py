"""A compacted partition served to a real Kafka client (confluent-kafka), and to
brokerctl: offset gaps in fetches, the latest value of every key.

The data directory is compacted in-process (a LogDirectory with a compact default config
and one cleaning pass), then served by a real ``twistd broker``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from brokerd.storage.cleaner.compactor import clean_log
from brokerd.storage.cleaner.keymap import OffsetMap
from brokerd.storage.logdir.log_directory import LogDirectory

from tests.brokerproc import BrokerProcess, env
from tests.compaction_helpers import T0, compact_config, put, roll, write_overwrites

pytestmark = pytest.mark.broker

ck = pytest.importorskip("confluent_kafka")


def compacted_dir(path: Path) -> tuple[dict[bytes, bytes], int]:
    logdir = LogDirectory.open(str(path), compact_config())
    logdir.topic_changes.create_topic("changelog", 1)
    log = logdir.get("changelog", 0)
    expected = write_overwrites(log, keys=30, rounds=20)
    put(log, [(b"k000", None)], ts=T0)
    roll(log)
    result = clean_log(log, None, now_ms=T0, key_map=OffsetMap(1 << 20))
    assert result is not None and result.records_removed > 400
    end = log.log_end_offset
    logdir.close()
    state = {k: v for k, (_, v) in expected.items() if v is not None and k != b"k000"}
    return state, end


def test_confluent_consumer_reads_compacted_partition(tmp_path: Path) -> None:
    state, end = compacted_dir(tmp_path / "data")
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        consumer = ck.Consumer(
            {
                "bootstrap.servers": broker.kafka_bootstrap,
                "group.id": "compaction-test",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.assign([ck.TopicPartition("changelog", 0, ck.OFFSET_BEGINNING)])
        seen: dict[bytes, bytes | None] = {}
        offsets: list[int] = []
        while True:
            m = consumer.poll(10.0)
            assert m is not None, "timed out"
            if m.error():
                assert m.error().code() == ck.KafkaError._PARTITION_EOF, m.error()
                break
            offsets.append(m.offset())
            seen[m.key()] = m.value()
        consumer.close()
        assert offsets == sorted(set(offsets)) and offsets[-1] < end
        assert len(offsets) < 30 * 20 / 2, "the client saw the compacted log, with gaps"
        assert {k: v for k, v in seen.items() if k != b"filler" and v is not None} == state
        # brokerctl follows next offsets across the gaps (native type-6 records).
        out = subprocess.run(
            [sys.executable, "-m", "brokerd.cli", "--bootstrap", broker.native_bootstrap,
             "consume", "changelog", "--from", "earliest"],
            env=env(), capture_output=True, timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.splitlines()) == len(offsets)
    finally:
        broker.kill()
