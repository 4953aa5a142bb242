# -*- test-case-name: tests.native.test_batch_framing -*-
"""A native Fetch answered straight from stored RecordBatch bytes (sans-IO).

What this module does: :func:`frame_batches` turns the raw, already CRC-checked batches
of a committed log read into the body of a type-2 Fetch answer, ``count x (u32 size,
value)``, in one pass over the bytes: each record's varints are stepped over in place and
its value is handed to the final join as a slice of the read buffer, so no record object,
no per-record ``bytes`` and no second encoding pass exists (docs/performance.md, "Native
fetch"). It applies the Fetch's rules itself: records below the requested offset are
skipped, the values total at most the byte cap (but one record is always answered), and
every varint and length is checked against the batch's bounds before it is used.

What it does not do: read files, check CRCs (the log's read did), or handle what needs
the transaction state or the decoder: a batch that is compressed, transactional, a
control batch or compacted (offsets with gaps) makes :func:`frame_batches` answer
``None``, and the caller takes the general path (decoded records) instead.
"""

from __future__ import annotations

import operator
import struct

import attrs

from brokerd.errors import CorruptBatch
from brokerd.native.wire import fixed_records
from brokerd.storage.record.encode import zigzag_varint as _zigzag
from brokerd.storage.record.header import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    MIN_RECORD_SIZE,
    TRANSACTIONAL_MASK,
)

__all__ = ["RAW_OVERHEAD_ALLOWANCE", "FramedValues", "frame_batches", "raw_fetch_budget"]

#: The stored bytes a framed Fetch reads beyond its cap of value bytes: a record's
#: varints and a batch's header make the stored form larger than the values it holds,
#: and a read of just the cap would often fall short of it. The read stays bounded by
#: the cap plus this allowance (and at least the one whole batch holding the offset).
RAW_OVERHEAD_ALLOWANCE = 256 * 1024

#: The attribute bits that send a batch to the general path.
_GENERAL_PATH_BITS = COMPRESSION_MASK | TRANSACTIONAL_MASK | CONTROL_MASK
_U32 = struct.Struct(">I")
#: ``u32`` size prefixes of the common value sizes, looked up rather than packed.
_PREFIX_TABLE_SIZE = 1 << 12
_PREFIXES = tuple(_U32.pack(n) for n in range(_PREFIX_TABLE_SIZE))
_EMPTY = _PREFIXES[0]
#: Zig-zag decoding of one-byte varints.
_UNZIGZAG_1 = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))


@attrs.frozen
class FramedValues:
    """The framed records of a Fetch answer: ``count`` records ``(u32 size, value)`` in
    ``parts`` (slices of the read buffer and size prefixes, joined only when sent),
    their value bytes, and whether the byte cap stopped the framing."""

    parts: list[bytes | memoryview]
    count: int
    value_bytes: int
    full: bool

    def body(self) -> bytes:
        """The joined records (without the count that heads a Fetch answer)."""
        return b"".join(self.parts)


def raw_fetch_budget(max_value_bytes: int) -> int:
    """The stored bytes to read for a Fetch capped at ``max_value_bytes`` of values."""
    return max_value_bytes + min(max_value_bytes, RAW_OVERHEAD_ALLOWANCE)


def frame_batches(data: bytes, offset: int, max_value_bytes: int) -> FramedValues | None:
    """The records at or after ``offset`` in the whole batches of ``data`` (a trailing
    partial batch is ignored), framed as a Fetch answers them; at most ``max_value_bytes``
    of values, but at least one record when one exists. ``None`` when a batch needs the
    general path (see the module docstring). Raises :class:`CorruptBatch` when a record
    does not fit its batch."""
    parts: list[bytes | memoryview] = []
    view = memoryview(data)
    unpack = HEADER.unpack_from
    end = len(data)
    pos = 0
    count = 0
    total = 0
    while end - pos >= BATCH_HEADER_SIZE:
        base, length, _, magic, _crc, attributes, lod, _, _, _, _, _, n = unpack(data, pos)
        size = length + LOG_OVERHEAD
        if size > end - pos:
            break  # the read's last batch was cut by its byte limit
        if magic != MAGIC or length < MIN_BATCH_LENGTH or n < 1:
            raise CorruptBatch(f"batch at offset {base}: invalid header")
        if attributes & _GENERAL_PATH_BITS or n != lod + 1:
            return None
        if base + lod >= offset:
            skip = max(offset - base, 0)
            framed = _frame_uniform(
                data, view, pos + BATCH_HEADER_SIZE, pos + size, n, skip, parts, total,
                max_value_bytes, need_one=not count,
            )
            if framed is None:
                framed = _frame_records(
                    data, view, pos + BATCH_HEADER_SIZE, pos + size, n, skip, parts, total,
                    max_value_bytes, need_one=not count,
                )
            taken, total, complete = framed
            count += taken
            if not complete:
                return FramedValues(parts, count, total, True)
        pos += size
    return FramedValues(parts, count, total, False)


