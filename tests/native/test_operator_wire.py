"""The native admin requests' codec (types 7 to 14): round trips through the client's
encoder and the server's incremental decoder, the byte layouts of docs/protocol.md,
hostile lengths and counts, and the answers' JSON framing on both sides."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokerd.native import operator_wire
from brokerd.native.client_codec import ResponseDecoder, decode_response, encode_request
from brokerd.native.messages import (
    ErrorCode,
    ErrorResponse,
    ListTopicsRequest,
    MalformedResponse,
    RequestError,
    RequestType,
)
from brokerd.native.operator_messages import (
    MAX_OPERATOR_CONFIGS,
    MAX_OPERATOR_REQUEST_BYTES,
    AlterTopicConfigsRequest,
    CreatePartitionsRequest,
    DeleteGroupRequest,
    DeleteTopicRequest,
    DescribeGroupRequest,
    DescribeTopicRequest,
    ListGroupsRequest,
    OperatorRequest,
    OperatorResponse,
    ResetMode,
    ResetOffsetsRequest,
)
from brokerd.native.server_codec import RequestDecoder, encode_error_response

from tests.native_helpers import list_topics_frame

EVERY_REQUEST: list[OperatorRequest] = [
    DescribeTopicRequest("logs"),
    AlterTopicConfigsRequest("logs", (("retention.ms", "1000"),), ("cleanup.policy",)),
    DeleteTopicRequest("logs"),
    CreatePartitionsRequest("logs", 5),
    ListGroupsRequest(),
    DescribeGroupRequest("billing"),
    ResetOffsetsRequest("billing", "logs", ResetMode.OFFSET, 42, (0, 3), dry_run=True),
    ResetOffsetsRequest("billing", "logs", ResetMode.EARLIEST),
    DeleteGroupRequest("billing"),
]


def frame(request_type: int, body: bytes) -> bytes:
    return struct.pack(">HI", request_type, len(body)) + body


def s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def decode_one(data: bytes) -> object:
    events = RequestDecoder().feed(data)
    assert len(events) == 1, events
    return events[0]


@pytest.mark.parametrize("request_", EVERY_REQUEST, ids=lambda r: type(r).__name__)
def test_every_admin_request_round_trips(request_: OperatorRequest) -> None:
    assert decode_one(encode_request(request_)) == request_


def test_every_admin_request_round_trips_byte_by_byte_and_pipelined() -> None:
    data = b"".join(encode_request(r) for r in EVERY_REQUEST) + list_topics_frame()
    decoder = RequestDecoder()
    events: list[object] = []
    for i in range(len(data)):
        events += decoder.feed(data[i : i + 1])
    assert events == [*EVERY_REQUEST, ListTopicsRequest()]
    assert not decoder.in_frame


def test_layouts_are_the_documented_bytes() -> None:
    # docs/protocol.md section 5: the admin examples, byte for byte.
    assert encode_request(DescribeTopicRequest("logs")) == bytes.fromhex(
        "0007 00000006 0004 6c6f6773"
    )
    assert encode_request(
        AlterTopicConfigsRequest("logs", (("retention.ms", "1000"),), ("cleanup.policy",))
    ) == bytes.fromhex(
        "0008 00000032 0004 6c6f6773 00000002"
        "000c 726574656e74696f6e2e6d73 00 0004 31303030"
        "000e 636c65616e75702e706f6c696379 01 0000"
    )
    assert encode_request(CreatePartitionsRequest("logs", 5)) == bytes.fromhex(
        "000a 0000000a 0004 6c6f6773 00000005"
    )
    assert encode_request(ListGroupsRequest()) == bytes.fromhex("000b 00000000")
    assert encode_request(
        ResetOffsetsRequest("g", "logs", ResetMode.OFFSET, 42, (1,), dry_run=True)
    ) == bytes.fromhex(
        "000d 0000001b 0001 67 0004 6c6f6773 02 000000000000002a 01 00000001 00000001"
    )
    assert encode_request(DeleteGroupRequest("g")) == bytes.fromhex("000e 00000003 0001 67")


def test_request_types_are_the_documented_numbers() -> None:
    assert [operator_wire.TYPE_OF_CLASS[type(r)] for r in EVERY_REQUEST] == [
        7, 8, 9, 10, 11, 12, 13, 13, 14
    ]


# --------------------------------------------------------------------------- hostile input


def test_over_long_body_is_refused_at_once_and_skipped_without_buffering() -> None:
    decoder = RequestDecoder()
    head = struct.pack(">HI", RequestType.DESCRIBE_TOPIC, MAX_OPERATOR_REQUEST_BYTES + 1)
    (error,) = decoder.feed(head)
    assert isinstance(error, RequestError)
    assert (error.code, error.fatal) == (ErrorCode.REQUEST_TOO_LARGE, False)
    # The body streams in and is dropped as it arrives.
    for _ in range(MAX_OPERATOR_REQUEST_BYTES // 4096):
        assert decoder.feed(b"x" * 4096) == []
        assert decoder.buffered == 0
    rest = MAX_OPERATOR_REQUEST_BYTES + 1 - (MAX_OPERATOR_REQUEST_BYTES // 4096) * 4096
    assert decoder.feed(b"x" * rest + list_topics_frame()) == [ListTopicsRequest()]


def test_body_length_of_four_gigabytes_costs_nothing() -> None:
    decoder = RequestDecoder()
    (error,) = decoder.feed(struct.pack(">HI", RequestType.DELETE_GROUP, 0xFFFFFFFF))
    assert isinstance(error, RequestError) and error.code is ErrorCode.REQUEST_TOO_LARGE
    assert decoder.buffered == 0


@pytest.mark.parametrize(
    "request_type, body, code",
    [
        # A string running past the body's end.
        (RequestType.DESCRIBE_TOPIC, struct.pack(">H", 10) + b"abc", ErrorCode.MALFORMED_REQUEST),
        # A topic name that breaks the naming rule, or is too long, or not UTF-8.
        (RequestType.DELETE_TOPIC, s("bad/name"), ErrorCode.INVALID_TOPIC),
        (RequestType.DELETE_TOPIC, s("x" * 250), ErrorCode.INVALID_TOPIC),
        (RequestType.DESCRIBE_TOPIC, struct.pack(">H", 2) + b"\xff\xfe", ErrorCode.INVALID_TOPIC),
        # A group id above 255 bytes.
        (RequestType.DESCRIBE_GROUP, s("g" * 256), ErrorCode.INVALID_GROUP_ID),
        # Bytes after the last field.
        (RequestType.LIST_GROUPS, b"\x00", ErrorCode.MALFORMED_REQUEST),
        (RequestType.DELETE_GROUP, s("g") + b"!", ErrorCode.MALFORMED_REQUEST),
        # A config count above the limit, or above what the body can hold.
        (RequestType.ALTER_TOPIC_CONFIGS, s("t") + struct.pack(">I", MAX_OPERATOR_CONFIGS + 1),
         ErrorCode.MALFORMED_REQUEST),
        (RequestType.ALTER_TOPIC_CONFIGS, s("t") + struct.pack(">I", 3) + s("a") + b"\x00" + s(""),
         ErrorCode.MALFORMED_REQUEST),
        # An unknown config operation, and a delete carrying a value.
        (RequestType.ALTER_TOPIC_CONFIGS, s("t") + struct.pack(">I", 1) + s("a") + b"\x07" + s(""),
         ErrorCode.MALFORMED_REQUEST),
        (RequestType.ALTER_TOPIC_CONFIGS, s("t") + struct.pack(">I", 1) + s("a") + b"\x01" + s("v"),
         ErrorCode.MALFORMED_REQUEST),
        # Partition totals outside 1..MAX_PARTITIONS.
        (RequestType.CREATE_PARTITIONS, s("t") + struct.pack(">I", 0),
         ErrorCode.INVALID_PARTITIONS),
        (RequestType.CREATE_PARTITIONS, s("t") + struct.pack(">I", 10_001),
         ErrorCode.INVALID_PARTITIONS),
        # Reset: unknown mode, unknown flags, a value above i64, a partition count
        # larger than the body, or above the limit.
        (RequestType.RESET_OFFSETS, s("g") + s("t") + b"\x09" + bytes(8) + b"\x00" + bytes(4),
         ErrorCode.MALFORMED_REQUEST),
        (RequestType.RESET_OFFSETS, s("g") + s("t") + b"\x00" + bytes(8) + b"\x80" + bytes(4),
         ErrorCode.MALFORMED_REQUEST),
        (RequestType.RESET_OFFSETS, s("g") + s("t") + b"\x02" + b"\xff" * 8 + b"\x00" + bytes(4),
         ErrorCode.MALFORMED_REQUEST),
        (RequestType.RESET_OFFSETS,
         s("g") + s("t") + b"\x00" + bytes(8) + b"\x00" + struct.pack(">I", 1000) + bytes(4),
         ErrorCode.MALFORMED_REQUEST),
        (RequestType.RESET_OFFSETS,
         s("g") + s("t") + b"\x00" + bytes(8) + b"\x00" + struct.pack(">I", 0xFFFFFFFF),
         ErrorCode.MALFORMED_REQUEST),
    ],
)
def test_bad_bodies_are_refused_and_the_connection_goes_on(
    request_type: int, body: bytes, code: ErrorCode
) -> None:
    decoder = RequestDecoder()
    events = decoder.feed(frame(request_type, body) + list_topics_frame())
    assert len(events) == 2, events
    error = events[0]
    assert isinstance(error, RequestError)
    assert (error.code, error.request_type, error.fatal) == (code, request_type, False)
    assert events[1] == ListTopicsRequest()


@settings(deadline=None, max_examples=200)
@given(
    request_type=st.integers(7, 14),
    body=st.binary(max_size=300),
    cut=st.integers(0, 400),
)
def test_any_body_gives_one_typed_event_and_keeps_framing(
    request_type: int, body: bytes, cut: int
) -> None:
    data = frame(request_type, body) + list_topics_frame()
    decoder = RequestDecoder()
    events = decoder.feed(data[:cut]) + decoder.feed(data[cut:])
    assert len(events) == 2
    assert events[-1] == ListTopicsRequest()
    if isinstance(events[0], RequestError):
        assert not events[0].fatal


def test_encoder_refuses_values_the_wire_cannot_carry() -> None:
    with pytest.raises(ValueError):
        encode_request(CreatePartitionsRequest("t", 2**32))
    with pytest.raises(ValueError):
        encode_request(ResetOffsetsRequest("g", "t", ResetMode.OFFSET, -1))
    with pytest.raises(ValueError):
        encode_request(DescribeGroupRequest("g" * 70_000))


# --------------------------------------------------------------------------- answers


def test_answers_round_trip() -> None:
    doc = {"name": "logs", "partitions": [{"partition": 0}], "é": None}
    data = operator_wire.encode_answer(RequestType.DESCRIBE_TOPIC, doc)
    assert data[:2] == b"\x00\x00"
    assert decode_response(RequestType.DESCRIBE_TOPIC, data) == OperatorResponse(7, doc)
    assert operator_wire.encode_answer(RequestType.DELETE_TOPIC, None) == b"\x00\x00"
    assert decode_response(RequestType.DELETE_GROUP, b"\x00\x00") == OperatorResponse(14)


def test_documented_answer_bytes() -> None:
    assert operator_wire.encode_answer(RequestType.LIST_GROUPS, []) == bytes.fromhex(
        "0000 00000002 5b5d"
    )


def test_answers_arrive_in_chunks_and_pipelined_with_errors() -> None:
    first = operator_wire.encode_answer(RequestType.LIST_GROUPS, [{"group_id": "g"}])
    second = encode_error_response(RequestType.DESCRIBE_GROUP, ErrorCode.GROUP_ID_NOT_FOUND, "no")
    third = operator_wire.encode_answer(RequestType.DELETE_TOPIC, None)
    decoder = ResponseDecoder()
    for t in (RequestType.LIST_GROUPS, RequestType.DESCRIBE_GROUP, RequestType.DELETE_TOPIC):
        decoder.expect(t)
    out = []
    for byte in first + second + third:
        out += decoder.feed(bytes([byte]))
    assert out == [
        OperatorResponse(11, [{"group_id": "g"}]),
        ErrorResponse(12, ErrorCode.GROUP_ID_NOT_FOUND, "no"),
        OperatorResponse(9),
    ]


def test_server_refuses_to_send_an_answer_above_the_limit() -> None:
    with pytest.raises(operator_wire.OperatorWireError) as caught:
        operator_wire.encode_answer(RequestType.LIST_GROUPS, ["x" * 100], limit=50)
    assert caught.value.code is ErrorCode.RESPONSE_TOO_LARGE


def test_client_refuses_a_huge_length_before_waiting_for_it() -> None:
    decoder = ResponseDecoder()
    decoder.expect(RequestType.DESCRIBE_TOPIC)
    with pytest.raises(MalformedResponse):
        decoder.feed(struct.pack(">HI", 0, 0xFFFFFFFF))


def test_client_refuses_an_answer_that_is_not_json() -> None:
    with pytest.raises(MalformedResponse):
        decode_response(RequestType.DESCRIBE_GROUP, struct.pack(">HI", 0, 3) + b"{x}")
    with pytest.raises(MalformedResponse):
        decode_response(RequestType.DESCRIBE_GROUP, struct.pack(">HI", 0, 2) + b"\xff\xfe")
