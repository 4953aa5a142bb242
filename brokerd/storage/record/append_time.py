# -*- test-case-name: tests.storage.record.test_append_time -*-
"""LogAppendTime: the broker's append time written into client RecordBatches.

A topic with ``message.timestamp.type=LogAppendTime`` keeps the broker's clock, not the
producer's, as its record timestamps. As Kafka does, each batch is rewritten in its
header only: the timestamp-type attribute bit is set, ``max_timestamp`` becomes the
append time and the CRC-32C (which covers the attributes and timestamps) is recomputed.
Consumers then report that time for every record of the batch. The records themselves
are not touched (no decompression, no per-record work), and neither is ``base_timestamp``.

What it does not do: decide when to stamp (the write job does, for topics configured so)
or anything else with the batch. Pure: no I/O, no Twisted.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import attrs
import crc32c

from brokerd.storage.record.header import CRC_START, TIMESTAMP_TYPE_MASK, BatchHeader

__all__ = ["stamp_log_append_time"]

# Where the fields it rewrites lie in a batch (the header layout is record/header.py's).
_CRC_AT = CRC_START - 4
_ATTRIBUTES_AT = CRC_START
_MAX_TIMESTAMP_AT = CRC_START + 2 + 4 + 8
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")


def stamp_log_append_time(
    data: bytes, headers: Sequence[BatchHeader], now_ms: int
) -> tuple[bytes, list[BatchHeader]]:
    """``data`` (validated batches described by ``headers``) with every batch stamped
    with ``now_ms`` as its LogAppendTime, and the matching new headers."""
    buf = bytearray(data)
    out: list[BatchHeader] = []
    pos = 0
    for header in headers:
        attributes = header.attributes | TIMESTAMP_TYPE_MASK
        _I16.pack_into(buf, pos + _ATTRIBUTES_AT, attributes)
        _I64.pack_into(buf, pos + _MAX_TIMESTAMP_AT, now_ms)
        crc = int(crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + header.size]))
        _U32.pack_into(buf, pos + _CRC_AT, crc)
        out.append(attrs.evolve(header, attributes=attributes, max_timestamp=now_ms, crc=crc))
        pos += header.size
    return bytes(buf), out
