"""The zero-copy read (``PartitionLog.read`` by reference): the same bytes as by value, by
reference only where they were checked, pins given back, damage never handed out."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from brokerd.errors import CorruptStoredBatch, OffsetOutOfRange
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches
from brokerd.storage.segment.batch_reads import VERIFY_CHUNK
from brokerd.storage.segment.segment import Segment
from brokerd.storage.segment.stored import StoredSpan, VerifiedRanges
from brokerd.storage.types import LogRead

from tests.read_specs import BYTES, COMMITTED, COMMITTED_REFERENCE, REFERENCE, data_of, span_of

BIG = 1 << 20


def open_log(path: Path, **config: Any) -> PartitionLog:
    return PartitionLog.open(str(path), LogConfig(**config), recovery_point=None, clock=time.time)


def fill(plog: PartitionLog, batches: int, *, seed: int = 7) -> None:
    """Client-style batches (some compressed) through ``append``, like a Kafka produce."""
    rng = random.Random(seed)
    for i in range(batches):
        values: list[bytes | None] = [
            b"r%d-%d-" % (i, j) + bytes([97 + j]) * rng.randrange(200)
            for j in range(rng.randint(1, 6))
        ]
        data = encode_batch(
            values,
            timestamp_ms=1000 + i,
            compression=Compression.GZIP if i % 3 == 0 else Compression.NONE,
        )
        plog.append(data, parse_batches(data, max_batch_bytes=BIG))
    plog.flush()
    plog.publish()


def content(read: LogRead) -> bytes:
    """What a fetch sends for ``read`` (the span's bytes read back), releasing it."""
    span = span_of(read)
    if span is None:
        return data_of(read)
    try:
        return span.read()
    finally:
        span.release()


def pins(plog: PartitionLog) -> list[int]:
    return [s._refs for s in plog.segments]


def test_stored_reads_are_spans_with_the_bytes_of_read_everywhere(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=4096, index_interval_bytes=256)
    try:
        fill(plog, 120)
        assert len(plog.segments) > 3
        hw = plog.high_watermark
        for offset in range(0, hw + 1):
            for max_bytes in (1, 300, 5000, BIG):
                got = plog.read(offset, max_bytes, REFERENCE)
                want = plog.read(offset, max_bytes, BYTES)
                assert (got.high_watermark, got.log_start_offset, got.last_stable_offset) == (
                    want.high_watermark, want.log_start_offset, want.last_stable_offset
                )
                if want.records:
                    # Everything was appended here: checked at append, so by reference.
                    assert span_of(got) is not None and data_of(got) == b""
                assert content(got) == want.records, (offset, max_bytes)
        assert pins(plog) == [0] * len(plog.segments)
        with pytest.raises(OffsetOutOfRange):
            plog.read(hw + 1, BIG, REFERENCE)
    finally:
        plog.close()


def test_after_a_restart_bytes_are_checked_once_then_sent_by_reference(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path, segment_bytes=1 << 20)
    fill(plog, 40)
    plog.close()
    plog = open_log(path, segment_bytes=1 << 20)
    try:
        segment = plog.segments[0]
        assert not plog.verified.covers(segment, 0, 1)
        # Checked a batch (or a bounded chunk) at a time, then handed out by reference.
        first = plog.read(0, BIG, REFERENCE)
        assert span_of(first) is not None and content(first) == plog.read(0, BIG, BYTES).records
        assert plog.verified.covers(segment, 0, span_of(first).length)
        span_of(first).release()
        again = plog.read(0, BIG, REFERENCE)
        assert span_of(again) is not None
        assert content(again) == plog.read(0, BIG, BYTES).records
        # A read that starts inside the checked range is covered too.
        mid = plog.read(17, 1000, REFERENCE)
        assert span_of(mid) is not None and content(mid) == plog.read(17, 1000, BYTES).records
    finally:
        plog.close()


def test_unchecked_bytes_are_checked_in_bounded_reads(tmp_path: Path) -> None:
    """After a restart a read of everything is checked 1 MiB (or one larger batch) at a
    time, never read whole, and then handed out by reference."""
    path = tmp_path / "t-0"
    plog = open_log(path)
    big = 3 * VERIFY_CHUNK // 2
    for i in range(40):
        # 100 KiB batches, and one batch larger than a verification chunk.
        value = os.urandom(big if i == 20 else 100 * 1024)
        data = encode_batch([value], timestamp_ms=1000 + i)
        plog.append(data, parse_batches(data, max_batch_bytes=4 * BIG))
    plog.flush()
    plog.publish()
    plog.close()
    plog = open_log(path)
    try:
        segment = plog.segments[0]
        reads: list[int] = []
        pread = segment.pread

        def counted(position: int, size: int) -> bytes:
            reads.append(size)
            return pread(position, size)

        segment.pread = counted  # type: ignore[method-assign]
        got = plog.read(0, 2**31 - 1, REFERENCE)
        assert span_of(got) is not None and span_of(got).length == segment.size
        assert max(reads) <= big + 100  # one chunk, or the large batch alone
        assert sum(reads) < 2 * segment.size
        del segment.pread
        assert content(got) == next(path.glob("*.log")).read_bytes()
        assert plog.verified.covers(segment, 0, segment.size)
    finally:
        plog.close()


def test_damage_on_disk_is_never_handed_out(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    plog = open_log(path)
    fill(plog, 10)
    plog.close()
    # A flipped byte inside the first batch's records (under its CRC), after a clean
    # shutdown: the reopened log trusts the file until a read checks it.
    log_file = next(path.glob("*.log"))
    with open(log_file, "r+b") as f:
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0xFF]))
    plog = open_log(path)
    try:
        for _ in range(2):  # not cached as checked by the failed read either
            with pytest.raises(CorruptStoredBatch):
                plog.read(0, BIG, REFERENCE)
        assert pins(plog) == [0]
        # The batches after the damaged one are still served, checked first.
        later = plog.read(plog.high_watermark - 1, BIG, REFERENCE)
        assert span_of(later) is not None and content(later) == plog.read(
            plog.high_watermark - 1, BIG
        , BYTES).records
        span_of(later).release()
    finally:
        plog.close()


