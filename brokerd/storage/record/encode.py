# -*- test-case-name: tests.storage.record.test_encode -*-
"""Building RecordBatch v2 batches: from values, from kept records, in another codec.

What it does: encodes uncompressed or compressed batches (:func:`encode_batch`, the
native produce and the markers), rebuilds a batch holding a subset of its records
(:func:`rebuild_batch`, the log cleaner), stores a validated batch in another codec
(:func:`recompress_batch`, a topic's ``compression.type``), and tells the size of the
batch :func:`encode_batch` would build without building it (:func:`stored_size`). Every
batch built here has its length, magic and CRC-32C worked out in one place.

What it does not do: parse or validate batches (``header.py``), decode records
(``decode.py``), any I/O. The record layout is that of Apache Kafka's ``DefaultRecord``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import attrs
import crc32c

from brokerd.errors import RecordTooLarge
from brokerd.storage.record.compression import (
    Buffer,
    Compression,
    compress,
    compress_records,
    decompress,
)
from brokerd.storage.record.header import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_TAIL,
    INT32_MAX,
    LOG_OVERHEAD,
    MAGIC,
    TRANSACTIONAL_MASK,
    BatchHeader,
    read_header,
)
from brokerd.storage.types import Record

__all__ = [
    "encode_batch",
    "encode_records",
    "rebuild_batch",
    "recompress_batch",
    "stored_size",
    "zigzag_varint",
]

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


#: The zig-zag varint of a signed int (a table look-up for small non-negative ones), as
#: record heads carry lengths and deltas: for the other code that lays out records.
zigzag_varint = _zz


#: Record heads of key-less records with values of one length, by that length: entry
#: ``i`` is the head of the record at offset delta ``i``, preceded (for ``i > 0``) by the
#: previous record's closing "no headers" byte. Built on first use, for lengths below
#: :data:`_SMALL` and batches of at most :data:`_MAX_TABLE_RECORDS` records; at most
#: :data:`_MAX_TABLES` lengths are kept (the table is cleared past that).
_HEADS: dict[int, list[bytes]] = {}
_MAX_TABLE_RECORDS = 1 << 16
_MAX_TABLES = 32


def _heads_for(value_len: int, count: int) -> list[bytes]:
    table = _HEADS.get(value_len)
    if table is None or len(table) < count:
        size = min(_MAX_TABLE_RECORDS, max(count, 1024))
        value_part = _ZZ[value_len]
        table = []
        for i in range(size):
            delta = _ZZ[i] if i < _SMALL else _zigzag_bytes(i)
            body = 2 + len(delta) + 1 + len(value_part) + value_len + 1
            head = _zz(body) + b"\x00\x00" + delta + _ZZ_NULL + value_part
            table.append(b"\x00" + head if i else head)
        if len(_HEADS) >= _MAX_TABLES:
            _HEADS.clear()
        _HEADS[value_len] = table
    return table


def _equal_length(values: Sequence[bytes | None]) -> int | None:
    """The one length of ``values`` when they all have it (and none is null), else None."""
    if not values or None in values:
        return None
    lengths = set(map(len, values))  # type: ignore[arg-type]
    return lengths.pop() if len(lengths) == 1 else None


def _encode_equal(values: Sequence[bytes], value_len: int) -> bytes:
    """Key-less records of equal values, joined in one pass from the head table: no
    per-record Python beyond the join itself."""
    count = len(values)
    parts = _heads_for(value_len, count)[:count]
    joined: list[bytes] = [b""] * (2 * count + 1)
    joined[0::2] = [*parts, b"\x00"]
    joined[1::2] = values
    return b"".join(joined)


def _encode_records(values: Sequence[bytes | None], keys: Sequence[bytes | None] | None) -> bytes:
    if keys is None and len(values) <= _MAX_TABLE_RECORDS:
        value_len = _equal_length(values)
        if value_len is not None and value_len < _SMALL:
            return _encode_equal(values, value_len)  # type: ignore[arg-type]
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



#: A record's headers: (key, value) pairs, in order.
RecordHeaders = Sequence[tuple[str, bytes | None]]


def _encode_with_headers(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    headers: Sequence[RecordHeaders],
) -> bytes:
    """Records with headers (rare: the broker's own dead-letter records), plainly."""
    out: list[bytes] = []
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        parts = [b"\x00", b"\x00", _zigzag_bytes(i)]
        for field in (key, value):
            parts.append(_ZZ_NULL if field is None else _zigzag_bytes(len(field)) + field)
        parts.append(_zigzag_bytes(len(headers[i])))
        for name, data in headers[i]:
            raw = name.encode()
            parts.append(_zigzag_bytes(len(raw)) + raw)
            parts.append(_ZZ_NULL if data is None else _zigzag_bytes(len(data)) + data)
        body = b"".join(parts)
        out.append(_zigzag_bytes(len(body)) + body)
    return b"".join(out)


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
    headers: Sequence[RecordHeaders] | None = None,
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
    if headers is not None and len(headers) != count:
        raise ValueError("headers and values differ in length")
    records = (
        _encode_records(values, keys) if headers is None
        else _encode_with_headers(values, keys, headers)
    )
    payload = compress(compression, records, compression_level)
    attributes = (
        int(compression)
        | (TRANSACTIONAL_MASK if transactional else 0)
        | (CONTROL_MASK if control else 0)
    )
    tail = HEADER_TAIL.pack(
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


def encode_records(records: Sequence[Record], *, timestamp_ms: int) -> bytes:
    """One uncompressed RecordBatch v2 of ``records`` with their keys and headers, all
    stamped ``timestamp_ms`` (offsets are deltas from the first record's, which the
    log assigns): what the console's produce form appends."""
    if not records:
        raise ValueError("a batch holds at least one record")
    base = records[0].offset
    stamped = [attrs.evolve(r, offset=base + i, timestamp=timestamp_ms)
               for i, r in enumerate(records)]
    payload = b"".join(_encode_record(r, base, timestamp_ms) for r in stamped)
    tail = HEADER_TAIL.pack(0, len(records) - 1, timestamp_ms, timestamp_ms, -1, -1, -1,
                            len(records))
    return _assemble(0, 0, tail, payload)


def rebuild_batch(header: BatchHeader, kept: Sequence[Record]) -> bytes:
    """``header``'s batch holding only ``kept`` (a non-empty subset of its records), as
    the log cleaner writes it: same base offset, ``last_offset_delta``, timestamps,
    producer fields and codec; new record count and CRC."""
    raw = b"".join(_encode_record(r, header.base_offset, header.base_timestamp) for r in kept)
    codec = header.compression
    payload = raw if codec == Compression.NONE else compress_records(Compression(codec), raw)
    return _rebuilt(header, header.attributes, len(kept), payload)


def _rebuilt(header: BatchHeader, attributes: int, count: int, payload: bytes) -> bytes:
    """``header``'s batch with new ``attributes``, record count and records section:
    offsets, timestamps and producer fields stay; length and CRC are worked out."""
    tail = HEADER_TAIL.pack(
        attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        count,
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
        raw = decompress(header.compression, payload, max_uncompressed)
    attributes = (header.attributes & ~COMPRESSION_MASK) | int(codec)
    return _rebuilt(header, attributes, header.records_count, compress(codec, raw, level))


def stored_size(values: Sequence[bytes | None]) -> int:
    """Bytes of the uncompressed batch :func:`encode_batch` builds for ``values`` (no
    keys), without building it: what a native produce of ``values`` occupies in the log,
    and so what a Kafka reader's ``MinBytes`` counts for it."""
    total = BATCH_HEADER_SIZE
    small = _SMALL
    value_len = _equal_length(values)
    if value_len is not None:
        # Equal values: records of one size per run of offset deltas of one width.
        value_part = len(_zz(value_len)) + value_len
        count = len(values)
        first = 0
        for width in range(1, 6):
            past = min(count, 1 << (7 * width - 1))
            if past > first:
                body_len = 2 + width + len(_ZZ_NULL) + value_part + 1
                total += (past - first) * (len(_zz(body_len)) + body_len)
            first = past
        return total
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
