"""Tests of the server half of the sans-IO native codec: byte-exact frames from the wire
tables, request round trips (hypothesis) with arbitrary chunking, limits enforced before
buffering, and garbage (the client half: tests/native/test_client_codec.py)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokerd.native import client_codec as client
from brokerd.native import messages as msg
from brokerd.native import server_codec as server
from brokerd.native.messages import (
    CreateTopicRequest,
    ErrorCode,
    FetchRequest,
    ListOffsetsRequest,
    ListTopicsRequest,
    LongPollFetchRequest,
    ProduceRequest,
    RequestError,
    RequestType,
)
from brokerd.native.server_codec import RequestDecoder

from tests.native_helpers import (
    create_topic_frame,
    error_body,
    fetch_error,
    fetch_frame,
    fetch_ok,
    list_offsets_frame,
    list_topics_frame,
    long_poll_frame,
    produce_frame,
    produce_ok,
    topic_field,
)

settings.register_profile(
    "native",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FAST = settings.get_profile("native")

U32 = st.integers(0, 2**32 - 1)
U64 = st.integers(0, 2**64 - 1)
TOPIC_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
TOPICS = st.one_of(
    st.text(TOPIC_CHARS, min_size=1, max_size=20),
    st.text(TOPIC_CHARS, min_size=249, max_size=249),
).filter(lambda t: t not in (".", ".."))
VALUES = st.lists(st.binary(max_size=40), min_size=1, max_size=12).map(tuple)

REQUESTS: st.SearchStrategy[msg.Request] = st.one_of(
    st.builds(ProduceRequest, TOPICS, U32, VALUES),
    st.builds(FetchRequest, TOPICS, U32, U64),
    st.builds(CreateTopicRequest, TOPICS, st.integers(1, msg.MAX_PARTITIONS)),
    st.builds(ListOffsetsRequest, TOPICS, U32),
    st.just(ListTopicsRequest()),
    st.builds(LongPollFetchRequest, TOPICS, U32, U64, U32, U32, U32),
)


EVENT_CLASSES = (
    ProduceRequest,
    FetchRequest,
    CreateTopicRequest,
    ListOffsetsRequest,
    ListTopicsRequest,
    LongPollFetchRequest,
    RequestError,
)


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    """Split ``data`` at the (sorted, deduplicated) positions in ``cuts``."""
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for p in [*points, len(data)]:
        out.append(data[last:p])
        last = p
    return out


def decode_all(decoder: RequestDecoder, pieces: list[bytes]) -> list[msg.RequestEvent]:
    events: list[msg.RequestEvent] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    return events


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


# --------------------------------------------------------------------------- byte-exact frames


def test_request_encoders_match_the_wire_tables() -> None:
    assert client.encode_produce("t", 3, [b"ab", b""]) == produce_frame("t", 3, [b"ab", b""])
    assert client.encode_produce("t", 3, [b"ab"]) == bytes.fromhex(
        "00010001740000000300000001000000026162"
    )
    assert client.encode_fetch("orders", 1, 7) == fetch_frame("orders", 1, 7)
    assert client.encode_fetch("t", 0, 5) == bytes.fromhex("0002000174000000000000000000000005")
    assert client.encode_create_topic("t", 4) == create_topic_frame("t", 4)
    assert client.encode_list_offsets("t", 2) == list_offsets_frame("t", 2)
    assert client.encode_list_topics() == list_topics_frame() == b"\x00\x05"
    assert client.encode_long_poll_fetch(
        "t", 1, 9, max_wait_ms=500, min_bytes=10, max_bytes=99
    ) == long_poll_frame("t", 1, 9, max_wait_ms=500, min_bytes=10, max_bytes=99)


def test_response_encoders_match_the_wire_tables() -> None:
    assert server.encode_produce_response(42) == produce_ok(42)
    assert produce_ok(42) == bytes.fromhex("0000000000000000002a")
    assert server.encode_fetch_response([b"x", b"yz"]) == fetch_ok([b"x", b"yz"])
    assert server.encode_fetch_response([]) == b"\x00\x00\x00\x00"
    assert server.encode_create_topic_response() == b"\x00\x00"
    assert server.encode_list_offsets_response(3, 10) == struct.pack(">HQQ", 0, 3, 10)
    assert server.encode_list_topics_response([("a", 1), ("bc", 3)]) == (
        struct.pack(">HI", 0, 2)
        + topic_field("a")
        + struct.pack(">I", 1)
        + topic_field("bc")
        + struct.pack(">I", 3)
    )
    assert server.encode_long_poll_fetch_response(12, [(10, b"v"), (11, None)]) == (
        struct.pack(">HQI", 0, 12, 2) + struct.pack(">QI", 10, 1) + b"v" + struct.pack(">QI", 11, 0)
    )


def test_null_values_are_sent_as_size_zero() -> None:
    assert server.encode_fetch_response([None, b"a"]) == fetch_ok([b"", b"a"])


def test_error_forms_are_byte_exact() -> None:
    assert server.encode_error_response(RequestType.FETCH, 4, "nope") == fetch_error(4, "nope")
    assert server.encode_error_response(2, 4, "nope") == bytes.fromhex("ffffffff00040004") + b"nope"
    for request_type in (1, 3, 4, 5, 6, 99):
        assert server.encode_error_response(request_type, 3, "bad") == error_body(3, "bad")
    with pytest.raises(ValueError):
        server.encode_error_response(1, 0, "success is not an error")


def test_error_message_is_truncated_on_a_character_boundary() -> None:
    message = "é" * 40000  # 80000 UTF-8 bytes
    frame = server.encode_error_response(1, 12, message)
    code, length = struct.unpack_from(">HH", frame)
    assert code == 12
    assert length == len(frame) - 4 <= 0xFFFF
    assert frame[4:].decode("utf-8") == "é" * (0xFFFF // 2)


# --------------------------------------------------------------------------- request round trips


@FAST
@given(request=REQUESTS, cuts=st.lists(st.integers(0, 10**6), max_size=8))
def test_request_round_trip_any_chunking(request: msg.Request, cuts: list[int]) -> None:
    frame = client.encode_request(request)
    decoder = RequestDecoder()
    assert decode_all(decoder, chunks(frame, cuts)) == [request]
    assert decoder.buffered == 0
    assert not decoder.in_frame


@FAST
@given(
    requests=st.lists(REQUESTS, min_size=1, max_size=6),
    cuts=st.lists(st.integers(0, 10**6), max_size=12),
)
def test_pipelined_requests_round_trip(requests: list[msg.Request], cuts: list[int]) -> None:
    data = b"".join(client.encode_request(r) for r in requests)
    assert decode_all(RequestDecoder(), chunks(data, cuts)) == requests


def test_every_type_one_byte_at_a_time() -> None:
    requests: list[msg.Request] = [
        ProduceRequest("orders", 2, (b"a", b"", b"ccc")),
        FetchRequest("orders", 2, 1),
        CreateTopicRequest("new.topic_1", 8),
        ListOffsetsRequest("orders", 0),
        ListTopicsRequest(),
        LongPollFetchRequest("orders", 1, 5, 1000, 1, 4096),
    ]
    data = b"".join(client.encode_request(r) for r in requests)
    decoder = RequestDecoder()
    events = []
    for piece in bytewise(data):
        # Complete fields and records are consumed as they arrive; the largest fixed
        # block (long poll, 24 bytes) is the most ever held.
        assert decoder.buffered < 24
        events.extend(decoder.feed(piece))
    assert events == requests


def test_receive_then_next_event_decodes_lazily() -> None:
    decoder = RequestDecoder()
    decoder.receive(client.encode_list_topics() + client.encode_fetch("t", 0, 1))
    assert decoder.buffered == 2 + 2 + 2 + 1 + 12
    assert decoder.next_event() == ListTopicsRequest()
    assert decoder.buffered == 17  # the fetch is still raw bytes
    assert decoder.next_event() == FetchRequest("t", 0, 1)
    assert decoder.next_event() is None


def test_values_are_bytes() -> None:
    (event,) = RequestDecoder().feed(client.encode_produce("t", 0, [b"abc"] * 3))
    assert isinstance(event, ProduceRequest)
    assert all(type(v) is bytes for v in event.values)


def test_benchmark_shape_decodes() -> None:
    values = [bytes([i % 251]) * 100 for i in range(1000)]
    frame = client.encode_produce("bench", 0, values)
    decoder = RequestDecoder()
    events = decode_all(decoder, [frame[i : i + 65536] for i in range(0, len(frame), 65536)])
    assert events == [ProduceRequest("bench", 0, tuple(values))]


# --------------------------------------------------------------------------- limits


def test_produce_at_the_limit_is_accepted_one_byte_more_is_refused() -> None:
    limit = 100
    exact = [b"x" * 46, b"y" * 46]  # 2 * (4 + 46) == 100
    decoder = RequestDecoder(max_produce_bytes=limit)
    assert decoder.feed(client.encode_produce("t", 0, exact)) == [
        ProduceRequest("t", 0, tuple(exact))
    ]
    over = [b"x" * 46, b"y" * 47]
    (event,) = decoder.feed(client.encode_produce("t", 0, over))
    assert isinstance(event, RequestError)
    assert event.code is ErrorCode.REQUEST_TOO_LARGE
    assert event.request_type == RequestType.PRODUCE
    assert not event.fatal


@pytest.mark.parametrize("chunk", [1, 13, 100, 10_000])
def test_equal_values_in_bulk_keep_the_limit_and_the_order(chunk: int) -> None:
    # Equal values are taken in runs; a run never passes the produce limit, and a size
    # that differs (or one that does not fit) is met by the record loop as before.
    equal = [bytes([i]) * 20 for i in range(40)]
    mixed = [*equal[:10], b"odd" * 3, *equal[10:]]
    for values, limit, refused in (
        (equal, 40 * 24, False),
        (mixed, 40 * 24 + 13, False),
        (equal, 40 * 24 - 1, True),
    ):
        decoder = RequestDecoder(max_produce_bytes=limit)
        frame = client.encode_produce("t", 0, values)
        events = []
        for i in range(0, len(frame), chunk):
            events.extend(decoder.feed(frame[i : i + chunk]))
        if refused:
            assert [getattr(e, "code", None) for e in events] == [ErrorCode.REQUEST_TOO_LARGE]
        else:
            assert events == [ProduceRequest("t", 0, tuple(values))]
        assert decoder.buffered == 0 and decoder.held == 0


def test_oversized_produce_is_skipped_without_buffering() -> None:
    limit = 1024
    frame = client.encode_produce("t", 0, [b"v" * 700, b"w" * 5000, b"z" * 3000])
    follow = client.encode_fetch("t", 0, 3)
    decoder = RequestDecoder(max_produce_bytes=limit)
    events = []
    for i in range(0, len(frame), 100):
        events.extend(decoder.feed(frame[i : i + 100]))
        # Never more than one chunk plus one in-limit partial value is held.
        assert decoder.buffered <= 100 + 704
    assert decoder.buffered == 0
    events.extend(decoder.feed(follow))
    assert [type(e) for e in events] == [RequestError, FetchRequest]
    assert isinstance(events[0], RequestError)
    assert events[0].code is ErrorCode.REQUEST_TOO_LARGE


def test_refused_value_arriving_in_one_huge_chunk_is_not_kept() -> None:
    decoder = RequestDecoder(max_produce_bytes=64)
    decoder.receive(produce_frame("t", 0, [], count=1) + struct.pack(">I", 10**6))
    # Refused as soon as the size is known, before any of the value arrives.
    error = decoder.next_event()
    assert isinstance(error, RequestError)
    assert error.code is ErrorCode.REQUEST_TOO_LARGE
    assert decoder.next_event() is None
    assert decoder.in_frame  # still discarding the rest of the frame
    decoder.receive(b"\0" * 500_000)
    assert decoder.buffered == 0  # dropped on arrival
    assert decoder.feed(b"\0" * 500_000 + list_topics_frame()) == [ListTopicsRequest()]


def test_errors_are_reported_before_the_frame_ends() -> None:
    decoder = RequestDecoder()
    (error,) = decoder.feed(struct.pack(">HH", 1, 300))  # topic too long: known at once
    assert isinstance(error, RequestError)
    assert error.code is ErrorCode.INVALID_TOPIC
    (error,) = RequestDecoder().feed(fetch_frame("../x", 0, 0)[:-12])
    assert isinstance(error, RequestError)
    assert error.code is ErrorCode.INVALID_TOPIC
    # A huge declared value: the answer does not wait for 4 GiB of bytes.
    head = produce_frame("huge", 0, [], count=1) + struct.pack(">I", 0xFFFFFFF0)
    (error,) = RequestDecoder().feed(head)
    assert isinstance(error, RequestError)
    assert error.code is ErrorCode.REQUEST_TOO_LARGE


def test_produce_count_beyond_the_limit_is_refused_before_reading_records() -> None:
    decoder = RequestDecoder(max_produce_bytes=40)  # room for at most 10 records
    frame = produce_frame("t", 0, [b""] * 11)
    events = decode_all(decoder, [*bytewise(frame), list_topics_frame()])
    assert isinstance(events[0], RequestError)
    assert events[0].code is ErrorCode.REQUEST_TOO_LARGE
    assert events[1:] == [ListTopicsRequest()]


@pytest.mark.parametrize("partitions", [0, msg.MAX_PARTITIONS + 1, 2**32 - 1])
def test_create_topic_partition_count_is_checked(partitions: int) -> None:
    events = RequestDecoder().feed(create_topic_frame("t", partitions) + list_topics_frame())
    assert isinstance(events[0], RequestError)
    assert events[0].code is ErrorCode.INVALID_PARTITIONS
    assert events[1:] == [ListTopicsRequest()]


def test_produce_count_zero_is_malformed_and_connection_continues() -> None:
    data = produce_frame("t", 0, []) + list_topics_frame()
    events = RequestDecoder().feed(data)
    assert isinstance(events[0], RequestError)
    assert events[0].code is ErrorCode.MALFORMED_REQUEST
    assert events[1:] == [ListTopicsRequest()]


def test_topic_longer_than_249_is_skipped_without_buffering() -> None:
    long = b"a" * 5000
    frame = struct.pack(">HH", 2, len(long)) + long + struct.pack(">IQ", 0, 0)
    decoder = RequestDecoder()
    events = []
    for i in range(0, len(frame), 64):
        events.extend(decoder.feed(frame[i : i + 64]))
        assert decoder.buffered <= 64
    events.extend(decoder.feed(list_topics_frame()))
    assert isinstance(events[0], RequestError)
    assert events[0].code is ErrorCode.INVALID_TOPIC
    assert events[0].request_type == RequestType.FETCH
    assert events[1:] == [ListTopicsRequest()]


@pytest.mark.parametrize(
    "topic", [b"../x", b".", b"..", b"", b"a/b", b"\xff\xfe", b"sp ace", "ü".encode(), b"a" * 250]
)
def test_invalid_topic_names_are_refused(topic: bytes) -> None:
    frames = [
        produce_frame(topic, 0, [b"v1", b"v2"]),
        fetch_frame(topic, 0, 0),
        create_topic_frame(topic, 1),
        list_offsets_frame(topic, 0),
        long_poll_frame(topic, 0, 0, max_wait_ms=10),
    ]
    for frame in frames:
        (request_type,) = struct.unpack_from(">H", frame)
        events = RequestDecoder().feed(frame + list_topics_frame())
        assert len(events) == 2, events
        error = events[0]
        assert isinstance(error, RequestError)
        assert error.code is ErrorCode.INVALID_TOPIC
        assert error.request_type == request_type
        assert not error.fatal
        assert events[1] == ListTopicsRequest()


def test_unknown_type_is_fatal_and_stops_decoding() -> None:
    decoder = RequestDecoder()
    events = decoder.feed(list_topics_frame() + b"\x00\x63rest" + list_topics_frame())
    assert events[0] == ListTopicsRequest()
    error = events[1]
    assert isinstance(error, RequestError)
    assert (error.code, error.fatal, error.request_type) == (
        ErrorCode.UNKNOWN_REQUEST_TYPE,
        True,
        99,
    )
    assert len(events) == 2
    assert decoder.closed
    assert decoder.feed(list_topics_frame()) == []
    assert decoder.buffered == 0
    assert not decoder.in_frame


def test_in_frame_tracks_partial_frames() -> None:
    decoder = RequestDecoder()
    assert not decoder.in_frame
    decoder.feed(b"\x00")
    assert decoder.in_frame
    decoder.feed(b"\x02\x00\x01t")
    assert decoder.in_frame
    assert decoder.feed(struct.pack(">IQ", 0, 0)) == [FetchRequest("t", 0, 0)]
    assert not decoder.in_frame


@settings(deadline=None, max_examples=150)
@given(data=st.binary(max_size=400), cuts=st.lists(st.integers(0, 10**6), max_size=10))
def test_garbage_only_yields_typed_events(data: bytes, cuts: list[int]) -> None:
    decoder = RequestDecoder(max_produce_bytes=256)
    events = decode_all(decoder, chunks(data, cuts))
    for i, event in enumerate(events):
        assert isinstance(event, EVENT_CLASSES)
        if isinstance(event, RequestError) and event.fatal:
            assert i == len(events) - 1
            assert event.code is ErrorCode.UNKNOWN_REQUEST_TYPE


@settings(deadline=None, max_examples=150)
@given(
    request_type=st.integers(1, 6),
    tail=st.binary(max_size=80),
    cuts=st.lists(st.integers(0, 10**6), max_size=6),
)
def test_garbage_after_a_known_type_never_raises(
    request_type: int, tail: bytes, cuts: list[int]
) -> None:
    # Random bytes mostly start with an unknown type (fatal at once); this drives the
    # per-type states with garbage instead.
    decoder = RequestDecoder(max_produce_bytes=64)
    data = struct.pack(">H", request_type) + tail
    for event in decode_all(decoder, chunks(data, cuts)):
        assert isinstance(event, EVENT_CLASSES)
    assert decoder.buffered <= len(data)

