"""brokerd.core.appends: what each kind of append adds toward a waiter's min_bytes."""

from __future__ import annotations

from brokerd.core.appends import (
    UNKNOWN_BYTES,
    BatchesAppend,
    MarkerAppend,
    ValuesAppend,
    wake_bytes,
)
from brokerd.storage.log.prepared_append import PreparedBatches
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch, stored_size
from brokerd.storage.record.header import parse_batches


def _batches(compression: Compression) -> PreparedBatches:
    data = encode_batch([b"abc", b"defgh"], timestamp_ms=1, compression=compression)
    return PreparedBatches(data, tuple(parse_batches(data, max_batch_bytes=1 << 20)))


def test_values_count_value_bytes_skipping_nulls_and_stored_bytes() -> None:
    plain = ValuesAppend((b"ab", b"cde"))
    assert wake_bytes(plain, values=True) == 5
    with_null = ValuesAppend((b"ab", None, b"c"))
    assert wake_bytes(with_null, values=True) == 3
    assert wake_bytes(plain, values=False) == stored_size([b"ab", b"cde"])
    assert wake_bytes(plain, values=False) == len(
        encode_batch([b"ab", b"cde"], timestamp_ms=0))


def test_uncompressed_batches_count_their_bytes_compressed_ones_unknown() -> None:
    plain = BatchesAppend(_batches(Compression.NONE))
    size = len(plain.prepared.data)
    assert wake_bytes(plain, values=True) == size
    assert wake_bytes(plain, values=False) == size
    packed = BatchesAppend(_batches(Compression.GZIP))
    assert wake_bytes(packed, values=True) == UNKNOWN_BYTES
    assert wake_bytes(packed, values=False) == len(packed.prepared.data)


def test_a_marker_wakes_every_waiter() -> None:
    marker = MarkerAppend(producer_id=1, producer_epoch=0, commit=True)
    assert wake_bytes(marker, values=True) == UNKNOWN_BYTES
    assert wake_bytes(marker, values=False) == UNKNOWN_BYTES
    assert marker.coordinator_epoch == 0
