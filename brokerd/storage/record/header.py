# -*- test-case-name: tests.storage.record.test_header -*-
"""The RecordBatch v2 (magic 2) header: its fields, its checks, and walks over batches.

What it does:

- reads the 61-byte header (:func:`read_header`, :class:`BatchHeader`) and says why one
  cannot start a valid batch (:func:`check_header`);
- validates the batches of a produce payload (:func:`parse_batches`) without decoding
  records: every length is checked before anything is sliced, and each CRC-32C;
- walks stored log bytes for valid batches (:func:`scan_batches`, used by recovery;
  :func:`verify_run`, the read path's guard, so a corrupt batch is never served);
- reads the codec of each batch of a payload leniently (:func:`batch_codecs`, for the
  protocol's version rules before anything is validated);
- rewrites the two header fields a broker owns (:func:`stamp_base_offset`).

What it does not do: build batches (``encode.py``), decode records (``decode.py``),
compress (``compression.py``), any I/O or knowledge of segments, and no Twisted. The byte
layout is that of Apache Kafka's ``DefaultRecordBatch``; the fields are listed at
:class:`BatchHeader`.
"""

from __future__ import annotations

import struct

import attrs
import crc32c

from brokerd.errors import CorruptBatch, InvalidRecord, RecordTooLarge
from brokerd.storage.record.compression import Buffer, Compression

__all__ = [
    "BATCH_HEADER_SIZE",
    "CRC_START",
    "LOG_OVERHEAD",
    "MAGIC",
    "MIN_BATCH_LENGTH",
    "BatchHeader",
    "ScanResult",
    "batch_codecs",
    "check_header",
    "crc_ok",
    "header_reason",
    "parse_batches",
    "read_header",
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

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20


# Header layout, big-endian: base_offset, batch_length, partition_leader_epoch, magic, crc,
# attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
# producer_epoch, base_sequence, records_count.
HEADER = struct.Struct(">qiibIhiqqqhii")
assert HEADER.size == BATCH_HEADER_SIZE
_STAMP = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
# The part of the header after the CRC: attributes .. records_count.
HEADER_TAIL = struct.Struct(">hiqqqhii")


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
        return self.attributes & COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def log_append_time(self) -> bool:
        """True when the timestamp type is LogAppendTime (max_timestamp is the time)."""
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Unpack the header at ``pos``; the caller guarantees 61 bytes are there."""
    return BatchHeader(*HEADER.unpack_from(buf, pos))


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


def crc_ok(buf: Buffer, pos: int, header: BatchHeader) -> bool:
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
        if not crc_ok(data, pos, header):
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
        if verify_crc and not crc_ok(buf, pos, header):
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



def header_reason(buf: Buffer, pos: int, *, stored: bool = False) -> str:
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
    unpack = HEADER.unpack_from
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
                not attributes & COMPRESSION_MASK
                and count * MIN_RECORD_SIZE > length - MIN_BATCH_LENGTH
            )
        ):
            return pos, expected, header_reason(buf, pos, stored=True)
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



def batch_codecs(records: Buffer) -> list[int]:
    """The compression codec of each batch in ``records``, from the headers' length and
    attributes only; stops quietly at anything malformed (validating is
    :func:`parse_batches`' job, which may come later)."""
    codecs: list[int] = []
    pos = 0
    while pos + _ATTRIBUTES_END <= len(records):
        (length,) = _LENGTH.unpack_from(records, pos + LOG_OVERHEAD - 4)
        (attributes,) = _ATTRIBUTES.unpack_from(records, pos + CRC_START)
        codecs.append(attributes & COMPRESSION_MASK)
        if length <= 0:
            break
        pos += LOG_OVERHEAD + length
    return codecs


_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
#: The attributes field ends here: what batch_codecs needs of each header.
_ATTRIBUTES_END = CRC_START + 2
