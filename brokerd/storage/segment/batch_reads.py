"""Reading batches out of one segment for :class:`~brokerd.storage.log.partition_log.PartitionLog`.

What it does: raw reads for a Kafka fetch (:func:`read_raw`, and :func:`stored_from`, which
hands out checked bytes by reference for ``os.sendfile`` or a TLS connection's bounded
chunks: bytes not yet checked are checked first by :func:`verify_stored`, a batch or
:data:`VERIFY_CHUNK` at a time, so a read never holds more than that), record decoding for a
native fetch (:func:`decode_from`) and the record-level part of an offset-for-timestamp
lookup (:func:`find_timestamp`). No batch is served unchecked: a read checks the CRC of the
batches it returns unless a :class:`~brokerd.storage.segment.stored.VerifiedRanges` says they were
checked already (at append, or by an earlier read); damage at the start of a read raises
:class:`CorruptStoredBatch` naming the segment file and byte; damage after some good batches
ends the read there (and is logged), so the next read reports it.

For transactions: :func:`cut_at_offset` and :func:`batches_end` bound a read_committed
Kafka fetch's bytes by the LSO (batch headers only), and a committed-only decoding read
takes a :class:`~brokerd.storage.log.txns.CommittedFilter` (the native fetch).

What it does not do: choose the segment, check offsets against the high watermark, or
pin segments (the caller does all three), and nothing with Twisted.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from brokerd.errors import CorruptBatch, CorruptStoredBatch, StorageError
from brokerd.storage.record.decode import RunResult, SkipBatches, decode_records, decode_run
from brokerd.storage.record.header import BATCH_HEADER_SIZE, LOG_OVERHEAD, BatchHeader, verify_run
from brokerd.storage.segment.batch_positions import BatchPositions
from brokerd.storage.segment.segment import Segment
from brokerd.storage.segment.stored import StoredSpan, VerifiedRanges
from brokerd.storage.types import Record

#: Builds the error for an offset the log no longer holds (``LogState.out_of_range``).
OutOfRange = Callable[[int, int], Exception]

__all__ = [
    "LEARN_AHEAD_BATCHES",
    "MAX_DECODED_BATCH_BYTES",
    "MAX_STORED_BATCH_BYTES",
    "READ_CHUNK",
    "VERIFY_CHUNK",
    "Located",
    "batches_end",
    "cut_at_offset",
    "decode_from",
    "find_timestamp",
    "headers_from",
    "learn_ahead",
    "published_segments",
    "raw_size",
    "read_checked",
    "read_raw",
    "records_from",
    "stored_from",
    "verify_stored",
]

log = logging.getLogger("brokerd.storage")

#: A stored batch larger than this is treated as damage by the read path: produce limits
#: keep real batches far smaller, and a flipped length bit must not make a fetch allocate
#: a whole segment.
MAX_STORED_BATCH_BYTES = 64 * 1024 * 1024
#: Bound of one batch's decompressed records on the decoding read path.
MAX_DECODED_BATCH_BYTES = 64 * 1024 * 1024
#: Bytes read at a time by a decoding read (:func:`decode_from`).
READ_CHUNK = 256 * 1024
#: Bytes read at a time by :func:`verify_stored` (a larger batch is read whole, alone).
VERIFY_CHUNK = 1024 * 1024
#: Batch headers a Kafka read walks past what it returns, so that a sequential reader's
#: next fetches find their batches in memory (``BatchPositions``). Each is a header pread
#: of bytes the reader is about to fetch; the walk stops sooner at the published end.
LEARN_AHEAD_BATCHES = 16

_BASE_AND_LENGTH = struct.Struct(">qi")


class Located(NamedTuple):
    """Where a read from ``offset`` starts, in one snapshot of a log's published state
    (``LogState.locate``): ``segments[segment_index]`` holds the offset; the published end
    is byte ``active_size`` of the segment based at ``active_base``. A named tuple, not an attrs
    class: every read builds one, and a tuple is the cheapest frozen value to build."""

    offset: int
    high_watermark: int
    active_base: int
    active_size: int
    log_start_offset: int
    segments: tuple[Segment, ...]
    segment_index: int
    #: The last stable offset, never below the log start.
    last_stable_offset: int


def published_segments(at: Located) -> Iterator[tuple[Segment, int]]:
    """The segments a read from ``at`` walks, from the one holding its offset up to the
    active one, each with its published end (its size; the published size of the active
    one). The caller pins each before reading it."""
    vbase, vpos = at.active_base, at.active_size
    for segment in at.segments[at.segment_index :]:
        if segment.base_offset > vbase:
            return
        yield segment, (vpos if segment.base_offset == vbase else segment.size)
_LAST_DELTA = struct.Struct(">i")
_LAST_DELTA_AT = 23


def cut_at_offset(data: bytes, stop: int) -> bytes:
    """``data`` (stored batches, the last maybe partial) up to the first batch whose base
    offset is at or past ``stop``."""
    pos = 0
    while len(data) - pos >= LOG_OVERHEAD:
        base, length = _BASE_AND_LENGTH.unpack_from(data, pos)
        if base >= stop:
            return data[:pos]
        pos += LOG_OVERHEAD + length
    return data


def batches_end(data: bytes, default: int) -> int:
    """The offset after the last batch whose header is in ``data``; ``default`` if none."""
    pos = 0
    end = default
    while len(data) - pos >= BATCH_HEADER_SIZE:
        base, length = _BASE_AND_LENGTH.unpack_from(data, pos)
        end = base + _LAST_DELTA.unpack_from(data, pos + _LAST_DELTA_AT)[0] + 1
        pos += LOG_OVERHEAD + length
    return end


def raw_size(segment: Segment, pos: int, header: BatchHeader, limit: int, max_bytes: int) -> int:
    """Bytes a raw read from the batch at ``pos`` returns at most: that whole batch at
    least, else ``max_bytes``, never past ``limit``. A first batch too large to be real
    raises :class:`CorruptStoredBatch`."""
    first = header.size
    if first > MAX_STORED_BATCH_BYTES:
        raise CorruptStoredBatch(
            f"{segment.log_path}: batch at byte {pos} claims {first} bytes; treating it as damage"
        )
    return min(limit - pos, max(first, max_bytes))


def read_checked(
    segment: Segment, pos: int, header: BatchHeader, limit: int, max_bytes: int
) -> tuple[bytes, int]:
    """:func:`read_raw`'s bytes, and how many of them are whole batches that passed the
    check (the rest, if any, is a trailing batch cut by ``max_bytes``)."""
    data = segment.pread(pos, raw_size(segment, pos, header, limit, max_bytes))
    valid_end, _, reason = verify_run(
        data, 0, len(data), header.base_offset, segment.next_offset
    )
    if valid_end == 0:
        raise CorruptStoredBatch(
            f"{segment.log_path}: batch at offset {header.base_offset} (byte {pos}) "
            f"fails validation: {reason or 'truncated'}"
        )
    if reason is not None:
        # Serve the good batches before the damage; the next fetch reports it.
        log.error("%s: damaged batch at byte %d: %s", segment.log_path, pos + valid_end, reason)
        return data[:valid_end], valid_end
    return data, valid_end


def read_raw(segment: Segment, pos: int, header: BatchHeader, limit: int, max_bytes: int) -> bytes:
    """Bytes from the batch at ``pos`` (``header`` is its header) up to ``limit``: that
    whole batch at least, else at most ``max_bytes`` (the last batch may be cut). Damage at
    ``pos`` raises :class:`StorageError`; damage further on ends the data before it."""
    return read_checked(segment, pos, header, limit, max_bytes)[0]


def stored_from(
    at: Located,
    max_bytes: int,
    verified: VerifiedRanges,
    out_of_range: Callable[[], Exception],
    ahead: BatchPositions | None = None,
) -> bytes | StoredSpan:
    """A Kafka fetch's raw read from ``at``, never past the published end: the bytes
    :func:`read_raw` would return, as a :class:`StoredSpan` (holding the segment's pin).
    Bytes no range of ``verified`` covers are checked first, in bounded pieces
    (:func:`verify_stored`, which marks them in ``verified``); damage after some good
    batches ends the span there. ``b""`` when no batch holds the offset or a later one.
    With ``ahead``, the positions of the batch found and of up to
    :data:`LEARN_AHEAD_BATCHES` after it are remembered there (:func:`learn_ahead`)."""
    for segment, limit in published_segments(at):
        if not segment.pin():
            raise out_of_range()
        handed_out = False
        try:
            found = segment.scan.find_batch(at.offset, limit)
            if found is not None:
                pos, header = found
                size = raw_size(segment, pos, header, limit, max_bytes)
                if ahead is not None:
                    learn_ahead(ahead, segment, pos, header, limit)
                if not verified.covers(segment, pos, pos + size):
                    size = verify_stored(segment, pos, header, limit, size, verified)
                handed_out = True
                return StoredSpan(segment, pos, size)
        finally:
            if not handed_out:
                segment.unpin()
    return b""


def verify_stored(
    segment: Segment,
    pos: int,
    header: BatchHeader,
    limit: int,
    size: int,
    verified: VerifiedRanges,
) -> int:
    """Check the batches of ``segment`` from ``pos`` (the batch ``header``) until they
    cover ``[pos, pos + size)``, reading at most :data:`VERIFY_CHUNK` at a time (or one
    larger batch alone), and mark each good run in ``verified``. The batch that crosses
    ``pos + size`` is checked whole, so the range handed out is covered. Returns how much
    of ``size`` may be handed out: all of it, or the good batches before damage (logged;
    the next read reports it). Damage at ``pos`` raises :class:`CorruptStoredBatch`."""
    at, expected, stop = pos, header.base_offset, pos + size
    while at < stop:
        chunk = segment.pread(at, min(VERIFY_CHUNK, limit - at))
        end, following, reason = verify_run(chunk, 0, len(chunk), expected, segment.next_offset)
        if end == 0 and reason is None:
            # Not one whole batch in the chunk: a batch larger than VERIFY_CHUNK.
            need = (
                LOG_OVERHEAD + _BASE_AND_LENGTH.unpack_from(chunk, 0)[1]
                if len(chunk) >= LOG_OVERHEAD else 0
            )
            if need <= len(chunk) or need > MAX_STORED_BATCH_BYTES or at + need > limit:
                reason = f"batch of {need or '?'} bytes"
            else:
                chunk = segment.pread(at, need)
                end, following, reason = verify_run(
                    chunk, 0, len(chunk), expected, segment.next_offset
                )
                if end == 0:
                    reason = reason or "truncated batch"
        del chunk
        if end:
            verified.mark(segment, at, at + end)
            at += end
            expected = following
        if reason is not None:
            if at == pos:
                raise CorruptStoredBatch(
                    f"{segment.log_path}: batch at offset {header.base_offset} (byte {pos}) "
                    f"fails validation: {reason}"
                )
            # Serve the good batches before the damage; the next fetch reports it.
            log.error("%s: damaged batch at byte %d: %s", segment.log_path, at, reason)
            return min(at - pos, size)
    return size


def learn_ahead(
    ahead: BatchPositions, segment: Segment, pos: int, header: BatchHeader, limit: int
) -> None:
    """Remember in ``ahead`` the batch at ``pos`` (``header``) and up to
    :data:`LEARN_AHEAD_BATCHES` after it, before ``limit``, unless the next one is known
    already. Damage ends the walk quietly: the read that reaches it reports it."""
    nxt = header.last_offset + 1
    if ahead.find(segment, nxt) is not None:
        return
    ahead.add(segment, header.base_offset, header.last_offset, pos, header.size)
    try:
        walked = segment.scan.headers_from(pos + header.size, limit, nxt)
        for count, (hpos, h) in enumerate(walked, 1):
            ahead.add(segment, h.base_offset, h.last_offset, hpos, h.size)
            if count >= LEARN_AHEAD_BATCHES:
                break
    except StorageError:
        return


def decode_from(
    segment: Segment,
    pos: int,
    expected: int,
    limit: int,
    offset: int,
    max_value_bytes: int,
    out: list[Record],
    total: int,
    committed: SkipBatches | None = None,
) -> tuple[bool, int]:
    """Decode batches from ``pos`` (the batch starting at offset ``expected``) to
    ``limit`` into ``out``, skipping records below ``offset``; ``total`` is the value
    bytes already in ``out``. Returns ``(stop, total)``: ``stop`` is True when the value
    budget is full or damage ended the read (an error if nothing was read yet)."""

    def decode(chunk: bytes) -> RunResult:
        return decode_run(
            chunk,
            0,
            len(chunk),
            expected_offset=expected,
            min_offset=offset,
            max_value_bytes=max_value_bytes,
            total=total,
            out=out,
            max_uncompressed=MAX_DECODED_BATCH_BYTES,
            end_offset=segment.next_offset,
            committed=committed,
        )

    while pos < limit:
        run = decode(segment.pread(pos, min(READ_CHUNK, limit - pos)))
        total = run.total
        if run.status == "full":
            return True, total
        if run.status == "damage":
            _damage(segment, pos + run.pos, run.reason or "invalid batch", out)
            return True, total
        if run.pos == 0:
            # Not one whole batch in the chunk: it is bigger than READ_CHUNK.
            need = run.need
            if need == 0 or need > MAX_STORED_BATCH_BYTES or pos + need > limit:
                _damage(segment, pos, f"batch of {need or '?'} bytes", out)
                return True, total
            run = decode(segment.pread(pos, need))
            total = run.total
            if run.status == "full":
                return True, total
            if run.status == "damage" or run.pos == 0:
                _damage(segment, pos, run.reason or "truncated batch", out)
                return True, total
        pos += run.pos
        expected = run.next_offset
    return False, total


def _damage(segment: Segment, pos: int, reason: str, out: list[Record]) -> None:
    """Stop a decoding read at damage: an error if nothing was read yet."""
    message = f"{segment.log_path}: damaged batch at byte {pos}: {reason}"
    log.error("%s", message)
    if not out:
        raise CorruptStoredBatch(message)


def find_timestamp(
    segment: Segment, timestamp: int, limit: int, high_watermark: int
) -> tuple[int, int] | None:
    """The first ``(offset, timestamp)`` in ``segment`` below ``limit`` whose record
    timestamp is >= ``timestamp``, or None if the segment has none. A batch that cannot be
    decoded answers with its base offset and max timestamp (its header is trusted)."""
    found = segment.scan.find_timestamp(timestamp, limit)
    if found is None:
        return None
    pos, header = found
    try:
        batch = segment.pread(pos, header.size)
        records = decode_records(batch, max_uncompressed=MAX_DECODED_BATCH_BYTES)
    except (CorruptBatch, StorageError):
        return header.base_offset, header.max_timestamp
    for record in records:
        if record.timestamp >= timestamp and record.offset < high_watermark:
            return record.offset, record.timestamp
    return header.base_offset, header.max_timestamp


def records_from(
    at: Located,
    max_value_bytes: int,
    out_of_range: OutOfRange,
    committed: SkipBatches | None = None,
) -> list[Record]:
    """The records of a native fetch from ``at`` on, across segments, never past the
    published end. A compacted log has gaps: the first record may be past the offset.
    With ``committed``, only committed records, up to its ``stop``."""
    offset = at.offset
    out: list[Record] = []
    total = 0
    first_segment = True
    for segment, limit in published_segments(at):
        if not segment.pin():
            if out:
                break
            raise out_of_range(offset, at.high_watermark)
        try:
            pos, expected = 0, segment.base_offset
            if first_segment:
                found = segment.scan.find_batch(offset, limit)
                if found is None:
                    pos = limit
                else:
                    pos, expected = found[0], found[1].base_offset
            first_segment = False
            full, total = decode_from(
                segment, pos, expected, limit, offset, max_value_bytes, out, total, committed
            )
        finally:
            segment.unpin()
        if full:
            break
    return out


def headers_from(at: Located, out_of_range: OutOfRange) -> list[BatchHeader]:
    """Headers of the published batches from the one holding ``at``'s offset on: header
    reads only (producer-state replay)."""
    offset, high_watermark = at.offset, at.high_watermark
    out: list[BatchHeader] = []
    for segment, limit in published_segments(at):
        if offset >= high_watermark:
            break
        if not segment.pin():
            raise out_of_range(offset, high_watermark)
        try:
            found = segment.scan.find_batch(offset, limit)
            if found is not None:
                for _pos, header in segment.scan.headers_from(found[0], limit):
                    out.append(header)
                    offset = header.last_offset + 1
        finally:
            segment.unpin()
    return out
