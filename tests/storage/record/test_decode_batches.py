"""Decoding RecordBatch v2: cross-checks with kafka-python's independent implementation,
hostile records sections, the run decoder against the record loop; and the helpers the
tests of encoding, headers and codecs beside it share (test_encode.py, test_header.py,
test_compression.py)."""

from __future__ import annotations

import contextlib
import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from brokerd.errors import CorruptBatch, RecordTooLarge
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.decode import decode_records, decode_run
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import (
    BATCH_HEADER_SIZE,
    parse_batches,
    scan_batches,
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


# --- hostile input -----------------------------------------------------------------------


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
