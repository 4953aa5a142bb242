# -*- test-case-name: tests.storage.record.test_compression -*-
"""The compression codecs of a RecordBatch's records section, bounded on the way in.

What it does: names the codec ids of the ``attributes`` bits 0-2 (:class:`Compression`),
compresses a records section with any of them (:func:`compress`) and decompresses one
(:func:`decompress`) with its output bounded, so a decompression bomb is refused, not
allocated. Snappy is framed the xerial way, as Kafka's Java producer writes it, and one
raw block (as librdkafka may send) is read too.

What it does not do: anything with headers, records or CRCs (``header.py``, ``encode.py``,
``decode.py``), and no I/O. Compression runs through ``cramjam`` (gzip through ``zlib``),
whose ``decompress_into`` writes into a caller-sized buffer and stops when it is full; that
is what bounds decompression output.
"""

from __future__ import annotations

import enum
import struct
import zlib

import cramjam

from brokerd.errors import CorruptBatch

__all__ = [
    "CODECS_BY_NAME",
    "XERIAL_MAGIC",
    "Buffer",
    "Compression",
    "compress",
    "compress_records",
    "decompress",
]

#: Any bytes-like a batch may arrive or be stored in.
Buffer = bytes | bytearray | memoryview

#: Java clients frame snappy the xerial way: this magic, two int32 versions, then chunks.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_XERIAL_VERSION = 1
_XERIAL_COMPAT_VERSION = 1
#: Chunk size xerial's SnappyOutputStream uses by default; our encoder follows it.
_XERIAL_CHUNK = 32 * 1024

#: First guess of the decompressed size of a frame without a usable size field, as a
#: multiple of the compressed size; the buffer doubles from there up to the bound.
_GROWTH_GUESS_FACTOR = 4
_MIN_GUESS = 64 * 1024

_XERIAL_HEADER = struct.Struct(">8sii")
_INT32 = struct.Struct(">i")


class Compression(enum.IntEnum):
    """Codec ids of the ``attributes`` bits 0-2 (Kafka's ``CompressionType``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


#: Codecs by their ``compression.type`` names.
CODECS_BY_NAME = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}



def compress(codec: Compression, raw: bytes, level: int | None = None) -> bytes:
    if codec == Compression.NONE:
        return raw
    if codec == Compression.GZIP:
        compressor = zlib.compressobj(-1 if level is None else level, wbits=31)
        return compressor.compress(raw) + compressor.flush()
    if codec == Compression.SNAPPY:
        # xerial framing, as Kafka's Java producer writes it.
        out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_COMPAT_VERSION))
        for start in range(0, len(raw), _XERIAL_CHUNK):
            block = bytes(cramjam.snappy.compress_raw(raw[start : start + _XERIAL_CHUNK]))
            out += _INT32.pack(len(block))
            out += block
        return bytes(out)
    if codec == Compression.LZ4:
        if level is None:
            return bytes(cramjam.lz4.compress(raw))
        return bytes(cramjam.lz4.compress(raw, level=level))
    if codec == Compression.ZSTD:
        if level is None:
            return bytes(cramjam.zstd.compress(raw))
        return bytes(cramjam.zstd.compress(raw, level=level))
    raise ValueError(f"unknown compression {codec!r}")


def compress_records(codec: Compression, raw: bytes) -> bytes:
    """The records section ``raw`` compressed with ``codec`` as :func:`encode_batch` does
    it (the log cleaner rebuilds compacted batches with their original codec)."""
    return compress(codec, raw)



def _grow_decompress(decompress_into: object, data: Buffer, bound: int, name: str) -> bytes:
    """Decompress a frame whose size is unknown into buffers doubling up to ``bound``."""
    func = decompress_into
    assert callable(func)
    size = min(bound, max(_MIN_GUESS, len(data) * _GROWTH_GUESS_FACTOR))
    while True:
        out = bytearray(size)
        try:
            written = int(func(data, out))
        except cramjam.DecompressionError as exc:
            # cramjam reports a full output buffer with this message; anything else is
            # malformed input.
            if "failed to write whole buffer" not in str(exc):
                raise CorruptBatch(f"{name} decompression failed: {exc}") from None
            if size >= bound:
                raise CorruptBatch(
                    f"{name} payload decompresses to more than {bound} bytes"
                ) from None
            size = min(bound, size * 2)
            continue
        del out[written:]
        return bytes(out)


def _snappy_raw(block: Buffer, bound: int) -> bytes:
    try:
        size = int(cramjam.snappy.decompress_raw_len(block))
    except cramjam.DecompressionError as exc:
        raise CorruptBatch(f"snappy block: {exc}") from None
    if size > bound:
        raise CorruptBatch(f"snappy block declares {size} bytes, more than {bound}")
    out = bytearray(size)
    try:
        written = int(cramjam.snappy.decompress_raw_into(block, out))
    except cramjam.DecompressionError as exc:
        raise CorruptBatch(f"snappy decompression failed: {exc}") from None
    if written != size:
        raise CorruptBatch("snappy block shorter than its declared length")
    return bytes(out)


def _snappy(data: memoryview, bound: int) -> bytes:
    if bytes(data[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        # librdkafka may send one raw snappy block.
        return _snappy_raw(data, bound)
    if len(data) < _XERIAL_HEADER_SIZE:
        raise CorruptBatch("truncated xerial snappy header")
    parts: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        if len(data) - pos < 4:
            raise CorruptBatch("truncated xerial snappy chunk length")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or length > len(data) - pos:
            raise CorruptBatch(f"xerial snappy chunk of {length} bytes overruns the payload")
        chunk = _snappy_raw(data[pos : pos + length], bound - total)
        total += len(chunk)
        parts.append(chunk)
        pos += length
    return b"".join(parts)


def _gzip(data: memoryview, bound: int) -> bytes:
    # wbits 47 accepts gzip and zlib headers; max_length bounds the output.
    decompressor = zlib.decompressobj(wbits=47)
    try:
        out = decompressor.decompress(data, bound + 1)
    except zlib.error as exc:
        raise CorruptBatch(f"gzip decompression failed: {exc}") from None
    if len(out) > bound:
        raise CorruptBatch(f"gzip payload decompresses to more than {bound} bytes")
    if not decompressor.eof:
        raise CorruptBatch("truncated gzip payload")
    return out


def decompress(codec: int, data: memoryview, bound: int) -> bytes:
    if codec == Compression.GZIP:
        return _gzip(data, bound)
    if codec == Compression.SNAPPY:
        return _snappy(data, bound)
    if codec == Compression.LZ4:
        return _grow_decompress(cramjam.lz4.decompress_into, data, bound, "lz4")
    if codec == Compression.ZSTD:
        return _grow_decompress(cramjam.zstd.decompress_into, data, bound, "zstd")
    raise CorruptBatch(f"unknown compression codec {codec}")