def test_read_committed_with_an_open_transaction_is_served_by_value(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    try:
        fill(plog, 3)
        data = encode_batch([b"txn"], timestamp_ms=5, producer_id=9, producer_epoch=0,
                            base_sequence=0, transactional=True)
        plog.append(data, parse_batches(data, max_batch_bytes=BIG))
        plog.flush()
        plog.publish()
        lso = plog.last_stable_offset
        assert lso < plog.high_watermark
        got = plog.read(0, BIG, COMMITTED_REFERENCE)
        assert span_of(got) is None
        assert data_of(got) == plog.read(0, BIG, COMMITTED).records
        at_lso = plog.read(lso, BIG, COMMITTED_REFERENCE)
        assert span_of(at_lso) is None and data_of(at_lso) == b""
        uncommitted = plog.read(0, BIG, REFERENCE)
        assert span_of(uncommitted) is not None
        assert content(uncommitted) == plog.read(0, BIG, BYTES).records
    finally:
        plog.close()


def test_a_span_outlives_retention_deleting_its_segment(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=2048)
    try:
        fill(plog, 60)
        first = plog.segments[0]
        read = plog.read(0, BIG, REFERENCE)
        span = span_of(read)
        assert span is not None
        expected = plog.read(0, BIG, BYTES).records
        first.delete()  # what retention does to an old segment
        assert not os.path.exists(first.log_path)
        assert first._fd >= 0, "closed under a pinned reader"
        fd = span.fileno()
        assert os.pread(fd, span.length, span.position) == expected
        span.release()
        span.release()  # idempotent
        assert first._fd == -1  # the last pin closed it
    finally:
        plog.close()


def test_span_cut_and_use_after_release() -> None:
    class FakeSegment:
        log_path = "/nowhere/00000000000000000000.log"
        _fd = 3
        unpinned = 0

        def unpin(self) -> None:
            self.unpinned += 1

    segment = FakeSegment()
    span = StoredSpan(segment, 10, 100)  # type: ignore[arg-type]
    span.truncate(40)
    assert span.length == 40
    with pytest.raises(ValueError):
        span.truncate(41)
    span.release()
    span.release()
    assert segment.unpinned == 1
    with pytest.raises(Exception, match="after release"):
        span.fileno()


def test_verified_ranges_merge_and_stay_bounded(tmp_path: Path) -> None:
    seg = Segment.create(str(tmp_path), 0, 4096)
    try:
        ranges = VerifiedRanges(max_ranges=4)
        ranges.mark(seg, 0, 100)
        ranges.mark(seg, 100, 250)  # touching: merged
        assert ranges.ranges(seg) == ((0, 250),)
        assert ranges.covers(seg, 10, 250) and not ranges.covers(seg, 10, 251)
        ranges.mark(seg, 300, 400)
        assert not ranges.covers(seg, 200, 350)  # the gap 250..300 is not checked
        ranges.mark(seg, 240, 310)
        assert ranges.ranges(seg) == ((0, 400),)
        for start in range(1000, 6000, 1000):
            ranges.mark(seg, start, start + 10)
        assert len(ranges.ranges(seg)) <= 4
        ranges.mark(seg, 5, 5)  # empty: nothing
        other = Segment.create(str(tmp_path), 10_000, 4096)
        try:
            assert not ranges.covers(other, 0, 1)
        finally:
            other.close()
    finally:
        seg.close()
