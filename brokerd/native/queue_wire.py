# -*- test-case-name: tests.native.test_queue_wire -*-
"""Byte layouts of the native queue requests (types 15 to 18) and their answers (sans-IO).

A queue request is framed like an admin request, ``u16 type, u32 body_len, body``, so
the server's decoder checks ``body_len`` before buffering and hands a complete body to
:func:`parse_body` (the body is read with the admin bodies' checked reader). Every
success answer is ``u16 error = 0, u32 body_len, body``: a client checks ``body_len``
against :data:`~brokerd.native.queue_messages.MAX_QUEUE_ANSWER_BYTES` before waiting for
the body, then parses it whole (:func:`decode_answer`). The describe and list answers'
bodies are compact UTF-8 JSON documents, as the admin answers'. The layouts are
specified in ``docs/protocol.md``, section 2.9.

What this module does not do: buffer a stream, do I/O, or decide what a request means
beyond the wire's own rules (names valid, counts within limits).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from brokerd.native.messages import ErrorCode, MalformedResponse, RequestType
from brokerd.native.operator_messages import JsonValue, OperatorResponse
from brokerd.native.operator_wire import (
    BodyReader,
    OperatorWireError,
    answer_body,
    document_answer,
    frame_request,
    json_document,
    read_body,
)
from brokerd.native.queue_messages import (
    MAX_QUEUE_ACK_OFFSETS,
    MAX_QUEUE_ACK_RANGES,
    MAX_QUEUE_ANSWER_BYTES,
    MAX_QUEUE_RECORDS,
    AckKind,
    AckRange,
    DescribeShareGroupRequest,
    ListShareGroupsRequest,
    QueueAckRequest,
    QueueAckResponse,
    QueueFetchRequest,
    QueueFetchResponse,
    QueueRecord,
    QueueRequest,
)
from brokerd.native.wire import MAX_U16, MAX_U32, MAX_U64, U32, check_range, string_bytes

__all__ = [
    "TYPE_OF_CLASS",
    "QueueAnswer",
    "decode_answer",
    "encode_ack_answer",
    "encode_document_answer",
    "encode_fetch_answer",
    "encode_request",
    "parse_body",
]

TYPE_OF_CLASS: dict[type, RequestType] = {
    QueueFetchRequest: RequestType.QUEUE_FETCH,
    QueueAckRequest: RequestType.QUEUE_ACKNOWLEDGE,
    DescribeShareGroupRequest: RequestType.DESCRIBE_SHARE_GROUP,
    ListShareGroupsRequest: RequestType.LIST_SHARE_GROUPS,
}

#: What a client decodes from a successful queue answer.
QueueAnswer = QueueFetchResponse | QueueAckResponse | OperatorResponse

_U8 = struct.Struct(">B")
_U64 = struct.Struct(">Q")
_OK_BODY = struct.Struct(">HI")  # error = 0, body_len
_RANGE = struct.Struct(">QQB")  # first, last, kind
_RECORD_HEAD = struct.Struct(">QH")  # offset, delivery_count
#: The smallest record of a fetch answer: offset, delivery count, two empty sizes.
_MIN_RECORD = _RECORD_HEAD.size + 8


# --------------------------------------------------------------------------- requests


def _fetch(body: BodyReader) -> QueueFetchRequest:
    group = body.group()
    topic = body.topic()
    partition = body.u32("partition")
    max_records = body.u32("max records")
    if not 1 <= max_records <= MAX_QUEUE_RECORDS:
        raise OperatorWireError(
            ErrorCode.MALFORMED_REQUEST,
            f"max records must be 1..{MAX_QUEUE_RECORDS}, not {max_records}",
        )
    max_wait_ms = body.u32("max wait")
    return QueueFetchRequest(group, topic, partition, max_records, max_wait_ms)


def _ack(body: BodyReader) -> QueueAckRequest:
    group = body.group()
    topic = body.topic()
    partition = body.u32("partition")
    count = body.count("range count", MAX_QUEUE_ACK_RANGES, _RANGE.size)
    if count == 0:
        raise OperatorWireError(ErrorCode.MALFORMED_REQUEST, "an acknowledgement needs a range")
    ranges: list[AckRange] = []
    covered = 0
    for _ in range(count):
        first = body.u64("first offset")
        last = body.u64("last offset")
        raw_kind = body.u8("acknowledgement kind")
        if last < first or last > 2**63 - 1:
            raise OperatorWireError(
                ErrorCode.MALFORMED_REQUEST, f"bad offset range {first}..{last}"
            )
        covered += last - first + 1
        if covered > MAX_QUEUE_ACK_OFFSETS:
            raise OperatorWireError(
                ErrorCode.MALFORMED_REQUEST,
                f"the ranges cover more than {MAX_QUEUE_ACK_OFFSETS} offsets",
            )
        try:
            kind = AckKind(raw_kind)
        except ValueError:
            raise OperatorWireError(
                ErrorCode.MALFORMED_REQUEST, f"unknown acknowledgement kind {raw_kind}"
            ) from None
        ranges.append(AckRange(first, last, kind))
    return QueueAckRequest(group, topic, partition, tuple(ranges))


#: How the body of each queue request type is read.
_PARSERS: dict[int, Callable[[BodyReader], QueueRequest]] = {
    RequestType.QUEUE_FETCH: _fetch,
    RequestType.QUEUE_ACKNOWLEDGE: _ack,
    RequestType.DESCRIBE_SHARE_GROUP: lambda body: DescribeShareGroupRequest(body.group()),
    RequestType.LIST_SHARE_GROUPS: lambda body: ListShareGroupsRequest(),
}


def parse_body(request_type: int, data: bytes) -> QueueRequest:
    """The request of queue type ``request_type`` whose complete body is ``data``.
    Raises :class:`OperatorWireError` (never anything else) for a body it refuses."""
    return read_body(_PARSERS, request_type, data, "a queue")


def _body(request: QueueRequest) -> bytes:
    match request:
        case QueueFetchRequest():
            return b"".join((
                string_bytes(request.group_id, "group id"),
                string_bytes(request.topic, "topic"),
                U32.pack(check_range("partition", request.partition, MAX_U32)),
                U32.pack(check_range("max records", request.max_records, MAX_U32)),
                U32.pack(check_range("max wait", request.max_wait_ms, MAX_U32)),
            ))
        case QueueAckRequest():
            parts = [
                string_bytes(request.group_id, "group id"),
                string_bytes(request.topic, "topic"),
                U32.pack(check_range("partition", request.partition, MAX_U32)),
                U32.pack(check_range("range count", len(request.ranges), MAX_U32)),
            ]
            for r in request.ranges:
                parts.append(_RANGE.pack(
                    check_range("first offset", r.first, MAX_U64),
                    check_range("last offset", r.last, MAX_U64),
                    int(r.kind),
                ))
            return b"".join(parts)
        case DescribeShareGroupRequest():
            return string_bytes(request.group_id, "group id")
        case ListShareGroupsRequest():
            return b""
    raise TypeError(f"not a native queue request: {request!r}")


def encode_request(request: QueueRequest) -> bytes:
    """``u16 type, u32 body_len, body``. Raises ``ValueError`` for values the wire
    cannot carry (the server applies the tighter limits)."""
    return frame_request(TYPE_OF_CLASS[type(request)], _body(request))


# --------------------------------------------------------------------------- answers


def _answer(body: bytes) -> bytes:
    return _OK_BODY.pack(0, len(body)) + body


def encode_fetch_answer(records: Sequence[QueueRecord]) -> bytes:
    """``u16 error = 0, u32 body_len``, body: ``u32 count, count x (u64 offset, u16
    delivery_count, u32 key_size, key, u32 value_size, value)``."""
    parts = [U32.pack(len(records))]
    for r in records:
        parts.append(_RECORD_HEAD.pack(r.offset, min(r.delivery_count, MAX_U16)))
        parts += [U32.pack(len(r.key)), r.key, U32.pack(len(r.value)), r.value]
    return _answer(b"".join(parts))


def encode_ack_answer() -> bytes:
    """``u16 error = 0, u32 body_len = 0``."""
    return _answer(b"")


def encode_document_answer(document: JsonValue) -> bytes:
    """``u16 error = 0, u32 json_len, json``; raises :class:`OperatorWireError`
    (RESPONSE_TOO_LARGE) above the admin answers' limit."""
    return document_answer(document)


