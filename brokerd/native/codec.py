"""Sans-IO codec of brokerd's native protocol (see ``docs/protocol.md``).

What this module does:

* :class:`RequestDecoder` turns the bytes a client sends into request messages
  (:class:`ProduceRequest`, :class:`FetchRequest`, ...) or typed :class:`RequestError`
  events. It checks every wire length against a named limit *before* it buffers or
  allocates anything from it, and skips the rest of a refused frame without buffering it,
  so one bad request costs one error response and nothing more.
* ``encode_*_response`` functions build the server's answers, and
  :func:`encode_error_response` builds the two pinned error forms.
* For clients (``brokerctl``, tests): ``encode_*`` request builders, a
  :class:`ResponseDecoder` that decodes pipelined responses incrementally, and
  :func:`decode_response` for one complete response.
* :func:`error_code_for` maps ``brokerd.errors`` exceptions to :class:`ErrorCode`.

What it does not do: no I/O, no Twisted, no timers, no calls into the broker core. The
caller feeds bytes in and writes the bytes this module returns.
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from brokerd import errors
from brokerd.names import MAX_TOPIC_LENGTH, validate_topic_name

__all__ = [
    "DEFAULT_MAX_FETCH_BYTES",
    "DEFAULT_MAX_PRODUCE_BYTES",
    "FETCH_ERROR_MARKER",
    "MAX_ERROR_MESSAGE_BYTES",
    "MAX_PARTITIONS",
    "MAX_TOPIC_LENGTH",
    "PRODUCE_RECORD_OVERHEAD",
    "CreateTopicRequest",
    "CreateTopicResponse",
    "ErrorCode",
    "ErrorResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchedRecord",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListTopicsRequest",
    "ListTopicsResponse",
    "LongPollFetchRequest",
    "LongPollFetchResponse",
    "MalformedResponse",
    "ProduceRequest",
    "ProduceResponse",
    "Request",
    "RequestDecoder",
    "RequestError",
    "RequestEvent",
    "RequestType",
    "Response",
    "ResponseDecoder",
    "TopicEntry",
    "decode_response",
    "encode_create_topic",
    "encode_create_topic_response",
    "encode_error_response",
    "encode_fetch",
    "encode_fetch_response",
    "encode_list_offsets",
    "encode_list_offsets_response",
    "encode_list_topics",
    "encode_list_topics_response",
    "encode_long_poll_fetch",
    "encode_long_poll_fetch_response",
    "encode_produce",
    "encode_produce_response",
    "encode_request",
    "error_code_for",
]

# --------------------------------------------------------------------------- limits

#: Default cap on a Produce payload: the sum of the value sizes plus a 4-byte size header
#: per record. A larger request is refused before it is buffered.
DEFAULT_MAX_PRODUCE_BYTES = 1024 * 1024
#: Default cap on the values returned by one Fetch or LongPollFetch (at least one record
#: is always returned when one exists, even if it alone is larger).
DEFAULT_MAX_FETCH_BYTES = 1024 * 1024
#: Each produced record costs its value plus this size header against the produce cap, so
#: a request can never claim more records than ``max_produce_bytes // 4``.
PRODUCE_RECORD_OVERHEAD = 4
#: Error messages travel behind a u16 length; longer ones are cut (on a UTF-8 boundary).
MAX_ERROR_MESSAGE_BYTES = 0xFFFF
#: Sent in place of the record count by a failed type-2 Fetch (pinned).
FETCH_ERROR_MARKER = 0xFFFFFFFF
#: CreateTopic accepts 1..MAX_PARTITIONS partitions. Each partition is a directory and open
#: files, so a wire count is checked here, before the core could act on it (the core may
#: apply a tighter limit of its own).
MAX_PARTITIONS = 10_000

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_ERROR_HEAD = struct.Struct(">HH")  # error code, message length
_OK_U64 = struct.Struct(">HQ")  # error = 0, one u64
_OK_U64_U64 = struct.Struct(">HQQ")  # error = 0, two u64
_OK_U32 = struct.Struct(">HI")  # error = 0, one u32
_OK_U64_U32 = struct.Struct(">HQI")  # error = 0, u64, u32
_OFFSET_SIZE = struct.Struct(">QI")  # long-poll record header
_PRODUCE_FIXED = struct.Struct(">II")  # partition, count
_FETCH_FIXED = struct.Struct(">IQ")  # partition, start offset
_LONG_POLL_FIXED = struct.Struct(">IQIII")  # partition, offset, max_wait, min, max bytes
_EMPTY_RECORD = b"\x00\x00\x00\x00"  # a null value (tombstone) is sent as size 0

_MAX_U16 = 0xFFFF
_MAX_U32 = 0xFFFFFFFF
_MAX_U64 = 0xFFFFFFFFFFFFFFFF


# --------------------------------------------------------------------------- enums


class RequestType(enum.IntEnum):
    """The ``u16`` that starts every request."""

    PRODUCE = 1
    FETCH = 2
    CREATE_TOPIC = 3
    LIST_OFFSETS = 4
    LIST_TOPICS = 5
    LONG_POLL_FETCH = 6


class ErrorCode(enum.IntEnum):
    """Error codes of the native protocol; 0 means success. Documented in docs/protocol.md."""

    NONE = 0
    UNKNOWN_REQUEST_TYPE = 1
    MALFORMED_REQUEST = 2
    INVALID_TOPIC = 3
    UNKNOWN_TOPIC_OR_PARTITION = 4
    OFFSET_OUT_OF_RANGE = 5
    REQUEST_TOO_LARGE = 6
    TOPIC_ALREADY_EXISTS = 7
    INVALID_PARTITIONS = 8
    STORAGE_ERROR = 9
    TOO_MANY_WAITERS = 10
    SHUTTING_DOWN = 11
    INTERNAL_ERROR = 12
    CORRUPT_RECORD = 13


#: The one table from shared broker errors to wire codes. Lookup walks the exception's
#: MRO, so a subclass added later inherits its parent's code.
_ERROR_CODES: dict[type[BaseException], ErrorCode] = {
    errors.InvalidTopic: ErrorCode.INVALID_TOPIC,
    errors.UnknownTopicOrPartition: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    errors.TopicAlreadyExists: ErrorCode.TOPIC_ALREADY_EXISTS,
    errors.InvalidPartitions: ErrorCode.INVALID_PARTITIONS,
    errors.OffsetOutOfRange: ErrorCode.OFFSET_OUT_OF_RANGE,
    errors.CorruptBatch: ErrorCode.CORRUPT_RECORD,
    errors.RecordTooLarge: ErrorCode.REQUEST_TOO_LARGE,
    errors.StorageError: ErrorCode.STORAGE_ERROR,
    errors.ShuttingDown: ErrorCode.SHUTTING_DOWN,
    errors.TooManyWaiters: ErrorCode.TOO_MANY_WAITERS,
    # The native produce is not idempotent, so these cannot arise from a native request;
    # if the core ever raises them here it is a bug on our side, hence INTERNAL_ERROR.
    errors.DuplicateSequence: ErrorCode.INTERNAL_ERROR,
    errors.OutOfOrderSequence: ErrorCode.INTERNAL_ERROR,
    errors.InvalidProducerEpoch: ErrorCode.INTERNAL_ERROR,
    errors.BrokerError: ErrorCode.INTERNAL_ERROR,
}


def error_code_for(exc: BaseException) -> ErrorCode | None:
    """Return the wire code for a ``brokerd.errors`` exception, or ``None`` for any other
    exception (which the caller should log and answer as ``INTERNAL_ERROR`` without
    revealing its text)."""
    for klass in type(exc).__mro__:
        code = _ERROR_CODES.get(klass)
        if code is not None:
            return code
    return None


# --------------------------------------------------------------------------- requests


@attrs.frozen
class ProduceRequest:
    """Type 1: append ``values`` (in order) to one partition."""

    topic: str
    partition: int
    values: tuple[bytes, ...]


@attrs.frozen
class FetchRequest:
    """Type 2 (the lesson's): records from ``offset`` on; never waits."""

    topic: str
    partition: int
    offset: int


@attrs.frozen
class CreateTopicRequest:
    """Type 3: create ``topic`` with ``partitions`` partitions."""

    topic: str
    partitions: int


@attrs.frozen
class ListOffsetsRequest:
    """Type 4: log start offset and high watermark of one partition."""

    topic: str
    partition: int


@attrs.frozen
class ListTopicsRequest:
    """Type 5: every topic with its partition count."""


@attrs.frozen
class LongPollFetchRequest:
    """Type 6: like Fetch, but parks until ``min_bytes`` of values exist or
    ``max_wait_ms`` passes; answers offsets and the high watermark too."""

    topic: str
    partition: int
    offset: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int


Request = (
    ProduceRequest
    | FetchRequest
    | CreateTopicRequest
    | ListOffsetsRequest
    | ListTopicsRequest
    | LongPollFetchRequest
)


@attrs.frozen
class RequestError:
    """A request the decoder refused.

    ``request_type`` is the type the client sent (it decides the error form: type 2 uses
    the fetch form). ``fatal`` means the frame boundary is lost: answer, then close.
    """

    request_type: int
    code: ErrorCode
    message: str
    fatal: bool = False


RequestEvent = Request | RequestError


# --------------------------------------------------------------------------- responses


@attrs.frozen
class TopicEntry:
    """One topic in a ListTopics response."""

    name: str
    partitions: int


@attrs.frozen
class FetchedRecord:
    """One record in a LongPollFetch response. ``value`` is ``b""`` for a null value."""

    offset: int
    value: bytes


@attrs.frozen
class ProduceResponse:
    base_offset: int


@attrs.frozen
class FetchResponse:
    """Values from the requested offset on; the next fetch starts at offset + len."""

    values: tuple[bytes, ...]


@attrs.frozen
class CreateTopicResponse:
    pass


@attrs.frozen
class ListOffsetsResponse:
    log_start_offset: int
    high_watermark: int


@attrs.frozen
class ListTopicsResponse:
    topics: tuple[TopicEntry, ...]


@attrs.frozen
class LongPollFetchResponse:
    high_watermark: int
    records: tuple[FetchedRecord, ...]


@attrs.frozen
class ErrorResponse:
    """A failed request, any type. ``code`` stays an int: a newer server may send codes
    this client does not know (see :attr:`error_code`)."""

    request_type: int
    code: int
    message: str

    @property
    def error_code(self) -> ErrorCode | None:
        try:
            return ErrorCode(self.code)
        except ValueError:
            return None


Response = (
    ProduceResponse
    | FetchResponse
    | CreateTopicResponse
    | ListOffsetsResponse
    | ListTopicsResponse
    | LongPollFetchResponse
    | ErrorResponse
)


class MalformedResponse(ValueError):
    """The server's bytes do not parse as the response that was expected."""


# --------------------------------------------------------------------------- request encoders


def _check(name: str, value: int, limit: int) -> int:
    if not 0 <= value <= limit:
        raise ValueError(f"{name} {value} is outside 0..{limit}")
    return value


def _topic_bytes(topic: str) -> bytes:
    raw = topic.encode("utf-8")
    _check("topic length", len(raw), _MAX_U16)
    return _U16.pack(len(raw)) + raw


def encode_produce(topic: str, partition: int, values: Sequence[bytes]) -> bytes:
    """Build a type-1 Produce request. Raises ``ValueError`` for values that do not fit
    the wire format (the server applies the tighter limits)."""
    _check("partition", partition, _MAX_U32)
    _check("record count", len(values), _MAX_U32)
    parts = [
        _U16.pack(RequestType.PRODUCE),
        _topic_bytes(topic),
        _PRODUCE_FIXED.pack(partition, len(values)),
    ]
    for value in values:
        parts.append(_U32.pack(_check("value size", len(value), _MAX_U32)))
        parts.append(value)
    return b"".join(parts)


def encode_fetch(topic: str, partition: int, offset: int) -> bytes:
    """Build a type-2 Fetch request (the lesson's)."""
    _check("partition", partition, _MAX_U32)
    _check("offset", offset, _MAX_U64)
    return _U16.pack(RequestType.FETCH) + _topic_bytes(topic) + _FETCH_FIXED.pack(partition, offset)


def encode_create_topic(topic: str, partitions: int) -> bytes:
    """Build a type-3 CreateTopic request."""
    _check("partitions", partitions, _MAX_U32)
    return _U16.pack(RequestType.CREATE_TOPIC) + _topic_bytes(topic) + _U32.pack(partitions)


def encode_list_offsets(topic: str, partition: int) -> bytes:
    """Build a type-4 ListOffsets request."""
    _check("partition", partition, _MAX_U32)
    return _U16.pack(RequestType.LIST_OFFSETS) + _topic_bytes(topic) + _U32.pack(partition)


def encode_list_topics() -> bytes:
    """Build a type-5 ListTopics request (no body)."""
    return _U16.pack(RequestType.LIST_TOPICS)


def encode_long_poll_fetch(
    topic: str,
    partition: int,
    offset: int,
    *,
    max_wait_ms: int,
    min_bytes: int = 1,
    max_bytes: int = DEFAULT_MAX_FETCH_BYTES,
) -> bytes:
    """Build a type-6 LongPollFetch request."""
    _check("partition", partition, _MAX_U32)
    _check("offset", offset, _MAX_U64)
    _check("max_wait_ms", max_wait_ms, _MAX_U32)
    _check("min_bytes", min_bytes, _MAX_U32)
    _check("max_bytes", max_bytes, _MAX_U32)
    return (
        _U16.pack(RequestType.LONG_POLL_FETCH)
        + _topic_bytes(topic)
        + _LONG_POLL_FIXED.pack(partition, offset, max_wait_ms, min_bytes, max_bytes)
    )


def encode_request(request: Request) -> bytes:
    """Encode any request message (the inverse of :class:`RequestDecoder`)."""
    match request:
        case ProduceRequest():
            return encode_produce(request.topic, request.partition, request.values)
        case FetchRequest():
            return encode_fetch(request.topic, request.partition, request.offset)
        case CreateTopicRequest():
            return encode_create_topic(request.topic, request.partitions)
        case ListOffsetsRequest():
            return encode_list_offsets(request.topic, request.partition)
        case ListTopicsRequest():
            return encode_list_topics()
        case LongPollFetchRequest():
            return encode_long_poll_fetch(
                request.topic,
                request.partition,
                request.offset,
                max_wait_ms=request.max_wait_ms,
                min_bytes=request.min_bytes,
                max_bytes=request.max_bytes,
            )
    raise TypeError(f"not a native request: {request!r}")


# --------------------------------------------------------------------------- response encoders


def encode_produce_response(base_offset: int) -> bytes:
    """``u16 error = 0, u64 base_offset``."""
    return _OK_U64.pack(0, base_offset)


def encode_fetch_response(values: Sequence[bytes | None]) -> bytes:
    """``u32 count, count x (u32 size, value)``; a null value is sent as size 0."""
    parts = [_U32.pack(len(values))]
    append = parts.append
    pack = _U32.pack
    for value in values:
        if value is None:
            append(_EMPTY_RECORD)
        else:
            append(pack(len(value)))
            append(value)
    return b"".join(parts)


def encode_create_topic_response() -> bytes:
    """``u16 error = 0``."""
    return _U16.pack(0)


def encode_list_offsets_response(log_start_offset: int, high_watermark: int) -> bytes:
    """``u16 error = 0, u64 log_start_offset, u64 high_watermark``."""
    return _OK_U64_U64.pack(0, log_start_offset, high_watermark)


def encode_list_topics_response(topics: Iterable[tuple[str, int]]) -> bytes:
    """``u16 error = 0, u32 count, count x (u16 name_len, name, u32 partitions)``."""
    body = []
    for name, partitions in topics:
        body.append(_topic_bytes(name))
        body.append(_U32.pack(partitions))
    return _OK_U32.pack(0, len(body) // 2) + b"".join(body)


def encode_long_poll_fetch_response(
    high_watermark: int, records: Sequence[tuple[int, bytes | None]]
) -> bytes:
    """``u16 error = 0, u64 high_watermark, u32 count, count x (u64 offset, u32 size,
    value)``; a null value is sent as size 0."""
    parts = [_OK_U64_U32.pack(0, high_watermark, len(records))]
    append = parts.append
    pack = _OFFSET_SIZE.pack
    for offset, value in records:
        if value is None:
            append(pack(offset, 0))
        else:
            append(pack(offset, len(value)))
            append(value)
    return b"".join(parts)


def _message_bytes(message: str) -> bytes:
    raw = message.encode("utf-8", "replace")
    if len(raw) > MAX_ERROR_MESSAGE_BYTES:
        # Cut, then drop a partial trailing character so the client can decode strictly.
        raw = raw[:MAX_ERROR_MESSAGE_BYTES].decode("utf-8", "ignore").encode("utf-8")
    return raw


def encode_error_response(request_type: int, code: int, message: str) -> bytes:
    """The pinned error forms: ``u16 error, u16 msg_len, message`` for every type but 2;
    a type-2 Fetch puts ``u32 0xFFFFFFFF`` first, where the count would be."""
    if code == 0:
        raise ValueError("an error response needs a non-zero code")
    raw = _message_bytes(message)
    head = _ERROR_HEAD.pack(code, len(raw))
    if request_type == RequestType.FETCH:
        return _U32.pack(FETCH_ERROR_MARKER) + head + raw
    return head + raw


# --------------------------------------------------------------------------- request decoder


class _State(enum.Enum):
    TYPE = enum.auto()  # waiting for the u16 type of the next frame
    TOPIC_LEN = enum.auto()
    TOPIC = enum.auto()
    SKIP_TOPIC = enum.auto()  # discarding an over-long topic
    FIXED = enum.auto()  # the fixed-size fields after the topic
    RECORDS = enum.auto()  # produce records (kept, or discarded once the frame is refused)
    CLOSED = enum.auto()  # frame boundary lost: nothing more is decoded


#: Size of the fixed fields that follow the topic, per request type.
_FIXED_SIZE: dict[int, int] = {
    RequestType.PRODUCE: _PRODUCE_FIXED.size,
    RequestType.FETCH: _FETCH_FIXED.size,
    RequestType.CREATE_TOPIC: 4,
    RequestType.LIST_OFFSETS: 4,
    RequestType.LONG_POLL_FETCH: _LONG_POLL_FIXED.size,
}


class RequestDecoder:
    """Incremental decoder of client requests.

    Bytes go in with :meth:`receive`; :meth:`next_event` decodes one request at a time, so
    a caller that is busy can simply stop asking and leave the rest as raw bytes (that is
    how the protocol bounds memory). :meth:`feed` does both and returns every event.

    Guarantees: never raises on any input (every problem is a :class:`RequestError`);
    allocates nothing from a wire length before checking it against a limit; reports a
    bad frame (invalid topic, over-large produce, ...) with one non-fatal error as soon as
    the fault is known, discards the rest of that frame as it arrives (never buffering
    it), and decodes the next frame normally. Only an unknown request type is fatal,
    because its frame length is unknowable; after it the decoder is closed and ignores
    further input.
    """

    def __init__(self, *, max_produce_bytes: int = DEFAULT_MAX_PRODUCE_BYTES) -> None:
        if max_produce_bytes < PRODUCE_RECORD_OVERHEAD:
            raise ValueError("max_produce_bytes is too small for even one record")
        self._max_produce_bytes = max_produce_bytes
        self._buf = bytearray()
        self._state = _State.TYPE
        # Per-frame state, reset at each frame start.
        self._type = 0
        self._topic = ""
        self._topic_len = 0
        self._skip = 0  # bytes still to discard (an over-long topic, or one refused value)
        self._error: RequestError | None = None  # first fault found in this frame
        self._partition = 0
        self._remaining = 0  # produce records not yet read
        self._budget = 0  # produce bytes still allowed by the cap in this frame
        self._values: list[bytes] = []
        self._ready: RequestEvent | None = None  # decoded, not yet returned

    # ----------------------------------------------------------------- public API

    @property
    def buffered(self) -> int:
        """Bytes received and not yet decoded (excludes values already decoded)."""
        return len(self._buf)

    @property
    def closed(self) -> bool:
        """True after a fatal error: further input is ignored."""
        return self._state is _State.CLOSED

    @property
    def in_frame(self) -> bool:
        """True when part of a frame has arrived but the frame is not complete.

        Only meaningful after :meth:`next_event` returned ``None``.
        """
        if self._state is _State.CLOSED:
            return False
        return self._state is not _State.TYPE or bool(self._buf)

    def receive(self, data: bytes) -> None:
        """Add bytes from the client. Decodes nothing until :meth:`next_event`."""
        if self._state is _State.CLOSED:
            return
        if self._skip and not self._buf:
            # Discarding a refused frame: drop what we can without ever buffering it.
            n = min(self._skip, len(data))
            self._skip -= n
            data = data[n:]
        self._buf += data

    def next_event(self) -> RequestEvent | None:
        """Decode and return the next complete request or error, or ``None`` if more bytes
        are needed (or the decoder is closed).

        An error is returned as soon as it is detected, even though the rest of its frame
        may not have arrived yet: the client learns at once, and the decoder goes on
        discarding that frame's remaining bytes before it decodes the next frame.
        """
        while self._ready is None and self._step():
            pass
        event, self._ready = self._ready, None
        return event

    def feed(self, data: bytes) -> list[RequestEvent]:
        """Receive ``data`` and return every event that is now complete."""
        self.receive(data)
        events: list[RequestEvent] = []
        while (event := self.next_event()) is not None:
            events.append(event)
        return events

    # ----------------------------------------------------------------- steps

    def _step(self) -> bool:
        """Advance the state machine by one step; False when more bytes are needed."""
        state = self._state
        buf = self._buf
        if state is _State.TYPE:
            if len(buf) < 2:
                return False
            self._read_type()
        elif state is _State.TOPIC_LEN:
            if len(buf) < 2:
                return False
            self._read_topic_len()
        elif state is _State.TOPIC:
            if len(buf) < self._topic_len:
                return False
            self._read_topic()
        elif state is _State.SKIP_TOPIC:
            if not self._discard():
                return False
            self._state = _State.FIXED
        elif state is _State.FIXED:
            if len(buf) < _FIXED_SIZE[self._type]:
                return False
            self._read_fixed()
        elif state is _State.RECORDS:
            if not self._read_records():
                return False
            self._end_frame(ProduceRequest(self._topic, self._partition, tuple(self._values)))
        else:  # CLOSED
            return False
        return True

    def _fail(self, code: ErrorCode, message: str) -> None:
        # The first fault in a frame is reported, at once; the frame is still walked to
        # its end (discarding) so that the next frame starts at the right byte.
        if self._error is None:
            self._error = RequestError(self._type, code, message)
            self._ready = self._error

    def _end_frame(self, request: Request | None) -> None:
        """Back to waiting for a type; ``request`` is the event unless the frame failed."""
        if self._error is None:
            assert request is not None
            self._ready = request
        self._state = _State.TYPE
        self._error = None
        self._topic = ""
        self._values = []

    def _read_type(self) -> None:
        (request_type,) = _U16.unpack_from(self._buf)
        del self._buf[:2]
        self._type = request_type
        if request_type == RequestType.LIST_TOPICS:
            self._end_frame(ListTopicsRequest())
        elif request_type in _FIXED_SIZE:
            self._state = _State.TOPIC_LEN
        else:
            # No way to find where this frame ends: answer, then decode nothing more.
            self._state = _State.CLOSED
            self._buf = bytearray()
            self._ready = RequestError(
                request_type,
                ErrorCode.UNKNOWN_REQUEST_TYPE,
                f"unknown request type {request_type}; closing the connection",
                fatal=True,
            )

    def _read_topic_len(self) -> None:
        (length,) = _U16.unpack_from(self._buf)
        del self._buf[:2]
        if length > MAX_TOPIC_LENGTH:
            self._fail(ErrorCode.INVALID_TOPIC, f"topic length {length} exceeds {MAX_TOPIC_LENGTH}")
            self._skip = length
            self._state = _State.SKIP_TOPIC
        else:
            self._topic_len = length
            self._state = _State.TOPIC

    def _read_topic(self) -> None:
        length = self._topic_len
        raw = bytes(self._buf[:length])
        del self._buf[:length]
        self._state = _State.FIXED
        try:
            topic = raw.decode("utf-8")
        except UnicodeDecodeError:
            self._fail(ErrorCode.INVALID_TOPIC, "topic name is not valid UTF-8")
            return
        try:
            self._topic = validate_topic_name(topic)
        except errors.InvalidTopic as exc:
            self._fail(ErrorCode.INVALID_TOPIC, str(exc))

    def _discard(self) -> bool:
        """Drop up to ``self._skip`` buffered bytes; True once all are dropped."""
        n = min(self._skip, len(self._buf))
        if n:
            del self._buf[:n]
            self._skip -= n
        return self._skip == 0

    def _read_fixed(self) -> None:
        buf = self._buf
        request_type = self._type
        topic = self._topic
        request: Request
        if request_type == RequestType.PRODUCE:
            partition, count = _PRODUCE_FIXED.unpack_from(buf)
            del buf[: _PRODUCE_FIXED.size]
            if count == 0:
                self._fail(ErrorCode.MALFORMED_REQUEST, "produce request with no records")
                self._end_frame(None)
                return
            if count > self._max_produce_bytes // PRODUCE_RECORD_OVERHEAD:
                # Cannot fit even with empty values: refuse before reading any of it.
                self._fail(
                    ErrorCode.REQUEST_TOO_LARGE,
                    f"produce of {count} records exceeds the limit of "
                    f"{self._max_produce_bytes} bytes",
                )
            self._partition = partition
            self._remaining = count
            self._budget = self._max_produce_bytes
            self._values = []
            self._state = _State.RECORDS
            return
        if request_type == RequestType.FETCH:
            partition, offset = _FETCH_FIXED.unpack_from(buf)
            request = FetchRequest(topic, partition, offset)
        elif request_type == RequestType.CREATE_TOPIC:
            (partitions,) = _U32.unpack_from(buf)
            if not 1 <= partitions <= MAX_PARTITIONS:
                self._fail(
                    ErrorCode.INVALID_PARTITIONS,
                    f"partitions must be 1..{MAX_PARTITIONS}, not {partitions}",
                )
            request = CreateTopicRequest(topic, partitions)
        elif request_type == RequestType.LIST_OFFSETS:
            (partition,) = _U32.unpack_from(buf)
            request = ListOffsetsRequest(topic, partition)
        else:
            partition, offset, max_wait, min_bytes, max_bytes = _LONG_POLL_FIXED.unpack_from(buf)
            request = LongPollFetchRequest(topic, partition, offset, max_wait, min_bytes, max_bytes)
        del buf[: _FIXED_SIZE[request_type]]
        self._end_frame(request)

    def _read_records(self) -> bool:
        """Consume produce records; True when the last one is done."""
        while True:
            if self._skip and not self._discard():
                return False
            if not self._remaining:
                return True
            if len(self._buf) < 4:
                return False
            if self._error is not None:
                # Refused frame: drop each header; its value is discarded as it arrives.
                (self._skip,) = _U32.unpack_from(self._buf)
                del self._buf[:4]
                self._remaining -= 1
            elif not self._take_values():
                return False

    def _take_values(self) -> bool:
        """Decode the complete records at the front of the buffer. False when the first
        one is still incomplete (and within the limit), so more bytes are needed."""
        buf = self._buf
        (size,) = _U32.unpack_from(buf)
        budget = self._budget
        if size + PRODUCE_RECORD_OVERHEAD > budget:
            # Refuse now, while only the header is here: the value and the rest of the
            # frame are discarded as they arrive, never buffered.
            self._fail(
                ErrorCode.REQUEST_TOO_LARGE,
                f"produce payload exceeds the limit of {self._max_produce_bytes} bytes",
            )
            self._values = []
            return True
        if len(buf) < 4 + size:
            return False
        unpack = _U32.unpack_from
        append = self._values.append
        remaining = self._remaining
        end = len(buf)
        pos = 0
        # Slicing a memoryview copies each value exactly once (a bytearray slice would
        # copy twice), and nothing beyond this frame's records is touched.
        with memoryview(buf) as view:
            while remaining and end - pos >= 4:
                (size,) = unpack(buf, pos)
                start = pos + 4
                stop = start + size
                if size + PRODUCE_RECORD_OVERHEAD > budget or stop > end:
                    break
                append(view[start:stop].tobytes())
                budget -= size + PRODUCE_RECORD_OVERHEAD
                pos = stop
                remaining -= 1
        del buf[:pos]
        self._remaining = remaining
        self._budget = budget
        return True


# --------------------------------------------------------------------------- response decoder


class ResponseDecoder:
    """Incremental client-side decoder of pipelined responses.

    Responses carry no type, so the client says what it sent: call :meth:`expect` once per
    request, in send order, then :meth:`feed` the server's bytes. Large fetch responses
    are scanned incrementally (no rescans as chunks arrive), and nothing is allocated
    from a length before its bytes are all here. Raises :class:`MalformedResponse` for
    bytes that cannot be the expected response (including bytes nobody asked for).
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._expected: deque[int] = deque()
        # The current response's items decoded so far: (items left, position, items).
        self._partial: tuple[int, int, list[Any]] | None = None

    @property
    def pending(self) -> int:
        """Responses expected and not yet decoded."""
        return len(self._expected)

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def expect(self, request_type: int) -> None:
        """Register one sent request whose response will follow the earlier ones."""
        RequestType(request_type)  # raises ValueError for unknown types
        self._expected.append(request_type)

    def feed(self, data: bytes) -> list[Response]:
        """Add server bytes; return every response now complete, in order."""
        self._buf += data
        out: list[Response] = []
        while self._expected:
            result = self._try_decode(self._expected[0])
            if result is None:
                break
            response, used = result
            del self._buf[:used]
            self._expected.popleft()
            self._partial = None
            out.append(response)
        if self._buf and not self._expected:
            raise MalformedResponse(f"{len(self._buf)} unexpected bytes from the server")
        return out

    # ----------------------------------------------------------------- internals

    def _error(self, request_type: int, pos: int) -> tuple[Response, int] | None:
        buf = self._buf
        if len(buf) < pos + 4:
            return None
        code, length = _ERROR_HEAD.unpack_from(buf, pos)
        end = pos + 4 + length
        if len(buf) < end:
            return None
        try:
            message = bytes(buf[pos + 4 : end]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedResponse("error message is not valid UTF-8") from exc
        return ErrorResponse(request_type, code, message), end

    def _try_decode(self, request_type: int) -> tuple[Response, int] | None:
        buf = self._buf
        if request_type == RequestType.FETCH:
            if len(buf) < 4:
                return None
            (count,) = _U32.unpack_from(buf)
            if count == FETCH_ERROR_MARKER:
                return self._error(request_type, 4)
            return self._records(count, 4, with_offsets=False)
        if len(buf) < 2:
            return None
        (code,) = _U16.unpack_from(buf)
        if code != 0:
            return self._error(request_type, 0)
        if request_type == RequestType.PRODUCE:
            if len(buf) < _OK_U64.size:
                return None
            return ProduceResponse(_OK_U64.unpack_from(buf)[1]), _OK_U64.size
        if request_type == RequestType.CREATE_TOPIC:
            return CreateTopicResponse(), 2
        if request_type == RequestType.LIST_OFFSETS:
            if len(buf) < _OK_U64_U64.size:
                return None
            _, start, high = _OK_U64_U64.unpack_from(buf)
            return ListOffsetsResponse(start, high), _OK_U64_U64.size
        if request_type == RequestType.LIST_TOPICS:
            if len(buf) < _OK_U32.size:
                return None
            return self._topics(_OK_U32.unpack_from(buf)[1], _OK_U32.size)
        # LONG_POLL_FETCH
        if len(buf) < _OK_U64_U32.size:
            return None
        _, _high, count = _OK_U64_U32.unpack_from(buf)
        return self._records(count, _OK_U64_U32.size, with_offsets=True)

    def _resume(self, count: int, start: int) -> tuple[int, int, list[Any]]:
        """Where the current response's items stand: (items left, position, items)."""
        if self._partial is None:
            return count, start, []
        return self._partial

    def _records(
        self, count: int, start: int, *, with_offsets: bool
    ) -> tuple[Response, int] | None:
        # Items are decoded as they arrive and kept between feeds, so a large response
        # arriving in many chunks is parsed once, not rescanned.
        left, pos, items = self._resume(count, start)
        buf = self._buf
        end = len(buf)
        with memoryview(buf) as view:
            if with_offsets:
                unpack_record = _OFFSET_SIZE.unpack_from
                while left and end - pos >= 12:
                    offset, size = unpack_record(buf, pos)
                    stop = pos + 12 + size
                    if stop > end:
                        break
                    items.append(FetchedRecord(offset, view[pos + 12 : stop].tobytes()))
                    pos = stop
                    left -= 1
            else:
                unpack_size = _U32.unpack_from
                while left and end - pos >= 4:
                    (size,) = unpack_size(buf, pos)
                    stop = pos + 4 + size
                    if stop > end:
                        break
                    items.append(view[pos + 4 : stop].tobytes())
                    pos = stop
                    left -= 1
        if left:
            self._partial = (left, pos, items)
            return None
        if with_offsets:
            (high,) = _U64.unpack_from(buf, 2)
            return LongPollFetchResponse(high, tuple(items)), pos
        return FetchResponse(tuple(items)), pos

    def _topics(self, count: int, start: int) -> tuple[Response, int] | None:
        left, pos, items = self._resume(count, start)
        buf = self._buf
        end = len(buf)
        while left and end - pos >= 2:
            (length,) = _U16.unpack_from(buf, pos)
            stop = pos + 2 + length + 4
            if stop > end:
                break
            try:
                name = bytes(buf[pos + 2 : stop - 4]).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise MalformedResponse("topic name is not valid UTF-8") from exc
            (partitions,) = _U32.unpack_from(buf, stop - 4)
            items.append(TopicEntry(name, partitions))
            pos = stop
            left -= 1
        if left:
            self._partial = (left, pos, items)
            return None
        return ListTopicsResponse(tuple(items)), pos


def decode_response(request_type: int, data: bytes) -> Response:
    """Decode one complete response to a request of ``request_type``. Raises
    :class:`MalformedResponse` if ``data`` is incomplete or has bytes left over."""
    decoder = ResponseDecoder()
    decoder.expect(request_type)
    responses = decoder.feed(data)
    if not responses:
        raise MalformedResponse("incomplete response")
    return responses[0]
