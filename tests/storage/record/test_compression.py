"""The codecs of record batches: snappy raw blocks and xerial chunks, stdlib gzip, and
decompression bombs refused at an exact bound."""

from __future__ import annotations

import gzip
import resource
import struct
import time
import zlib

import lz4.frame
import pytest
import snappy
import zstandard

from brokerd.errors import CorruptBatch
from brokerd.storage.record.compression import XERIAL_MAGIC, Compression
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import (
    BATCH_HEADER_SIZE,
    parse_batches,
)

from tests.storage.record.test_decode_batches import BIG, raw_batch

BOMB_MIB = 256


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


def _maxrss_mib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


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
