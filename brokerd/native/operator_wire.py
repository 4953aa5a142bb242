# -*- test-case-name: tests.native.test_operator_wire -*-
"""Byte layouts of the native operator requests (types 7 to 14) and their answers (sans-IO).

An operator request is ``u16 type, u32 body_len, body``: unlike types 1 to 6 its frame
says its own length, so the server's decoder (``brokerd.native.server_codec``) checks
``body_len`` against :data:`~brokerd.native.operator_messages.MAX_OPERATOR_REQUEST_BYTES`
before buffering anything, skips a refused body without buffering it, and hands a
complete body to :func:`parse_body`. A successful answer is ``u16 error = 0``, then for
every type but DeleteTopic and DeleteGroup ``u32 json_len`` and a compact UTF-8 JSON
document (:func:`encode_answer`, :func:`decode_answer`). Failures use the common error
form. The layouts are specified in ``docs/protocol.md``, section 2.8.

What this module does not do: buffer a stream, do I/O, or decide anything about the
requests' meaning beyond the wire's own rules (names valid, counts within limits).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from typing import TypeVar

from brokerd import errors
from brokerd.names import MAX_TOPIC_LENGTH, validate_topic_name
from brokerd.native.messages import MAX_PARTITIONS, ErrorCode, MalformedResponse, RequestType
from brokerd.native.operator_messages import (
    MAX_OPERATOR_CONFIGS,
    MAX_OPERATOR_RESPONSE_BYTES,
    OPERATOR_RESET_DRY_RUN,
    AlterTopicConfigsRequest,
    CreatePartitionsRequest,
    DeleteGroupRequest,
    DeleteTopicRequest,
    DescribeGroupRequest,
    DescribeTopicRequest,
    JsonValue,
    ListGroupsRequest,
    OperatorRequest,
    OperatorResponse,
    ResetMode,
    ResetOffsetsRequest,
)
from brokerd.native.wire import MAX_U16, MAX_U32, MAX_U64, U16, U32, check_range, string_bytes

__all__ = [
    "ANSWERS_WITHOUT_DOCUMENT",
    "BODY_LENGTH",
    "TYPE_OF_CLASS",
    "BodyReader",
    "OperatorWireError",
    "answer_body",
    "decode_answer",
    "document_answer",
    "encode_answer",
    "encode_request",
    "frame_request",
    "json_document",
    "parse_body",
    "read_body",
]

#: The ``u32 body_len`` after an admin request's type.
BODY_LENGTH = U32
#: The success answer of these types is ``u16 error = 0`` alone.
ANSWERS_WITHOUT_DOCUMENT = frozenset({RequestType.DELETE_TOPIC, RequestType.DELETE_GROUP})
#: Group ids travel as strings of at most this many bytes (Kafka's limit).
MAX_GROUP_ID_BYTES = 255
#: Config names and values travel as ``u16``-prefixed strings.
MAX_CONFIG_STRING_BYTES = MAX_U16

_CONFIG_SET = 0
_CONFIG_DELETE = 1
_U8 = struct.Struct(">B")
_U64 = struct.Struct(">Q")
_OK_JSON = struct.Struct(">HI")  # error = 0, json_len

TYPE_OF_CLASS: dict[type, RequestType] = {
    DescribeTopicRequest: RequestType.DESCRIBE_TOPIC,
    AlterTopicConfigsRequest: RequestType.ALTER_TOPIC_CONFIGS,
    DeleteTopicRequest: RequestType.DELETE_TOPIC,
    CreatePartitionsRequest: RequestType.CREATE_PARTITIONS,
    ListGroupsRequest: RequestType.LIST_GROUPS,
    DescribeGroupRequest: RequestType.DESCRIBE_GROUP,
    ResetOffsetsRequest: RequestType.RESET_OFFSETS,
    DeleteGroupRequest: RequestType.DELETE_GROUP,
}


class OperatorWireError(Exception):
    """A body that does not parse, or a value it refuses: answered with ``code``."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- body reader


