"""Kafka RecordBatch v2 (magic 2) codec: header parsing, validation, CRC-32C, compression.

What it does:

- parses and validates the batches of a produce payload (:func:`parse_batches`) without
  decoding records: every length is checked before anything is sliced or allocated;
- scans stored log bytes for valid batches (:func:`scan_batches`, used by recovery and by
  the read path to make sure a corrupt batch is never served);
- builds uncompressed or compressed batches (:func:`encode_batch`) and decodes the records
  of a batch for every codec Kafka clients use (:func:`decode_records`), with the
  decompressed size bounded so a decompression bomb is refused, not allocated;
- rewrites the two header fields a broker owns (:func:`stamp_base_offset`).

What it does not do: any I/O, any knowledge of segments or offsets assignment, and no
Twisted. The byte layout is that of Apache Kafka's ``DefaultRecordBatch`` and
``DefaultRecord`` classes; the header fields are listed at :class:`BatchHeader`.
Compression runs through ``cramjam`` (gzip through ``zlib``), whose ``decompress_into``
writes into a caller-sized buffer and stops when it is full; that is what bounds
decompression output.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Sequence
from typing import Protocol

import attrs
import cramjam
import crc32c

from brokerd.errors import CorruptBatch, InvalidRecord, RecordTooLarge
from brokerd.storage.types import Record

__all__ = [
    "BATCH_HEADER_SIZE",
    "CRC_START",
    "LOG_OVERHEAD",
    "MAGIC",
    "MIN_BATCH_LENGTH",
    "BatchHeader",
    "Compression",
    "RunResult",
    "ScanResult",
    "check_header",
    "compress_records",
    "decode_records",
    "decode_records_sized",
    "decode_run",
    "encode_batch",
    "parse_batches",
    "read_header",
    "rebuild_batch",
    "scan_batches",
    "stamp_base_offset",
    "verify_run",
]

#: Size of the fixed RecordBatch v2 header (through ``records_count``).
BATCH_HEADER_SIZE = 61
#: base_offset (8) + batch_length (4): the bytes not counted by batch_length.
LOG_OVERHEAD = 12
#: Smallest legal batch_length: a header with no record bytes.
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
MAGIC = 2
#: The CRC covers bytes from ``attributes`` to the end of the batch.
CRC_START = 21
#: Smallest encoded record: length, attributes, timestamp delta, offset delta, key length,
#: value length and header count are one byte each at least.
MIN_RECORD_SIZE = 7
#: Largest int32, the bound of every 32-bit length and count in the format.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20

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

# Header layout, big-endian: base_offset, batch_length, partition_leader_epoch, magic, crc,
# attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
# producer_epoch, base_sequence, records_count.
_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == BATCH_HEADER_SIZE
_STAMP = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
# The part of the header after the CRC: attributes .. records_count.
_HEADER_TAIL = struct.Struct(">hiqqqhii")
_XERIAL_HEADER = struct.Struct(">8sii")
_INT32 = struct.Struct(">i")

Buffer = bytes | bytearray | memoryview


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


@attrs.frozen
class BatchHeader:
    """The 61-byte RecordBatch v2 header, field by field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        """The codec id; an int, since stored bytes may carry an unknown id (5-7)."""
        return self.attributes & _COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def log_append_time(self) -> bool:
        """True when the timestamp type is LogAppendTime (max_timestamp is the time)."""
        return bool(self.attributes & _TIMESTAMP_TYPE_MASK)


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Unpack the header at ``pos``; the caller guarantees 61 bytes are there."""
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def check_header(header: BatchHeader, *, stored: bool = False) -> str | None:
    """The reason ``header`` cannot start a valid batch, or None. No CRC, no bounds.

    ``stored``: a batch read back from the log, where the cleaner may have removed records
    (log compaction keeps ``last_offset_delta``, so ``records_count`` may be smaller than
    ``last_offset_delta + 1``, never larger). A produced batch must be complete.
    """
    if header.batch_length < MIN_BATCH_LENGTH:
        return f"batch_length {header.batch_length} below the minimum {MIN_BATCH_LENGTH}"
    if header.magic != MAGIC:
        return f"magic {header.magic}, only magic {MAGIC} (RecordBatch v2) is supported"
    if stored:
        if not 1 <= header.records_count <= header.last_offset_delta + 1:
            return (
                f"records_count {header.records_count} does not fit "
                f"last_offset_delta {header.last_offset_delta} + 1"
            )
    elif header.records_count < 1 or header.records_count != header.last_offset_delta + 1:
        return (
            f"records_count {header.records_count} does not match "
            f"last_offset_delta {header.last_offset_delta} + 1"
        )
    if (
        header.compression == Compression.NONE
        and header.records_count * MIN_RECORD_SIZE > header.batch_length - MIN_BATCH_LENGTH
    ):
        return f"records_count {header.records_count} cannot fit in {header.size} bytes"
    return None


def _crc_ok(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    view = memoryview(buf)[pos + CRC_START : pos + header.size]
    return int(crc32c.crc32c(view)) == header.crc


def parse_batches(data: Buffer, *, max_batch_bytes: int) -> list[BatchHeader]:
    """Validate a produce payload made of one or more complete batches.

    Raises :class:`CorruptBatch` naming the first problem, or :class:`RecordTooLarge` if
    one batch is larger than ``max_batch_bytes``. Client batches may not be control
    batches (nor transactional ones without a producer id): :class:`InvalidRecord`.
    Records are not decoded (the batch is stored as it arrived).
    """
    total = len(data)
    if total == 0:
        raise CorruptBatch("empty record set: expected at least one RecordBatch")
    headers: list[BatchHeader] = []
    pos = 0
    while pos < total:
        left = total - pos
        if left < BATCH_HEADER_SIZE:
            raise CorruptBatch(
                f"truncated batch at byte {pos}: {left} bytes, a header needs {BATCH_HEADER_SIZE}"
            )
        header = read_header(data, pos)
        if header.batch_length >= MIN_BATCH_LENGTH and header.size > max_batch_bytes:
            raise RecordTooLarge(
                f"batch at byte {pos} is {header.size} bytes, the limit is {max_batch_bytes}"
            )
        reason = check_header(header)
        if reason is not None:
            raise CorruptBatch(f"batch at byte {pos}: {reason}")
        if header.size > left:
            raise CorruptBatch(
                f"truncated batch at byte {pos}: declares {header.size} bytes, {left} present"
            )
        if header.is_control:
            raise InvalidRecord(f"batch at byte {pos}: clients may not send control batches")
        if header.is_transactional and header.producer_id < 0:
            raise InvalidRecord(
                f"batch at byte {pos}: a transactional batch needs a producer id"
            )
        if not _crc_ok(data, pos, header):
            raise CorruptBatch(f"batch at byte {pos}: CRC-32C mismatch")
        headers.append(header)
        pos += header.size
    return headers


@attrs.frozen
class ScanResult:
    """Outcome of :func:`scan_batches` over a buffer of stored log bytes.

    ``batches`` holds ``(position, header)`` of each valid complete batch in order; ``end``
    is the position just after the last of them. Scanning stopped at ``end`` because the
    buffer ended (``reason`` None; ``pending`` is the header of a batch that looked valid
    but runs past the buffer, if its header was complete) or because the bytes at ``end``
    are not a valid batch (``reason`` says why).
    """

    batches: list[tuple[int, BatchHeader]]
    end: int
    next_offset: int | None
    reason: str | None
    pending: BatchHeader | None


def scan_batches(
    buf: Buffer,
    start: int = 0,
    end: int | None = None,
    *,
    expected_offset: int | None = None,
    verify_crc: bool = True,
) -> ScanResult:
    """Walk stored batches in ``buf[start:end]``, stopping at the first invalid one.

    With ``expected_offset`` set, the bytes are stored log bytes: each batch must start at
    or after it (offsets increase; a compacted log has gaps, see docs/compaction.md), and
    the next expected offset is returned in ``next_offset``.
    """
    stop = len(buf) if end is None else end
    pos = start
    found: list[tuple[int, BatchHeader]] = []
    expected = expected_offset
    while stop - pos >= BATCH_HEADER_SIZE:
        header = read_header(buf, pos)
        reason = check_header(header, stored=expected is not None)
        if reason is None and expected is not None and header.base_offset < expected:
            reason = f"base offset {header.base_offset}, expected {expected} or more"
        if reason is not None:
            return ScanResult(found, pos, expected, reason, None)
        if header.size > stop - pos:
            return ScanResult(found, pos, expected, None, header)
        if verify_crc and not _crc_ok(buf, pos, header):
            return ScanResult(found, pos, expected, "CRC-32C mismatch", None)
        found.append((pos, header))
        pos += header.size
        if expected is not None:
            expected = header.last_offset + 1
    return ScanResult(found, pos, expected, None, None)


def stamp_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Write the broker-owned fields of the batch at ``pos``: base offset, leader epoch 0.

    Neither field is under the CRC, so the batch stays valid.
    """
    _STAMP.pack_into(buf, pos, base_offset)
    _EPOCH.pack_into(buf, pos + 12, 0)


