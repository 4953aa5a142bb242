"""The client half of the sans-IO native codec: request encoders that refuse what the
wire cannot carry, and responses decoded from the server codec's frames (hypothesis, any
chunking), incomplete or unasked for."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokerd.native import client_codec as client
from brokerd.native import messages as msg
from brokerd.native import server_codec as server
from brokerd.native.client_codec import ResponseDecoder
from brokerd.native.messages import ErrorCode, RequestType

from tests.native.test_server_codec import FAST, TOPICS, U32, U64, bytewise, chunks
from tests.native_helpers import fetch_error


def test_client_encoders_refuse_values_the_wire_cannot_carry() -> None:
    with pytest.raises(ValueError):
        client.encode_fetch("t", 2**32, 0)
    with pytest.raises(ValueError):
        client.encode_fetch("t", 0, -1)
    with pytest.raises(ValueError):
        client.encode_produce("x" * 70000, 0, [b""])
    with pytest.raises(ValueError):
        client.encode_long_poll_fetch("t", 0, 0, max_wait_ms=2**32)
    with pytest.raises(TypeError):
        client.encode_request("not a request")  # type: ignore[arg-type]


RESPONSE_CASES: st.SearchStrategy[tuple[int, bytes, msg.Response]] = st.one_of(
    st.builds(lambda o: (1, server.encode_produce_response(o), msg.ProduceResponse(o)), U64),
    st.builds(
        lambda vs: (2, server.encode_fetch_response(vs), msg.FetchResponse(tuple(vs))),
        st.lists(st.binary(max_size=30), max_size=10),
    ),
    st.just((3, server.encode_create_topic_response(), msg.CreateTopicResponse())),
    st.builds(
        lambda a, b: (4, server.encode_list_offsets_response(a, b), msg.ListOffsetsResponse(a, b)),
        U64,
        U64,
    ),
    st.builds(
        lambda ts: (
            5,
            server.encode_list_topics_response(ts),
            msg.ListTopicsResponse(tuple(msg.TopicEntry(n, p) for n, p in ts)),
        ),
        st.lists(st.tuples(TOPICS, U32), max_size=5),
    ),
    st.builds(
        lambda hw, rs: (
            6,
            server.encode_long_poll_fetch_response(hw, rs),
            msg.LongPollFetchResponse(hw, tuple(msg.FetchedRecord(o, v) for o, v in rs)),
        ),
        U64,
        st.lists(st.tuples(U64, st.binary(max_size=30)), max_size=10),
    ),
    st.builds(
        lambda t, c, m: (t, server.encode_error_response(t, c, m), msg.ErrorResponse(t, c, m)),
        st.integers(1, 6),
        st.integers(1, 0xFFFF),
        st.text(max_size=30),
    ),
)


@FAST
@given(
    cases=st.lists(RESPONSE_CASES, min_size=1, max_size=6),
    cuts=st.lists(st.integers(0, 10**6), max_size=12),
)
def test_response_round_trip_any_chunking(
    cases: list[tuple[int, bytes, msg.Response]], cuts: list[int]
) -> None:
    decoder = ResponseDecoder()
    for request_type, _, _ in cases:
        decoder.expect(request_type)
    got: list[msg.Response] = []
    for piece in chunks(b"".join(frame for _, frame, _ in cases), cuts):
        got.extend(decoder.feed(piece))
    assert got == [expected for _, _, expected in cases]
    assert decoder.pending == 0
    assert decoder.buffered == 0


@FAST
@given(case=RESPONSE_CASES)
def test_decode_response_one_byte_short_is_incomplete(
    case: tuple[int, bytes, msg.Response],
) -> None:
    request_type, frame, expected = case
    assert client.decode_response(request_type, frame) == expected
    with pytest.raises(msg.MalformedResponse):
        client.decode_response(request_type, frame[:-1])
    with pytest.raises(msg.MalformedResponse):
        client.decode_response(request_type, frame + b"\x00")


def test_large_fetch_response_one_byte_at_a_time() -> None:
    values = [bytes([i]) * i for i in range(200)]
    frame = server.encode_fetch_response(values)
    decoder = ResponseDecoder()
    decoder.expect(RequestType.FETCH)
    got: list[msg.Response] = []
    for piece in bytewise(frame):
        got.extend(decoder.feed(piece))
    assert got == [msg.FetchResponse(tuple(values))]


def test_fetch_error_form_decodes_as_error() -> None:
    response = client.decode_response(2, fetch_error(5, "offset 9 is outside [0, 3]"))
    assert response == msg.ErrorResponse(2, 5, "offset 9 is outside [0, 3]")
    assert isinstance(response, msg.ErrorResponse)
    assert response.error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert msg.ErrorResponse(1, 999, "?").error_code is None


def test_response_decoder_rejects_bytes_nobody_asked_for() -> None:
    decoder = ResponseDecoder()
    with pytest.raises(msg.MalformedResponse):
        decoder.feed(b"\x00")
    with pytest.raises(ValueError):
        decoder.expect(42)
