"""Byte layouts of the native protocol, shared by the server and client codecs.

What this module does: holds the ``struct`` formats of the pinned wire format, and the
table of request layouts, :data:`REQUEST_LAYOUTS`: for each request type, whether a
topic follows the type, which fixed-size fields come next (name and width), whether
produce records follow, the message class they make, and the range check the server's
decoder applies to them. The decoder (``server_codec``) and the request encoder
(``client_codec``) both walk this one table, so a request type is described once.
Also the two encoders of shared pieces: a ``u16``-prefixed string and a range check.

What it does not do: decode a byte stream or build responses (the codecs do), or define
the messages themselves (``messages``). The format is specified in ``docs/protocol.md``.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable

import attrs

from brokerd.native.messages import (
    MAX_PARTITIONS,
    CreateTopicRequest,
    ErrorCode,
    FetchRequest,
    ListOffsetsRequest,
    ListTopicsRequest,
    LongPollFetchRequest,
    ProduceRequest,
    Request,
    RequestType,
)

__all__ = [
    "EMPTY_RECORD",
    "ERROR_HEAD",
    "LAYOUT_OF_CLASS",
    "MAX_U16",
    "MAX_U32",
    "MAX_U64",
    "OFFSET_SIZE",
    "OK_U32",
    "OK_U64",
    "OK_U64_U32",
    "OK_U64_U64",
    "REQUEST_LAYOUTS",
    "U16",
    "U32",
    "U64",
    "Field",
    "RequestLayout",
    "check_range",
    "fixed_records",
    "string_bytes",
]

U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
U64 = struct.Struct(">Q")
ERROR_HEAD = struct.Struct(">HH")  # error code, message length
OK_U64 = struct.Struct(">HQ")  # error = 0, one u64
OK_U64_U64 = struct.Struct(">HQQ")  # error = 0, two u64
OK_U32 = struct.Struct(">HI")  # error = 0, one u32
OK_U64_U32 = struct.Struct(">HQI")  # error = 0, u64, u32
OFFSET_SIZE = struct.Struct(">QI")  # long-poll record header: offset, value size
EMPTY_RECORD = b"\x00\x00\x00\x00"  # a null value (tombstone) is sent as size 0

MAX_U16 = 0xFFFF
MAX_U32 = 0xFFFFFFFF
MAX_U64 = 0xFFFFFFFFFFFFFFFF

_WIDTH_LIMITS = {"H": MAX_U16, "I": MAX_U32, "Q": MAX_U64}

#: What a layout's check returns for fields it refuses: the code and a message.
Refusal = tuple[ErrorCode, str]


@attrs.frozen
class Field:
    """One fixed-size unsigned field: the message attribute it carries and its struct
    format character (``H`` u16, ``I`` u32, ``Q`` u64)."""

    name: str
    code: str

    @property
    def maximum(self) -> int:
        return _WIDTH_LIMITS[self.code]


def _u32(name: str) -> Field:
    return Field(name, "I")


def _u64(name: str) -> Field:
    return Field(name, "Q")


@attrs.frozen
class RequestLayout:
    """How one request type sits on the wire after its ``u16 type``: an optional
    ``u16``-prefixed topic, then ``fields`` (big-endian), then, for Produce only,
    ``count`` records of ``u32 size, value``."""

    request_type: RequestType
    #: Built as ``message(topic, *fields)`` (``message(*fields)`` without a topic);
    #: a layout with records builds its message itself.
    message: Callable[..., Request]
    fields: tuple[Field, ...]
    has_topic: bool = True
    has_records: bool = False
    #: Checks the decoded field values; a refusal is answered, the connection kept.
    check: Callable[[tuple[int, ...]], Refusal | None] | None = None
    fixed: struct.Struct = attrs.field(init=False)

    @fixed.default
    def _fixed_struct(self) -> struct.Struct:
        return struct.Struct(">" + "".join(f.code for f in self.fields))


def _partitions_in_range(values: tuple[int, ...]) -> Refusal | None:
    (partitions,) = values
    if 1 <= partitions <= MAX_PARTITIONS:
        return None
    return ErrorCode.INVALID_PARTITIONS, f"partitions must be 1..{MAX_PARTITIONS}, not {partitions}"


#: Every request type the server knows; any other type is fatal (its length is unknowable).
REQUEST_LAYOUTS: dict[int, RequestLayout] = {
    layout.request_type: layout
    for layout in (
        RequestLayout(
            RequestType.PRODUCE,
            ProduceRequest,
            (_u32("partition"), _u32("count")),
            has_records=True,
        ),
        RequestLayout(RequestType.FETCH, FetchRequest, (_u32("partition"), _u64("offset"))),
        RequestLayout(
            RequestType.CREATE_TOPIC,
            CreateTopicRequest,
            (_u32("partitions"),),
            check=_partitions_in_range,
        ),
        RequestLayout(RequestType.LIST_OFFSETS, ListOffsetsRequest, (_u32("partition"),)),
        RequestLayout(RequestType.LIST_TOPICS, ListTopicsRequest, (), has_topic=False),
        RequestLayout(
            RequestType.LONG_POLL_FETCH,
            LongPollFetchRequest,
            (
                _u32("partition"),
                _u64("offset"),
                _u32("max_wait_ms"),
                _u32("min_bytes"),
                _u32("max_bytes"),
            ),
        ),
    )
}

#: The same table by message class, for encoding.
LAYOUT_OF_CLASS: dict[object, RequestLayout] = {
    layout.message: layout for layout in REQUEST_LAYOUTS.values()
}


def check_range(name: str, value: int, limit: int) -> int:
    """Return ``value`` if it fits ``0..limit``, else raise ``ValueError``."""
    if not 0 <= value <= limit:
        raise ValueError(f"{name} {value} is outside 0..{limit}")
    return value


def string_bytes(text: str, what: str = "topic") -> bytes:
    """``u16 length, UTF-8 bytes``: every string of the native layouts (topics, group
    ids, config names and values); ``what`` names it in the error of one too long."""
    raw = text.encode("utf-8")
    check_range(f"{what} length", len(raw), MAX_U16)
    return U16.pack(len(raw)) + raw


@functools.lru_cache(maxsize=64)
def fixed_records(before: int, value_len: int, after: int) -> struct.Struct:
    """The layout of a record of fixed size whose value lies between ``before`` and
    ``after`` other bytes: ``iter_unpack`` walks a run of them in C, one value each
    (the bulk paths of both codecs, once they checked every record has this size)."""
    return struct.Struct(f"{before}x{value_len}s{after}x")