# --- encoding -----------------------------------------------------------------------------

#: Precomputed zig-zag varints of small non-negative ints: record lengths, offset deltas
#: and value lengths below this are table lookups on the encode hot path.
_SMALL = 1 << 14


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag_bytes(value: int) -> bytes:
    return _uvarint_bytes((value << 1) ^ (value >> 63))


_ZZ: list[bytes] = [_zigzag_bytes(i) for i in range(_SMALL)]
_ZZ_NULL = _zigzag_bytes(-1)


def _zz(value: int) -> bytes:
    return _ZZ[value] if 0 <= value < _SMALL else _zigzag_bytes(value)


def _encode_records(values: Sequence[bytes | None], keys: Sequence[bytes | None] | None) -> bytes:
    parts: list[bytes] = []
    append = parts.append
    zz = _ZZ
    small = _SMALL
    null = _ZZ_NULL
    # Every record: attributes 0, timestamp delta 0 (one timestamp per batch), offset delta
    # i, key, value, zero headers.
    for i, value in enumerate(values):
        delta = zz[i] if i < small else _zigzag_bytes(i)
        key = keys[i] if keys is not None else None
        key_part = null if key is None else _zz(len(key)) + key
        if value is None:
            value_len_part = null
            value = b""
        else:
            vlen = len(value)
            value_len_part = zz[vlen] if vlen < small else _zigzag_bytes(vlen)
        body_len = 2 + len(delta) + len(key_part) + len(value_len_part) + len(value) + 1
        append(zz[body_len] if body_len < small else _zigzag_bytes(body_len))
        append(b"\x00\x00")
        append(delta)
        append(key_part)
        append(value_len_part)
        append(value)
        append(b"\x00")
    return b"".join(parts)


