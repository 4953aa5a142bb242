# -*- test-case-name: tests.native.test_server_codec -*-
"""The server half of the native codec: requests in, responses out (sans-IO).

What this module does:

* :class:`RequestDecoder` turns the bytes a client sends into request messages
  (``brokerd.native.messages``) or typed :class:`~brokerd.native.messages.RequestError`
  events. It walks the request layout table (``brokerd.native.wire``), checks every
  wire length against a named limit *before* it buffers or allocates anything from it,
  and skips the rest of a refused frame without buffering it, so one bad request costs
  one error response and nothing more.
* ``encode_*_response`` functions build the server's answers, and
  :func:`encode_error_response` builds the two pinned error forms.

What it does not do: no I/O, no Twisted, no timers, no calls into the broker core; the
client half (request encoders, response decoder) is ``brokerd.native.client_codec``.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Iterable, Sequence

from brokerd import errors
from brokerd.names import MAX_TOPIC_LENGTH, validate_topic_name
from brokerd.native import operator_wire, queue_wire
from brokerd.native.batch_framing import FramedValues
from brokerd.native.messages import (
    DEFAULT_MAX_PRODUCE_BYTES,
    FETCH_ERROR_MARKER,
    MAX_ERROR_MESSAGE_BYTES,
    OPERATOR_REQUEST_TYPES,
    PRODUCE_RECORD_OVERHEAD,
    QUEUE_REQUEST_TYPES,
    ErrorCode,
    ProduceRequest,
    Request,
    RequestError,
    RequestEvent,
    RequestType,
)
from brokerd.native.operator_messages import MAX_OPERATOR_REQUEST_BYTES
from brokerd.native.wire import (
    EMPTY_RECORD,
    ERROR_HEAD,
    OFFSET_SIZE,
    OK_U32,
    OK_U64,
    OK_U64_U32,
    OK_U64_U64,
    REQUEST_LAYOUTS,
    U16,
    U32,
    RequestLayout,
    fixed_records,
    string_bytes,
)

__all__ = [
    "RequestDecoder",
    "encode_create_topic_response",
    "encode_error_response",
    "encode_fetch_response",
    "encode_framed_fetch_response",
    "encode_list_offsets_response",
    "encode_list_topics_response",
    "encode_long_poll_fetch_response",
    "encode_produce_response",
]

# --------------------------------------------------------------------------- response encoders


def encode_produce_response(base_offset: int) -> bytes:
    """``u16 error = 0, u64 base_offset``."""
    return OK_U64.pack(0, base_offset)


def encode_fetch_response(values: Sequence[bytes | None]) -> bytes:
    """``u32 count, count x (u32 size, value)``; a null value is sent as size 0."""
    parts = [U32.pack(len(values))]
    append = parts.append
    pack = U32.pack
    for value in values:
        if value is None:
            append(EMPTY_RECORD)
        else:
            append(pack(len(value)))
            append(value)
    return b"".join(parts)


def encode_framed_fetch_response(framed: FramedValues) -> bytes:
    """The Fetch answer of records framed straight from stored batches: the count,
    then the framed records, in one join."""
    parts = framed.parts
    return b"".join((U32.pack(framed.count), *parts)) if parts else U32.pack(0)


def encode_create_topic_response() -> bytes:
    """``u16 error = 0``."""
    return U16.pack(0)


def encode_list_offsets_response(log_start_offset: int, high_watermark: int) -> bytes:
    """``u16 error = 0, u64 log_start_offset, u64 high_watermark``."""
    return OK_U64_U64.pack(0, log_start_offset, high_watermark)


def encode_list_topics_response(topics: Iterable[tuple[str, int]]) -> bytes:
    """``u16 error = 0, u32 count, count x (u16 name_len, name, u32 partitions)``."""
    body = []
    for name, partitions in topics:
        body.append(string_bytes(name))
        body.append(U32.pack(partitions))
    return OK_U32.pack(0, len(body) // 2) + b"".join(body)


def encode_long_poll_fetch_response(
    high_watermark: int, records: Sequence[tuple[int, bytes | None]]
) -> bytes:
    """``u16 error = 0, u64 high_watermark, u32 count, count x (u64 offset, u32 size,
    value)``; a null value is sent as size 0."""
    parts = [OK_U64_U32.pack(0, high_watermark, len(records))]
    append = parts.append
    pack = OFFSET_SIZE.pack
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
    head = ERROR_HEAD.pack(code, len(raw))
    if request_type == RequestType.FETCH:
        return U32.pack(FETCH_ERROR_MARKER) + head + raw
    return head + raw


# --------------------------------------------------------------------------- request decoder


class _State(enum.Enum):
    TYPE = enum.auto()  # waiting for the u16 type of the next frame
    TOPIC_LEN = enum.auto()
    TOPIC = enum.auto()
    SKIP_TOPIC = enum.auto()  # discarding an over-long topic
    FIXED = enum.auto()  # the fixed-size fields after the topic
    RECORDS = enum.auto()  # produce records (kept, or discarded once the frame is refused)
    OPERATOR_LEN = enum.auto()  # an admin request's u32 body length
    OPERATOR_BODY = enum.auto()  # its body, buffered whole once its length was accepted
    SKIP_BODY = enum.auto()  # discarding a refused (over-long) admin body
    CLOSED = enum.auto()  # frame boundary lost: nothing more is decoded


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
        self._layout: RequestLayout | None = None  # of the frame being decoded
        self._topic = ""
        self._topic_len = 0
        self._body_len = 0  # an admin request's accepted body length
        self._skip = 0  # bytes still to discard (an over-long topic, or one refused value)
        self._error: RequestError | None = None  # first fault found in this frame
        self._partition = 0
        self._remaining = 0  # produce records not yet read
        self._budget = 0  # produce bytes still allowed by the cap in this frame
        self._values: list[bytes] = []
        self._values_bytes = 0  # their sizes, as the request budget counts them
        self._ready: RequestEvent | None = None  # decoded, not yet returned
        self._received = 0  # bytes ever put into the buffer
        self._frame_start = 0  # bytes taken out of it before this frame began
        #: Request bytes of the last frame completed (what its request holds).
        self.last_frame_bytes = 0

    # ----------------------------------------------------------------- public API

    @property
    def buffered(self) -> int:
        """Bytes received and not yet decoded (excludes values already decoded)."""
        return len(self._buf)

    @property
    def held(self) -> int:
        """Bytes held for requests not yet returned: undecoded, plus the values of a
        produce frame decoded so far."""
        return len(self._buf) + self._values_bytes

    @property
    def owed(self) -> int:
        """Bytes a length already read announced (a produce value within the limit,
        an admin body) that have not arrived yet."""
        buf = self._buf
        if self._state is _State.OPERATOR_BODY:
            return max(0, self._body_len - len(buf))
        if (
            self._state is _State.RECORDS
            and self._error is None
            and self._remaining
            and not self._skip
            and len(buf) >= 4
        ):
            size: int = U32.unpack_from(buf)[0]
            if size + PRODUCE_RECORD_OVERHEAD <= self._budget:
                return max(0, 4 + size - len(buf))
        return 0

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
        self._received += len(data)

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
            assert self._layout is not None
            if len(buf) < self._layout.fixed.size:
                return False
            self._read_fixed()
        elif state is _State.RECORDS:
            if not self._read_records():
                return False
            self._end_frame(ProduceRequest(self._topic, self._partition, tuple(self._values)))
        elif state is _State.OPERATOR_LEN:
            if len(buf) < operator_wire.BODY_LENGTH.size:
                return False
            self._read_admin_length()
        elif state is _State.OPERATOR_BODY:
            if len(buf) < self._body_len:
                return False
            self._read_admin_body()
        elif state is _State.SKIP_BODY:
            if not self._discard():
                return False
            self._end_frame(None)
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
        self.last_frame_bytes = self._received - len(self._buf) - self._frame_start
        self._state = _State.TYPE
        self._error = None
        self._layout = None
        self._topic = ""
        self._values = []
        self._values_bytes = 0

    def _read_type(self) -> None:
        self._frame_start = self._received - len(self._buf)
        (request_type,) = U16.unpack_from(self._buf)
        del self._buf[:2]
        self._type = request_type
        layout = REQUEST_LAYOUTS.get(request_type)
        if request_type in OPERATOR_REQUEST_TYPES or request_type in QUEUE_REQUEST_TYPES:
            self._state = _State.OPERATOR_LEN
        elif layout is not None:
            self._layout = layout
            self._state = _State.TOPIC_LEN if layout.has_topic else _State.FIXED
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

    def _read_admin_length(self) -> None:
        (length,) = operator_wire.BODY_LENGTH.unpack_from(self._buf)
        del self._buf[: operator_wire.BODY_LENGTH.size]
        if length > MAX_OPERATOR_REQUEST_BYTES:
            # The frame says where it ends, so refusing it costs only the skipping.
            self._fail(
                ErrorCode.REQUEST_TOO_LARGE,
                f"admin request body of {length} bytes exceeds {MAX_OPERATOR_REQUEST_BYTES}",
            )
            self._skip = length
            self._state = _State.SKIP_BODY
        else:
            self._body_len = length
            self._state = _State.OPERATOR_BODY

    def _read_admin_body(self) -> None:
        length = self._body_len
        body = bytes(self._buf[:length])
        del self._buf[:length]
        try:
            request: Request
            if self._type in QUEUE_REQUEST_TYPES:
                request = queue_wire.parse_body(self._type, body)
            else:
                request = operator_wire.parse_body(self._type, body)
        except operator_wire.OperatorWireError as exc:
            self._fail(exc.code, str(exc))
            self._end_frame(None)
            return
        self._end_frame(request)

    def _read_topic_len(self) -> None:
        (length,) = U16.unpack_from(self._buf)
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
        layout = self._layout
        assert layout is not None
        values: tuple[int, ...] = layout.fixed.unpack_from(self._buf)
        del self._buf[: layout.fixed.size]
        if layout.has_records:
            self._start_records(*values)
            return
        if layout.check is not None:
            refusal = layout.check(values)
            if refusal is not None:
                self._fail(*refusal)
        if layout.has_topic:
            self._end_frame(layout.message(self._topic, *values))
        else:
            self._end_frame(layout.message(*values))

    def _start_records(self, partition: int, count: int) -> None:
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
        self._values_bytes = 0
        self._state = _State.RECORDS

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
                (self._skip,) = U32.unpack_from(self._buf)
                del self._buf[:4]
                self._remaining -= 1
            elif not self._take_values():
                return False

    def _take_values(self) -> bool:
        """Decode the complete records at the front of the buffer. False when the first
        one is still incomplete (and within the limit), so more bytes are needed."""
        buf = self._buf
        (size,) = U32.unpack_from(buf)
        budget = self._budget
        if size + PRODUCE_RECORD_OVERHEAD > budget:
            # Refuse now, while only the header is here: the value and the rest of the
            # frame are discarded as they arrive, never buffered.
            self._fail(
                ErrorCode.REQUEST_TOO_LARGE,
                f"produce payload exceeds the limit of {self._max_produce_bytes} bytes",
            )
            self._values = []
            self._values_bytes = 0
            return True
        if len(buf) < 4 + size:
            return False
        unpack = U32.unpack_from
        append = self._values.append
        remaining = self._remaining
        end = len(buf)
        pos = 0
        # Slicing a memoryview copies each value exactly once (a bytearray slice would
        # copy twice), and nothing beyond this frame's records is touched.
        with memoryview(buf) as view:
            if remaining > 1:
                pos, remaining, budget = _take_equal(buf, view, remaining, budget, self._values)
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
        self._values_bytes += pos
        self._remaining = remaining
        self._budget = budget
        return True


def _take_equal(
    buf: bytearray, view: memoryview, remaining: int, budget: int, values: list[bytes]
) -> tuple[int, int, int]:
    """Take the produce records at the front of ``buf`` in bulk while their values all
    have the first one's size and fit ``budget``: every size field of the run is checked
    against the first, across the run at once, before any value is taken; then the
    values are sliced at computed places. Returns ``(bytes taken, records still to
    read, budget left)``; the record loop goes on from there."""
    (size,) = U32.unpack_from(buf)
    step = size + PRODUCE_RECORD_OVERHEAD
    run = min(remaining, len(buf) // step, budget // step)
    if run < 2:
        return 0, remaining, budget
    stop = run * step
    for k in range(4):
        if buf[k:stop:step] != buf[k : k + 1] * run:
            return 0, remaining, budget
    values.extend(map(_first, fixed_records(4, size, 0).iter_unpack(view[:stop])))
    return stop, remaining - run, budget - stop


_first = operator.itemgetter(0)
