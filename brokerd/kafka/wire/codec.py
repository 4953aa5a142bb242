# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Sans-IO Kafka wire codec: framing, headers, primitives and a small schema engine.

What it does:

* :class:`FrameDecoder` splits a byte stream into ``int32 size`` + payload frames, and
  refuses a negative or oversized size as soon as its four bytes arrive, before any of
  the payload is buffered.
* :class:`Reader` reads the protocol's primitive types (big-endian ints, ``int16``-length
  strings, ``int32``-length bytes, ``int32``-count arrays). Every length and count is
  checked against the bytes that remain **before** anything is allocated, in this one
  place, so a hostile count costs nothing. :class:`Writer` is its mirror.
* :class:`Field`, :class:`Array` and :class:`Struct` describe a message body per version
  (the way Kafka's JSON message schemas do: a field exists for a version range and may
  be nullable from some version on). :func:`read_struct` / :func:`write_struct` turn
  bytes into attrs instances and back. The message classes themselves live in
  :mod:`brokerd.kafka.wire.requests.apis`. Each class is read and written by one
  function per version and mode, generated as source text and compiled the first time
  it is needed (all fields inline; anything but the plain case handed to the generic
  code above at the same position, so the checks and errors are that code's):
  :func:`reader_source` / :func:`writer_source` show it.
* Flexible versions (KIP-482): a message class's ``FLEXIBLE_FROM`` names its first
  flexible version. A :class:`Reader` / :class:`Writer` built with ``flexible=True``
  reads and writes strings, bytes and arrays in their compact forms (unsigned varint
  length or count + 1, 0 = null) and a tagged-fields section at the end of every
  struct. Tagged fields are read and skipped (none is modelled) and written empty;
  their count, every tag's size and every compact length are checked against the bytes
  that remain before anything is sliced.
* Request header v1 (non-flexible requests) and v2 (v1 + tagged fields), response
  header v0 and v1 (correlation id + tagged fields).
* A bytes field holding a :class:`~brokerd.net.frames.StoredRecords` (a Fetch
  response's records) is not joined into the encoding: :meth:`Writer.getframe`,
  :func:`encode_frame` and :func:`response_frame` return a
  :class:`~brokerd.net.frames.SplicedFrame` of parts (typed
  :data:`~brokerd.net.frames.Frame`: ``bytes | SplicedFrame``).

What it does not do: no I/O, no Twisted; which header version an API uses is decided by
:mod:`brokerd.kafka.wire.requests.apis` (ApiVersions answers header v0 whatever its version).
"""

from __future__ import annotations

import enum
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Protocol, cast, overload

import attrs

from brokerd.net.frames import OWN_PART_BYTES as _OWN_PART_BYTES
from brokerd.net.frames import Frame, SplicedFrame
from brokerd.storage.types import Part, Records, StoredRecords

#: Default largest request frame. Kafka's ``socket.request.max.bytes`` is 100 MiB, far
#: too much to hold per connection in Python; 8 MiB leaves room for a 1 MiB batch per
#: partition across several partitions. Configurable per factory.
DEFAULT_MAX_FRAME_BYTES = 8 * 1024 * 1024
#: Bytes of the fixed part of every request header: api key, api version, correlation id.
REQUEST_HEADER_FIXED = 8

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")
_HEADER = struct.Struct(">hhi")
#: The varints of 0-127: one byte each, shared (written without building them).
_ONE_BYTE_VARINTS = tuple(bytes((i,)) for i in range(0x80))
_TWO_BYTES = struct.Struct(">BB")
#: An unsigned varint of a 32-bit value takes at most this many bytes (Kafka's limit).
MAX_UVARINT_BYTES = 5
#: Longest string in bytes, compact or not (Kafka's generated code refuses longer).
MAX_STRING_BYTES = 0x7FFF
#: Smallest encoding of one tagged field: a one-byte tag and a one-byte size of 0.
MIN_TAGGED_FIELD_BYTES = 2


class ApiKey(enum.IntEnum):
    """The Kafka API keys brokerd answers (``clients/.../protocol/ApiKeys.java``)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    INCREMENTAL_ALTER_CONFIGS = 44
    # Group admin APIs.
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DESCRIBE_CLUSTER = 60
    DESCRIBE_TOPIC_PARTITIONS = 75
    # The consumer group protocol (KIP-848).
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    # Transactions.
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    DESCRIBE_PRODUCERS = 61
    WRITE_TXN_MARKERS = 27
    # ACLs.
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    # SASL authentication and SCRAM credentials.
    SASL_HANDSHAKE = 17
    SASL_AUTHENTICATE = 36
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    # Share groups (KIP-932).
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74
    # Streams groups (KIP-1071).
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE = 93
    # Client quotas.
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    # What one node answers about leadership: partitions' leader epochs, the quorum.
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_QUORUM = 55
    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46


# -- errors --------------------------------------------------------------------------


class CodecError(ValueError):
    """Base of everything this module raises for bad input."""


class FrameError(CodecError):
    """A frame size prefix that cannot be accepted; the connection must be closed."""


class FrameTooLarge(FrameError):
    """A frame larger than the configured limit."""


class MalformedRequest(CodecError):
    """A request header or body that does not parse as its API and version say."""


# -- framing -------------------------------------------------------------------------


class FrameDecoder:
    """Split a byte stream into frames (the payload after the ``int32`` size).

    The size is validated the moment its four bytes are present, so an oversized or
    negative frame is refused before a single payload byte is kept. Consumed bytes are
    deleted from the private buffer in place.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._need: int | None = None  # payload size of the frame being received

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf)

    @property
    def owed(self) -> int:
        """Bytes of the frame being received that its size prefix announced and that
        have not arrived yet (0 before a size prefix is complete)."""
        if self._need is None:
            return 0
        return max(0, self._need - len(self._buf))

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return every frame it completes, in order.

        :raises FrameTooLarge: a size above ``max_frame_bytes``.
        :raises FrameError: a negative size.
        """
        self._buf += data
        frames: list[bytes] = []
        while True:
            if self._need is None:
                if len(self._buf) < 4:
                    return frames
                (size,) = _I32.unpack_from(self._buf, 0)
                if size < 0:
                    raise FrameError(f"negative frame size {size}")
                if size > self.max_frame_bytes:
                    raise FrameTooLarge(
                        f"frame of {size} bytes exceeds the limit of {self.max_frame_bytes}"
                    )
                del self._buf[:4]
                self._need = size
            if len(self._buf) < self._need:
                return frames
            # One copy (a bytearray slice would copy twice): at most this frame's size
            # on top of the buffer, for one frame at a time.
            with memoryview(self._buf) as view:
                frames.append(view[: self._need].tobytes())
            del self._buf[: self._need]
            self._need = None


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its ``int32`` size."""
    return _I32.pack(len(payload)) + payload


# -- primitives ----------------------------------------------------------------------


class Reader:
    """Bounds-checked reader of Kafka primitive types over one frame.

    Every variable-length read (string, bytes, array count) is checked against
    :attr:`remaining` before allocating; any shortfall raises :class:`MalformedRequest`.
    """

    __slots__ = ("_data", "_pos", "flexible")

    def __init__(self, data: bytes, pos: int = 0, *, flexible: bool = False) -> None:
        self._data = data
        self._pos = pos
        #: Whether the body being read is a flexible version (compact encodings).
        self.flexible = flexible

    @property
    def pos(self) -> int:
        return self._pos

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def _take(self, n: int) -> int:
        # Every read passes here: the bound is worked out inline, not by `remaining`.
        pos = self._pos
        end = pos + n
        if n < 0 or end > len(self._data):
            raise MalformedRequest(
                f"need {n} bytes at position {pos}, {self.remaining} remain"
            )
        self._pos = end
        return pos

    def _int(self, fmt: struct.Struct) -> int:
        value: int = fmt.unpack_from(self._data, self._take(fmt.size))[0]
        return value

    def int8(self) -> int:
        return self._int(_I8)

    def int16(self) -> int:
        return self._int(_I16)

    def int32(self) -> int:
        return self._int(_I32)

    def int64(self) -> int:
        return self._int(_I64)

    def boolean(self) -> bool:
        return self.int8() != 0

    def raw(self, n: int) -> bytes:
        pos = self._take(n)
        return self._data[pos : pos + n]

    def skip(self, n: int) -> None:
        self._take(n)

    def uvarint(self) -> int:
        """An unsigned varint of at most 32 bits (at most five bytes)."""
        pos = self._pos
        if pos < len(self._data):
            byte = self._data[pos]
            if not byte & 0x80:
                # One byte, the usual case (every length, count and tag below 128): a
                # flexible Produce reads eight of these, so they skip the loop.
                self._pos = pos + 1
                return byte
        value = 0
        for i in range(MAX_UVARINT_BYTES):
            byte = self._data[self._take(1)]
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                if value > 0xFFFFFFFF:
                    break
                return value
        raise MalformedRequest(f"varint longer than 32 bits before position {self._pos}")

    def _compact_length(self) -> int | None:
        """A compact length or count: the varint minus one; None for 0 (null)."""
        n = self.uvarint()
        return None if n == 0 else n - 1

    def _utf8(self, n: int) -> str:
        if n > MAX_STRING_BYTES:
            raise MalformedRequest(f"string of {n} bytes is longer than {MAX_STRING_BYTES}")
        try:
            return self.raw(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedRequest(f"string is not UTF-8: {e}") from None

    @staticmethod
    def _classic_length(n: int, what: str) -> int | None:
        """A classic (``int16``/``int32``) length or count: None for -1 (null)."""
        if n == -1:
            return None
        if n < 0:
            raise MalformedRequest(f"invalid {what} {n}")
        return n

    def nullable_string(self) -> str | None:
        n = self._classic_length(self.int16(), "string length")
        return None if n is None else self._utf8(n)

    def compact_nullable_string(self) -> str | None:
        n = self._compact_length()
        return None if n is None else self._utf8(n)

    def compact_nullable_bytes(self) -> bytes | None:
        n = self._compact_length()
        return None if n is None else self.raw(n)

    def compact_array_count(self, min_item_size: int) -> int | None:
        """A compact array count (None for null) that fits in the remaining bytes."""
        n = self._compact_length()
        if n is not None:
            self._check_fits(n, min_item_size, "array")
        return n

    def skip_tagged_fields(self) -> None:
        """Read a tagged-fields section and skip every field in it.

        brokerd models no tagged field, so known and unknown tags alike are skipped (as
        Kafka skips tags it does not know). The count is checked against the remaining
        bytes before the loop, each size before it is skipped; tags must ascend.
        """
        pos = self._pos
        if pos < len(self._data) and self._data[pos] == 0:
            self._pos = pos + 1  # the usual empty section, one per struct
            return
        count = self.uvarint()
        self._check_fits(count, MIN_TAGGED_FIELD_BYTES, "tagged-fields section")
        last = -1
        for _ in range(count):
            tag = self.uvarint()
            if tag <= last:
                raise MalformedRequest(f"tag {tag} is out of order (after {last})")
            last = tag
            self.skip(self.uvarint())

    def _check_fits(self, n: int, min_item_size: int, what: str) -> None:
        if n * max(min_item_size, 1) > len(self._data) - self._pos:
            raise MalformedRequest(
                f"{what} of {n} items cannot fit in the {self.remaining} remaining bytes"
            )

    def nullable_bytes(self) -> bytes | None:
        n = self._classic_length(self.int32(), "bytes length")
        return None if n is None else self.raw(n)

    def array_count(self, min_item_size: int) -> int | None:
        """An ``int32`` count (None for -1) that fits in the remaining bytes."""
        n = self._classic_length(self.int32(), "array count")
        if n is not None:
            self._check_fits(n, min_item_size, "array")
        return n

    def expect_end(self) -> None:
        if self.remaining:
            raise MalformedRequest(f"{self.remaining} unexpected trailing bytes")


class Writer:
    """Accumulates encoded parts; :meth:`getvalue` joins them once.

    A :class:`~brokerd.net.frames.StoredRecords` value of a bytes field is kept as a
    part of its own, not joined: :meth:`getframe` then returns a
    :class:`~brokerd.net.frames.SplicedFrame` (a Fetch response's records, sent
    without being copied into the frame).
    """

    __slots__ = ("_own", "_parts", "_spliced", "flexible")

    def __init__(self, *, flexible: bool = False) -> None:
        self._parts: list[bytes | StoredRecords] = []
        self._spliced = False
        # Indexes in _parts of what a spliced frame sends as parts of their own (file
        # regions, long record bytes); every other part is short and joined.
        self._own: list[int] = []
        #: Whether the body being written is a flexible version (compact encodings).
        self.flexible = flexible

    def int8(self, v: int) -> None:
        self._parts.append(_I8.pack(v))

    def int16(self, v: int) -> None:
        self._parts.append(_I16.pack(v))

    def int32(self, v: int) -> None:
        self._parts.append(_I32.pack(v))

    def int64(self, v: int) -> None:
        self._parts.append(_I64.pack(v))

    def boolean(self, v: bool) -> None:
        self._parts.append(b"\x01" if v else b"\x00")

    def raw(self, data: bytes) -> None:
        self._parts.append(data)

    def uvarint(self, v: int) -> None:
        # One or two bytes cover every count, tag and short length, and a record batch
        # up to 16 KiB (a flexible Fetch answer writes several per partition).
        if 0 <= v < 0x80:
            self._parts.append(_ONE_BYTE_VARINTS[v])
            return
        if 0x80 <= v < 0x4000:
            self._parts.append(_TWO_BYTES.pack((v & 0x7F) | 0x80, v >> 7))
            return
        if not 0 <= v <= 0xFFFFFFFF:
            raise ValueError(f"{v} does not fit an unsigned 32-bit varint")
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self._parts.append(bytes(out))

    @staticmethod
    def _utf8(v: str) -> bytes:
        data = v.encode("utf-8")
        if len(data) > MAX_STRING_BYTES:
            raise ValueError(f"string of {len(data)} bytes is too long for the protocol")
        return data

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        data = self._utf8(v)
        self.int16(len(data))
        self._parts.append(data)

    def compact_nullable_string(self, v: str | None) -> None:
        self.compact_nullable_bytes(None if v is None else self._utf8(v))

    def compact_nullable_bytes(self, v: Records | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        if isinstance(v, StoredRecords):
            self.uvarint(v.size + 1)
            self._append_stored(v)
            return
        self.uvarint(len(v) + 1)
        self._append_bytes(bytes(v))

    def _append_stored(self, v: StoredRecords) -> None:
        self._spliced = True
        payload = v.payload
        if isinstance(payload, bytes) and len(payload) < _OWN_PART_BYTES:
            self._parts.append(payload)  # short: joined with its neighbours
            return
        self._own.append(len(self._parts))
        self._parts.append(v)

    def compact_array_count(self, n: int | None) -> None:
        self.uvarint(0 if n is None else n + 1)

    def empty_tagged_fields(self) -> None:
        self._parts.append(b"\x00")

    def nullable_bytes(self, v: Records | None) -> None:
        if v is None:
            self.int32(-1)
            return
        if isinstance(v, StoredRecords):
            self.int32(v.size)
            self._append_stored(v)
            return
        self.int32(len(v))
        self._append_bytes(bytes(v))

    def _append_bytes(self, data: bytes) -> None:
        if len(data) >= _OWN_PART_BYTES:
            self._own.append(len(self._parts))  # in a spliced frame: not copied again
        self._parts.append(data)

    def getvalue(self) -> bytes:
        """The encoding as ``bytes``; TypeError if a
        :class:`~brokerd.net.frames.StoredRecords` was written (use :meth:`getframe`)."""
        if self._spliced:
            raise TypeError("stored records were written: the encoding is a spliced frame")
        return b"".join(p for p in self._parts if isinstance(p, bytes))

    def response_frame(self, correlation_id: int, flexible_header: bool = False) -> Frame:
        """The whole response frame of this body: size, response header v0 (or v1 if
        ``flexible_header``), the body, joined once (:func:`response_frame` of
        :meth:`getframe` would copy the body a second time). A spliced frame when a
        :class:`~brokerd.net.frames.StoredRecords` was written."""
        header = _I32.pack(correlation_id) + (b"\x00" if flexible_header else b"")
        if self._spliced:
            return self._spliced_frame(header)
        body: list[bytes] = self._parts  # type: ignore[assignment]  # no StoredRecords
        return b"".join([_I32.pack(len(header) + sum(map(len, body))), header, *body])

    def _spliced_frame(self, header: bytes) -> SplicedFrame:
        """The frame as the short parts between the parts of their own joined into one
        each (one pass, as :meth:`SplicedFrame.of` would cut it), the size prefix and
        ``header`` at the front of the first."""
        parts = self._parts
        pieces: list[Part] = []
        size = len(header)
        start = 0
        for i in self._own:
            run = b"".join(cast(list[bytes], parts[start:i]))
            size += len(run)
            if run or not pieces:
                pieces.append(run)
            own = parts[i]
            payload = own.payload if isinstance(own, StoredRecords) else own
            size += len(payload) if isinstance(payload, bytes) else payload.length
            pieces.append(payload)
            start = i + 1
        run = b"".join(cast(list[bytes], parts[start:]))
        size += len(run)
        if run or not pieces:
            pieces.append(run)
        first = pieces[0]
        assert isinstance(first, bytes)  # a body starts with a fixed-size field
        pieces[0] = _I32.pack(size) + header + first
        return SplicedFrame(tuple(pieces), size + 4)

    def getframe(self) -> Frame:
        """The encoding: ``bytes``, or a :class:`~brokerd.net.frames.SplicedFrame`
        when a :class:`~brokerd.net.frames.StoredRecords` was written."""
        if self._spliced:
            return SplicedFrame.of(self._parts)
        return self.getvalue()


# -- the schema engine ---------------------------------------------------------------


class WireType(Protocol):
    """How one field type is read and written at a given version."""

    def read(self, r: Reader, version: int, nullable: bool) -> Any: ...

    def write(self, w: Writer, value: Any, version: int, nullable: bool) -> None: ...

    def min_size(self, version: int, flexible: bool = False) -> int: ...


def _null_check(value: object, nullable: bool, what: str) -> None:
    if value is None and not nullable:
        raise ValueError(f"{what} may not be null at this version")


def _int_reader(
    unpack: Callable[[bytes, int], tuple[Any, ...]], size: int
) -> Callable[[Reader], Any]:
    def read(r: Reader) -> Any:
        pos = r._pos
        end = pos + size
        if end > len(r._data):
            r._take(size)  # raises MalformedRequest, with the generic path's message
        r._pos = end
        return unpack(r._data, pos)[0]

    return read


def _int_writer(pack: Callable[[int], bytes]) -> Callable[[Writer, Any], None]:
    def write(w: Writer, v: Any) -> None:
        w._parts.append(pack(v))

    return write


class _Fixed:
    """A type of a fixed size: its reader and writer of one value, chosen once (the
    generated readers and writers call them where the bytes are short or a value does
    not pack, for the generic path's error)."""

    def __init__(
        self,
        name: str,
        size: int,
        read: Callable[[Reader], Any],
        write: Callable[[Writer, Any], None],
    ) -> None:
        self._name = name
        self._size = size
        self.read_value = read
        self.write_value = write

    def read(self, r: Reader, version: int, nullable: bool) -> Any:
        return self.read_value(r)

    def write(self, w: Writer, value: Any, version: int, nullable: bool) -> None:
        self.write_value(w, value)

    def min_size(self, version: int, flexible: bool = False) -> int:
        return self._size

    def __repr__(self) -> str:
        return self._name


def _write_uint16(w: Writer, value: Any) -> None:
    if not 0 <= value <= 0xFFFF:
        raise ValueError(f"uint16 out of range: {value}")
    w.int16(value - 0x10000 if value >= 0x8000 else value)


class _Sized:
    """A length-prefixed value (string or bytes): ``int16``/``int32`` length in the
    classic versions, a compact (varint + 1) length in flexible ones; nullability from
    the field."""

    def __init__(
        self,
        what: str,
        classic_prefix: int,
        readers: tuple[Callable[[Reader], Any], Callable[[Reader], Any]],
        writers: tuple[Callable[[Writer, Any], None], Callable[[Writer, Any], None]],
    ) -> None:
        self.what = what
        self._classic_prefix = classic_prefix
        self._readers = readers
        self._writers = writers

    def read(self, r: Reader, version: int, nullable: bool) -> Any:
        v = self._readers[r.flexible](r)
        if v is None and not nullable:
            raise MalformedRequest(f"null {self.what} where the schema forbids it")
        return v

    def write(self, w: Writer, value: Any, version: int, nullable: bool) -> None:
        _null_check(value, nullable, self.what)
        self._writers[w.flexible](w, value)

    def min_size(self, version: int, flexible: bool = False) -> int:
        return 1 if flexible else self._classic_prefix

    def __repr__(self) -> str:
        return self.what.upper()


#: Kafka's all-zero UUID: "no topic ID" in a request or an answer.
ZERO_UUID = uuid.UUID(int=0)

INT8: WireType = _Fixed("INT8", 1, _int_reader(_I8.unpack_from, 1), _int_writer(_I8.pack))
INT16: WireType = _Fixed("INT16", 2, _int_reader(_I16.unpack_from, 2), _int_writer(_I16.pack))
INT32: WireType = _Fixed("INT32", 4, _int_reader(_I32.unpack_from, 4), _int_writer(_I32.pack))
INT64: WireType = _Fixed("INT64", 8, _int_reader(_I64.unpack_from, 8), _int_writer(_I64.pack))
#: Two bytes, unsigned (Kafka's one ``uint16`` field: an endpoint's port).
UINT16: WireType = _Fixed("UINT16", 2, lambda r: r.int16() & 0xFFFF, _write_uint16)
BOOL: WireType = _Fixed("BOOL", 1, Reader.boolean, lambda w, v: w.boolean(bool(v)))
#: An IEEE 754 double, big-endian (Kafka's ``float64``: client quota values).
FLOAT64: WireType = _Fixed(
    "FLOAT64", 8, lambda r: float(_F64.unpack(r.raw(8))[0]),
    lambda w, v: w.raw(_F64.pack(float(v))),
)
#: ``int16`` length + UTF-8 (compact in flexible versions); nullability from the field.
STRING: WireType = _Sized(
    "string", 2,
    (Reader.nullable_string, Reader.compact_nullable_string),
    (Writer.nullable_string, Writer.compact_nullable_string),
)
#: ``int32`` length + bytes (compact in flexible versions; also the ``records`` type);
#: nullability from the field.
BYTES: WireType = _Sized(
    "bytes", 4,
    (Reader.nullable_bytes, Reader.compact_nullable_bytes),
    (Writer.nullable_bytes, Writer.compact_nullable_bytes),
)
#: 16 bytes, read as a :class:`uuid.UUID` (topic IDs; :data:`ZERO_UUID` = none).
UUID: WireType = _Fixed(
    "UUID", 16, lambda r: uuid.UUID(bytes=r.raw(16)), lambda w, v: w.raw(v.bytes)
)


class Array:
    """``int32`` count + items (-1 = null where the field allows it); read as a tuple.
    In flexible versions a compact array (varint count + 1, 0 = null)."""

    def __init__(self, item: WireType) -> None:
        self.item = item

    def read(self, r: Reader, version: int, nullable: bool) -> tuple[Any, ...] | None:
        item_size = self.item.min_size(version, r.flexible)
        n = r.compact_array_count(item_size) if r.flexible else r.array_count(item_size)
        if n is None:
            if not nullable:
                raise MalformedRequest("null array where the schema forbids it")
            return None
        return tuple(self.item.read(r, version, False) for _ in range(n))

    def write(self, w: Writer, value: Any, version: int, nullable: bool) -> None:
        _null_check(value, nullable, "array")
        items: Sequence[Any] | None = value
        if w.flexible:
            w.compact_array_count(None if items is None else len(items))
        elif items is None:
            w.int32(-1)
        else:
            w.int32(len(items))
        for item in items or ():
            self.item.write(w, item, version, False)

    def min_size(self, version: int, flexible: bool = False) -> int:
        return 1 if flexible else 4

    def __repr__(self) -> str:
        return f"Array({self.item!r})"


class Message(Protocol):
    """An attrs class carrying its wire layout in ``FIELDS``.

    A top-level message may also set ``FLEXIBLE_FROM: ClassVar[int | None]``, its first
    flexible version (absent or None: never flexible). Nested structs take the mode of
    the message that contains them.
    """

    FIELDS: ClassVar[tuple[Field, ...]]


class Struct:
    """A nested structure: an attrs class whose ``FIELDS`` give its layout."""

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls

    def read(self, r: Reader, version: int, nullable: bool) -> Any:
        return read_struct(self.cls, r, version)

    def write(self, w: Writer, value: Any, version: int, nullable: bool) -> None:
        write_struct(w, value, version)

    def min_size(self, version: int, flexible: bool = False) -> int:
        return _layout(self.cls).min_size(version, flexible)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.cls.__name__})"


@attrs.frozen
class Field:
    """One field of a message: its name (the attrs attribute), type and versions.

    :param min_version: first version the field is on the wire.
    :param max_version: last version it is on the wire (inclusive).
    :param nullable_from: first version from which -1 (null) is allowed; None = never.
    """

    name: str
    type: WireType
    min_version: int = 0
    max_version: int = 0x7FFF
    nullable_from: int | None = None

    def present(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def nullable(self, version: int) -> bool:
        return self.nullable_from is not None and version >= self.nullable_from


def _fields(cls: type[Any]) -> tuple[Field, ...]:
    fields: tuple[Field, ...] = cls.FIELDS
    return fields


#: One field as a version reads and writes it: attribute name, type, nullable.
PlanStep = tuple[str, WireType, bool]
#: A message's tagged fields to write at a version: ``(tag, encoded value)`` in tag
#: order (a class's ``TAGGED_FIELDS``; the few brokerd writes, such as ApiVersions'
#: features, are constant per version).
TaggedWriter = Callable[[int], Sequence[tuple[int, bytes]]]


class _Layout:
    """A message class's fields, planned per version once: which are on the wire and
    whether each may be null. Versions past the last one any field names share the last
    plan, so a plan is one tuple index away."""

    __slots__ = ("_min_sizes", "_plans", "tagged")

    def __init__(self, fields: Sequence[Field], tagged: TaggedWriter | None = None) -> None:
        #: The class's ``TAGGED_FIELDS`` (None: an empty tagged-fields section).
        self.tagged = tagged
        edges = [0]
        for f in fields:
            edges.append(f.min_version)
            if f.max_version < 0x7FFF:
                edges.append(f.max_version + 1)
            if f.nullable_from is not None:
                edges.append(f.nullable_from)
        self._plans: tuple[tuple[PlanStep, ...], ...] = tuple(
            tuple((f.name, f.type, f.nullable(v)) for f in fields if f.present(v))
            for v in range(max(edges) + 1)
        )
        self._min_sizes: dict[tuple[int, bool], int] = {}

    def plan(self, version: int) -> tuple[PlanStep, ...]:
        plans = self._plans
        return plans[version] if 0 <= version < len(plans) else plans[-1 if version > 0 else 0]

    def min_size(self, version: int, flexible: bool) -> int:
        """The fewest bytes one instance takes (checks an array count before the loop)."""
        key = (version, flexible)
        size = self._min_sizes.get(key)
        if size is None:
            size = sum(t.min_size(version, flexible) for _, t, _ in self.plan(version))
            if flexible:
                size += 1  # the empty tagged-fields count
            self._min_sizes[key] = size
        return size


_LAYOUTS: dict[type[Any], _Layout] = {}


def _layout(cls: type[Any]) -> _Layout:
    """``cls``'s plans, made the first time it is read or written (not at import: a
    start builds hundreds of message classes, most of them for APIs no client uses)."""
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = _LAYOUTS[cls] = _Layout(_fields(cls), getattr(cls, "TAGGED_FIELDS", None))
    return layout


def is_flexible(cls: type[Any], version: int) -> bool:
    """Whether message class ``cls`` uses the flexible encodings at ``version``."""
    start: int | None = getattr(cls, "FLEXIBLE_FROM", None)
    return start is not None and version >= start


# -- readers and writers generated per class, version and mode --------------------------
#
# Decoding and encoding are the largest Python steps of a small request
# (docs/performance.md, "librdkafka's latency"). Through the generic path every field
# costs a ``WireType.read`` or ``write``, a ``Reader``/``Writer`` method and its bounds
# check: three or four calls. Instead, each (class, version, flexible) gets ONE reader
# and ONE writer function, generated as source text the first time it is used and
# compiled once: every field inline, nested structs and arrays of structs inline in the
# same function (a loop per array), consecutive integers read or written by one
# ``struct`` call, one-byte varints, lengths and empty tagged-fields sections handled
# inline.
#
# The checks are the generic path's: every inline read first checks that its bytes are
# there (a count also that its items can fit, before anything is allocated); anything
# that is not the plain case (a short buffer, a null, a multi-byte varint, a non-empty
# tagged-fields section, bad UTF-8, a value that does not pack) is handed, at the same
# position, to the generic ``Reader``/``Writer``/``WireType`` code, which reads it or
# raises its own error with its own message. Types the generator does not know (a
# ``Struct`` subclass such as a nullable struct, custom ``WireType`` classes) are read
# and written through their own ``read``/``write``; so is a struct nested in itself,
# and an array item whose class is not the declared one (written by ``write_struct``).
# :func:`reader_source` and :func:`writer_source` return the generated text.

#: The fixed-size types read and written inline, by their ``struct`` format character.
_FIXED_CODES: dict[object, str] = {
    INT8: "b", INT16: "h", INT32: "i", INT64: "q", BOOL: "?", UINT16: "H", FLOAT64: "d",
}
#: The ones a writer packs inline (UINT16 and FLOAT64 convert and check first: theirs).
_PACKED_CODES = frozenset("bhiq?")
#: Items of an array read into a list made before the loop (the rest are appended).
_PREALLOCATED_ITEMS = 64
#: How deep structs are inlined into one function (deeper ones: one call each).
_INLINE_DEPTH = 8
#: Topic IDs read lately, by their 16 bytes (a Fetch names its topics by ID; a UUID is
#: immutable, so one instance serves every request). Emptied when full: a client
#: naming ever new IDs costs at most this many entries.
_UUIDS: dict[bytes, uuid.UUID] = {}
_UUIDS_KEPT = 256
_GenKey = tuple[type[Any], int, bool]


def _uuid_of(data: bytes) -> uuid.UUID:
    """``uuid.UUID(bytes=data)``, kept in :data:`_UUIDS`."""
    if len(_UUIDS) >= _UUIDS_KEPT:
        _UUIDS.clear()
    value = _UUIDS[data] = uuid.UUID(bytes=data)
    return value
_READ_FUNCS: dict[_GenKey, Callable[[Reader], Any]] = {}
_WRITE_FUNCS: dict[_GenKey, Callable[[Writer, Any], None]] = {}


class _Source:
    """The text of one generated function and the objects it refers to by name."""

    def __init__(self) -> None:
        self.name = ""
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {}
        self._names: dict[int, str] = {}
        self._count = 0

    def const(self, obj: Any, hint: str) -> str:
        """A global name for ``obj`` in the generated function's namespace."""
        name = self._names.get(id(obj))
        if name is None:
            name = self._names[id(obj)] = f"{hint}_{len(self._names)}"
            self.ns[name] = obj
        return name

    def var(self, hint: str) -> str:
        self._count += 1
        return f"{hint}{self._count}"

    def add(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def begin(self, name: str, params: str) -> None:
        """The function's first line: ``def NAME(PARAMS):``."""
        self.name = name
        self.add(0, f"def {name}({params}):")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def compile(self) -> Any:
        """The generated function (its traceback lines name ``<codec NAME>``)."""
        exec(compile(self.text(), f"<codec {self.name}>", "exec"), self.ns)
        return self.ns[self.name]


def _struct_format(codes: str) -> struct.Struct:
    return struct.Struct(">" + codes)


def _is_plain_struct(t: WireType) -> bool:
    return type(t) is Struct


def _runs(plan: Sequence[PlanStep], packed: bool) -> list[tuple[bool, list[PlanStep]]]:
    """The plan cut into runs: ``(True, steps)`` for consecutive fixed-size fields read
    (or, if ``packed``, written) by one ``struct`` call, ``(False, [step])`` for every
    other field."""
    runs: list[tuple[bool, list[PlanStep]]] = []
    for step in plan:
        code = _FIXED_CODES.get(step[1])
        fixed = code is not None and (not packed or code in _PACKED_CODES)
        if fixed and runs and runs[-1][0]:
            runs[-1][1].append(step)
        else:
            runs.append((fixed, [step]))
    return runs


# The reading side.


class _ReaderGen:
    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.src = _Source()
        self.stack: list[type[Any]] = []

    def fallback(self, ind: int, target: str, call: str) -> None:
        """Hand the field at ``pos`` to the generic code (which reads it or raises)."""
        self.src.add(ind, "r._pos = pos")
        self.src.add(ind, f"{target} = {call}")
        self.src.add(ind, "pos = r._pos")

    def generic(self, ind: int, target: str, t: WireType, nullable: bool) -> None:
        self.fallback(ind, target, f"{self.src.const(t, 'T')}.read(r, {self.version}, {nullable})")

    def struct(self, cls: type[Any], ind: int, target: str) -> None:
        """Read an instance of ``cls`` into the local ``target``."""
        src = self.src
        c = src.const(cls, cls.__name__)
        if cls in self.stack or len(self.stack) >= _INLINE_DEPTH:
            self.fallback(ind, target, f"read_struct({c}, r, {self.version})")
            return
        self.stack.append(cls)
        plan = (_LAYOUTS.get(cls) or _layout(cls)).plan(self.version)
        names: list[tuple[str, str]] = []
        for fixed, run in _runs(plan, packed=False):
            if fixed:
                names.extend(self.fixed_run(run, ind))
                continue
            ((name, t, nullable),) = run
            v = src.var("v")
            src.add(ind, f"# {cls.__name__}.{name}: {t!r}{' (nullable)' if nullable else ''}")
            self.field(t, nullable, ind, v)
            names.append((name, v))
        if self.flexible:
            src.add(ind, "if pos < end and data[pos] == 0:")
            src.add(ind + 1, "pos += 1  # the usual empty tagged-fields section")
            src.add(ind, "else:")
            self.fallback(ind + 1, "_", "r.skip_tagged_fields()")
        args = ", ".join(f"{name}={v}" for name, v in names)
        src.add(ind, f"{target} = {c}({args})")
        self.stack.pop()

    def fixed_run(self, run: Sequence[PlanStep], ind: int) -> list[tuple[str, str]]:
        src = self.src
        codes = "".join(_FIXED_CODES[t] for _, t, _ in run)
        fmt = _struct_format(codes)
        names = [(name, src.var("v")) for name, _, _ in run]
        targets = ", ".join(v for _, v in names)
        src.add(ind, f"# {', '.join(name for name, _, _ in run)}: {codes}")
        src.add(ind, f"if pos + {fmt.size} <= end:")
        unpack = src.const(fmt.unpack_from, "unpack_" + codes.replace("?", "o"))
        src.add(ind + 1, f"{targets}{',' if len(run) == 1 else ''} = {unpack}(data, pos)")
        src.add(ind + 1, f"pos += {fmt.size}")
        src.add(ind, "else:  # short: the generic reads raise where the bytes end")
        src.add(ind + 1, "r._pos = pos")
        for (_, t, _), (_, v) in zip(run, names, strict=True):
            src.add(ind + 1, f"{v} = {src.const(cast(_Fixed, t).read_value, 'read')}(r)")
        src.add(ind + 1, "pos = r._pos")
        return names

    def field(self, t: WireType, nullable: bool, ind: int, target: str) -> None:
        src = self.src
        kind = type(t)
        if t in _FIXED_CODES:
            ((_, v),) = self.fixed_run([("value", t, False)], ind)
            src.add(ind, f"{target} = {v}")
        elif t is UUID:
            src.add(ind, "if pos + 16 <= end:")
            src.add(ind + 1, f"{target} = {src.const(_UUIDS, 'UUIDS')}.get(data[pos:pos + 16])")
            src.add(ind + 1, f"if {target} is None:")
            src.add(ind + 2, f"{target} = {src.const(_uuid_of, 'uuid_of')}(data[pos:pos + 16])")
            src.add(ind + 1, "pos += 16")
            src.add(ind, "else:")
            self.generic(ind + 1, target, t, nullable)
        elif kind is _Sized and (t is STRING or t is BYTES):
            self.sized(t, nullable, ind, target)
        elif _is_plain_struct(t):
            self.struct(cast(Struct, t).cls, ind, target)
        elif kind is Array:
            self.array(cast(Array, t), nullable, ind, target)
        else:
            self.generic(ind, target, t, nullable)

    def sized(self, t: WireType, nullable: bool, ind: int, target: str) -> None:
        src = self.src
        string = t is STRING
        n = src.var("n")
        if self.flexible:
            # A compact length (n + 1; 0 = null): one varint byte covers 0-126 bytes, two
            # bytes up to 16 KiB (a Produce's records); longer ones: the generic read.
            start = src.var("start")
            src.add(ind, f"{n} = data[pos] if pos < end else -1")
            src.add(ind, f"if {n} >= 0x80 and pos + 1 < end and data[pos + 1] < 0x80:")
            src.add(ind + 1, f"{n} = ({n} & 0x7F | data[pos + 1] << 7) - 1")
            src.add(ind + 1, f"{start} = pos + 2")
            src.add(ind, f"elif 0 < {n} < 0x80:")
            src.add(ind + 1, f"{n} -= 1")
            src.add(ind + 1, f"{start} = pos + 1")
            src.add(ind, "else:  # null, short or a longer varint")
            src.add(ind + 1, f"{start} = -1")
            limit = f" and {n} <= {MAX_STRING_BYTES}" if string else ""
            src.add(ind, f"if {start} >= 0 <= {n} and {start} + {n} <= end{limit}:")
            value, stop = f"data[{start}:{start} + {n}]", f"{start} + {n}"
            null_test, null_size = f"{n} == 0", 1
        else:
            size = 2 if string else 4
            src.add(ind, f"if pos + {size} <= end:")
            if string:
                src.add(ind + 1, f"{n} = data[pos] << 8 | data[pos + 1]")
                limit, null_value = "0x8000", "0xFFFF"
            else:
                src.add(
                    ind + 1,
                    f"{n} = data[pos] << 24 | data[pos + 1] << 16 | data[pos + 2] << 8"
                    " | data[pos + 3]",
                )
                limit, null_value = "0x80000000", "0xFFFFFFFF"
            src.add(ind, "else:")
            src.add(ind + 1, f"{n} = -1  # short: the generic read raises")
            src.add(ind, f"if 0 <= {n} < {limit} and pos + {size} + {n} <= end:")
            value = f"data[pos + {size}:pos + {size} + {n}]"
            stop = f"pos + {size} + {n}"
            null_test, null_size = f"{n} == {null_value}", size
        if string:
            src.add(ind + 1, "try:")
            src.add(ind + 2, f"{target} = {value}.decode('utf-8')")
            src.add(ind + 1, "except UnicodeDecodeError:  # the generic read raises")
            self.generic(ind + 2, target, t, nullable)
            src.add(ind + 1, "else:")
            src.add(ind + 2, f"pos = {stop}")
        else:
            src.add(ind + 1, f"{target} = {value}")
            src.add(ind + 1, f"pos = {stop}")
        if nullable:
            src.add(ind, f"elif {null_test}:")
            src.add(ind + 1, f"{target} = None")
            src.add(ind + 1, f"pos += {null_size}")
        src.add(ind, "else:  # long, null or short: the generic read")
        self.generic(ind + 1, target, t, nullable)

    def array(self, t: Array, nullable: bool, ind: int, target: str) -> None:
        src = self.src
        item = t.item
        item_size = item.min_size(self.version, self.flexible)
        fit = max(item_size, 1)
        n = src.var("n")
        if self.flexible:
            src.add(ind, f"{n} = data[pos] - 1 if pos < end else -1")
            src.add(ind, f"if 0 <= {n} < 0x7F and {n} * {fit} <= end - pos - 1:")
            src.add(ind + 1, "pos += 1")
            count = f"r.compact_array_count({item_size})"
        else:
            src.add(ind, "if pos + 4 <= end:")
            src.add(ind + 1, f"{n} = {src.const(_I32.unpack_from, 'unpack_i')}(data, pos)[0]")
            src.add(ind, "else:")
            src.add(ind + 1, f"{n} = -1  # short: the generic read raises")
            src.add(ind, f"if 0 <= {n} and {n} * {fit} <= end - pos - 4:")
            src.add(ind + 1, "pos += 4")
            count = f"r.array_count({item_size})"
        src.add(ind, "else:  # null, long or too many: the generic count (or its error)")
        self.fallback(ind + 1, n, count)
        src.add(ind, f"if {n} is None:")
        if nullable:
            src.add(ind + 1, f"{target} = None")
        else:
            error = src.const(MalformedRequest, "MalformedRequest")
            src.add(ind + 1, f"raise {error}('null array where the schema forbids it')")
        src.add(ind, "else:")
        code = _FIXED_CODES.get(item)
        if code is not None:
            # Every item fits (checked above, with their exact size): one unpack.
            unpack = src.const(struct.unpack_from, "unpack_from")
            src.add(ind + 1, f"{target} = {unpack}('>%d{code}' % {n}, data, pos)")
            src.add(ind + 1, f"pos += {n} * {item_size}")
            return
        items = src.var("items")
        i = src.var("i")
        v = src.var("item")
        # The first items fill a list made at once (no call per item); past them the
        # list grows with what is read, not with what the count claims (a count that
        # fits the bytes by the items' smallest size may still be a lie).
        k = _PREALLOCATED_ITEMS
        src.add(ind + 1, f"{items} = [None] * ({n} if {n} <= {k} else {k})")
        src.add(ind + 1, f"for {i} in range({n}):")
        self.field(item, False, ind + 2, v)
        src.add(ind + 2, f"if {i} < {k}:")
        src.add(ind + 3, f"{items}[{i}] = {v}")
        src.add(ind + 2, "else:")
        src.add(ind + 3, f"{items}.append({v})")
        src.add(ind + 1, f"{target} = tuple({items})")


def _generated_name(verb: str, cls: type[Any], version: int, flexible: bool) -> str:
    return f"{verb}_{cls.__name__}_v{version}{'_flexible' if flexible else ''}"


def _generated_reader(cls: type[Any], version: int, flexible: bool) -> _Source:
    gen = _ReaderGen(version, flexible)
    src = gen.src
    src.ns["read_struct"] = read_struct
    src.begin(_generated_name("read", cls, version, flexible), "r")
    src.add(1, "data = r._data")
    src.add(1, "end = len(data)")
    src.add(1, "pos = r._pos")
    gen.struct(cls, 1, "obj")
    src.add(1, "r._pos = pos")
    src.add(1, "return obj")
    return src


def _make_reader(cls: type[Any], version: int, flexible: bool) -> Callable[[Reader], Any]:
    read: Callable[[Reader], Any] = _generated_reader(cls, version, flexible).compile()
    _READ_FUNCS[(cls, version, flexible)] = read
    return read


def _mode(cls: type[Any], version: int, flexible: bool | None) -> bool:
    return is_flexible(cls, version) if flexible is None else flexible


def reader_source(cls: type[Any], version: int, flexible: bool | None = None) -> str:
    """The source of the reader generated for ``cls`` at ``version`` (debugging, tests);
    ``flexible`` defaults to what ``cls.FLEXIBLE_FROM`` says."""
    return _generated_reader(cls, version, _mode(cls, version, flexible)).text()


def read_struct(cls: type[Any], r: Reader, version: int) -> Any:
    """Read an instance of ``cls`` at ``version``; absent fields take their defaults.
    In a flexible reader the struct's tagged fields are read and skipped."""
    flexible = r.flexible
    read = _READ_FUNCS.get((cls, version, flexible)) or _make_reader(cls, version, flexible)
    return read(r)


# The writing side.


def _write_tagged(w: Writer, tagged: TaggedWriter, version: int) -> None:
    tags = tagged(version)
    w.uvarint(len(tags))
    for tag, value in tags:
        w.uvarint(tag)
        w.uvarint(len(value))
        w.raw(value)


class _WriterGen:
    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.src = _Source()
        self.stack: list[type[Any]] = []

    def generic(self, ind: int, t: WireType, value: str, nullable: bool) -> None:
        self.src.add(ind, f"{self.src.const(t, 'T')}.write(w, {value}, {self.version}, {nullable})")

    def struct(self, cls: type[Any], ind: int, obj: str) -> None:
        """Write the instance in the local ``obj`` (of class ``cls``)."""
        src = self.src
        if cls in self.stack or len(self.stack) >= _INLINE_DEPTH:
            src.add(ind, f"write_struct(w, {obj}, {self.version})")
            return
        self.stack.append(cls)
        layout = _LAYOUTS.get(cls) or _layout(cls)
        for fixed, run in _runs(layout.plan(self.version), packed=True):
            if fixed:
                self.fixed_run(run, ind, [f"{obj}.{name}" for name, _, _ in run])
                continue
            ((name, t, nullable),) = run
            src.add(ind, f"# {cls.__name__}.{name}: {t!r}{' (nullable)' if nullable else ''}")
            v = src.var("v")
            src.add(ind, f"{v} = {obj}.{name}")
            self.field(t, nullable, ind, v)
        if self.flexible:
            if layout.tagged is None:
                src.add(ind, "append(b'\\x00')  # an empty tagged-fields section")
            else:
                tagged = src.const(layout.tagged, "tagged")
                write = src.const(_write_tagged, "write_tagged")
                src.add(ind, f"{write}(w, {tagged}, {self.version})")
        self.stack.pop()

    def fixed_run(self, run: Sequence[PlanStep], ind: int, values: Sequence[str]) -> None:
        src = self.src
        codes = "".join(_FIXED_CODES[t] for _, t, _ in run)
        pack = src.const(_struct_format(codes).pack, "pack_" + codes.replace("?", "o"))
        src.add(ind, f"# {', '.join(name for name, _, _ in run)}: {codes}")
        if len(run) == 1:
            v = values[0]
        else:
            v = src.var("v")
            src.add(ind, f"{v} = ({', '.join(values)})")
        src.add(ind, "try:")
        src.add(ind + 1, f"append({pack}({v if len(run) == 1 else '*' + v}))")
        src.add(ind, f"except {src.const(struct.error, 'struct_error')}:")
        src.add(ind + 1, "# The generic writes raise the error of the field that does not pack.")
        for k, (_, t, _) in enumerate(run):
            item = v if len(run) == 1 else f"{v}[{k}]"
            src.add(ind + 1, f"{src.const(cast(_Fixed, t).write_value, 'write')}(w, {item})")
        src.add(ind + 1, "raise")

    def null(self, ind: int, v: str, nullable: bool, what: str, null: bytes) -> None:
        """The start of ``if v is None: <null or error> else:`` (the caller writes the
        not-null branch at ``ind + 1``)."""
        src = self.src
        src.add(ind, f"if {v} is None:")
        if nullable:
            src.add(ind + 1, f"append({null!r})")
        else:
            error = f"{what} may not be null at this version"
            src.add(ind + 1, f"raise ValueError({error!r})")
        src.add(ind, "else:")

    def field(self, t: WireType, nullable: bool, ind: int, v: str) -> None:
        src = self.src
        code = _FIXED_CODES.get(t)
        if code is not None and code in _PACKED_CODES:
            self.fixed_run([("value", t, False)], ind, [v])
        elif t is UUID:
            # (UUID.bytes is a property: self.int.to_bytes(16); anything else: its own.)
            u = src.const(uuid.UUID, "UUID")
            src.add(
                ind,
                f"append({v}.int.to_bytes(16, 'big') if type({v}) is {u} else {v}.bytes)",
            )
        elif t is STRING:
            self.string(nullable, ind, v)
        elif t is BYTES:
            self.bytes(nullable, ind, v)
        elif _is_plain_struct(t):
            cls = cast(Struct, t).cls
            src.add(ind, f"if type({v}) is not {src.const(cls, cls.__name__)}:")
            src.add(ind + 1, f"write_struct(w, {v}, {self.version})")
            src.add(ind, "else:")
            self.struct(cls, ind + 1, v)
        elif type(t) is Array:
            self.array(t, nullable, ind, v)
        else:
            self.generic(ind, t, v, nullable)

    def bytes(self, nullable: bool, ind: int, v: str) -> None:
        src = self.src
        null = b"\x00" if self.flexible else b"\xff\xff\xff\xff"
        self.null(ind, v, nullable, "bytes", null)
        n = src.var("n")
        ind += 1
        src.add(ind, f"if type({v}) is bytes:")
        src.add(ind + 1, f"{n} = len({v})")
        self.length(ind + 1, n)
        # As Writer._append_bytes: long record bytes are a part of their own.
        src.add(ind + 1, f"if {n} >= {_OWN_PART_BYTES}:")
        src.add(ind + 2, "w._own.append(len(w._parts))")
        src.add(ind + 1, f"append({v})")
        # As Writer._append_stored: a Fetch answer's records, kept out of the join
        # unless short bytes.
        stored = src.const(StoredRecords, "StoredRecords")
        src.add(ind, f"elif type({v}) is {stored}:")
        p, b = src.var("payload"), src.var("is_bytes")
        src.add(ind + 1, f"{p} = {v}.payload")
        src.add(ind + 1, f"{b} = isinstance({p}, bytes)")
        src.add(ind + 1, f"{n} = len({p}) if {b} else {p}.length")
        self.length(ind + 1, n)
        src.add(ind + 1, "w._spliced = True")
        src.add(ind + 1, f"if {b} and {n} < {_OWN_PART_BYTES}:")
        src.add(ind + 2, f"append({p})")
        src.add(ind + 1, "else:")
        src.add(ind + 2, "w._own.append(len(w._parts))")
        src.add(ind + 2, f"append({v})")
        src.add(ind, "else:  # a bytearray or memoryview: the generic write")
        method = "compact_nullable_bytes" if self.flexible else "nullable_bytes"
        src.add(ind + 1, f"w.{method}({v})")

    def length(self, ind: int, n: str) -> None:
        """The length prefix of ``n`` bytes: compact (n + 1: one varint byte, or two up
        to 16 KiB, else ``Writer.uvarint``) or ``int32``."""
        src = self.src
        if self.flexible:
            one = src.const(_ONE_BYTE_VARINTS, "ONE_BYTE_VARINTS")
            src.add(ind, f"if {n} < 0x7F:")
            src.add(ind + 1, f"append({one}[{n} + 1])")
            src.add(ind, f"elif {n} < 0x3FFF:")
            two = src.const(_TWO_BYTES.pack, "pack_BB")
            src.add(ind + 1, f"append({two}(({n} + 1) & 0x7F | 0x80, ({n} + 1) >> 7))")
            src.add(ind, "else:")
            src.add(ind + 1, f"w.uvarint({n} + 1)")
        else:
            src.add(ind, f"append({src.const(_I32.pack, 'pack_i')}({n}))")

    def string(self, nullable: bool, ind: int, v: str) -> None:
        src = self.src
        null = b"\x00" if self.flexible else b"\xff\xff"
        self.null(ind, v, nullable, "string", null)
        d = src.var("d")
        n = src.var("n")
        src.add(ind + 1, f"{d} = {v}.encode('utf-8')")
        src.add(ind + 1, f"{n} = len({d})")
        if self.flexible:
            one = src.const(_ONE_BYTE_VARINTS, "ONE_BYTE_VARINTS")
            src.add(ind + 1, f"if {n} < 0x7F:")
            src.add(ind + 2, f"append({one}[{n} + 1] + {d})")
            src.add(ind + 1, "else:  # a longer varint, or too long: the generic write")
            src.add(ind + 2, f"w.compact_nullable_string({v})")
        else:
            pack = src.const(_I16.pack, "pack_h")
            src.add(ind + 1, f"if {n} <= {MAX_STRING_BYTES}:")
            src.add(ind + 2, f"append({pack}({n}) + {d})")
            src.add(ind + 1, "else:  # too long: the generic write raises")
            src.add(ind + 2, f"w.nullable_string({v})")

    def array(self, t: Array, nullable: bool, ind: int, v: str) -> None:
        src = self.src
        null = b"\x00" if self.flexible else b"\xff\xff\xff\xff"
        self.null(ind, v, nullable, "array", null)
        ind += 1
        n = src.var("n")
        src.add(ind, f"{n} = len({v})")
        if self.flexible:
            one = src.const(_ONE_BYTE_VARINTS, "ONE_BYTE_VARINTS")
            src.add(ind, f"if {n} < 0x7F:")
            src.add(ind + 1, f"append({one}[{n} + 1])")
            src.add(ind, "else:")
            src.add(ind + 1, f"w.compact_array_count({n})")
        else:
            src.add(ind, f"append({src.const(_I32.pack, 'pack_i')}({n}))")
        item = t.item
        code = _FIXED_CODES.get(item)
        if code is not None and code in _PACKED_CODES:
            pack = src.const(struct.pack, "pack")
            src.add(ind, "try:")
            src.add(ind + 1, f"append({pack}('>%d{code}' % {n}, *{v}))")
            src.add(ind, f"except {src.const(struct.error, 'struct_error')}:")
            src.add(ind + 1, "# The generic writes raise the error of the item that does not pack.")
            x = src.var("x")
            src.add(ind + 1, f"for {x} in {v}:")
            src.add(ind + 2, f"{src.const(cast(_Fixed, item).write_value, 'write')}(w, {x})")
            src.add(ind + 1, "raise")
            return
        x = src.var("x")
        src.add(ind, f"for {x} in {v}:")
        self.field(item, False, ind + 1, x)


def _generated_writer(cls: type[Any], version: int, flexible: bool) -> _Source:
    gen = _WriterGen(version, flexible)
    src = gen.src
    src.ns["write_struct"] = write_struct
    src.begin(_generated_name("write", cls, version, flexible), "w, obj")
    src.add(1, "append = w._parts.append")
    gen.struct(cls, 1, "obj")
    return src


def _make_writer(cls: type[Any], version: int, flexible: bool) -> Callable[[Writer, Any], None]:
    write: Callable[[Writer, Any], None] = _generated_writer(cls, version, flexible).compile()
    _WRITE_FUNCS[(cls, version, flexible)] = write
    return write


def writer_source(cls: type[Any], version: int, flexible: bool | None = None) -> str:
    """As :func:`reader_source`, for the writer generated for ``cls`` at ``version``."""
    return _generated_writer(cls, version, _mode(cls, version, flexible)).text()


def write_struct(w: Writer, obj: Any, version: int) -> None:
    """Write the fields of ``obj`` that exist at ``version``, in schema order (and an
    empty tagged-fields section in a flexible writer, or the class's
    ``TAGGED_FIELDS``)."""
    key = (type(obj), version, w.flexible)
    write = _WRITE_FUNCS.get(key) or _make_writer(*key)
    write(w, obj)


def encode_struct(obj: Any, version: int) -> bytes:
    """Encode a whole body; flexible or not as ``type(obj).FLEXIBLE_FROM`` says. A body
    holding :class:`~brokerd.net.frames.StoredRecords` needs :func:`encode_frame`."""
    w = Writer(flexible=is_flexible(type(obj), version))
    write_struct(w, obj, version)
    return w.getvalue()


def encode_frame(obj: Any, version: int) -> Frame:
    """:func:`encode_struct` for a body that may hold
    :class:`~brokerd.net.frames.StoredRecords` (a Fetch response): a spliced frame then."""
    w = Writer(flexible=is_flexible(type(obj), version))
    write_struct(w, obj, version)
    return w.getframe()


def decode_struct(cls: type[Any], data: bytes, version: int) -> Any:
    """Decode a whole body; trailing bytes are an error (they mean a wrong layout)."""
    r = Reader(data, flexible=is_flexible(cls, version))
    obj = read_struct(cls, r, version)
    r.expect_end()
    return obj


# -- headers -------------------------------------------------------------------------


@attrs.frozen
class RequestHeader:
    """Request header v1 (non-flexible requests) or v2 (flexible ones: the same fields,
    then tagged fields, which are skipped; ``client_id`` stays a non-compact string)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def peek_header(payload: bytes) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)``: the fixed 8 bytes every request
    header starts with, whatever its version (enough to answer an ApiVersions request
    of an unknown version without parsing the rest).

    :raises MalformedRequest: fewer than 8 bytes.
    """
    if len(payload) < REQUEST_HEADER_FIXED:
        raise MalformedRequest(f"request of {len(payload)} bytes has no complete header")
    key, version, correlation = _HEADER.unpack_from(payload, 0)
    return int(key), int(version), int(correlation)


def read_request_header(payload: bytes, flexible: bool = False) -> tuple[RequestHeader, int]:
    """Parse request header v1 (v2 if ``flexible``); return it and the offset where the
    body starts."""
    end = len(payload)
    if end >= REQUEST_HEADER_FIXED + 2:
        # The plain case inline (a client id of known length, an empty tagged-fields
        # section); anything else is parsed by the Reader below, checks and errors as
        # ever.
        n = payload[8] << 8 | payload[9]
        pos = REQUEST_HEADER_FIXED + 2 + n
        client_id: str | None = None
        if n == 0xFFFF:
            pos = REQUEST_HEADER_FIXED + 2
        elif n >= 0x8000 or pos > end:
            pos = -1
        else:
            try:
                client_id = payload[REQUEST_HEADER_FIXED + 2 : pos].decode("utf-8")
            except UnicodeDecodeError:
                pos = -1
        if flexible and 0 <= pos < end and payload[pos] == 0:
            pos += 1
        elif flexible:
            pos = -1
        if pos >= 0:
            key, version, correlation = _HEADER.unpack_from(payload, 0)
            return RequestHeader(key, version, correlation, client_id), pos
    return _read_request_header(payload, flexible)


def _read_request_header(payload: bytes, flexible: bool) -> tuple[RequestHeader, int]:
    key, version, correlation = peek_header(payload)
    r = Reader(payload, REQUEST_HEADER_FIXED)
    client_id = r.nullable_string()
    if flexible:
        r.skip_tagged_fields()
    return RequestHeader(key, version, correlation, client_id), r.pos


def encode_request_header(header: RequestHeader, flexible: bool = False) -> bytes:
    """Request header v1, or v2 (with an empty tagged-fields section) if ``flexible``."""
    w = Writer()
    w.int16(header.api_key)
    w.int16(header.api_version)
    w.int32(header.correlation_id)
    w.nullable_string(header.client_id)
    if flexible:
        w.empty_tagged_fields()
    return w.getvalue()


@overload
def response_frame(correlation_id: int, body: bytes, flexible_header: bool = False) -> bytes: ...


@overload
def response_frame(
    correlation_id: int, body: SplicedFrame, flexible_header: bool = False
) -> SplicedFrame: ...


@overload
def response_frame(correlation_id: int, body: Frame, flexible_header: bool = False) -> Frame: ...


def response_frame(correlation_id: int, body: Frame, flexible_header: bool = False) -> Frame:
    """A complete response frame: size, response header v0 (correlation id) or, if
    ``flexible_header``, v1 (correlation id + an empty tagged-fields section), body.
    A :class:`~brokerd.net.frames.SplicedFrame` body gives a spliced frame: the
    stored records stay parts of their own (``RequestConnection.write`` sends them)."""
    header = _I32.pack(correlation_id) + (b"\x00" if flexible_header else b"")
    if isinstance(body, SplicedFrame):
        return SplicedFrame.of((_I32.pack(body.size + len(header)) + header, *body.parts))
    return _I32.pack(len(body) + len(header)) + header + body


def read_response_header(payload: bytes, flexible_header: bool = False) -> tuple[int, int]:
    """``(correlation_id, body offset)`` of response header v0, or v1 if
    ``flexible_header`` (its tagged fields are skipped)."""
    r = Reader(payload)
    correlation = r.int32()
    if flexible_header:
        r.skip_tagged_fields()
    return correlation, r.pos


def iter_fields(cls: type[Any], version: int) -> Iterable[Field]:
    """The fields of ``cls`` present at ``version`` (tests build strategies from it)."""
    return (f for f in _fields(cls) if f.present(version))