def _compress(codec: Compression, raw: bytes, level: int | None = None) -> bytes:
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
    return _compress(codec, raw)


def encode_batch(
    values: Sequence[bytes | None],
    *,
    timestamp_ms: int,
    keys: Sequence[bytes | None] | None = None,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """Build one RecordBatch v2 holding ``values`` (all with ``timestamp_ms``).

    ``base_offset`` may be given directly (it is not under the CRC), which saves the
    broker a copy when it encodes native produces. ``transactional`` and ``control`` set
    those attribute bits (a transactional producer's batch, a transaction marker).
    """
    count = len(values)
    if count == 0:
        raise ValueError("a batch holds at least one record")
    if keys is not None and len(keys) != count:
        raise ValueError("keys and values differ in length")
    payload = _compress(compression, _encode_records(values, keys), compression_level)
    attributes = (
        int(compression)
        | (_TRANSACTIONAL_MASK if transactional else 0)
        | (_CONTROL_MASK if control else 0)
    )
    tail = _HEADER_TAIL.pack(
        attributes,
        count - 1,
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    return _assemble(base_offset, 0, tail, payload)


def _assemble(base_offset: int, leader_epoch: int, tail: bytes, payload: bytes) -> bytes:
    """A whole batch from its header tail (attributes .. record count) and records: the
    length, magic and CRC-32C (over tail and payload) are worked out here."""
    crc = crc32c.crc32c(payload, crc32c.crc32c(tail))
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload)
    if batch_length > INT32_MAX:
        raise RecordTooLarge(f"batch of {batch_length} bytes does not fit the format")
    head = struct.pack(">qiibI", base_offset, batch_length, leader_epoch, MAGIC, crc)
    return b"".join((head, tail, payload))


def _bytes_field(data: bytes | None) -> bytes:
    return _ZZ_NULL if data is None else _zz(len(data)) + data


def _encode_record(record: Record, base_offset: int, base_ts: int) -> bytes:
    body = b"".join(
        (
            b"\x00",  # attributes (unused)
            _zz(record.timestamp - base_ts),
            _zz(record.offset - base_offset),
            _bytes_field(record.key),
            _bytes_field(record.value),
            _zz(len(record.headers)),
            *(_bytes_field(k.encode()) + _bytes_field(v) for k, v in record.headers),
        )
    )
    return _zz(len(body)) + body


def rebuild_batch(header: BatchHeader, kept: Sequence[Record]) -> bytes:
    """``header``'s batch holding only ``kept`` (a non-empty subset of its records), as
    the log cleaner writes it: same base offset, ``last_offset_delta``, timestamps,
    producer fields and codec; new record count and CRC."""
    raw = b"".join(_encode_record(r, header.base_offset, header.base_timestamp) for r in kept)
    codec = header.compression
    payload = raw if codec == Compression.NONE else compress_records(Compression(codec), raw)
    tail = _HEADER_TAIL.pack(
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(kept),
    )
    return _assemble(header.base_offset, header.partition_leader_epoch, tail, payload)


def recompress_batch(
    batch: Buffer, codec: Compression, level: int | None, *, max_uncompressed: int
) -> bytes:
    """The validated batch ``batch`` with its records section in ``codec`` at ``level``
    (None: the codec's default): what a topic's ``compression.type`` stores. The records
    section is the same bytes whatever the codec, so it is decompressed (at most
    ``max_uncompressed`` bytes) and compressed again, never decoded record by record.
    Offsets, timestamps, producer fields and the other attribute bits stay; the length,
    codec bits and CRC are new."""
    view = memoryview(batch)
    header = read_header(view)
    payload = view[BATCH_HEADER_SIZE : header.size]
    if header.compression == Compression.NONE:
        raw = bytes(payload)
    else:
        raw = _decompress(header.compression, payload, max_uncompressed)
    tail = _HEADER_TAIL.pack(
        (header.attributes & ~_COMPRESSION_MASK) | int(codec),
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
    )
    return _assemble(
        header.base_offset, header.partition_leader_epoch, tail, _compress(codec, raw, level)
    )


# --- decoding -----------------------------------------------------------------------------


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Unsigned varint at ``pos`` (slow path: more than one byte)."""
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise CorruptBatch("varint longer than 10 bytes")


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


def _decompress(codec: int, data: memoryview, bound: int) -> bytes:
    if codec == Compression.GZIP:
        return _gzip(data, bound)
    if codec == Compression.SNAPPY:
        return _snappy(data, bound)
    if codec == Compression.LZ4:
        return _grow_decompress(cramjam.lz4.decompress_into, data, bound, "lz4")
    if codec == Compression.ZSTD:
        return _grow_decompress(cramjam.zstd.decompress_into, data, bound, "zstd")
    raise CorruptBatch(f"unknown compression codec {codec}")


def decode_records(batch: Buffer, *, max_uncompressed: int) -> list[Record]:
    """Decode every record of one complete batch (CRC checked, any codec).

    ``batch`` starts at the batch's first byte; bytes after the batch are ignored. The
    decompressed records section may not exceed ``max_uncompressed`` bytes.
    """
    return decode_records_sized(batch, max_uncompressed=max_uncompressed)[0]


def decode_records_sized(batch: Buffer, *, max_uncompressed: int) -> tuple[list[Record], int]:
    """Like :func:`decode_records`, also returning the total length of the values
    (what a fetch budget counts), so callers need not loop over the records for it."""
    view = memoryview(batch)
    if len(view) < BATCH_HEADER_SIZE:
        raise CorruptBatch(f"truncated batch: {len(view)} bytes")
    header = read_header(view)
    # A stored batch may be compacted (fewer records than its offset range).
    reason = check_header(header, stored=True)
    if reason is not None:
        raise CorruptBatch(reason)
    if header.size > len(view):
        raise CorruptBatch(f"truncated batch: declares {header.size}, {len(view)} present")
    if not _crc_ok(view, 0, header):
        raise CorruptBatch(f"batch at offset {header.base_offset}: CRC-32C mismatch")
    codec = header.compression
    fixed_ts = header.max_timestamp if header.log_append_time else None
    if codec == Compression.NONE:
        # Records are parsed where they lie in a bytes object; other buffers are copied
        # once because indexing bytes is what makes the parser fast.
        buf = batch if isinstance(batch, bytes) else bytes(view[: header.size])
        start, end = BATCH_HEADER_SIZE, header.size
    else:
        buf = _decompress(codec, view[BATCH_HEADER_SIZE : header.size], max_uncompressed)
        start, end = 0, len(buf)
    records, value_bytes, _ = _parse_records(
        buf, start, end, header.records_count, header.base_offset, header.base_timestamp, fixed_ts
    )
    return records, value_bytes


def _header_reason(buf: Buffer, pos: int, *, stored: bool = False) -> str:
    """The reason the header at ``pos`` was refused (the slow path of the lean loops)."""
    return check_header(read_header(buf, pos), stored=stored) or "invalid header"


def verify_run(
    buf: bytes, start: int, end: int, expected_offset: int, end_offset: int | None = None
) -> tuple[int, int, str | None]:
    """Check the stored batches in ``buf[start:end]``: header, CRC and offsets increasing
    from ``expected_offset`` (gaps allowed: compaction). The read path's guard against
    serving damage.

    Returns ``(valid_end, next_offset, reason)``: ``valid_end`` is the end of the last good
    complete batch; ``reason`` says why the bytes there are not a valid batch, or is None
    when only the buffer's end (a partial batch) stopped the walk. With ``end_offset`` (the
    segment's end), a batch reaching it is damage: with gaps allowed, that bound is what
    catches a base offset damaged upward.
    """
    limit = INT64_MAX if end_offset is None else end_offset
    unpack = _HEADER.unpack_from
    view = memoryview(buf)
    crc = crc32c.crc32c
    pos = start
    expected = expected_offset
    while end - pos >= BATCH_HEADER_SIZE:
        base, length, _, magic, stored_crc, attributes, lod, _, _, _, _, _, count = unpack(buf, pos)
        if (
            length < MIN_BATCH_LENGTH
            or magic != MAGIC
            or count < 1
            or count > lod + 1
            or (
                not attributes & _COMPRESSION_MASK
                and count * MIN_RECORD_SIZE > length - MIN_BATCH_LENGTH
            )
        ):
            return pos, expected, _header_reason(buf, pos, stored=True)
        if base < expected or base + lod >= limit:
            return pos, expected, f"base offset {base}, expected {expected}..{limit - 1}"
        size = length + LOG_OVERHEAD
        if size > end - pos:
            break
        if crc(view[pos + CRC_START : pos + size]) != stored_crc:
            return pos, expected, f"batch at offset {base}: CRC-32C mismatch"
        pos += size
        expected = base + lod + 1
    return pos, expected, None


class SkipBatches(Protocol):
    """A committed-only read's filter (``storage.log_txn.CommittedFilter``)."""

    @property
    def stop(self) -> int: ...
    def skips(self, control: bool, producer_id: int, base_offset: int) -> bool: ...


class RunResult:
    """Where :func:`decode_run` stopped: ``pos`` and ``next_offset`` of the first batch not
    consumed, the value bytes ``total`` so far, and why (``status``): ``"end"`` (buffer
    exhausted; ``need`` > 0 is the size of a partial batch at ``pos``), ``"full"`` (value
    budget reached) or ``"damage"`` (``reason`` says what)."""

    __slots__ = ("need", "next_offset", "pos", "reason", "status", "total")

    def __init__(
        self, status: str, pos: int, next_offset: int, total: int, need: int, reason: str | None
    ) -> None:
        self.status = status
        self.pos = pos
        self.next_offset = next_offset
        self.total = total
        self.need = need
        self.reason = reason


def decode_run(
    buf: bytes,
    start: int,
    end: int,
    *,
    expected_offset: int,
    min_offset: int,
    max_value_bytes: int,
    total: int,
    out: list[Record],
    max_uncompressed: int,
    end_offset: int | None = None,
    committed: SkipBatches | None = None,
) -> RunResult:
    """Decode the stored batches in ``buf[start:end]`` into ``out`` (the native fetch path).

    Each batch is checked (header, CRC, offsets increasing from ``expected_offset``);
    records before ``min_offset`` are skipped; values are counted into ``total`` and
    decoding stops once adding a record would pass ``max_value_bytes`` (but ``out`` always
    gets at least one record). Uncompressed records are parsed in place: no copy of the
    batch, and no per-batch objects besides the records. ``end_offset`` bounds the
    offsets as in :func:`verify_run`. ``committed`` makes it a committed-only read: it
    stops (status ``"full"``) at a batch at or past ``committed.stop`` and skips the
    transactional batches ``committed.skips`` names (checked on headers only).
    """
    limit = INT64_MAX if end_offset is None else end_offset
    unpack = _HEADER.unpack_from
    view = memoryview(buf)
    crc = crc32c.crc32c
    pos = start
    expected = expected_offset
    while end - pos >= BATCH_HEADER_SIZE:
        base, length, _, magic, stored_crc, attributes, lod, base_ts, max_ts, pid, _, _, count = (
            unpack(buf, pos)
        )
        codec = attributes & _COMPRESSION_MASK
        if (
            length < MIN_BATCH_LENGTH
            or magic != MAGIC
            or count < 1
            or count > lod + 1
            or (not codec and count * MIN_RECORD_SIZE > length - MIN_BATCH_LENGTH)
        ):
            reason = _header_reason(buf, pos, stored=True)
            return RunResult("damage", pos, expected, total, 0, reason)
        if base < expected or base + lod >= limit:
            reason = f"base offset {base}, expected {expected}..{limit - 1}"
            return RunResult("damage", pos, expected, total, 0, reason)
        size = length + LOG_OVERHEAD
        if size > end - pos:
            return RunResult("end", pos, expected, total, size, None)
        if crc(view[pos + CRC_START : pos + size]) != stored_crc:
            return RunResult(
                "damage", pos, expected, total, 0, f"batch at offset {base}: CRC-32C mismatch"
            )
        if committed is not None:
            if base >= committed.stop:
                return RunResult("full", pos, expected, total, 0, None)
            if attributes & _TRANSACTIONAL_MASK and committed.skips(
                bool(attributes & _CONTROL_MASK), pid, base
            ):
                pos += size
                expected = base + lod + 1
                continue
        if base + lod >= min_offset:
            fixed_ts = max_ts if attributes & _TIMESTAMP_TYPE_MASK else None
            parse_from: tuple[Buffer, int, int]
            try:
                if codec == Compression.NONE:
                    parse_from = (buf, pos + BATCH_HEADER_SIZE, pos + size)
                else:
                    raw = _decompress(
                        codec, view[pos + BATCH_HEADER_SIZE : pos + size], max_uncompressed
                    )
                    parse_from = (raw, 0, len(raw))
                if count == lod + 1:
                    # Only the records this fetch returns become objects: earlier ones
                    # are skipped by length, and parsing stops once the budget is spent.
                    records, value_bytes, complete = _parse_records(
                        *parse_from,
                        count,
                        base,
                        base_ts,
                        fixed_ts,
                        min_offset=min_offset,
                        budget=max_value_bytes - total,
                        need_one=not out,
                    )
                else:
                    # A compacted batch: offsets have gaps, so skipping by position is
                    # not possible; parse it whole and cut by offset and budget.
                    records, value_bytes, complete = _cut(
                        _parse_records(*parse_from, count, base, base_ts, fixed_ts)[0],
                        min_offset,
                        max_value_bytes - total,
                        need_one=not out,
                    )
            except CorruptBatch as exc:
                return RunResult("damage", pos, expected, total, 0, str(exc))
            out.extend(records)
            total += value_bytes
            if not complete:
                return RunResult("full", pos, expected, total, 0, None)
        pos += size
        expected = base + lod + 1
    return RunResult("end", pos, expected, total, 0, None)


def _cut(
    records: list[Record], min_offset: int, budget: int, *, need_one: bool
) -> tuple[list[Record], int, bool]:
    """The records at or after ``min_offset`` whose values fit ``budget`` (at least one
    if ``need_one``), their value bytes, and whether none had to be left out."""
    out: list[Record] = []
    value_bytes = 0
    for record in records:
        if record.offset < min_offset:
            continue
        size = 0 if record.value is None else len(record.value)
        if value_bytes + size > budget and (out or not need_one):
            return out, value_bytes, False
        out.append(record)
        value_bytes += size
    return out, value_bytes, True


#: Zig-zag decoding of every one-byte varint, the common case for every record field.
_UNZIGZAG_1 = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))
#: A one-byte zig-zag varint encoding -1: a null key or value.
_NULL_BYTE = 1