def _fetch_records(body: bytes) -> QueueFetchResponse:
    if len(body) < 4:
        raise MalformedResponse("queue fetch answer ends inside its count")
    (count,) = U32.unpack_from(body)
    if count > MAX_QUEUE_RECORDS or count * _MIN_RECORD > len(body) - 4:
        raise MalformedResponse(f"queue fetch answer: {count} records cannot fit its body")
    pos = 4
    records: list[QueueRecord] = []
    for _ in range(count):
        if pos + _RECORD_HEAD.size + 4 > len(body):
            raise MalformedResponse("queue fetch answer ends inside a record")
        offset, delivery = _RECORD_HEAD.unpack_from(body, pos)
        pos += _RECORD_HEAD.size
        fields: list[bytes] = []
        for what in ("key", "value"):
            if pos + 4 > len(body):
                raise MalformedResponse(f"queue fetch answer ends inside a {what} size")
            (size,) = U32.unpack_from(body, pos)
            pos += 4
            if size > len(body) - pos:
                raise MalformedResponse(f"queue fetch answer: {what} of {size} bytes overruns")
            fields.append(body[pos : pos + size])
            pos += size
        records.append(QueueRecord(offset, delivery, fields[0], fields[1]))
    if pos != len(body):
        raise MalformedResponse(f"queue fetch answer: {len(body) - pos} bytes after the records")
    return QueueFetchResponse(tuple(records))


def decode_answer(
    request_type: int, buf: bytes | bytearray, *, limit: int = MAX_QUEUE_ANSWER_BYTES
) -> tuple[QueueAnswer, int] | None:
    """The success answer at the start of ``buf`` (its error code already read as 0) and
    its length, or None while incomplete. A body longer than ``limit`` is refused before
    it is waited for (:class:`MalformedResponse`)."""
    found = answer_body(buf, limit, "queue")
    if found is None:
        return None
    body, end = found
    answer: QueueAnswer
    if request_type == RequestType.QUEUE_FETCH:
        answer = _fetch_records(body)
    elif request_type == RequestType.QUEUE_ACKNOWLEDGE:
        if body:
            raise MalformedResponse(f"acknowledge answer with a {len(body)}-byte body")
        answer = QueueAckResponse()
    else:
        answer = OperatorResponse(request_type, json_document(body, "queue"))
    return answer, end
