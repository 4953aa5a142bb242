"""A real partition log under the topic configs added for Kafka 4.x: the rolls by
``segment.index.bytes`` and ``segment.jitter.ms``, and native produce encoded in the
topic's ``compression.type``."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.config.topic_config import (
    to_log_config,
)
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.header import read_header

from tests.read_specs import BYTES, COMMITTED_RECORDS

NOW = 1_700_000_000_000



# -- segment.index.bytes and segment.jitter.ms ----------------------------------------


class FakeTime:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _open(path: Path, config: LogConfig, clock: FakeTime) -> PartitionLog:
    return PartitionLog.open(str(path), config, recovery_point=None, clock=clock)


def test_a_full_index_rolls_the_segment(tmp_path: Path) -> None:
    # 24 bytes: three offset entries (8 bytes each) but two time entries (12 bytes each);
    # brokerd writes them in pairs, so the time index is full first. With an entry for
    # every batch after a segment's first (index.interval.bytes 0), a segment holds
    # three batches.
    config = to_log_config(LogConfig(), {"segment.index.bytes": "24",
                                         "index.interval.bytes": "0"})
    plog = _open(tmp_path / "t-0", config, FakeTime())
    try:
        for i in range(7):
            plog.append_values([b"v%d" % i], timestamp_ms=NOW + i)
        assert plog.segment_bases == (0, 3, 6)
        assert [len(s.timeindex) for s in plog.segments] == [2, 2, 0]
    finally:
        plog.close()


def test_default_index_size_does_not_roll(tmp_path: Path) -> None:
    plog = _open(tmp_path / "t-0", LogConfig(index_interval_bytes=0), FakeTime())
    try:
        for i in range(50):
            plog.append_values([b"v%d" % i], timestamp_ms=NOW)
        assert plog.segment_bases == (0,)
    finally:
        plog.close()


def test_segment_jitter_rolls_early_by_a_draw_per_segment(tmp_path: Path) -> None:
    clock = FakeTime()
    config = LogConfig(segment_ms=1_000, segment_jitter_ms=5_000)
    plog = _open(tmp_path / "t-0", config, clock)
    bounds: list[int] = []

    def draw(bound: int) -> int:
        bounds.append(bound)
        return 400

    plog.roll_jitter = draw
    try:
        plog.append_values([b"a"], timestamp_ms=NOW)
        clock.now += 0.599
        plog.append_values([b"b"], timestamp_ms=NOW)
        assert plog.segment_bases == (0,)
        clock.now += 0.001  # 600 ms = segment.ms minus the 400 ms drawn
        plog.append_values([b"c"], timestamp_ms=NOW)
        assert plog.segment_bases == (0, 2)
        # Drawn below min(segment.jitter.ms, segment.ms), once per segment.
        clock.now += 0.1
        plog.append_values([b"d"], timestamp_ms=NOW)
        assert bounds == [1_000, 1_000]
    finally:
        plog.close()


def test_no_jitter_rolls_at_segment_ms(tmp_path: Path) -> None:
    clock = FakeTime()
    plog = _open(tmp_path / "t-0", LogConfig(segment_ms=1_000), clock)
    plog.roll_jitter = lambda bound: pytest.fail("no jitter configured: nothing is drawn")
    try:
        plog.append_values([b"a"], timestamp_ms=NOW)
        clock.now += 0.999
        plog.append_values([b"b"], timestamp_ms=NOW)
        assert plog.segment_bases == (0,)
        clock.now += 0.001
        plog.append_values([b"c"], timestamp_ms=NOW)
        assert plog.segment_bases == (0, 2)
    finally:
        plog.close()




def test_native_produce_is_encoded_in_the_topics_codec(tmp_path: Path) -> None:
    config = to_log_config(LogConfig(), {"compression.type": "gzip",
                                         "compression.gzip.level": "1"})
    plog = _open(tmp_path / "t-0", config, FakeTime())
    try:
        plog.append_values([b"native %d" % i for i in range(10)], timestamp_ms=NOW)
        plog.publish()
        assert read_header(plog.read(0, 1 << 20, BYTES).records).compression == Compression.GZIP
        assert [r.value for r in plog.read(0, 1 << 20, COMMITTED_RECORDS).decoded] == [
            b"native %d" % i for i in range(10)]
    finally:
        plog.close()