def _parse_records(
    buf: bytes,
    start: int,
    n: int,
    count: int,
    base_offset: int,
    base_ts: int,
    fixed_ts: int | None,
    *,
    min_offset: int = -1,
    budget: int | None = None,
    need_one: bool = True,
) -> tuple[list[Record], int, bool]:
    """Parse ``count`` records filling ``buf[start:n]`` exactly.

    Each record is a varint length, then attributes, timestamp and offset deltas,
    key, value and headers (RecordBatch v2's record layout).

    Records below ``min_offset`` are stepped over by their length, without objects.
    With a ``budget``, parsing stops before the record whose value would exceed it
    (unless ``need_one`` and nothing was taken yet); the third result says whether every
    record was parsed. Returns ``(records, value bytes of those records, complete)``.

    This is the hot path of native fetches: one-byte and two-byte varints are decoded
    inline, and nothing is sliced except keys and values.
    """
    if count * MIN_RECORD_SIZE > n - start:
        raise CorruptBatch(f"{count} records cannot fit in {n - start} bytes")
    out: list[Record] = []
    append = out.append
    uvarint = _uvarint
    unzz = _UNZIGZAG_1
    ts_scale = 1
    if fixed_ts is not None:
        # LogAppendTime: every record carries the batch's time.
        base_ts, ts_scale = fixed_ts, 0
    value_bytes = 0
    pos = start
    skip = min(max(min_offset - base_offset, 0), count)
    try:
        for _ in range(count):
            u = buf[pos]
            if u < 0x80:
                length = unzz[u]
                pos += 1
            else:
                if buf[pos + 1] < 0x80:
                    u = (u & 0x7F) | (buf[pos + 1] << 7)
                    pos += 2
                else:
                    u, pos = uvarint(buf, pos)
                length = (u >> 1) ^ -(u & 1)
            body_end = pos + length
            if length < MIN_RECORD_SIZE - 1 or body_end > n:
                raise CorruptBatch(f"record length {length} out of bounds")
            if skip:
                # Offsets in a complete batch are its base plus 0..count-1 (the caller
                # passes no min_offset for a compacted one), so the first record wanted
                # is known without parsing.
                skip -= 1
                pos = body_end
                continue
            # Skip the unused attributes byte.
            u = buf[pos + 1]
            if u < 0x80:
                ts_delta = unzz[u]
                pos += 2
            else:
                u, pos = uvarint(buf, pos + 1)
                ts_delta = (u >> 1) ^ -(u & 1)
            u = buf[pos]
            if u < 0x80:
                offset_delta = unzz[u]
                pos += 1
            else:
                if buf[pos + 1] < 0x80:
                    u = (u & 0x7F) | (buf[pos + 1] << 7)
                    pos += 2
                else:
                    u, pos = uvarint(buf, pos)
                offset_delta = (u >> 1) ^ -(u & 1)
            key: bytes | None
            u = buf[pos]
            if u == _NULL_BYTE:
                key = None
                pos += 1
            else:
                if u < 0x80:
                    klen = unzz[u]
                    pos += 1
                else:
                    u, pos = uvarint(buf, pos)
                    klen = (u >> 1) ^ -(u & 1)
                if klen < 0 or pos + klen > body_end:
                    raise CorruptBatch(f"key length {klen} out of bounds")
                key = buf[pos : pos + klen]
                pos += klen
            value: bytes | None
            u = buf[pos]
            if u == _NULL_BYTE:
                value = None
                pos += 1
            else:
                if u < 0x80:
                    vlen = unzz[u]
                    pos += 1
                elif buf[pos + 1] < 0x80:
                    u = (u & 0x7F) | (buf[pos + 1] << 7)
                    vlen = (u >> 1) ^ -(u & 1)
                    pos += 2
                else:
                    u, pos = uvarint(buf, pos)
                    vlen = (u >> 1) ^ -(u & 1)
                if vlen < 0 or pos + vlen > body_end:
                    raise CorruptBatch(f"value length {vlen} out of bounds")
                if budget is not None and value_bytes + vlen > budget and (out or not need_one):
                    return out, value_bytes, False
                value = buf[pos : pos + vlen]
                pos += vlen
                value_bytes += vlen
            headers: tuple[tuple[str, bytes | None], ...] = ()
            if buf[pos] == 0:
                pos += 1
            else:
                u, pos = uvarint(buf, pos)
                headers, pos = _parse_headers(buf, pos, body_end, (u >> 1) ^ -(u & 1))
            if pos != body_end:
                raise CorruptBatch("record length does not match its fields")
            append(
                Record(
                    base_offset + offset_delta, base_ts + ts_delta * ts_scale, key, value, headers
                )
            )
    except IndexError:
        raise CorruptBatch("truncated record") from None
    if pos != n:
        raise CorruptBatch(f"{n - pos} bytes after the last declared record")
    return out, value_bytes, True


