"""The client half of the native codec: requests out, responses in (sans-IO).

What this module does: builds request frames from messages by walking the request
layout table (``brokerd.native.wire``; the admin types' bodies are
``brokerd.native.operator_wire``'s): :func:`encode_request` for any message, and one
``encode_<type>`` shortcut per request type 1 to 6; and decodes the server's answers:
:class:`ResponseDecoder` for pipelined responses arriving in chunks,
:func:`decode_response` for one complete response. Used by ``brokerd.client`` (and so
``brokerctl``), tests and benchmarks.

What it does not do: no I/O, no sockets, no retries. It checks only that values fit
their wire fields; the server applies the tighter limits. The server half (request
decoder, response encoders) is ``brokerd.native.server_codec``.
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Sequence
from typing import cast

from brokerd.native import operator_wire, queue_wire
from brokerd.native.messages import (
    DEFAULT_MAX_FETCH_BYTES,
    FETCH_ERROR_MARKER,
    OPERATOR_REQUEST_TYPES,
    QUEUE_REQUEST_TYPES,
    CreateTopicRequest,
    CreateTopicResponse,
    ErrorResponse,
    FetchedRecord,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListTopicsRequest,
    ListTopicsResponse,
    LongPollFetchRequest,
    LongPollFetchResponse,
    MalformedResponse,
    ProduceRequest,
    ProduceResponse,
    Request,
    RequestType,
    Response,
    TopicEntry,
)
from brokerd.native.wire import (
    ERROR_HEAD,
    LAYOUT_OF_CLASS,
    MAX_U32,
    OFFSET_SIZE,
    OK_U32,
    OK_U64,
    OK_U64_U32,
    OK_U64_U64,
    U16,
    U32,
    U64,
    check_range,
    fixed_records,
    string_bytes,
)

__all__ = [
    "ResponseDecoder",
    "decode_response",
    "encode_create_topic",
    "encode_fetch",
    "encode_list_offsets",
    "encode_list_topics",
    "encode_long_poll_fetch",
    "encode_produce",
    "encode_request",
]

# --------------------------------------------------------------------------- request encoders


def encode_request(request: Request) -> bytes:
    """Encode any request message (the inverse of the server's ``RequestDecoder``).
    Raises ``ValueError`` for values that do not fit the wire format."""
    if type(request) in operator_wire.TYPE_OF_CLASS:
        return operator_wire.encode_request(request)  # type: ignore[arg-type]
    if type(request) in queue_wire.TYPE_OF_CLASS:
        return queue_wire.encode_request(request)  # type: ignore[arg-type]
    layout = LAYOUT_OF_CLASS.get(type(request))
    if layout is None:
        raise TypeError(f"not a native request: {request!r}")
    parts = [U16.pack(layout.request_type)]
    if layout.has_topic:
        parts.append(string_bytes(getattr(request, "topic")))  # noqa: B009
    fixed = [check_range(f.name, getattr(request, f.name), f.maximum) for f in layout.fields]
    parts.append(layout.fixed.pack(*fixed))
    if isinstance(request, ProduceRequest):
        for value in request.values:
            parts.append(U32.pack(check_range("value size", len(value), MAX_U32)))
            parts.append(value)
    return b"".join(parts)


def encode_produce(topic: str, partition: int, values: Sequence[bytes]) -> bytes:
    """Build a type-1 Produce request."""
    return encode_request(ProduceRequest(topic, partition, tuple(values)))


def encode_fetch(topic: str, partition: int, offset: int) -> bytes:
    """Build a type-2 Fetch request."""
    return encode_request(FetchRequest(topic, partition, offset))


def encode_create_topic(topic: str, partitions: int) -> bytes:
    """Build a type-3 CreateTopic request."""
    return encode_request(CreateTopicRequest(topic, partitions))


def encode_list_offsets(topic: str, partition: int) -> bytes:
    """Build a type-4 ListOffsets request."""
    return encode_request(ListOffsetsRequest(topic, partition))


def encode_list_topics() -> bytes:
    """Build a type-5 ListTopics request (no body)."""
    return encode_request(ListTopicsRequest())


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
    return encode_request(
        LongPollFetchRequest(topic, partition, offset, max_wait_ms, min_bytes, max_bytes)
    )


# --------------------------------------------------------------------------- response decoder

#: One decoded item of a response being assembled: a Fetch value, a LongPollFetch record
#: or a ListTopics entry (each response holds one kind).
_Item = bytes | FetchedRecord | TopicEntry


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
        self._partial: tuple[int, int, list[_Item]] | None = None

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
        code, length = ERROR_HEAD.unpack_from(buf, pos)
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
            (count,) = U32.unpack_from(buf)
            if count == FETCH_ERROR_MARKER:
                return self._error(request_type, 4)
            return self._records(count, 4, with_offsets=False)
        if len(buf) < 2:
            return None
        (code,) = U16.unpack_from(buf)
        if code != 0:
            return self._error(request_type, 0)
        if request_type in OPERATOR_REQUEST_TYPES:
            return operator_wire.decode_answer(request_type, buf)
        if request_type in QUEUE_REQUEST_TYPES:
            return queue_wire.decode_answer(request_type, buf)
        if request_type == RequestType.PRODUCE:
            if len(buf) < OK_U64.size:
                return None
            return ProduceResponse(OK_U64.unpack_from(buf)[1]), OK_U64.size
        if request_type == RequestType.CREATE_TOPIC:
            return CreateTopicResponse(), 2
        if request_type == RequestType.LIST_OFFSETS:
            if len(buf) < OK_U64_U64.size:
                return None
            _, start, high = OK_U64_U64.unpack_from(buf)
            return ListOffsetsResponse(start, high), OK_U64_U64.size
        if request_type == RequestType.LIST_TOPICS:
            if len(buf) < OK_U32.size:
                return None
            return self._topics(OK_U32.unpack_from(buf)[1], OK_U32.size)
        # LONG_POLL_FETCH
        if len(buf) < OK_U64_U32.size:
            return None
        _, _high, count = OK_U64_U32.unpack_from(buf)
        return self._records(count, OK_U64_U32.size, with_offsets=True)

    def _resume(self, count: int, start: int) -> tuple[int, int, list[_Item]]:
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
                unpack_record = OFFSET_SIZE.unpack_from
                while left and end - pos >= 12:
                    offset, size = unpack_record(buf, pos)
                    stop = pos + 12 + size
                    if stop > end:
                        break
                    items.append(FetchedRecord(offset, view[pos + 12 : stop].tobytes()))
                    pos = stop
                    left -= 1
            else:
                unpack_size = U32.unpack_from
                if left > 1 and end - pos >= 4:
                    pos, left = _take_uniform(buf, view, pos, end, left, items)
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
            (high,) = U64.unpack_from(buf, 2)
            return LongPollFetchResponse(high, cast(tuple[FetchedRecord, ...], tuple(items))), pos
        return FetchResponse(cast(tuple[bytes, ...], tuple(items))), pos

    def _topics(self, count: int, start: int) -> tuple[Response, int] | None:
        left, pos, items = self._resume(count, start)
        buf = self._buf
        end = len(buf)
        while left and end - pos >= 2:
            (length,) = U16.unpack_from(buf, pos)
            stop = pos + 2 + length + 4
            if stop > end:
                break
            try:
                name = bytes(buf[pos + 2 : stop - 4]).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise MalformedResponse("topic name is not valid UTF-8") from exc
            (partitions,) = U32.unpack_from(buf, stop - 4)
            items.append(TopicEntry(name, partitions))
            pos = stop
            left -= 1
        if left:
            self._partial = (left, pos, items)
            return None
        return ListTopicsResponse(cast(tuple[TopicEntry, ...], tuple(items))), pos


def _take_uniform(
    buf: bytearray, view: memoryview, pos: int, end: int, left: int, items: list[_Item]
) -> tuple[int, int]:
    """Take the Fetch values at ``pos`` in bulk while they all have the first one's size:
    that is checked, not assumed (every size field of the run is compared, across the
    run at once, with the first), then the values are sliced at computed places with no
    size read per value. Returns the new ``(pos, left)``; the loop takes what remains."""
    (size,) = U32.unpack_from(buf, pos)
    step = 4 + size
    run = min(left, (end - pos) // step)
    if run < 2:
        return pos, left
    stop = pos + run * step
    head = buf[pos : pos + 4]
    for k in range(4):
        if buf[pos + k : stop : step] != head[k : k + 1] * run:
            return pos, left
    items.extend(map(_first, fixed_records(4, size, 0).iter_unpack(view[pos:stop])))
    return stop, left - run


_first = operator.itemgetter(0)


def decode_response(request_type: int, data: bytes) -> Response:
    """Decode one complete response to a request of ``request_type``. Raises
    :class:`MalformedResponse` if ``data`` is incomplete or has bytes left over."""
    decoder = ResponseDecoder()
    decoder.expect(request_type)
    responses = decoder.feed(data)
    if not responses:
        raise MalformedResponse("incomplete response")
    return responses[0]
