"""Lookups in one segment's log: the header walk, the batch holding an offset, the first
batch at or after a timestamp, damage found and quarantined regions stepped over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.errors import CorruptStoredBatch
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.segment.resync import Damage
from brokerd.storage.segment.segment import Segment


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[Segment]:
    """One segment of six batches of two records: offsets 0-1, 2-3, ..., 10-11, batch i
    stamped 100 * i."""
    plog = PartitionLog.open(
        str(tmp_path), LogConfig(index_interval_bytes=150), recovery_point=None
    )
    for i in range(6):
        plog.append_values([b"a" * 40, b"b" * 40], timestamp_ms=100 * i)
    yield plog.segments[0]
    plog.close()


def test_the_header_walk_yields_each_batch_once_in_order(segment: Segment) -> None:
    found = list(segment.scan.headers_from(0, segment.size, 0))
    assert [h.base_offset for _pos, h in found] == [0, 2, 4, 6, 8, 10]
    positions = [pos for pos, _h in found]
    assert positions[0] == 0
    assert all(positions[i] + found[i][1].size == positions[i + 1] for i in range(5))
    assert positions[-1] + found[-1][1].size == segment.size


def test_find_batch_and_find_timestamp(segment: Segment) -> None:
    size = segment.size
    for offset in range(12):
        hit = segment.scan.find_batch(offset, size)
        assert hit is not None and hit[1].base_offset == offset - offset % 2
    assert segment.scan.find_batch(12, size) is None
    hit = segment.scan.find_timestamp(250, size)
    assert hit is not None and hit[1].base_offset == 6  # the batch stamped 300
    assert segment.scan.find_timestamp(0, size) == segment.scan.find_batch(0, size)
    assert segment.scan.find_timestamp(501, size) is None


def test_a_batch_out_of_order_or_past_the_limit_is_damage(segment: Segment) -> None:
    with pytest.raises(CorruptStoredBatch, match="expected 5 or more"):
        list(segment.scan.headers_from(0, segment.size, 5))
    with pytest.raises(CorruptStoredBatch, match="runs past byte"):
        list(segment.scan.headers_from(0, segment.size - 1))


def test_a_quarantined_region_is_stepped_over_and_refused_by_lookups(segment: Segment) -> None:
    found = list(segment.scan.headers_from(0, segment.size, 0))
    start, end = found[1][0], found[3][0]  # batches 2-3 and 4-5
    segment.damaged = (Damage(start, end, 2, 6, "bad crc"),)
    walked = [h.base_offset for _pos, h in segment.scan.headers_from(0, segment.size, 0)]
    assert walked == [0, 6, 8, 10]
    assert segment.scan.damage_at(3) is segment.damaged[0]
    assert segment.scan.damage_at(6) is None
    with pytest.raises(CorruptStoredBatch, match=r"offsets 2\.\.5 are in a damaged region"):
        segment.scan.find_batch(4, segment.size)
    hit = segment.scan.find_batch(7, segment.size)
    assert hit is not None and hit[1].base_offset == 6