def _parse_headers(
    buf: bytes, pos: int, body_end: int, count: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if count < 0 or count * 2 > body_end - pos:
        raise CorruptBatch(f"header count {count} out of bounds")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        u, pos = _uvarint(buf, pos)
        klen = (u >> 1) ^ -(u & 1)
        if klen < 0 or pos + klen > body_end:
            raise CorruptBatch(f"header key length {klen} out of bounds")
        try:
            hkey = buf[pos : pos + klen].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptBatch("header key is not UTF-8") from None
        pos += klen
        u, pos = _uvarint(buf, pos)
        vlen = (u >> 1) ^ -(u & 1)
        hvalue: bytes | None
        if vlen < 0:
            if vlen != -1:
                raise CorruptBatch(f"header value length {vlen}")
            hvalue = None
        else:
            if pos + vlen > body_end:
                raise CorruptBatch("header value overruns its record")
            hvalue = buf[pos : pos + vlen]
            pos += vlen
        headers.append((hkey, hvalue))
    return tuple(headers), pos


# --- sizes --------------------------------------------------------------------------------


def stored_size(values: Sequence[bytes | None]) -> int:
    """Bytes of the uncompressed batch :func:`encode_batch` builds for ``values`` (no
    keys), without building it: what a native produce of ``values`` occupies in the log,
    and so what a Kafka reader's ``MinBytes`` counts for it."""
    total = BATCH_HEADER_SIZE
    small = _SMALL
    for i, value in enumerate(values):
        delta = len(_ZZ[i]) if i < small else len(_zigzag_bytes(i))
        if value is None:
            value_part = len(_ZZ_NULL)
        else:
            vlen = len(value)
            value_part = (len(_ZZ[vlen]) if vlen < small else len(_zigzag_bytes(vlen))) + vlen
        # Attributes and timestamp delta (2), offset delta, null key, value, no headers (1).
        body_len = 2 + delta + len(_ZZ_NULL) + value_part + 1
        total += len(_zz(body_len)) + body_len
    return total