#: Runs of offset deltas whose zig-zag varint has one width: (first, past the last, width).
_DELTA_RUNS = tuple(
    (0 if w == 1 else 1 << (7 * (w - 1) - 1), 1 << (7 * w - 1), w) for w in range(1, 4)
)
#: The bytes of the offset deltas of a run, by (run start, byte within the varint):
#: byte ``k`` of the varint of every delta of the run, in delta order. Built on first use
#: (at most the few runs a batch of ``MAX_UNIFORM_RECORDS`` reaches).
_DELTA_BYTES: dict[tuple[int, int], bytes] = {}
#: Batches of more records take the loop (their offset-delta tables would be large).
MAX_UNIFORM_RECORDS = 1 << 16
_NULL_KEY = 1


def _delta_bytes(first: int, k: int, last: int) -> bytes:
    """Byte ``k`` of the zig-zag varint of each delta in ``first..last - 1`` (one run)."""
    table = _DELTA_BYTES.get((first, k))
    if table is None or len(table) < last - first:
        run_end = next(end for start, end, _ in _DELTA_RUNS if start == first)
        stop = min(run_end, max(last, first + 1024, 2 * (last - first) + first))
        table = bytes(_zigzag(i)[k] for i in range(first, stop))
        _DELTA_BYTES[(first, k)] = table
    return table[: last - first]


