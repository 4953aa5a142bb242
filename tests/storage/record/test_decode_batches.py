"""RecordBatch v2 codec: round trips for every codec, cross-checks with kafka-python's
independent implementation, validation of hostile input, decompression bombs."""

from __future__ import annotations

import contextlib
import gzip
import resource
import struct
import time
import zlib

import crc32c
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from brokerd.errors import CorruptBatch, RecordTooLarge
from brokerd.storage.record.compression import XERIAL_MAGIC, Compression
from brokerd.storage.record.decode import decode_records, decode_run
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import (
    BATCH_HEADER_SIZE,
    parse_batches,
    read_header,
    scan_batches,
    stamp_base_offset,
    verify_run,
)
from brokerd.storage.types import Record

BIG = 1 << 20


def raw_batch(
    payload: bytes,
    *,
    codec: int = 0,
    count: int = 1,
    base_offset: int = 0,
    attributes: int | None = None,
    magic: int = 2,
    last_offset_delta: int | None = None,
    crc: int | None = None,
) -> bytes:
    """A batch around an arbitrary records payload, CRC computed unless given."""
    attrs = codec if attributes is None else attributes
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    tail = struct.pack(">hiqqqhii", attrs, lod, 1000, 1000, -1, -1, -1, count) + payload
    value = crc32c.crc32c(tail) if crc is None else crc
    head = struct.pack(
        ">qiibI", base_offset, BATCH_HEADER_SIZE - 12 + len(payload), 0, magic, value
    )
    return head + tail


def kafka_python_batch(
    values: list[bytes | None], codec: int, headers: list[tuple[str, bytes]] | None = None
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=BIG,
    )
    for i, value in enumerate(values):
        builder.append(
            i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=value, headers=headers or []
        )
    return bytes(builder.build())


values_st = st.lists(st.one_of(st.none(), st.binary(max_size=300)), min_size=1, max_size=40)
codec_st = st.sampled_from(list(Compression))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=values_st,
    codec=codec_st,
    with_keys=st.booleans(),
    ts=st.integers(-1, 2**62),
    base=st.integers(0, 2**40),
)
def test_round_trip_every_codec(
    values: list[bytes | None], codec: Compression, with_keys: bool, ts: int, base: int
) -> None:
    keys = [None if v is None else b"key" + v[:3] for v in values] if with_keys else None
    data = encode_batch(values, timestamp_ms=ts, keys=keys, compression=codec, base_offset=base)
    (header,) = parse_batches(data, max_batch_bytes=BIG)
    assert header.size == len(data)
    assert header.compression == codec
    assert header.base_offset == base
    assert header.records_count == len(values)
    assert header.last_offset == base + len(values) - 1
    records = decode_records(data, max_uncompressed=BIG)
    assert [r.value for r in records] == values
    assert [r.offset for r in records] == list(range(base, base + len(values)))
    assert [r.key for r in records] == (keys or [None] * len(values))
    assert all(r.timestamp == ts for r in records)
    # An independent implementation reads what we wrote.
    theirs = DefaultRecordBatch(data)
    assert [(r.offset, r.key, r.value) for r in theirs] == [
        (r.offset, r.key, r.value) for r in records
    ]


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.binary(max_size=200), min_size=1, max_size=20), codec=codec_st)
def test_decodes_kafka_python_batches(values: list[bytes | None], codec: Compression) -> None:
    data = kafka_python_batch(values, int(codec), headers=[("h", b"1"), ("empty", b"")])
    (header,) = parse_batches(data, max_batch_bytes=BIG)
    # kafka-python stores uncompressed when compression would not save space.
    assert header.compression in (codec, Compression.NONE)
    records = decode_records(data, max_uncompressed=BIG)
    assert [r.value for r in records] == values
    assert [r.key for r in records] == [b"k%d" % i for i in range(len(values))]
    assert [r.timestamp for r in records] == [1_700_000_000_000 + i for i in range(len(values))]
    assert all(r.headers == (("h", b"1"), ("empty", b"")) for r in records)


def test_snappy_raw_block_accepted() -> None:
    """librdkafka may send one raw snappy block instead of xerial framing."""
    records = encode_batch([b"a" * 50, b"b"], timestamp_ms=5)
    payload = snappy.compress(records[BATCH_HEADER_SIZE:])
    data = raw_batch(payload, codec=Compression.SNAPPY, count=2)
    assert [r.value for r in decode_records(data, max_uncompressed=BIG)] == [b"a" * 50, b"b"]


