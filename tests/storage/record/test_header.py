"""Batch headers: the CRC over what it covers, base offsets stamped with it kept valid,
truncated, trailing and invalid batches refused, lengths checked before use, the scan's stop
reason."""

from __future__ import annotations

import struct

import pytest

from brokerd.errors import CorruptBatch, RecordTooLarge
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import (
    parse_batches,
    read_header,
    scan_batches,
    stamp_base_offset,
)

from tests.storage.record.test_decode_batches import (
    BIG,
    raw_batch,
)


def test_multiple_batches_in_one_payload() -> None:
    a = encode_batch([b"1", b"2"], timestamp_ms=1)
    b = encode_batch([b"3"], timestamp_ms=2, compression=Compression.ZSTD)
    headers = parse_batches(a + b, max_batch_bytes=BIG)
    assert [h.records_count for h in headers] == [2, 1]
    assert sum(h.size for h in headers) == len(a) + len(b)


def test_stamp_base_offset_keeps_crc_valid() -> None:
    buf = bytearray(encode_batch([b"v"] * 3, timestamp_ms=7))
    struct.pack_into(">i", buf, 12, 99)  # a client's leader epoch
    stamp_base_offset(buf, 0, 12345)
    (header,) = parse_batches(buf, max_batch_bytes=BIG)
    assert header.base_offset == 12345
    assert header.partition_leader_epoch == 0
    assert [r.offset for r in decode_records(buf, max_uncompressed=BIG)] == [12345, 12346, 12347]


def test_crc_mismatch_detected_anywhere() -> None:
    data = encode_batch([b"hello", b"world"], timestamp_ms=1)
    for pos in range(21, len(data)):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        with pytest.raises(CorruptBatch):
            parse_batches(bytes(bad), max_batch_bytes=BIG)
        with pytest.raises(CorruptBatch):
            decode_records(bytes(bad), max_uncompressed=BIG)


def test_fields_outside_crc_may_change() -> None:
    data = bytearray(encode_batch([b"x"], timestamp_ms=1))
    data[0:8] = b"\xff" * 8
    data[12:16] = b"\x01\x02\x03\x04"
    parse_batches(bytes(data), max_batch_bytes=BIG)


@pytest.mark.parametrize("cut", [0, 1, 11, 12, 60, 61, 62])
def test_truncated_batches_rejected(cut: int) -> None:
    data = encode_batch([b"a" * 10, b"b"], timestamp_ms=1)
    with pytest.raises(CorruptBatch):
        parse_batches(data[:cut], max_batch_bytes=BIG)
    with pytest.raises(CorruptBatch):
        parse_batches(data[: len(data) - 1 - cut], max_batch_bytes=BIG)


def test_trailing_garbage_rejected() -> None:
    data = encode_batch([b"a"], timestamp_ms=1)
    with pytest.raises(CorruptBatch):
        parse_batches(data + b"\x00" * 30, max_batch_bytes=BIG)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"magic": 1}, "magic"),
        ({"count": 2, "last_offset_delta": 0}, "records_count"),
        ({"count": 0, "last_offset_delta": -1}, "records_count"),
        ({"attributes": 0x20}, "control"),
        ({"count": 5}, "cannot fit"),
    ],
)
def test_invalid_headers_rejected(kwargs: dict[str, int], match: str) -> None:
    data = raw_batch(b"\x0e\x00\x00\x00\x01\x02ab\x00", **kwargs)
    with pytest.raises(CorruptBatch, match=match):
        parse_batches(data, max_batch_bytes=BIG)


def test_lengths_checked_before_use() -> None:
    data = bytearray(encode_batch([b"a"], timestamp_ms=1))
    for length in (-1, 0, 48, 2**31 - 1):
        struct.pack_into(">i", data, 8, length)
        with pytest.raises((CorruptBatch, RecordTooLarge)):
            parse_batches(bytes(data), max_batch_bytes=BIG)
    with pytest.raises(CorruptBatch):
        parse_batches(b"", max_batch_bytes=BIG)


def test_record_too_large() -> None:
    data = encode_batch([b"x" * 1000], timestamp_ms=1)
    with pytest.raises(RecordTooLarge):
        parse_batches(data, max_batch_bytes=500)
    parse_batches(data, max_batch_bytes=len(data))


def test_scan_batches_reports_stop_reason() -> None:
    a = encode_batch([b"1"], timestamp_ms=1, base_offset=0)
    b = encode_batch([b"2", b"3"], timestamp_ms=1, base_offset=1)
    c = encode_batch([b"4"], timestamp_ms=1, base_offset=2)  # goes back: damage
    # A gap (a compacted log) is not damage; offsets going back are.
    gap = encode_batch([b"4"], timestamp_ms=1, base_offset=5)
    assert len(scan_batches(a + b + gap, expected_offset=0).batches) == 3
    result = scan_batches(a + b + c, expected_offset=0)
    assert [p for p, _ in result.batches] == [0, len(a)]
    assert result.end == len(a) + len(b)
    assert result.next_offset == 3
    assert result.reason is not None and "expected 3" in result.reason
    partial = scan_batches(a + b[:70])
    assert partial.reason is None and partial.pending is not None and partial.end == len(a)
    assert read_header(b).records_count == 2
