"""Reading batches out of one segment: bounds by offset from batch headers, raw reads
that serve the good batches before damage, and spans handed out only for checked bytes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.errors import CorruptStoredBatch, OffsetOutOfRange
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.segment.batch_reads import (
    Located,
    batches_end,
    cut_at_offset,
    read_raw,
    stored_from,
)
from brokerd.storage.segment.segment import Segment
from brokerd.storage.segment.stored import StoredSpan, VerifiedRanges


def batches(*spans: tuple[int, int]) -> list[bytes]:
    """Encoded batches of ``(base_offset, records)``."""
    return [
        bytes(encode_batch([b"v"] * n, timestamp_ms=1, base_offset=base)) for base, n in spans
    ]


def test_cut_at_offset_keeps_the_batches_below_the_stop() -> None:
    a, b, c = batches((0, 3), (3, 2), (5, 4))
    data = a + b + c
    assert cut_at_offset(data, 5) == a + b
    assert cut_at_offset(data, 4) == a + b  # the batch starting below the stop stays whole
    assert cut_at_offset(data, 0) == b""
    assert cut_at_offset(data[:-5], 100) == data[:-5]  # a partial tail is kept as it is


def test_batches_end_is_the_offset_after_the_last_whole_header() -> None:
    a, b = batches((0, 3), (3, 2))
    assert batches_end(a + b, -1) == 5
    assert batches_end(a + b[:20], -1) == 3  # the second header is incomplete
    assert batches_end(b"", 42) == 42


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[Segment]:
    """Three batches of two records each: offsets 0-1, 2-3, 4-5."""
    plog = PartitionLog.open(str(tmp_path), LogConfig(), recovery_point=None)
    for i in range(3):
        plog.append_values([b"x" * 50, b"y" * 50], timestamp_ms=i)
    yield plog.segments[0]
    plog.close()


def corrupt(segment: Segment, batch: int) -> None:
    pos, header = list(segment.scan.headers_from(0, segment.size))[batch]
    with open(segment.log_path, "r+b") as f:
        f.seek(pos + header.size - 1)
        last = f.read(1)
        f.seek(pos + header.size - 1)
        f.write(bytes([last[0] ^ 0xFF]))


def test_read_raw_serves_the_good_batches_before_damage(segment: Segment) -> None:
    found = segment.scan.find_batch(0, segment.size)
    assert found is not None
    whole = read_raw(segment, *found, segment.size, 10**6)
    assert len(whole) == segment.size
    assert len(read_raw(segment, *found, segment.size, 1)) == found[1].size  # one batch at least
    corrupt(segment, 1)
    assert read_raw(segment, *found, segment.size, 10**6) == whole[: found[1].size]
    corrupt(segment, 0)
    with pytest.raises(CorruptStoredBatch, match="fails validation"):
        read_raw(segment, *found, segment.size, 10**6)


def located(segment: Segment, offset: int) -> Located:
    return Located(offset, 6, segment.base_offset, segment.size, 0, (segment,), 0, 6)


def out_of_range() -> Exception:
    return OffsetOutOfRange("gone")


def test_stored_from_checks_unchecked_bytes_once_and_stops_at_damage(segment: Segment) -> None:
    verified = VerifiedRanges()
    span = stored_from(located(segment, 2), 10**6, verified, out_of_range)
    assert isinstance(span, StoredSpan)
    first = list(segment.scan.headers_from(0, segment.size))[1][0]
    assert (span.position, span.position + span.length) == (first, segment.size)
    assert verified.covers(segment, first, segment.size)
    span.release()
    corrupt(segment, 2)
    # Checked already: handed out as it was (the check is not repeated).
    again = stored_from(located(segment, 2), 10**6, verified, out_of_range)
    assert isinstance(again, StoredSpan) and again.length == span.length
    again.release()
    fresh = stored_from(located(segment, 2), 10**6, VerifiedRanges(), out_of_range)
    assert isinstance(fresh, StoredSpan)
    assert fresh.position + fresh.length == list(segment.scan.headers_from(0, segment.size))[2][0]
    fresh.release()
    assert stored_from(located(segment, 6), 10**6, verified, out_of_range) == b""