def test_xerial_snappy_multiple_chunks() -> None:
    values = [bytes([i % 251]) * 1000 for i in range(100)]  # 100 KB: several 32 KiB chunks
    data = encode_batch(values, timestamp_ms=1, compression=Compression.SNAPPY)
    assert data[BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + 8] == XERIAL_MAGIC
    assert [r.value for r in decode_records(data, max_uncompressed=BIG)] == values


def test_gzip_from_stdlib_accepted() -> None:
    records = encode_batch([b"x", b"yy"], timestamp_ms=1)[BATCH_HEADER_SIZE:]
    data = raw_batch(gzip.compress(records), codec=Compression.GZIP, count=2)
    assert [r.value for r in decode_records(data, max_uncompressed=BIG)] == [b"x", b"yy"]


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


# --- hostile input -----------------------------------------------------------------------


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


@settings(max_examples=300, deadline=None)
@given(garbage=st.binary(max_size=200), prefix=st.booleans())
def test_garbage_never_crashes(garbage: bytes, prefix: bool) -> None:
    data = (encode_batch([b"ok"], timestamp_ms=1) if prefix else b"") + garbage
    with contextlib.suppress(CorruptBatch, RecordTooLarge):
        parse_batches(data, max_batch_bytes=BIG)
    with contextlib.suppress(CorruptBatch):
        decode_records(data, max_uncompressed=BIG)
    scan_batches(data)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), codec=codec_st)
def test_corrupt_records_section_never_crashes(data: st.DataObject, codec: Compression) -> None:
    """Valid CRC, garbage inside: decoding raises CorruptBatch or returns, nothing else."""
    payload = data.draw(st.binary(max_size=120))
    count = data.draw(st.integers(1, 5))
    batch = raw_batch(payload, codec=int(codec), count=count)
    try:
        parse_batches(batch, max_batch_bytes=BIG)
        decode_records(batch, max_uncompressed=BIG)
    except CorruptBatch:
        pass


def test_record_fields_overrunning_are_rejected() -> None:
    # A record whose value length claims more than the record holds.
    record = bytes([0x0E, 0, 0, 0, 0x01, 0x7E]) + b"abcdefgh"  # value len 63 > present
    with pytest.raises(CorruptBatch):
        decode_records(raw_batch(record), max_uncompressed=BIG)


def _maxrss_mib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


BOMB_MIB = 256