def _frame_uniform(
    buf: bytes,
    view: memoryview,
    pos: int,
    end: int,
    n: int,
    skip: int,
    parts: list[bytes | memoryview],
    total: int,
    budget: int,
    *,
    need_one: bool,
) -> tuple[int, int, bool] | None:
    """Frame a batch whose records all share one layout, without a loop per record; None
    when they do not (the caller takes the loop).

    The layout: no key, no headers, attributes 0, a one-byte timestamp delta, and values
    of one length ``L`` (what a native produce of equal values writes, and most
    producers' batches of fixed-size values). Then every record of an offset-delta run
    of one varint width has the same size, so record ``i`` starts at a computable place.
    That is checked, not assumed: the sizes must add up to the batch, and each byte
    position of the record heads and the trailing header count is compared, across
    all records at once, with what the layout says (a strided slice against a constant,
    the offset deltas against their table, the timestamp deltas by their maximum).
    Values are then slices at computed places: per record, only the slice itself."""
    if n > MAX_UNIFORM_RECORDS or end - pos < 8:
        return None
    # The first record's head gives the candidate layout.
    try:
        _length, p = _head_varint(buf, pos)
        if buf[p] != 0 or buf[p + 1] >= 0x80 or buf[p + 2] != 0 or buf[p + 3] != _NULL_KEY:
            return None
        value_len, value_at = _head_varint(buf, p + 4)
    except (IndexError, CorruptBatch):
        return None  # the loop reports the damage
    if value_len < 0 or value_at + value_len >= end or buf[value_at + value_len] != 0:
        return None
    value_part = len(_zigzag(value_len))
    # Per run of one offset-delta width: (first delta, past the last, width, record
    # start, record size, the record's length varint).
    runs: list[tuple[int, int, int, int, int, bytes]] = []
    at = pos
    for first, past, width in _DELTA_RUNS:
        if first >= n:
            break
        last = min(past, n)
        # Attributes, timestamp delta, offset delta, null key, value, header count.
        body = 2 + width + 1 + value_part + value_len + 1
        length_bytes = _zigzag(body)
        size = len(length_bytes) + body
        runs.append((first, last, width, at, size, length_bytes))
        at += (last - first) * size
    if at != end or runs[-1][1] != n:
        return None
    for first, last, width, start, size, length_bytes in runs:
        count = last - first
        stop = start + count * size
        h = 0
        for byte in length_bytes:
            if buf[start + h : stop : size] != _repeat(byte, count):
                return None
            h += 1
        zeros = _repeat(0, count)
        if buf[start + h : stop : size] != zeros:  # attributes
            return None
        if max(buf[start + h + 1 : stop : size]) >= 0x80:  # timestamp delta, one byte
            return None
        h += 2
        for k in range(width):
            if buf[start + h + k : stop : size] != _delta_bytes(first, k, last):
                return None
        h += width
        for byte in (_NULL_KEY, *_zigzag(value_len)):
            if buf[start + h : stop : size] != _repeat(byte, count):
                return None
            h += 1
        if buf[start + size - 1 : stop : size] != zeros:  # no headers
            return None
    # Every record checks out: take them from ``skip`` on, within the budget.
    wanted = n - skip
    if value_len and total + wanted * value_len > budget:
        fit = max(0, (budget - total) // value_len)
        if fit == 0 and need_one:
            fit = 1
        wanted = min(wanted, fit)
    prefix = prefixes_for(value_len)
    taken = 0
    for first, last, _width, start, size, _length_bytes in runs:
        if taken == wanted:
            break
        lo = max(first, skip)
        if lo >= last:
            continue
        hi = min(last, lo + wanted - taken)
        region = view[start + (lo - first) * size : start + (hi - first) * size]
        record = fixed_records(size - 1 - value_len, value_len, 1)
        # Each record unpacks to its value (in C); the prefix goes between them.
        parts.append(prefix + prefix.join(map(_first, record.iter_unpack(region))))
        taken += hi - lo
    total += taken * value_len
    return taken, total, taken == n - skip


_first = operator.itemgetter(0)


def _repeat(byte: int, count: int) -> bytes:
    return bytes((byte,)) * count


def prefixes_for(value_len: int) -> bytes:
    """The ``u32`` size prefix of a value of ``value_len`` bytes."""
    return _PREFIXES[value_len] if value_len < _PREFIX_TABLE_SIZE else _U32.pack(value_len)


def _head_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint of a record head (bounds checked by the caller's IndexError)."""
    u = buf[pos]
    if u < 0x80:
        return _UNZIGZAG_1[u], pos + 1
    return _varint(buf, pos)


def _frame_records(
    buf: bytes,
    view: memoryview,
    pos: int,
    end: int,
    n: int,
    skip: int,
    parts: list[bytes | memoryview],
    total: int,
    budget: int,
    *,
    need_one: bool,
) -> tuple[int, int, bool]:
    """Frame the ``n`` records filling ``buf[pos:end]``, the first ``skip`` stepped over;
    returns ``(records framed, value bytes so far, complete)``. One-byte and two-byte
    varints are read inline: they are every length of records below 8 KiB."""
    if n * MIN_RECORD_SIZE > end - pos:
        raise CorruptBatch(f"{n} records cannot fit in {end - pos} bytes")
    unzz = _UNZIGZAG_1
    prefixes = _PREFIXES
    table = _PREFIX_TABLE_SIZE
    append = parts.append
    taken = 0
    try:
        for _ in range(n):
            u = buf[pos]
            if u < 0x80:
                length = unzz[u]
                pos += 1
            elif buf[pos + 1] < 0x80:
                u = (u & 0x7F) | (buf[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = _varint(buf, pos)
            record_end = pos + length
            if length < MIN_RECORD_SIZE - 1 or record_end > end:
                raise CorruptBatch(f"record length {length} out of bounds")
            if skip:
                skip -= 1
                pos = record_end
                continue
            # Attributes (one byte), then the timestamp and offset deltas, stepped over.
            p = pos + 1
            while buf[p] >= 0x80:
                p += 1
            p += 1
            while buf[p] >= 0x80:
                p += 1
            p += 1
            u = buf[p]
            if u == 1:  # a null key, the common case
                p += 1
            else:
                if u < 0x80:
                    key_len = unzz[u]
                    p += 1
                else:
                    key_len, p = _varint(buf, p)
                if key_len > 0:
                    p += key_len
            u = buf[p]
            if u < 0x80:
                value_len = unzz[u]
                p += 1
            elif buf[p + 1] < 0x80:
                u = (u & 0x7F) | (buf[p + 1] << 7)
                value_len = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                value_len, p = _varint(buf, p)
            if value_len == -1:
                # A null value is sent as size 0, and (as in a decoded read) costs nothing
                # against the cap.
                append(_EMPTY)
            else:
                stop = p + value_len
                if value_len < 0 or stop > record_end:
                    raise CorruptBatch(f"value length {value_len} out of bounds")
                if total + value_len > budget and (taken or not need_one):
                    return taken, total, False
                append(prefixes[value_len] if value_len < table else _U32.pack(value_len))
                append(view[p:stop])
                total += value_len
            taken += 1
            pos = record_end
    except IndexError:
        raise CorruptBatch("record runs past its batch") from None
    if pos != end:
        raise CorruptBatch(f"records end at {pos}, batch at {end}")
    return taken, total, True


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint of up to 5 bytes at ``pos``: ``(value, position after)``."""
    shift = 0
    u = 0
    for _ in range(5):
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return (u >> 1) ^ -(u & 1), pos
        shift += 7
    raise CorruptBatch("varint longer than 5 bytes")
