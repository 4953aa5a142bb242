"""Encoding record batches: round trips for every codec, keys checked, large varints, equal
values encoded as the record loop does."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from brokerd.storage.record.compression import Compression
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import (
    parse_batches,
)

from tests.storage.record.test_decode_batches import (
    BIG,
    codec_st,
    values_st,
)


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