def _bomb(codec: Compression) -> bytes:
    chunk = bytes(1 << 20)
    if codec == Compression.GZIP:
        # zlib is the slow one to build: a quarter of the size still makes the point.
        z = zlib.compressobj(1, wbits=31)
        return b"".join([z.compress(chunk) for _ in range(BOMB_MIB // 4)] + [z.flush()])
    if codec == Compression.LZ4:
        c = lz4.frame.LZ4FrameCompressor()
        return b"".join([c.begin()] + [c.compress(chunk) for _ in range(BOMB_MIB)] + [c.flush()])
    if codec == Compression.ZSTD:
        z2 = zstandard.ZstdCompressor().compressobj()
        return b"".join([z2.compress(chunk) for _ in range(BOMB_MIB)] + [z2.flush()])
    # Snappy: xerial chunks each claiming 4 GiB (raw snappy's varint preamble).
    block = b"\xff\xff\xff\xff\x0f" + b"\x00" * 16
    return XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_decompression_bomb_refused(codec: Compression) -> None:
    payload = _bomb(codec)
    data = raw_batch(payload, codec=int(codec), count=1000)
    parse_batches(data, max_batch_bytes=BIG * 8)  # headers and CRC are fine
    before = _maxrss_mib()
    # CPU time, not the wall clock: a loaded machine may pause the process, not the work.
    started = time.process_time()
    with pytest.raises(CorruptBatch, match=r"more than|declares"):
        decode_records(data, max_uncompressed=BIG)
    assert time.process_time() - started < 2.0
    # Bounded output: far below the bomb's 256 MiB (maxrss is a high-water mark).
    assert _maxrss_mib() - before < 64


def test_raw_snappy_bomb_refused_before_decompressing() -> None:
    data = raw_batch(b"\xff\xff\xff\xff\x0f" + b"\x00" * 8, codec=Compression.SNAPPY)
    with pytest.raises(CorruptBatch, match="declares"):
        decode_records(data, max_uncompressed=BIG)


def test_bound_is_exact() -> None:
    values = [b"z" * 1000] * 10
    for codec in (Compression.GZIP, Compression.LZ4, Compression.ZSTD, Compression.SNAPPY):
        data = encode_batch(values, timestamp_ms=1, compression=codec)
        raw_len = len(encode_batch(values, timestamp_ms=1)) - BATCH_HEADER_SIZE
        assert len(decode_records(data, max_uncompressed=raw_len)) == 10
        with pytest.raises(CorruptBatch):
            decode_records(data, max_uncompressed=raw_len - 1)


def test_corrupt_compressed_payload() -> None:
    for codec in (Compression.GZIP, Compression.LZ4, Compression.ZSTD, Compression.SNAPPY):
        with pytest.raises(CorruptBatch):
            decode_records(
                raw_batch(b"not compressed at all", codec=int(codec)), max_uncompressed=BIG
            )
    with pytest.raises(CorruptBatch, match="unknown compression"):
        decode_records(raw_batch(b"\x00" * 7, codec=5), max_uncompressed=BIG)


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


def test_encode_rejects_empty_and_mismatched_keys() -> None:
    with pytest.raises(ValueError):
        encode_batch([], timestamp_ms=1)
    with pytest.raises(ValueError):
        encode_batch([b"a"], timestamp_ms=1, keys=[b"x", b"y"])


def test_large_varints() -> None:
    values = [b"v" * 20000, b"", None, b"w" * 300]
    data = encode_batch(values, timestamp_ms=2**50, keys=[b"k" * 20000, None, b"", b"x"])
    records = decode_records(data, max_uncompressed=BIG)
    assert [r.value for r in records] == values
    assert records[0].key == b"k" * 20000 and records[1].key is None and records[2].key == b""


@pytest.mark.parametrize("codec", list(Compression))
def test_decodes_kafka_python_compressed(codec: Compression) -> None:
    values: list[bytes | None] = [b"abc" * 100, None, b"", b"xyz" * 50]
    data = kafka_python_batch(values, int(codec))
    (header,) = parse_batches(data, max_batch_bytes=BIG)
    assert header.compression == codec
    assert [r.value for r in decode_records(data, max_uncompressed=BIG)] == values


@settings(max_examples=100, deadline=None)
@given(
    batches=st.lists(
        st.tuples(st.lists(st.binary(max_size=50), min_size=1, max_size=8), codec_st),
        min_size=1,
        max_size=8,
    ),
    data=st.data(),
)
def test_decode_run_matches_decode_records(
    batches: list[tuple[list[bytes], Compression]], data: st.DataObject
) -> None:
    """The in-place run decoder agrees with decoding batch by batch."""
    encoded = []
    offset = 0
    for values, codec in batches:
        encoded.append(encode_batch(values, timestamp_ms=9, compression=codec, base_offset=offset))
        offset += len(values)
    buf = b"".join(encoded)
    every = [r for b in encoded for r in decode_records(b, max_uncompressed=BIG)]
    min_offset = data.draw(st.integers(0, offset - 1))
    budget = data.draw(st.integers(0, 400))
    out: list[Record] = []
    run = decode_run(
        buf,
        0,
        len(buf),
        expected_offset=0,
        min_offset=min_offset,
        max_value_bytes=budget,
        total=0,
        out=out,
        max_uncompressed=BIG,
    )
    want: list[Record] = []
    total = 0
    for r in every:
        if r.offset < min_offset:
            continue
        size = len(r.value or b"")
        if want and total + size > budget:
            break
        want.append(r)
        total += size
    assert out == want
    assert run.total == total
    assert run.status == ("full" if len(want) < offset - min_offset else "end")
    # verify_run accepts the whole run and stops exactly at a cut.
    assert verify_run(buf, 0, len(buf), 0) == (len(buf), offset, None)
    cut = data.draw(st.integers(0, len(buf)))
    end, _, reason = verify_run(buf, 0, cut, 0)
    assert reason is None and end <= cut


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([1, 2, 63, 64, 65, 700]))
def test_equal_values_encode_as_the_record_loop_does(value: bytes, count: int) -> None:
    # Equal values take the head table and a closed-form size; the bytes and the size
    # are those the general loop (which every mixed batch takes) gives.
    from unittest import mock

    from brokerd.storage.record import encode

    values: list[bytes | None] = [value] * count
    fast = encode.encode_batch(values, timestamp_ms=5, base_offset=9)
    fast_size = encode.stored_size(values)
    with mock.patch.object(encode, "_equal_length", lambda _values: None):
        assert encode.encode_batch(values, timestamp_ms=5, base_offset=9) == fast
        assert encode.stored_size(values) == fast_size == len(fast)
    records = decode_records(fast, max_uncompressed=1 << 20)
    assert [r.value for r in records] == values
    assert [r.offset for r in records] == list(range(9, 9 + count))
