"""The native queue requests' codec (types 15 to 18): round trips through the client's
encoder and the server's incremental decoder, the byte layouts pinned in
docs/protocol.md (read from the document and compared with the encoders' bytes),
hostile lengths and counts on both sides, and the answers' framing."""

from __future__ import annotations

import re
import struct

import pytest

from brokerd.native import queue_wire
from brokerd.native.client_codec import ResponseDecoder, decode_response, encode_request
from brokerd.native.messages import (
    ErrorCode,
    ErrorResponse,
    ListTopicsRequest,
    MalformedResponse,
    RequestError,
    RequestType,
)
from brokerd.native.operator_messages import MAX_OPERATOR_REQUEST_BYTES, OperatorResponse
from brokerd.native.queue_messages import (
    MAX_QUEUE_ACK_OFFSETS,
    MAX_QUEUE_ACK_RANGES,
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
from brokerd.native.server_codec import RequestDecoder, encode_error_response

from tests import paths
from tests.native_helpers import list_topics_frame

PROTOCOL_MD = paths.REPO / "docs" / "protocol.md"

EVERY_REQUEST: list[QueueRequest] = [
    QueueFetchRequest("workers", "jobs", 3, 500, 1000),
    QueueFetchRequest("g", "logs", 0, 1),
    QueueAckRequest("workers", "jobs", 3, (
        AckRange(0, 9, AckKind.ACCEPT), AckRange(10, 10, AckKind.RELEASE),
        AckRange(11, 12, AckKind.REJECT),
    )),
    DescribeShareGroupRequest("workers"),
    ListShareGroupsRequest(),
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


def refusal(data: bytes) -> tuple[int, str]:
    event = decode_one(data)
    assert isinstance(event, RequestError), event
    assert not event.fatal
    return event.code, event.message


@pytest.mark.parametrize("request_", EVERY_REQUEST, ids=lambda r: type(r).__name__)
def test_every_queue_request_round_trips(request_: QueueRequest) -> None:
    assert decode_one(encode_request(request_)) == request_


def test_round_trips_byte_by_byte_and_pipelined_with_other_types() -> None:
    data = b"".join(encode_request(r) for r in EVERY_REQUEST) + list_topics_frame()
    decoder = RequestDecoder()
    events: list[object] = []
    for i in range(len(data)):
        events += decoder.feed(data[i : i + 1])
    assert events == [*EVERY_REQUEST, ListTopicsRequest()]
    assert not decoder.in_frame


def test_request_types_are_the_documented_numbers() -> None:
    assert [queue_wire.TYPE_OF_CLASS[type(r)] for r in EVERY_REQUEST] == [15, 15, 16, 17, 18]


# --------------------------------------------------------------------------- docs' bytes


def documented_blocks() -> list[bytes]:
    """The hex blocks of docs/protocol.md's queue examples, in order."""
    text = PROTOCOL_MD.read_text()
    start = text.index("### 5.1 Queue examples")
    section = text[start : text.index("\n## ", start)]
    blocks = re.findall(r"```\n(.*?)```", section, flags=re.S)
    return [bytes.fromhex(b.replace("\n", " ")) for b in blocks]


def test_docs_hex_is_the_encoders_output() -> None:
    assert documented_blocks() == [
        encode_request(QueueFetchRequest("g", "logs", 0, 10, 1000)),
        queue_wire.encode_fetch_answer(
            [QueueRecord(42, 1, b"", b"hi"), QueueRecord(43, 2, b"k", b"abc")]
        ),
        encode_request(QueueAckRequest("g", "logs", 0, (
            AckRange(42, 42, AckKind.ACCEPT), AckRange(43, 43, AckKind.RELEASE),
        ))),
        queue_wire.encode_ack_answer(),
        encode_error_response(
            RequestType.QUEUE_ACKNOWLEDGE, ErrorCode.INVALID_RECORD_STATE,
            "offset 44 is not acquired by this member",
        ),
        encode_request(DescribeShareGroupRequest("g")),
        encode_request(ListShareGroupsRequest()),
        queue_wire.encode_document_answer([]),
    ]


# --------------------------------------------------------------------------- hostile requests


def fetch_body(max_records: int = 10, *, group: str = "g", topic: str = "logs") -> bytes:
    return s(group) + s(topic) + struct.pack(">III", 0, max_records, 0)


def ack_body(ranges: list[tuple[int, int, int]], count: int | None = None) -> bytes:
    n = len(ranges) if count is None else count
    return s("g") + s("logs") + struct.pack(">II", 0, n) + b"".join(
        struct.pack(">QQB", *r) for r in ranges
    )


@pytest.mark.parametrize("max_records", [0, MAX_QUEUE_RECORDS + 1, 2**32 - 1])
def test_fetch_max_records_outside_the_limit_is_refused(max_records: int) -> None:
    code, message = refusal(frame(RequestType.QUEUE_FETCH, fetch_body(max_records)))
    assert code == ErrorCode.MALFORMED_REQUEST
    assert "max records" in message


def test_a_body_that_ends_early_or_runs_on_is_refused() -> None:
    body = fetch_body()
    code, message = refusal(frame(RequestType.QUEUE_FETCH, body[:-1]))
    assert (code, "ends inside" in message) == (ErrorCode.MALFORMED_REQUEST, True)
    code, message = refusal(frame(RequestType.QUEUE_FETCH, body + b"\0"))
    assert (code, "after the request's last field" in message) == (
        ErrorCode.MALFORMED_REQUEST, True
    )


def test_bad_names_are_refused() -> None:
    code, _ = refusal(frame(RequestType.QUEUE_FETCH, fetch_body(topic="bad/name")))
    assert code == ErrorCode.INVALID_TOPIC
    code, _ = refusal(frame(RequestType.QUEUE_FETCH, fetch_body(group="g" * 256)))
    assert code == ErrorCode.INVALID_GROUP_ID


def test_ack_count_is_checked_against_the_limit_and_the_body_before_reading() -> None:
    code, message = refusal(frame(RequestType.QUEUE_ACKNOWLEDGE,
                                  ack_body([], count=MAX_QUEUE_ACK_RANGES + 1)))
    assert (code, "exceeds" in message) == (ErrorCode.MALFORMED_REQUEST, True)
    # A count the body cannot hold is refused before any range is read.
    code, message = refusal(frame(RequestType.QUEUE_ACKNOWLEDGE,
                                  ack_body([(0, 0, 1)], count=1000)))
    assert (code, "exceeds the body" in message) == (ErrorCode.MALFORMED_REQUEST, True)
    code, message = refusal(frame(RequestType.QUEUE_ACKNOWLEDGE, ack_body([])))
    assert (code, "needs a range" in message) == (ErrorCode.MALFORMED_REQUEST, True)


@pytest.mark.parametrize(
    ("ranges", "words"),
    [
        ([(5, 4, 1)], "bad offset range"),
        ([(0, 2**63, 1)], "bad offset range"),
        ([(0, 0, 0)], "unknown acknowledgement kind 0"),
        ([(0, 0, 4)], "unknown acknowledgement kind 4"),
        ([(0, MAX_QUEUE_ACK_OFFSETS, 1)], "cover more than"),
        ([(0, MAX_QUEUE_ACK_OFFSETS // 2, 1), (10**9, 10**9 + MAX_QUEUE_ACK_OFFSETS // 2, 1)],
         "cover more than"),
    ],
)
def test_bad_ranges_are_refused(ranges: list[tuple[int, int, int]], words: str) -> None:
    code, message = refusal(frame(RequestType.QUEUE_ACKNOWLEDGE, ack_body(ranges)))
    assert code == ErrorCode.MALFORMED_REQUEST
    assert words in message


def test_over_long_body_is_refused_at_once_and_skipped_without_buffering() -> None:
    decoder = RequestDecoder()
    (error,) = decoder.feed(struct.pack(">HI", RequestType.QUEUE_ACKNOWLEDGE,
                                        MAX_OPERATOR_REQUEST_BYTES + 1))
    assert isinstance(error, RequestError)
    assert (error.code, error.fatal) == (ErrorCode.REQUEST_TOO_LARGE, False)
    for _ in range(MAX_OPERATOR_REQUEST_BYTES // 4096):
        assert decoder.feed(b"x" * 4096) == []
        assert decoder.buffered == 0
    rest = MAX_OPERATOR_REQUEST_BYTES + 1 - (MAX_OPERATOR_REQUEST_BYTES // 4096) * 4096
    assert decoder.feed(b"x" * rest + list_topics_frame()) == [ListTopicsRequest()]


def test_encoder_refuses_values_the_wire_cannot_carry() -> None:
    with pytest.raises(ValueError):
        encode_request(QueueFetchRequest("g", "logs", 2**32, 1))
    with pytest.raises(ValueError):
        encode_request(QueueAckRequest("g", "logs", 0, (AckRange(-1, 0, AckKind.ACCEPT),)))


# --------------------------------------------------------------------------- answers


RECORDS = [QueueRecord(7, 1, b"", b"a"), QueueRecord(9, 3, b"key", b""),
           QueueRecord(10, 1, b"k", b"v" * 1000)]


def test_answers_round_trip_in_any_chunking_and_pipelined() -> None:
    answers = [
        (RequestType.QUEUE_FETCH, queue_wire.encode_fetch_answer(RECORDS),
         QueueFetchResponse(tuple(RECORDS))),
        (RequestType.QUEUE_FETCH, queue_wire.encode_fetch_answer([]), QueueFetchResponse()),
        (RequestType.QUEUE_ACKNOWLEDGE, queue_wire.encode_ack_answer(), QueueAckResponse()),
        (RequestType.DESCRIBE_SHARE_GROUP, queue_wire.encode_document_answer({"group_id": "g"}),
         OperatorResponse(RequestType.DESCRIBE_SHARE_GROUP, {"group_id": "g"})),
        (RequestType.QUEUE_ACKNOWLEDGE,
         encode_error_response(RequestType.QUEUE_ACKNOWLEDGE, 23, "no"),
         ErrorResponse(RequestType.QUEUE_ACKNOWLEDGE, 23, "no")),
    ]
    data = b"".join(raw for _, raw, _ in answers)
    for step in (1, 7, len(data)):
        decoder = ResponseDecoder()
        for request_type, _, _ in answers:
            decoder.expect(request_type)
        got: list[object] = []
        for i in range(0, len(data), step):
            got += decoder.feed(data[i : i + step])
        assert got == [want for _, _, want in answers]


def test_delivery_counts_beyond_u16_are_capped_on_the_wire() -> None:
    raw = queue_wire.encode_fetch_answer([QueueRecord(1, 70_000, b"", b"")])
    answer = decode_response(RequestType.QUEUE_FETCH, raw)
    assert isinstance(answer, QueueFetchResponse)
    assert answer.records[0].delivery_count == 65_535


def test_client_refuses_an_over_long_answer_before_waiting_for_it() -> None:
    decoder = ResponseDecoder()
    decoder.expect(RequestType.QUEUE_FETCH)
    with pytest.raises(MalformedResponse, match="exceeds"):
        decoder.feed(struct.pack(">HI", 0, 2**32 - 1))


def body_answer(body: bytes) -> bytes:
    return struct.pack(">HI", 0, len(body)) + body


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"\0\0", "ends inside its count"),
        (struct.pack(">I", MAX_QUEUE_RECORDS + 1), "cannot fit"),
        (struct.pack(">I", 2) + b"\0" * 18, "cannot fit"),
        (struct.pack(">IQHI", 1, 0, 1, 50) + b"\0" * 4, "overruns"),
        (struct.pack(">IQHII", 1, 0, 1, 0, 0) + b"x", "after the records"),
    ],
)
def test_client_refuses_fetch_answers_that_do_not_parse(body: bytes, words: str) -> None:
    with pytest.raises(MalformedResponse, match=words):
        decode_response(RequestType.QUEUE_FETCH, body_answer(body))


def test_client_refuses_an_acknowledge_answer_with_a_body_and_bad_json() -> None:
    with pytest.raises(MalformedResponse):
        decode_response(RequestType.QUEUE_ACKNOWLEDGE, body_answer(b"x"))
    with pytest.raises(MalformedResponse, match="not JSON"):
        decode_response(RequestType.LIST_SHARE_GROUPS, body_answer(b"{"))
