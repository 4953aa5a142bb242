# -*- test-case-name: tests.storage.record.test_decode_batches -*-
"""Decoding the records of RecordBatch v2 batches, for every codec clients use.

What it does: decodes every record of one batch (:func:`decode_records`, CRC checked,
compacted batches allowed) and decodes a run of stored batches straight into records
within a value budget (:func:`decode_run`, the native fetch path: uncompressed records
are parsed in place, and only the records a fetch returns become objects). Decompressed
sizes are bounded (``compression.py``).

What it does not do: build batches (``encode.py``), validate produce payloads
(``header.py``), any I/O.
"""

from __future__ import annotations

from typing import Protocol

import crc32c

from brokerd.errors import CorruptBatch
from brokerd.storage.record.compression import Buffer, Compression, decompress
from brokerd.storage.record.header import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_START,
    HEADER,
    INT64_MAX,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    MIN_RECORD_SIZE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    check_header,
    crc_ok,
    header_reason,
    read_header,
)
from brokerd.storage.types import Record

__all__ = [
    "RunResult",
    "SkipBatches",
    "decode_records",
    "decode_records_sized",
    "decode_run",
]

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
    if not crc_ok(view, 0, header):
        raise CorruptBatch(f"batch at offset {header.base_offset}: CRC-32C mismatch")
    codec = header.compression
    fixed_ts = header.max_timestamp if header.log_append_time else None
    if codec == Compression.NONE:
        # Records are parsed where they lie in a bytes object; other buffers are copied
        # once because indexing bytes is what makes the parser fast.
        buf = batch if isinstance(batch, bytes) else bytes(view[: header.size])
        start, end = BATCH_HEADER_SIZE, header.size
    else:
        buf = decompress(codec, view[BATCH_HEADER_SIZE : header.size], max_uncompressed)
        start, end = 0, len(buf)
    records, value_bytes, _ = _parse_records(
        buf, start, end, header.records_count, header.base_offset, header.base_timestamp, fixed_ts
    )
    return records, value_bytes



class SkipBatches(Protocol):
    """A committed-only read's filter. Implemented by
    :class:`~brokerd.storage.log.txns.CommittedFilter`; a Protocol because ``record/`` sits
    below ``log/``."""

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
    unpack = HEADER.unpack_from
    view = memoryview(buf)
    crc = crc32c.crc32c
    pos = start
    expected = expected_offset
    while end - pos >= BATCH_HEADER_SIZE:
        base, length, _, magic, stored_crc, attributes, lod, base_ts, max_ts, pid, _, _, count = (
            unpack(buf, pos)
        )
        codec = attributes & COMPRESSION_MASK
        if (
            length < MIN_BATCH_LENGTH
            or magic != MAGIC
            or count < 1
            or count > lod + 1
            or (not codec and count * MIN_RECORD_SIZE > length - MIN_BATCH_LENGTH)
        ):
            reason = header_reason(buf, pos, stored=True)
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
            if attributes & TRANSACTIONAL_MASK and committed.skips(
                bool(attributes & CONTROL_MASK), pid, base
            ):
                pos += size
                expected = base + lod + 1
                continue
        if base + lod >= min_offset:
            fixed_ts = max_ts if attributes & TIMESTAMP_TYPE_MASK else None
            parse_from: tuple[Buffer, int, int]
            try:
                if codec == Compression.NONE:
                    parse_from = (buf, pos + BATCH_HEADER_SIZE, pos + size)
                else:
                    raw = decompress(
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