class _Body:
    """A complete request body, read field by field; every length and count is checked
    against the bytes left before anything is taken from it."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def _take(self, size: int, what: str) -> bytes:
        if size > len(self._data) - self._pos:
            raise OperatorWireError(ErrorCode.MALFORMED_REQUEST, f"body ends inside the {what}")
        start = self._pos
        self._pos += size
        return self._data[start : self._pos]

    def u8(self, what: str) -> int:
        return int(_U8.unpack(self._take(1, what))[0])

    def u32(self, what: str) -> int:
        return int(U32.unpack(self._take(4, what))[0])

    def u64(self, what: str) -> int:
        return int(_U64.unpack(self._take(8, what))[0])

    def string(self, what: str, limit: int, code: ErrorCode) -> str:
        (length,) = U16.unpack(self._take(2, what))
        if length > limit:
            raise OperatorWireError(code, f"{what} length {length} exceeds {limit}")
        try:
            return self._take(length, what).decode("utf-8")
        except UnicodeDecodeError:
            raise OperatorWireError(code, f"{what} is not valid UTF-8") from None

    def topic(self) -> str:
        name = self.string("topic", MAX_TOPIC_LENGTH, ErrorCode.INVALID_TOPIC)
        try:
            return validate_topic_name(name)
        except errors.InvalidTopic as exc:
            raise OperatorWireError(ErrorCode.INVALID_TOPIC, str(exc)) from None

    def group(self) -> str:
        return self.string("group id", MAX_GROUP_ID_BYTES, ErrorCode.INVALID_GROUP_ID)

    def count(self, what: str, limit: int, item_size: int) -> int:
        n = self.u32(what)
        if n > limit:
            raise OperatorWireError(ErrorCode.MALFORMED_REQUEST, f"{what} {n} exceeds {limit}")
        if n * item_size > len(self._data) - self._pos:
            raise OperatorWireError(ErrorCode.MALFORMED_REQUEST, f"{what} {n} exceeds the body")
        return n

    def end(self) -> None:
        if self._pos != len(self._data):
            raise OperatorWireError(
                ErrorCode.MALFORMED_REQUEST,
                f"{len(self._data) - self._pos} byte(s) after the request's last field",
            )


#: The checked body reader, for the other length-prefixed requests (the queue types).
BodyReader = _Body


def _alter(body: _Body) -> AlterTopicConfigsRequest:
    topic = body.topic()
    # Each config takes at least 5 bytes: two empty strings and the operation.
    count = body.count("config count", MAX_OPERATOR_CONFIGS, 5)
    set_configs: list[tuple[str, str]] = []
    delete: list[str] = []
    for _ in range(count):
        name = body.string("config name", MAX_CONFIG_STRING_BYTES, ErrorCode.INVALID_CONFIG)
        op = body.u8("config operation")
        value = body.string("config value", MAX_CONFIG_STRING_BYTES, ErrorCode.INVALID_CONFIG)
        if op == _CONFIG_SET:
            set_configs.append((name, value))
        elif op == _CONFIG_DELETE and not value:
            delete.append(name)
        else:
            raise OperatorWireError(
                ErrorCode.MALFORMED_REQUEST, f"config {name!r}: bad operation {op}"
            )
    return AlterTopicConfigsRequest(topic, tuple(set_configs), tuple(delete))


def _partitions(body: _Body) -> CreatePartitionsRequest:
    topic = body.topic()
    total = body.u32("partition count")
    if not 1 <= total <= MAX_PARTITIONS:
        raise OperatorWireError(
            ErrorCode.INVALID_PARTITIONS, f"partitions must be 1..{MAX_PARTITIONS}, not {total}"
        )
    return CreatePartitionsRequest(topic, total)


def _reset(body: _Body) -> ResetOffsetsRequest:
    group = body.group()
    topic = body.topic()
    raw_mode = body.u8("reset mode")
    try:
        mode = ResetMode(raw_mode)
    except ValueError:
        raise OperatorWireError(
            ErrorCode.MALFORMED_REQUEST, f"unknown reset mode {raw_mode}"
        ) from None
    value = body.u64("reset value")
    if value > 2**63 - 1:
        raise OperatorWireError(ErrorCode.MALFORMED_REQUEST, f"reset value {value} is too large")
    flags = body.u8("flags")
    if flags & ~OPERATOR_RESET_DRY_RUN:
        raise OperatorWireError(ErrorCode.MALFORMED_REQUEST, f"unknown flags {flags:#x}")
    count = body.count("partition count", MAX_PARTITIONS, 4)
    partitions = tuple(body.u32("partition") for _ in range(count))
    return ResetOffsetsRequest(
        group, topic, mode, value, partitions, bool(flags & OPERATOR_RESET_DRY_RUN)
    )


_R = TypeVar("_R")


def read_body(
    parsers: Mapping[int, Callable[[BodyReader], _R]], request_type: int, data: bytes, kind: str
) -> _R:
    """The request ``parsers`` reads from the complete body ``data`` for ``request_type``,
    every byte of it consumed. Raises :class:`OperatorWireError` (never anything else) for
    a body it refuses, or a type ``parsers`` does not name (``kind``: which types it has)."""
    parse = parsers.get(request_type)
    if parse is None:
        raise OperatorWireError(ErrorCode.UNKNOWN_REQUEST_TYPE, f"not {kind} type: {request_type}")
    body = BodyReader(data)
    request = parse(body)
    body.end()
    return request


#: How the body of each operator request type is read.
_PARSERS: dict[int, Callable[[BodyReader], OperatorRequest]] = {
    RequestType.DESCRIBE_TOPIC: lambda body: DescribeTopicRequest(body.topic()),
    RequestType.ALTER_TOPIC_CONFIGS: _alter,
    RequestType.DELETE_TOPIC: lambda body: DeleteTopicRequest(body.topic()),
    RequestType.CREATE_PARTITIONS: _partitions,
    RequestType.LIST_GROUPS: lambda body: ListGroupsRequest(),
    RequestType.DESCRIBE_GROUP: lambda body: DescribeGroupRequest(body.group()),
    RequestType.RESET_OFFSETS: _reset,
    RequestType.DELETE_GROUP: lambda body: DeleteGroupRequest(body.group()),
}


def parse_body(request_type: int, data: bytes) -> OperatorRequest:
    """The request of admin type ``request_type`` whose complete body is ``data``.
    Raises :class:`OperatorWireError` (never anything else) for a body it refuses."""
    return read_body(_PARSERS, request_type, data, "an operator")


def _body(request: OperatorRequest) -> bytes:
    match request:
        case DescribeTopicRequest() | DeleteTopicRequest():
            return string_bytes(request.topic, "topic")
        case AlterTopicConfigsRequest():
            parts = [string_bytes(request.topic, "topic")]
            configs = [(k, _CONFIG_SET, v) for k, v in request.set_configs]
            configs += [(k, _CONFIG_DELETE, "") for k in request.delete]
            parts.append(U32.pack(check_range("config count", len(configs), MAX_U32)))
            for name, op, value in configs:
                parts += [
                    string_bytes(name, "config name"), _U8.pack(op), string_bytes(value, "value")
                ]
            return b"".join(parts)
        case CreatePartitionsRequest():
            total = check_range("partition count", request.total, MAX_U32)
            return string_bytes(request.topic, "topic") + U32.pack(total)
        case ListGroupsRequest():
            return b""
        case DescribeGroupRequest() | DeleteGroupRequest():
            return string_bytes(request.group_id, "group id")
        case ResetOffsetsRequest():
            flags = OPERATOR_RESET_DRY_RUN if request.dry_run else 0
            parts = [
                string_bytes(request.group_id, "group id"),
                string_bytes(request.topic, "topic"),
                _U8.pack(request.mode),
                _U64.pack(check_range("reset value", request.value, MAX_U64)),
                _U8.pack(flags),
                U32.pack(check_range("partition count", len(request.partitions), MAX_U32)),
            ]
            parts += [U32.pack(check_range("partition", p, MAX_U32)) for p in request.partitions]
            return b"".join(parts)
    raise TypeError(f"not a native admin request: {request!r}")


def encode_request(request: OperatorRequest) -> bytes:
    """``u16 type, u32 body_len, body``. Raises ``ValueError`` for values the wire
    cannot carry (the server applies the tighter limits)."""
    return frame_request(TYPE_OF_CLASS[type(request)], _body(request))


def frame_request(request_type: int, body: bytes) -> bytes:
    """``u16 type, u32 body_len, body``: the frame of the operator and queue types.
    Raises ``ValueError`` for a body the length cannot carry."""
    check_range("body length", len(body), MAX_U32)
    return U16.pack(request_type) + BODY_LENGTH.pack(len(body)) + body


# --------------------------------------------------------------------------- answers


def encode_answer(
    request_type: int, document: JsonValue, *, limit: int = MAX_OPERATOR_RESPONSE_BYTES
) -> bytes:
    """``u16 error = 0, u32 json_len, json``, or ``u16 error = 0`` alone for the types
    answered without a document. Raises :class:`OperatorWireError` (RESPONSE_TOO_LARGE)
    when the document exceeds ``limit`` bytes."""
    if request_type in ANSWERS_WITHOUT_DOCUMENT:
        return U16.pack(0)
    return document_answer(document, limit=limit)


def document_answer(document: JsonValue, *, limit: int = MAX_OPERATOR_RESPONSE_BYTES) -> bytes:
    """``u16 error = 0, u32 json_len, json`` (operator and queue types). Raises
    :class:`OperatorWireError` (RESPONSE_TOO_LARGE) when the document exceeds ``limit``
    bytes."""
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(raw) > limit:
        raise OperatorWireError(
            ErrorCode.RESPONSE_TOO_LARGE, f"answer of {len(raw)} bytes exceeds {limit}"
        )
    return _OK_JSON.pack(0, len(raw)) + raw


def decode_answer(
    request_type: int, buf: bytes | bytearray, *, limit: int = MAX_OPERATOR_RESPONSE_BYTES
) -> tuple[OperatorResponse, int] | None:
    """The success answer at the start of ``buf`` (its error code already read as 0) and
    its length, or None while incomplete. A document longer than ``limit`` is refused
    before it is waited for (:class:`MalformedResponse`)."""
    if request_type in ANSWERS_WITHOUT_DOCUMENT:
        return (OperatorResponse(request_type), 2) if len(buf) >= 2 else None
    found = answer_body(buf, limit, "operator")
    if found is None:
        return None
    body, end = found
    return OperatorResponse(request_type, json_document(body, "operator")), end


def answer_body(buf: bytes | bytearray, limit: int, kind: str) -> tuple[bytes, int] | None:
    """The body of the ``u16 error = 0, u32 body_len, body`` answer at the start of
    ``buf`` and the answer's length, or None while incomplete; a body longer than
    ``limit`` is refused before it is waited for (:class:`MalformedResponse`, naming the
    ``kind`` of answer)."""
    if len(buf) < _OK_JSON.size:
        return None
    _, length = _OK_JSON.unpack_from(buf)
    if length > limit:
        raise MalformedResponse(f"{kind} answer of {length} bytes exceeds {limit}")
    end = _OK_JSON.size + length
    if len(buf) < end:
        return None
    return bytes(buf[_OK_JSON.size : end]), end


def json_document(body: bytes, kind: str) -> JsonValue:
    """An answer's JSON document; :class:`MalformedResponse` if it is not one."""
    try:
        document: JsonValue = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedResponse(f"{kind} answer is not JSON: {exc}") from None
    return document
