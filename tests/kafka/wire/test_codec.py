"""Tests for the sans-IO Kafka codec (brokerd.kafka.wire.codec / brokerd.kafka.wire.requests.apis).

Frames are built by hand, field by field, from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``), independently of the codec's own
schema tables; hypothesis then checks encode/decode round trips for every message class
at every supported version.
"""

from __future__ import annotations

import itertools
import struct
import tracemalloc
import uuid
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokerd.kafka.wire import codec
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.messages.acl import DescribeAclsRequest
from brokerd.kafka.wire.messages.cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from brokerd.kafka.wire.messages.configs import IncrementalAlterConfigsResponse
from brokerd.kafka.wire.messages.topics import CreatableTopicConfigs, DeleteTopicState
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import SUPPORTED_VERSIONS
from brokerd.kafka.wire.requests.registry import SPECS

# -- hand encoders (independent of the codec) ----------------------------------------


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s(v: str | None) -> bytes:
    if v is None:
        return i16(-1)
    data = v.encode()
    return i16(len(data)) + data


def b(v: bytes | None) -> bytes:
    if v is None:
        return i32(-1)
    return i32(len(v)) + v


def arr(*items: bytes) -> bytes:
    return i32(len(items)) + b"".join(items)


NULL_ARRAY = i32(-1)


def request(key: int, version: int, body: bytes, correlation: int = 7,
            client_id: str | None = "cli") -> bytes:
    """A request frame payload (without the size prefix): header v1 + body."""
    return i16(key) + i16(version) + i32(correlation) + s(client_id) + body


def decode(key: ApiKey, version: int, body: bytes) -> Any:
    req = apis.decode_request(request(key, version, body))
    assert req.header == RequestHeader(int(key), version, 7, "cli")
    return req.body


def encoded(version: int, body: Any, correlation: int = 7) -> bytes:
    """The response frame for ``body`` minus size and correlation id (checked here)."""
    out = apis.encode_response(correlation, version, body)
    (size,) = struct.unpack_from(">i", out)
    assert size == len(out) - 4
    assert out[4:8] == i32(correlation)
    return out[8:]


# -- framing -------------------------------------------------------------------------


def test_frames_fed_one_byte_at_a_time() -> None:
    stream = i32(3) + b"abc" + i32(0) + i32(2) + b"xy"
    dec = codec.FrameDecoder(100)
    got: list[bytes] = []
    for byte in stream:
        got += dec.feed(bytes([byte]))
    assert got == [b"abc", b"", b"xy"]
    assert dec.buffered == 0


def test_negative_frame_size_rejected() -> None:
    dec = codec.FrameDecoder(100)
    with pytest.raises(codec.FrameError, match="negative"):
        dec.feed(i32(-1))


def test_oversized_frame_refused_before_buffering() -> None:
    dec = codec.FrameDecoder(1000)
    assert dec.feed(i32(1000) + b"x" * 10) == []  # exactly the limit is fine
    dec = codec.FrameDecoder(1000)
    with pytest.raises(codec.FrameTooLarge):
        # Only the four size bytes have arrived: refused now, not once 1001 bytes are in.
        dec.feed(i32(1001))


def test_frame_limit_is_checked_for_every_frame() -> None:
    dec = codec.FrameDecoder(10)
    with pytest.raises(codec.FrameTooLarge):
        dec.feed(i32(1) + b"a" + i32(11))


@given(
    frames=st.lists(st.binary(max_size=40), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_framing_independent_of_chunking(frames: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(codec.frame(f) for f in frames)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    dec = codec.FrameDecoder(64)
    got: list[bytes] = []
    for a, z in itertools.pairwise(points):
        got += dec.feed(stream[a:z])
    assert got == frames


# -- the reader: lengths and counts are checked before allocating ---------------------


def test_string_longer_than_remaining_rejected() -> None:
    r = codec.Reader(i16(10) + b"abc")
    with pytest.raises(codec.MalformedRequest):
        r.nullable_string()


def test_bytes_longer_than_remaining_rejected() -> None:
    r = codec.Reader(i32(0x7FFFFFFF) + b"abc")
    with pytest.raises(codec.MalformedRequest):
        r.nullable_bytes()


@pytest.mark.parametrize("reader", ["nullable_string", "nullable_bytes"])
def test_negative_lengths_other_than_null_rejected(reader: str) -> None:
    data = i16(-2) if reader == "nullable_string" else i32(-2)
    with pytest.raises(codec.MalformedRequest):
        getattr(codec.Reader(data + b"xx"), reader)()


def test_huge_array_count_rejected_without_allocating() -> None:
    # Metadata v1 claiming 2**31-1 topics in a 20-byte body.
    payload = request(ApiKey.METADATA, 1, i32(0x7FFFFFFF) + b"\x00" * 16)
    # The first decode of Metadata v1 generates its reader (a one-time compile of a
    # few kilobytes); what is measured is the refused count itself.
    with pytest.raises(codec.MalformedRequest, match="cannot fit"):
        apis.decode_request(payload)
    tracemalloc.start()
    try:
        with pytest.raises(codec.MalformedRequest, match="cannot fit"):
            apis.decode_request(payload)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_array_count_uses_item_size() -> None:
    # Two partitions need at least 2 x 16 bytes in a Fetch v4 topic entry; 20 are there.
    topic = s("t") + i32(2) + b"\x00" * 20
    body = i32(-1) + i32(0) + i32(1) + i32(100) + i8(0) + arr(topic)
    with pytest.raises(codec.MalformedRequest, match="cannot fit"):
        decode(ApiKey.FETCH, 4, body)


def test_null_where_not_nullable_rejected() -> None:
    with pytest.raises(codec.MalformedRequest):
        decode(ApiKey.METADATA, 0, NULL_ARRAY)  # v0 topics are not nullable
    with pytest.raises(codec.MalformedRequest):
        decode(ApiKey.FIND_COORDINATOR, 0, s(None))


def test_invalid_utf8_rejected() -> None:
    with pytest.raises(codec.MalformedRequest, match="UTF-8"):
        decode(ApiKey.FIND_COORDINATOR, 0, i16(2) + b"\xff\xfe")


def test_trailing_bytes_rejected() -> None:
    with pytest.raises(codec.MalformedRequest, match="trailing"):
        decode(ApiKey.API_VERSIONS, 0, b"\x00")


def test_truncated_body_rejected() -> None:
    with pytest.raises(codec.MalformedRequest):
        decode(ApiKey.HEARTBEAT, 0, s("g") + i32(1))


def test_short_header_rejected() -> None:
    with pytest.raises(codec.MalformedRequest):
        apis.decode_request(b"\x00\x12\x00")


def test_unknown_api_key() -> None:
    with pytest.raises(apis.UnknownApiKey) as info:
        apis.decode_request(request(4, 0, b""))  # LeaderAndIsr: inter-broker, not implemented
    assert info.value.correlation_id == 7


@pytest.mark.parametrize(
    ("key", "version"),
    [(ApiKey.FETCH, 3), (ApiKey.FETCH, 19), (ApiKey.METADATA, 14), (ApiKey.PRODUCE, 14),
     (ApiKey.LIST_OFFSETS, 0), (ApiKey.OFFSET_COMMIT, 11), (ApiKey.API_VERSIONS, 6)],
)
def test_unsupported_versions(key: ApiKey, version: int) -> None:
    with pytest.raises(apis.UnsupportedVersion) as info:
        apis.decode_request(request(key, version, b""))
    assert info.value.api_key is key
    assert info.value.correlation_id == 7


# -- ApiVersions ---------------------------------------------------------------------


def test_api_versions_v6_fallback_bytes_exactly() -> None:
    # A version above brokerd's: header v2 (client id + tagged fields), a body of some
    # later layout. Only 8 bytes are looked at.
    flexible = (i16(18) + i16(6) + i32(0x01020304) + s("rdkafka") + b"\x00"
                + b"\x0alibrdkafka\x062.0.2\x00\xff\xff")
    with pytest.raises(apis.UnsupportedVersion) as info:
        apis.decode_request(flexible)
    reply = apis.api_versions_fallback(info.value.correlation_id)
    assert reply == (
        i32(16)                      # size
        + i32(0x01020304)            # correlation id, response header v0
        + i16(35)                    # UNSUPPORTED_VERSION
        + i32(1)                     # one entry
        + i16(18) + i16(0) + i16(5)  # ApiVersions 0-5; v0 body: no throttle time, no tags
    )


def test_api_versions_v5_request_bytes_exactly() -> None:
    # KIP-1242: after the client software, a nullable compact cluster id and a node id.
    wire = (i16(18) + i16(5) + i32(9) + s("adminclient-1") + NO_TAGS
            + cs("apache-kafka-java") + cs("4.4.0") + cs("abcd") + i32(3) + NO_TAGS)
    req = apis.decode_request(wire)
    assert req.body == apis.ApiVersionsRequest(
        client_software_name="apache-kafka-java", client_software_version="4.4.0",
        cluster_id="abcd", node_id=3)
    first = (i16(18) + i16(5) + i32(9) + s("c") + NO_TAGS
             + b"\x02a\x021" + b"\x00" + i32(-1) + NO_TAGS)
    assert apis.decode_request(first).body == apis.ApiVersionsRequest(
        client_software_name="a", client_software_version="1")


def test_api_versions_v5_refuses_another_cluster_or_node() -> None:
    """REBOOTSTRAP_REQUIRED (129) and no API when the request names a cluster and either
    it or the node is not this broker's; a request naming no cluster is answered."""
    def answer(cluster: str | None, node: int, version: int = 5) -> int:
        body = apis.ApiVersionsRequest(
            client_software_name="a", client_software_version="1",
            cluster_id=cluster, node_id=node)
        response = apis.api_versions_response(version, body, cluster_id="abcd", node_id=3)
        if response.error_code:
            assert response.api_keys == ()
        return response.error_code
    assert answer("abcd", 3) == 0
    assert answer(None, -1) == 0
    assert answer(None, 7) == 0
    assert answer("other", 3) == 129
    assert answer("abcd", 4) == 129
    assert answer("abcd", -1) == 129
    # v4 carries neither field: nothing to check.
    assert answer("other", 4, version=4) == 0


def test_api_versions_v3_request_bytes_exactly() -> None:
    # librdkafka's first request: ApiVersions v3, header v2 (client id + tagged fields),
    # compact body with client software name and version, then the body's tags.
    for version in (3, 4):
        wire = (i16(18) + i16(version) + i32(9) + s("rdkafka") + NO_TAGS
                + b"\x0blibrdkafka\x062.0.2" + NO_TAGS)
        req = apis.decode_request(wire)
        assert req.header == RequestHeader(18, version, 9, "rdkafka")
        assert req.body == apis.ApiVersionsRequest(
            client_software_name="librdkafka", client_software_version="2.0.2"
        )
        assert apis.encode_request(req.header, req.body) == i32(len(wire)) + wire


def test_api_versions_v3_response_bytes_exactly() -> None:
    resp = apis.ApiVersionsResponse(
        error_code=0, api_keys=(apis.ApiVersionRange(api_key=0, min_version=0, max_version=13),)
    )
    for version in (3, 4, 5):
        out = apis.encode_response(7, version, resp)
        name = uv(len(b"share.version") + 1) + b"share.version"
        # Below v4 a supported feature with minimum 0 is left out (KAFKA-17011).
        supported = carr(name + i16(0) + i16(2) + NO_TAGS) if version >= 4 else carr()
        finalized = carr(name + i16(2) + i16(2) + NO_TAGS)
        # The tagged features (KIP-932's share.version): SupportedFeatures (0),
        # FinalizedFeaturesEpoch (1), FinalizedFeatures (2).
        tags = (
            uv(3) + uv(0) + uv(len(supported)) + supported + uv(1) + uv(8) + i64(1)
            + uv(2) + uv(len(finalized)) + finalized
        )
        body = i16(0) + carr(i16(0) + i16(0) + i16(13) + NO_TAGS) + i32(0) + tags
        # Response header v0 (no tag byte after the correlation id), compact body.
        assert out == i32(4 + len(body)) + i32(7) + body
        assert apis.decode_response(ApiKey.API_VERSIONS, version, out[4:]) == (7, resp)


@pytest.mark.parametrize(
    ("name", "version", "valid"),
    [("librdkafka", "2.0.2", True), ("apache-kafka-java", "4.2.1", True),
     ("platformatic-kafka", "1.21.0", True), ("a", "1", True),
     ("kafka-python", "2.2.15-dev", True),
     ("", "1.0", False), ("x", "", False), ("-lead", "1", False), ("trail.", "1", False),
     ("@scope/pkg", "1", False), ("name", "1.0 beta", False), ("náme", "1", False)],
)
def test_api_versions_client_software_checked_from_v3(
    name: str, version: str, valid: bool
) -> None:
    req = apis.ApiVersionsRequest(client_software_name=name, client_software_version=version)
    assert apis.client_software_valid(req, 3) is valid
    answer = apis.api_versions_response(3, req)
    if valid:
        assert answer == apis.api_versions_response(3)
    else:  # Kafka's answer: INVALID_REQUEST and no API
        assert answer == apis.ApiVersionsResponse(error_code=42)
    # v0-2 carry no name: nothing to check.
    assert apis.api_versions_response(2, apis.ApiVersionsRequest()).error_code == 0


def test_api_versions_request_and_response() -> None:
    assert decode(ApiKey.API_VERSIONS, 0, b"") == apis.ApiVersionsRequest()
    assert decode(ApiKey.API_VERSIONS, 2, b"") == apis.ApiVersionsRequest()
    resp = apis.ApiVersionsResponse(
        error_code=0, api_keys=(apis.ApiVersionRange(api_key=0, min_version=0, max_version=8),)
    )
    assert encoded(0, resp) == i16(0) + arr(i16(0) + i16(0) + i16(8))
    assert encoded(1, resp) == i16(0) + arr(i16(0) + i16(0) + i16(8)) + i32(0)


def test_advertised_ranges_are_the_documented_ones() -> None:
    from tests.kafka.wire.requests.test_apis_version_table import documented

    body = apis.api_versions_response(2)
    got = {r.api_key: (r.min_version, r.max_version) for r in body.api_keys}
    assert got == {key: (low, high) for key, (_name, low, high) in documented().items()}


# -- Metadata ------------------------------------------------------------------------


def test_metadata_requests() -> None:
    assert decode(ApiKey.METADATA, 0, arr(s("a"))).topics == (
        apis.MetadataRequestTopic(name="a"),
    )
    assert decode(ApiKey.METADATA, 1, NULL_ARRAY).topics is None
    r4 = decode(ApiKey.METADATA, 4, arr(s("a"), s("b")) + i8(0))
    assert [t.name for t in r4.topics] == ["a", "b"]
    assert r4.allow_auto_topic_creation is False
    r8 = decode(ApiKey.METADATA, 8, NULL_ARRAY + i8(1) + i8(1) + i8(0))
    assert r8 == apis.MetadataRequest(
        topics=None, allow_auto_topic_creation=True,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=False,
    )


def _metadata_response() -> apis.MetadataResponse:
    return apis.MetadataResponse(
        brokers=(apis.MetadataBroker(node_id=0, host="h", port=9092),),
        cluster_id="c",
        controller_id=0,
        topics=(
            apis.MetadataTopic(
                error_code=0, name="t",
                partitions=(
                    apis.MetadataPartition(
                        partition_index=0, leader_id=0, leader_epoch=0,
                        replica_nodes=(0,), isr_nodes=(0,),
                    ),
                ),
            ),
        ),
    )


def test_metadata_response_v0() -> None:
    assert encoded(0, _metadata_response()) == (
        arr(i32(0) + s("h") + i32(9092))
        + arr(i16(0) + s("t") + arr(i16(0) + i32(0) + i32(0) + arr(i32(0)) + arr(i32(0))))
    )


def test_metadata_response_v8() -> None:
    assert encoded(8, _metadata_response()) == (
        i32(0)                                               # throttle
        + arr(i32(0) + s("h") + i32(9092) + s(None))         # broker + null rack
        + s("c") + i32(0)                                    # cluster id, controller
        + arr(
            i16(0) + s("t") + i8(0)                          # error, name, is_internal
            + arr(i16(0) + i32(0) + i32(0) + i32(0)          # ..., leader epoch
                  + arr(i32(0)) + arr(i32(0)) + arr())       # replicas, isr, offline
            + i32(-(2**31))                                  # topic authorized ops
        )
        + i32(-(2**31))                                      # cluster authorized ops
    )


# -- Produce -------------------------------------------------------------------------


def test_produce_request_v3_and_v8() -> None:
    body = s(None) + i16(-1) + i32(30000) + arr(s("t") + arr(i32(1) + b(b"BATCH")))
    for version in (3, 8):
        req = decode(ApiKey.PRODUCE, version, body)
        assert req == apis.ProduceRequest(
            transactional_id=None, acks=-1, timeout_ms=30000,
            topic_data=(apis.ProduceTopicData(
                name="t",
                partition_data=(apis.ProducePartitionData(index=1, records=b"BATCH"),),
            ),),
        )


def test_produce_request_v0_has_no_transactional_id() -> None:
    req = decode(ApiKey.PRODUCE, 0, i16(1) + i32(5) + arr(s("t") + arr(i32(0) + b(None))))
    assert req.acks == 1 and req.timeout_ms == 5
    assert req.topic_data[0].partition_data[0].records is None


def _produce_response() -> apis.ProduceResponse:
    return apis.ProduceResponse(responses=(apis.ProduceTopicResponse(
        name="t",
        partition_responses=(apis.ProducePartitionResponse(
            index=0, error_code=0, base_offset=42, log_append_time_ms=-1, log_start_offset=3,
        ),),
    ),))


def test_produce_response_versions() -> None:
    resp = _produce_response()
    assert encoded(0, resp) == arr(s("t") + arr(i32(0) + i16(0) + i64(42)))
    assert encoded(3, resp) == arr(s("t") + arr(i32(0) + i16(0) + i64(42) + i64(-1))) + i32(0)
    assert encoded(8, resp) == (
        arr(s("t") + arr(i32(0) + i16(0) + i64(42) + i64(-1) + i64(3) + arr() + s(None)))
        + i32(0)
    )


def test_produce_v9_is_flexible() -> None:
    # v9-12: compact strings, arrays and records, tagged fields after every struct,
    # request header v2 and response header v1.
    body = (cs("tx") + i16(-1) + i32(30000)
            + carr(cs("t") + carr(i32(1) + cb(b"BATCH") + NO_TAGS) + NO_TAGS) + NO_TAGS)
    for version in (9, 10, 11, 12):
        wire = i16(0) + i16(version) + i32(7) + s("cli") + NO_TAGS + body
        req = apis.decode_request(wire)
        assert req.body == apis.ProduceRequest(
            transactional_id="tx", acks=-1, timeout_ms=30000,
            topic_data=(apis.ProduceTopicData(
                name="t",
                partition_data=(apis.ProducePartitionData(index=1, records=b"BATCH"),),
            ),),
        )
        assert apis.encode_request(req.header, req.body) == i32(len(wire)) + wire
        out = apis.encode_response(7, version, _produce_response())
        resp_body = (
            carr(cs("t") + carr(i32(0) + i16(0) + i64(42) + i64(-1) + i64(3) + carr()
                                + cs(None) + NO_TAGS) + NO_TAGS)
            + i32(0) + NO_TAGS
        )
        assert out == i32(4 + 1 + len(resp_body)) + i32(7) + NO_TAGS + resp_body
        assert apis.decode_response(ApiKey.PRODUCE, version, out[4:]) == (
            7, _produce_response()
        )


TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def test_produce_v13_names_topics_by_id() -> None:
    # The topic's 16-byte ID where v0-12 have its name, in the request and the answer.
    body = (cs(None) + i16(1) + i32(5)
            + carr(TOPIC_ID.bytes + carr(i32(0) + cb(b"B") + NO_TAGS) + NO_TAGS) + NO_TAGS)
    wire = i16(0) + i16(13) + i32(7) + s("cli") + NO_TAGS + body
    req = apis.decode_request(wire).body
    assert req.topic_data == (apis.ProduceTopicData(
        topic_id=TOPIC_ID, partition_data=(apis.ProducePartitionData(index=0, records=b"B"),)
    ),)
    assert req.topic_data[0].name == ""  # not on the wire at v13
    resp = apis.ProduceResponse(responses=(apis.ProduceTopicResponse(
        name="ignored at v13", topic_id=TOPIC_ID,
        partition_responses=(apis.ProducePartitionResponse(index=0, error_code=100),),
    ),))
    out = apis.encode_response(7, 13, resp)
    assert out[9:] == (
        carr(TOPIC_ID.bytes + carr(i32(0) + i16(100) + i64(-1) + i64(-1) + i64(-1) + carr()
                                   + cs(None) + NO_TAGS) + NO_TAGS)
        + i32(0) + NO_TAGS
    )
    # And v12 answers by name, without the ID.
    assert apis.encode_response(7, 12, resp)[9:].startswith(uv(2) + cs("ignored at v13") + uv(2))


def test_produce_response_v10_tagged_leader_hints_are_skipped() -> None:
    # A v10+ answer carrying CurrentLeader (partition tag 0) and NodeEndpoints (top-level
    # tag 0), as Kafka sends beside NOT_LEADER_OR_FOLLOWER: read and skipped.
    leader = i32(0) + i32(0) + NO_TAGS
    endpoint = carr(i32(0) + cs("h") + i32(9092) + cs(None) + NO_TAGS)
    payload = (
        i32(7) + NO_TAGS
        + carr(cs("t") + carr(i32(0) + i16(6) + i64(-1) + i64(-1) + i64(-1) + carr() + cs(None)
                              + uv(1) + uv(0) + uv(len(leader)) + leader) + NO_TAGS)
        + i32(0) + uv(1) + uv(0) + uv(len(endpoint)) + endpoint
    )
    _, resp = apis.decode_response(ApiKey.PRODUCE, 10, payload)
    assert resp.responses[0].partition_responses[0].error_code == 6


# -- Fetch ---------------------------------------------------------------------------


def test_fetch_request_v4() -> None:
    body = (i32(-1) + i32(500) + i32(1) + i32(52428800) + i8(1)
            + arr(s("t") + arr(i32(0) + i64(10) + i32(1048576))))
    req = decode(ApiKey.FETCH, 4, body)
    assert req == apis.FetchRequest(
        replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52428800, isolation_level=1,
        topics=(apis.FetchTopic(topic="t", partitions=(apis.FetchPartition(
            partition=0, fetch_offset=10, partition_max_bytes=1048576),)),),
    )


def test_fetch_request_v11() -> None:
    body = (i32(-1) + i32(500) + i32(1) + i32(1000) + i8(0) + i32(0) + i32(-1)
            + arr(s("t") + arr(i32(2) + i32(5) + i64(10) + i64(-1) + i32(99)))
            + arr(s("old") + arr(i32(1))) + s("rack"))
    req = decode(ApiKey.FETCH, 11, body)
    p = req.topics[0].partitions[0]
    assert (p.partition, p.current_leader_epoch, p.fetch_offset, p.log_start_offset,
            p.partition_max_bytes) == (2, 5, 10, -1, 99)
    assert req.session_epoch == -1
    assert req.forgotten_topics_data == (apis.ForgottenTopic(topic="old", partitions=(1,)),)
    assert req.rack_id == "rack"


def _fetch_response(aborted: tuple[apis.AbortedTransaction, ...] | None) -> apis.FetchResponse:
    return apis.FetchResponse(responses=(apis.FetchTopicResponse(topic="t", partitions=(
        apis.FetchPartitionResponse(
            partition_index=0, error_code=0, high_watermark=5, last_stable_offset=5,
            log_start_offset=1, aborted_transactions=aborted, preferred_read_replica=-1,
            records=b"RAW",
        ),
    )),))


def test_fetch_response_v4_and_v11() -> None:
    assert encoded(4, _fetch_response(None)) == (
        i32(0) + arr(s("t") + arr(i32(0) + i16(0) + i64(5) + i64(5) + NULL_ARRAY + b(b"RAW")))
    )
    assert encoded(11, _fetch_response(())) == (
        i32(0) + i16(0) + i32(0)
        + arr(s("t") + arr(i32(0) + i16(0) + i64(5) + i64(5) + i64(1) + arr() + i32(-1)
                           + b(b"RAW")))
    )


# -- ListOffsets ---------------------------------------------------------------------


def test_list_offsets_requests() -> None:
    r1 = decode(ApiKey.LIST_OFFSETS, 1, i32(-1) + arr(s("t") + arr(i32(0) + i64(-2))))
    assert r1.topics[0].partitions[0] == apis.ListOffsetsPartition(
        partition_index=0, timestamp=-2)
    r5 = decode(ApiKey.LIST_OFFSETS, 5,
                i32(-1) + i8(1) + arr(s("t") + arr(i32(0) + i32(3) + i64(-1))))
    assert r5.isolation_level == 1
    assert r5.topics[0].partitions[0] == apis.ListOffsetsPartition(
        partition_index=0, current_leader_epoch=3, timestamp=-1)


def test_list_offsets_responses() -> None:
    resp = apis.ListOffsetsResponse(topics=(apis.ListOffsetsTopicResponse(name="t", partitions=(
        apis.ListOffsetsPartitionResponse(partition_index=0, timestamp=-1, offset=9,
                                          leader_epoch=0),)),))
    assert encoded(1, resp) == arr(s("t") + arr(i32(0) + i16(0) + i64(-1) + i64(9)))
    assert encoded(4, resp) == i32(0) + arr(
        s("t") + arr(i32(0) + i16(0) + i64(-1) + i64(9) + i32(0)))
    flexible = NO_TAGS + i32(0) + carr(
        cs("t") + carr(i32(0) + i16(0) + i64(-1) + i64(9) + i32(0) + NO_TAGS) + NO_TAGS
    ) + NO_TAGS
    for version in (6, 7, 8, 9, 10, 11):
        assert encoded(version, resp) == flexible


def test_list_offsets_v6_flexible_and_v10_timeout() -> None:
    topics = carr(cs("t") + carr(i32(0) + i32(-1) + i64(-3) + NO_TAGS) + NO_TAGS)
    want = (apis.ListOffsetsTopic(name="t", partitions=(
        apis.ListOffsetsPartition(partition_index=0, timestamp=-3),)),)
    for version in (6, 7, 8, 9):
        req = apis.decode_request(_flex_request(
            ApiKey.LIST_OFFSETS, version, i32(-1) + i8(1) + topics + NO_TAGS
        ))
        assert req.body == apis.ListOffsetsRequest(isolation_level=1, topics=want)
    for version in (10, 11):
        req = apis.decode_request(_flex_request(
            ApiKey.LIST_OFFSETS, version, i32(-1) + i8(0) + topics + i32(2500) + NO_TAGS
        ))
        assert req.body == apis.ListOffsetsRequest(topics=want, timeout_ms=2500)
        header = RequestHeader(int(ApiKey.LIST_OFFSETS), version, 7, "cli")
        wire = _flex_request(
            ApiKey.LIST_OFFSETS, version, i32(-1) + i8(0) + topics + i32(2500) + NO_TAGS
        )
        assert apis.encode_request(header, req.body) == i32(len(wire)) + wire
    with pytest.raises(apis.UnsupportedVersion):
        apis.decode_request(_flex_request(ApiKey.LIST_OFFSETS, 12, b""))


# -- FindCoordinator -----------------------------------------------------------------


def test_find_coordinator() -> None:
    assert decode(ApiKey.FIND_COORDINATOR, 0, s("g")) == apis.FindCoordinatorRequest(key="g")
    assert decode(ApiKey.FIND_COORDINATOR, 2, s("g") + i8(0)).key_type == 0
    resp = apis.FindCoordinatorResponse(node_id=0, host="h", port=1)
    assert encoded(0, resp) == i16(0) + i32(0) + s("h") + i32(1)
    assert encoded(1, resp) == i32(0) + i16(0) + s(None) + i32(0) + s("h") + i32(1)


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ----------------------------------


def test_join_group_requests() -> None:
    protocols = arr(s("range") + b(b"META"))
    r0 = decode(ApiKey.JOIN_GROUP, 0, s("g") + i32(10000) + s("") + s("consumer") + protocols)
    assert r0 == apis.JoinGroupRequest(
        group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=-1, member_id="",
        protocol_type="consumer",
        protocols=(apis.JoinGroupProtocol(name="range", metadata=b"META"),),
    )
    r5 = decode(ApiKey.JOIN_GROUP, 5,
                s("g") + i32(10000) + i32(300000) + s("m") + s("inst") + s("consumer")
                + protocols)
    assert (r5.rebalance_timeout_ms, r5.member_id, r5.group_instance_id) == (
        300000, "m", "inst")


def test_join_group_responses() -> None:
    resp = apis.JoinGroupResponse(
        error_code=0, generation_id=1, protocol_name="range", leader="m", member_id="m",
        members=(apis.JoinGroupMember(member_id="m", group_instance_id=None, metadata=b"X"),),
    )
    assert encoded(0, resp) == (i16(0) + i32(1) + s("range") + s("m") + s("m")
                                + arr(s("m") + b(b"X")))
    assert encoded(5, resp) == (i32(0) + i16(0) + i32(1) + s("range") + s("m") + s("m")
                                + arr(s("m") + s(None) + b(b"X")))


def test_sync_group() -> None:
    r0 = decode(ApiKey.SYNC_GROUP, 0, s("g") + i32(1) + s("m") + arr(s("m") + b(b"A")))
    assert r0.assignments == (apis.SyncGroupAssignment(member_id="m", assignment=b"A"),)
    r3 = decode(ApiKey.SYNC_GROUP, 3, s("g") + i32(1) + s("m") + s(None) + arr())
    assert r3.group_instance_id is None and r3.assignments == ()
    resp = apis.SyncGroupResponse(error_code=27, assignment=b"")
    assert encoded(0, resp) == i16(27) + b(b"")
    assert encoded(3, resp) == i32(0) + i16(27) + b(b"")


def test_heartbeat_and_leave_group() -> None:
    assert decode(ApiKey.HEARTBEAT, 0, s("g") + i32(3) + s("m")) == apis.HeartbeatRequest(
        group_id="g", generation_id=3, member_id="m")
    assert decode(ApiKey.HEARTBEAT, 3, s("g") + i32(3) + s("m") + s("i")).group_instance_id == "i"
    assert encoded(0, apis.HeartbeatResponse(error_code=27)) == i16(27)
    assert encoded(1, apis.HeartbeatResponse(error_code=27)) == i32(0) + i16(27)
    assert decode(ApiKey.LEAVE_GROUP, 2, s("g") + s("m")) == apis.LeaveGroupRequest(
        group_id="g", member_id="m")
    assert encoded(0, apis.LeaveGroupResponse()) == i16(0)
    assert encoded(2, apis.LeaveGroupResponse()) == i32(0) + i16(0)


# -- OffsetCommit / OffsetFetch ------------------------------------------------------


def test_offset_commit_requests() -> None:
    r2 = decode(ApiKey.OFFSET_COMMIT, 2, s("g") + i32(1) + s("m") + i64(-1)
                + arr(s("t") + arr(i32(0) + i64(5) + s(None))))
    assert r2.retention_time_ms == -1
    assert r2.topics[0].partitions[0] == apis.OffsetCommitPartition(
        partition_index=0, committed_offset=5, committed_leader_epoch=-1,
        committed_metadata=None)
    r7 = decode(ApiKey.OFFSET_COMMIT, 7, s("g") + i32(1) + s("m") + s(None)
                + arr(s("t") + arr(i32(0) + i64(5) + i32(0) + s("md"))))
    assert r7.topics[0].partitions[0].committed_leader_epoch == 0
    assert r7.topics[0].partitions[0].committed_metadata == "md"


def test_offset_commit_responses() -> None:
    resp = apis.OffsetCommitResponse(topics=(apis.OffsetCommitTopicResponse(
        name="t", partitions=(apis.OffsetCommitPartitionResponse(partition_index=0,
                                                                 error_code=22),)),))
    assert encoded(2, resp) == arr(s("t") + arr(i32(0) + i16(22)))
    assert encoded(3, resp) == i32(0) + arr(s("t") + arr(i32(0) + i16(22)))


def test_offset_fetch() -> None:
    r1 = decode(ApiKey.OFFSET_FETCH, 1, s("g") + arr(s("t") + arr(i32(0), i32(1))))
    assert r1.topics == (apis.OffsetFetchTopic(name="t", partition_indexes=(0, 1)),)
    assert decode(ApiKey.OFFSET_FETCH, 2, s("g") + NULL_ARRAY).topics is None
    with pytest.raises(codec.MalformedRequest):
        decode(ApiKey.OFFSET_FETCH, 1, s("g") + NULL_ARRAY)
    resp = apis.OffsetFetchResponse(topics=(apis.OffsetFetchTopicResponse(name="t", partitions=(
        apis.OffsetFetchPartitionResponse(partition_index=0, committed_offset=-1,
                                          committed_leader_epoch=-1, metadata="",
                                          error_code=0),)),))
    part1 = i32(0) + i64(-1) + s("") + i16(0)
    assert encoded(1, resp) == arr(s("t") + arr(part1))
    assert encoded(2, resp) == arr(s("t") + arr(part1)) + i16(0)
    assert encoded(5, resp) == (
        i32(0) + arr(s("t") + arr(i32(0) + i64(-1) + i32(-1) + s("") + i16(0))) + i16(0))


# -- CreateTopics / DeleteTopics / InitProducerId ------------------------------------


def test_create_topics() -> None:
    body = (arr(s("t") + i32(3) + i16(1) + arr() + arr(s("retention.ms") + s("1000")),
                s("u") + i32(-1) + i16(-1) + arr(i32(0) + arr(i32(0))) + arr())
            + i32(5000) + i8(1))
    req = decode(ApiKey.CREATE_TOPICS, 4, body)
    assert req.timeout_ms == 5000 and req.validate_only is True
    assert req.topics[0] == apis.CreatableTopic(
        name="t", num_partitions=3, replication_factor=1,
        configs=(apis.CreatableTopicConfig(name="retention.ms", value="1000"),))
    assert req.topics[1].assignments == (
        apis.CreatableReplicaAssignment(partition_index=0, broker_ids=(0,)),)
    resp = apis.CreateTopicsResponse(topics=(
        apis.CreatableTopicResult(name="t", error_code=36, error_message="exists"),))
    assert encoded(2, resp) == i32(0) + arr(s("t") + i16(36) + s("exists"))


def test_delete_topics() -> None:
    req = decode(ApiKey.DELETE_TOPICS, 1, arr(s("a"), s("b")) + i32(100))
    assert req == apis.DeleteTopicsRequest(topic_names=("a", "b"), timeout_ms=100)
    resp = apis.DeleteTopicsResponse(responses=(apis.DeletableTopicResult(name="a"),))
    assert encoded(3, resp) == i32(0) + arr(s("a") + i16(0))


def test_init_producer_id() -> None:
    assert decode(ApiKey.INIT_PRODUCER_ID, 0, s(None) + i32(60000)) == (
        apis.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))
    assert decode(ApiKey.INIT_PRODUCER_ID, 1, s("tx") + i32(1)).transactional_id == "tx"
    resp = apis.InitProducerIdResponse(error_code=0, producer_id=5, producer_epoch=0)
    assert encoded(0, resp) == i32(0) + i16(0) + i64(5) + i16(0)
    # v2+ flexible, v3+ carries the current producer id and epoch.
    v2 = i16(22) + i16(2) + i32(7) + s("cli") + NO_TAGS + cs(None) + i32(100) + NO_TAGS
    assert apis.decode_request(v2).body == apis.InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=100)
    v3 = (i16(22) + i16(3) + i32(7) + s("cli") + NO_TAGS + cs("tx") + i32(100) + i64(9)
          + i16(2) + NO_TAGS)
    assert apis.decode_request(v3).body == apis.InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=100, producer_id=9, producer_epoch=2)
    assert encoded(4, resp) == NO_TAGS + i32(0) + i16(0) + i64(5) + i16(0) + NO_TAGS


# -- group admin APIs: ListGroups, DescribeGroups, DeleteGroups, OffsetDelete ----------


def test_list_groups() -> None:
    assert decode(ApiKey.LIST_GROUPS, 2, b"") == apis.ListGroupsRequest()
    resp = apis.ListGroupsResponse(
        groups=(apis.ListedGroup(group_id="g", protocol_type="consumer"),)
    )
    assert encoded(0, resp) == i16(0) + arr(s("g") + s("consumer"))
    assert encoded(1, resp) == i32(0) + i16(0) + arr(s("g") + s("consumer"))


def test_describe_groups() -> None:
    assert decode(ApiKey.DESCRIBE_GROUPS, 0, arr(s("g"))).groups == ("g",)
    r3 = decode(ApiKey.DESCRIBE_GROUPS, 3, arr(s("a"), s("b")) + i8(1))
    assert r3 == apis.DescribeGroupsRequest(groups=("a", "b"), include_authorized_operations=True)
    member = apis.DescribedGroupMember(
        member_id="m", group_instance_id="i", client_id="c", client_host="/h",
        member_metadata=b"md", member_assignment=b"as",
    )
    group = apis.DescribedGroup(
        group_id="g", group_state="Stable", protocol_type="consumer", protocol_data="range",
        members=(member,),
    )
    resp = apis.DescribeGroupsResponse(groups=(group,))
    head = i16(0) + s("g") + s("Stable") + s("consumer") + s("range")
    m0 = s("m") + s("c") + s("/h") + b(b"md") + b(b"as")
    assert encoded(0, resp) == arr(head + arr(m0))
    m4 = s("m") + s("i") + s("c") + s("/h") + b(b"md") + b(b"as")
    assert encoded(4, resp) == i32(0) + arr(head + arr(m4) + i32(-(2**31)))


def test_delete_groups() -> None:
    assert decode(ApiKey.DELETE_GROUPS, 1, arr(s("a"), s("b"))) == apis.DeleteGroupsRequest(
        groups_names=("a", "b")
    )
    resp = apis.DeleteGroupsResponse(
        results=(apis.DeletableGroupResult(group_id="a", error_code=68),)
    )
    assert encoded(0, resp) == i32(0) + arr(s("a") + i16(68))


def test_offset_delete() -> None:
    body = s("g") + arr(s("t") + arr(i32(0), i32(2)))
    assert decode(ApiKey.OFFSET_DELETE, 0, body) == apis.OffsetDeleteRequest(
        group_id="g", topics=(apis.OffsetDeleteRequestTopic(name="t", partitions=(0, 2)),)
    )
    resp = apis.OffsetDeleteResponse(
        topics=(
            apis.OffsetDeleteResponseTopic(
                name="t",
                partitions=(apis.OffsetDeleteResponsePartition(partition_index=0, error_code=86),),
            ),
        )
    )
    assert encoded(0, resp) == i16(0) + i32(0) + arr(s("t") + arr(i32(0) + i16(86)))
    assert encoded(0, apis.OffsetDeleteResponse(error_code=69)) == i16(69) + i32(0) + arr()


def test_encoding_a_null_where_forbidden_is_a_bug() -> None:
    with pytest.raises(ValueError, match="null"):
        apis.encode_response(1, 0, apis.FindCoordinatorResponse(node_id=0, host=None, port=0))  # type: ignore[arg-type]


# -- hypothesis round trips over every message and version ---------------------------

_INT_RANGES = {
    id(codec.INT8): 7, id(codec.INT16): 15, id(codec.INT32): 31, id(codec.INT64): 63,
}


def _type_strategy(t: Any, version: int) -> st.SearchStrategy[Any]:
    bits = _INT_RANGES.get(id(t))
    if bits is not None:
        return st.integers(min_value=-(2**bits), max_value=2**bits - 1)
    if t is codec.UINT16:
        return st.integers(min_value=0, max_value=0xFFFF)
    if t is codec.BOOL:
        return st.booleans()
    if t is codec.STRING:
        return st.text(max_size=8)
    if t is codec.BYTES:
        return st.binary(max_size=16)
    if t is codec.UUID:
        return st.uuids()
    if t is codec.FLOAT64:
        return st.floats(allow_nan=False, width=64)
    if isinstance(t, codec.Array):
        return st.lists(_type_strategy(t.item, version), max_size=3).map(tuple)
    assert isinstance(t, codec.Struct)
    return _struct_strategy(t.cls, version)


def _struct_strategy(cls: type[Any], version: int) -> st.SearchStrategy[Any]:
    fields = {}
    for f in codec.iter_fields(cls, version):
        value = _type_strategy(f.type, version)
        fields[f.name] = st.none() | value if f.nullable(version) else value
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def _signature(t: Any, version: int) -> Any:
    """What :func:`_type_strategy` builds its strategy from, for one field type."""
    if isinstance(t, codec.Array):
        return ("array", _signature(t.item, version))
    if isinstance(t, codec.Struct):
        return (type(t), t.cls, _fields_signature(t.cls, version))
    return id(t)


def _fields_signature(cls: type[Any], version: int) -> Any:
    """What :func:`_struct_strategy` builds its strategy from: every field of ``cls`` at
    ``version`` (name, type, nullability), nested structs' fields at the same version."""
    return tuple(
        (f.name, _signature(f.type, version), f.nullable(version))
        for f in codec.iter_fields(cls, version)
    )


def _version_groups() -> list[tuple[ApiKey, tuple[int, ...], str]]:
    """Each API's supported versions, per direction, in runs whose bodies are drawn from
    the same strategy (the same fields at every level, the same flexibility): a body drawn
    once is checked at every version of its run. Most APIs add a field every few
    versions; the versions in between encode the same fields, and drawing fresh bodies
    for each was most of this test's time."""
    groups: dict[Any, list[int]] = {}
    for key, (lo, hi) in SUPPORTED_VERSIONS.items():
        for kind in ("request", "response"):
            spec = SPECS[key]
            cls = spec.request if kind == "request" else spec.response
            for version in range(lo, hi + 1):
                shape = (key, kind, codec.is_flexible(cls, version),
                         _fields_signature(cls, version))
                groups.setdefault(shape, []).append(version)
    return [(shape[0], tuple(versions), shape[1]) for shape, versions in groups.items()]


_GROUPS = _version_groups()


def test_version_groups_cover_every_supported_version_once() -> None:
    cases = sorted((key, v, kind) for key, versions, kind in _GROUPS for v in versions)
    assert cases == sorted(
        (key, v, kind)
        for key, (lo, hi) in SUPPORTED_VERSIONS.items()
        for v in range(lo, hi + 1)
        for kind in ("request", "response")
    )


@pytest.mark.parametrize(
    ("key", "versions", "kind"),
    _GROUPS,
    ids=[f"{int(k)}-v{'.'.join(map(str, vs))}-{kind}" for k, vs, kind in _GROUPS],
)
def test_round_trip(key: ApiKey, versions: tuple[int, ...], kind: str) -> None:
    # The @given function is built per case: pytest-twisted rewraps a collected test
    # function in place, which breaks @given combined with parametrize.
    spec = SPECS[key]
    cls = spec.request if kind == "request" else spec.response

    @settings(max_examples=15, deadline=None, database=None)
    @given(body=_struct_strategy(cls, versions[0]), client_id=st.none() | st.text(max_size=5))
    def check(body: Any, client_id: str | None) -> None:
        for version in versions:
            if kind == "request":
                header = RequestHeader(int(key), version, 99, client_id)
                (payload,) = codec.FrameDecoder().feed(apis.encode_request(header, body))
                req = apis.decode_request(payload)
                assert req.header == header, version
                assert req.body == body, version
            else:
                (payload,) = codec.FrameDecoder().feed(
                    apis.encode_response(99, version, body)
                )
                assert apis.decode_response(key, version, payload) == (99, body), version

    check()


def test_messages_are_frozen() -> None:
    resp = apis.HeartbeatResponse(error_code=0)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        resp.error_code = 1  # type: ignore[misc]
    assert apis.ProduceTopicData(name="t", partition_data=[]).partition_data == ()  # type: ignore[arg-type]


# -- the config APIs: DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44)


def test_describe_configs_request_by_version() -> None:
    resource = i8(2) + s("t") + i32(-1)  # a topic, every key (null array)
    assert decode(ApiKey.DESCRIBE_CONFIGS, 1, arr(resource) + b"\x00") == (
        apis.DescribeConfigsRequest(
            resources=(apis.DescribeConfigsResource(resource_type=2, resource_name="t"),)
        )
    )
    # Kafka 4.0 removed v0 (IsDefault instead of the config source).
    with pytest.raises(apis.UnsupportedVersion):
        apis.decode_request(request(ApiKey.DESCRIBE_CONFIGS, 0, arr(resource)))
    v4 = apis.decode_request(_flex_request(
        ApiKey.DESCRIBE_CONFIGS, 4,
        carr(i8(2) + cs("t") + b"\x00" + NO_TAGS, i8(4) + cs("0") + carr(cs("a")) + NO_TAGS)
        + b"\x01\x00" + NO_TAGS,
    ))
    assert v4.body == apis.DescribeConfigsRequest(
        resources=(
            apis.DescribeConfigsResource(resource_type=2, resource_name="t"),
            apis.DescribeConfigsResource(
                resource_type=4, resource_name="0", configuration_keys=("a",)
            ),
        ),
        include_synonyms=True,
    )
    body = decode(
        ApiKey.DESCRIBE_CONFIGS, 3, arr(i8(4) + s("0") + arr(s("a"), s("b"))) + b"\x01\x01"
    )
    assert body.include_synonyms and body.include_documentation
    assert body.resources[0].configuration_keys == ("a", "b")


def test_describe_configs_response_v1_the_source_v3_types_v4_flexible() -> None:
    entry = apis.DescribeConfigsResourceResult(
        name="retention.ms", value="1000", read_only=False,
        config_source=1, is_sensitive=False,
        synonyms=(apis.DescribeConfigsSynonym(name="retention.ms", value="1000", source=1),),
        config_type=5, documentation=None,
    )
    result = apis.DescribeConfigsResult(resource_type=2, resource_name="t", configs=(entry,))
    body = apis.DescribeConfigsResponse(results=(result,))
    head = i32(0) + i32(1) + i16(0) + s(None) + i8(2) + s("t") + i32(1)
    name_value = s("retention.ms") + s("1000") + b"\x00"
    synonyms = arr(s("retention.ms") + s("1000") + i8(1))
    assert encoded(1, body) == head + name_value + i8(1) + b"\x00" + synonyms
    assert encoded(3, body) == head + name_value + i8(1) + b"\x00" + synonyms + i8(5) + s(None)
    flex_synonyms = carr(cs("retention.ms") + cs("1000") + i8(1) + NO_TAGS)
    flex_entry = (cs("retention.ms") + cs("1000") + b"\x00" + i8(1) + b"\x00" + flex_synonyms
                  + i8(5) + b"\x00" + NO_TAGS)
    assert encoded(4, body) == NO_TAGS + i32(0) + carr(
        i16(0) + b"\x00" + i8(2) + cs("t") + carr(flex_entry) + NO_TAGS
    ) + NO_TAGS


def test_alter_configs_and_incremental_bytes() -> None:
    body = decode(
        ApiKey.ALTER_CONFIGS, 1, arr(i8(2) + s("t") + arr(s("retention.ms") + s(None))) + b"\x01"
    )
    assert body == apis.AlterConfigsRequest(
        resources=(apis.AlterConfigsResource(resource_type=2, resource_name="t", configs=(
            apis.AlterableConfig(name="retention.ms", value=None),)),),
        validate_only=True,
    )
    body = decode(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 0,
        arr(i8(2) + s("t") + arr(s("cleanup.policy") + i8(2) + s("compact"))) + b"\x00",
    )
    assert body.resources[0].configs == (
        apis.IncrementalAlterableConfig(name="cleanup.policy", config_operation=2, value="compact"),
    )
    response = apis.AlterConfigsResponse(responses=(apis.AlterConfigsResourceResponse(
        error_code=40, error_message="bad", resource_type=2, resource_name="t"),))
    assert encoded(0, response) == i32(0) + arr(i16(40) + s("bad") + i8(2) + s("t"))


def test_alter_configs_v2_and_incremental_v1_are_flexible() -> None:
    config = cs("retention.ms") + b"\x00" + NO_TAGS
    v2 = apis.decode_request(_flex_request(
        ApiKey.ALTER_CONFIGS, 2, carr(i8(2) + cs("t") + carr(config) + NO_TAGS) + b"\x00" + NO_TAGS
    ))
    assert v2.body == apis.AlterConfigsRequest(
        resources=(apis.AlterConfigsResource(resource_type=2, resource_name="t", configs=(
            apis.AlterableConfig(name="retention.ms", value=None),)),),
    )
    op = cs("cleanup.policy") + i8(0) + cs("compact") + NO_TAGS
    v1 = apis.decode_request(_flex_request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
        carr(i8(2) + cs("t") + carr(op) + NO_TAGS) + b"\x01" + NO_TAGS,
    ))
    assert v1.body.validate_only
    assert v1.body.resources[0].configs == (
        apis.IncrementalAlterableConfig(name="cleanup.policy", config_operation=0, value="compact"),
    )
    result = apis.AlterConfigsResourceResponse(
        error_code=40, error_message="bad", resource_type=2, resource_name="t"
    )
    flexible = NO_TAGS + i32(0) + carr(i16(40) + cs("bad") + i8(2) + cs("t") + NO_TAGS) + NO_TAGS
    assert encoded(2, apis.AlterConfigsResponse(responses=(result,))) == flexible
    # The same layout, flexible one version earlier: a response class of its own.
    incremental = IncrementalAlterConfigsResponse(responses=(result,))
    assert encoded(1, incremental) == flexible
    assert encoded(0, incremental) == i32(0) + arr(i16(40) + s("bad") + i8(2) + s("t"))
    assert apis.response_header_flexible(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    assert not apis.response_header_flexible(ApiKey.ALTER_CONFIGS, 1)


# -- CreatePartitions / DeleteRecords / DescribeLogDirs ------------------------------


def test_create_partitions() -> None:
    body = (arr(s("t") + i32(4) + NULL_ARRAY,
                s("u") + i32(3) + arr(arr(i32(0)), arr(i32(0))))
            + i32(5000) + i8(1))
    for version in (0, 1):
        req = decode(ApiKey.CREATE_PARTITIONS, version, body)
        assert req == apis.CreatePartitionsRequest(
            topics=(
                apis.CreatePartitionsTopic(name="t", count=4, assignments=None),
                apis.CreatePartitionsTopic(name="u", count=3, assignments=(
                    apis.CreatePartitionsAssignment(broker_ids=(0,)),
                    apis.CreatePartitionsAssignment(broker_ids=(0,)),
                )),
            ),
            timeout_ms=5000, validate_only=True,
        )
        resp = apis.CreatePartitionsResponse(results=(
            apis.CreatePartitionsTopicResult(name="t"),
            apis.CreatePartitionsTopicResult(name="u", error_code=37, error_message="no"),
        ))
        assert encoded(version, resp) == i32(0) + arr(
            s("t") + i16(0) + s(None), s("u") + i16(37) + s("no"))


def test_delete_records() -> None:
    body = arr(s("t") + arr(i32(0) + i64(10), i32(1) + i64(-1))) + i32(3000)
    for version in (0, 1):
        req = decode(ApiKey.DELETE_RECORDS, version, body)
        assert req == apis.DeleteRecordsRequest(
            topics=(apis.DeleteRecordsTopic(name="t", partitions=(
                apis.DeleteRecordsPartition(partition_index=0, offset=10),
                apis.DeleteRecordsPartition(partition_index=1, offset=-1),
            )),),
            timeout_ms=3000,
        )
        resp = apis.DeleteRecordsResponse(topics=(apis.DeleteRecordsTopicResult(
            name="t", partitions=(
                apis.DeleteRecordsPartitionResult(partition_index=0, low_watermark=10),
                apis.DeleteRecordsPartitionResult(partition_index=1, error_code=1),
            )),))
        assert encoded(version, resp) == i32(0) + arr(s("t") + arr(
            i32(0) + i64(10) + i16(0), i32(1) + i64(-1) + i16(1)))


def test_describe_log_dirs() -> None:
    assert decode(ApiKey.DESCRIBE_LOG_DIRS, 1, NULL_ARRAY) == (
        apis.DescribeLogDirsRequest(topics=None))
    req = decode(ApiKey.DESCRIBE_LOG_DIRS, 1, arr(s("t") + arr(i32(0), i32(2))))
    assert req.topics == (apis.DescribableLogDirTopic(topic="t", partitions=(0, 2)),)
    resp = apis.DescribeLogDirsResponse(error_code=31, results=(apis.DescribeLogDirsResult(
        log_dir="/data", topics=(apis.DescribeLogDirsTopic(name="t", partitions=(
            apis.DescribeLogDirsPartition(partition_index=0, partition_size=123),
        )),), total_bytes=1000, usable_bytes=600,
    ),))
    # v1: no top-level error code, no volume sizes.
    assert encoded(1, resp) == i32(0) + arr(
        i16(0) + s("/data") + arr(s("t") + arr(i32(0) + i64(123) + i64(0) + i8(0))))
    # Kafka 4.0 removed v0.
    with pytest.raises(apis.UnsupportedVersion):
        apis.decode_request(request(ApiKey.DESCRIBE_LOG_DIRS, 0, NULL_ARRAY))


def test_describe_log_dirs_v2_flexible_v3_error_code_v4_volume_bytes() -> None:
    for version in (2, 3, 4):
        every = apis.decode_request(_flex_request(ApiKey.DESCRIBE_LOG_DIRS, version,
                                                  b"\x00" + NO_TAGS))
        assert every.body == apis.DescribeLogDirsRequest(topics=None)
        some = apis.decode_request(_flex_request(
            ApiKey.DESCRIBE_LOG_DIRS, version, carr(cs("t") + carr(i32(1)) + NO_TAGS) + NO_TAGS
        ))
        assert some.body.topics == (apis.DescribableLogDirTopic(topic="t", partitions=(1,)),)
    resp = apis.DescribeLogDirsResponse(error_code=31, results=(apis.DescribeLogDirsResult(
        log_dir="/data", topics=(apis.DescribeLogDirsTopic(name="t", partitions=(
            apis.DescribeLogDirsPartition(partition_index=0, partition_size=123),
        )),), total_bytes=1000, usable_bytes=600,
    ),))
    topics = carr(cs("t") + carr(i32(0) + i64(123) + i64(0) + i8(0) + NO_TAGS) + NO_TAGS)
    result = i16(0) + cs("/data") + topics
    assert encoded(2, resp) == NO_TAGS + i32(0) + carr(result + NO_TAGS) + NO_TAGS
    assert encoded(3, resp) == NO_TAGS + i32(0) + i16(31) + carr(result + NO_TAGS) + NO_TAGS
    assert encoded(4, resp) == NO_TAGS + i32(0) + i16(31) + carr(
        result + i64(1000) + i64(600) + NO_TAGS) + NO_TAGS


def test_create_partitions_v2_v3_and_delete_records_v2_are_flexible() -> None:
    topics = carr(cs("t") + i32(4) + b"\x00" + NO_TAGS,
                  cs("u") + i32(2) + carr(carr(i32(0)) + NO_TAGS) + NO_TAGS)
    for version in (2, 3):
        req = apis.decode_request(_flex_request(
            ApiKey.CREATE_PARTITIONS, version, topics + i32(5000) + i8(0) + NO_TAGS
        ))
        assert req.body == apis.CreatePartitionsRequest(topics=(
            apis.CreatePartitionsTopic(name="t", count=4, assignments=None),
            apis.CreatePartitionsTopic(name="u", count=2, assignments=(
                apis.CreatePartitionsAssignment(broker_ids=(0,)),)),
        ), timeout_ms=5000)
        resp = apis.CreatePartitionsResponse(results=(
            apis.CreatePartitionsTopicResult(name="t", error_code=37, error_message="no"),
        ))
        assert encoded(version, resp) == (
            NO_TAGS + i32(0) + carr(cs("t") + i16(37) + cs("no") + NO_TAGS) + NO_TAGS
        )
    req = apis.decode_request(_flex_request(
        ApiKey.DELETE_RECORDS, 2,
        carr(cs("t") + carr(i32(0) + i64(10) + NO_TAGS) + NO_TAGS) + i32(3000) + NO_TAGS,
    ))
    assert req.body == apis.DeleteRecordsRequest(topics=(apis.DeleteRecordsTopic(
        name="t", partitions=(apis.DeleteRecordsPartition(partition_index=0, offset=10),)),),
        timeout_ms=3000)
    resp2 = apis.DeleteRecordsResponse(topics=(apis.DeleteRecordsTopicResult(
        name="t", partitions=(apis.DeleteRecordsPartitionResult(
            partition_index=0, low_watermark=10),)),))
    assert encoded(2, resp2) == NO_TAGS + i32(0) + carr(
        cs("t") + carr(i32(0) + i64(10) + i16(0) + NO_TAGS) + NO_TAGS) + NO_TAGS


# -- flexible versions: compact encodings, tagged fields, headers v2 / v1 --------------


def uv(n: int) -> bytes:
    """An unsigned varint (written out by hand so the codec is not its own oracle)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cs(v: str | None) -> bytes:
    return b"\x00" if v is None else uv(len(v.encode()) + 1) + v.encode()


def cb(v: bytes | None) -> bytes:
    return b"\x00" if v is None else uv(len(v) + 1) + v


def carr(*items: bytes) -> bytes:
    return uv(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


@attrs.frozen(kw_only=True)
class _FlexItem:
    name: str = ""
    FIELDS = (codec.Field("name", codec.STRING),)


@attrs.frozen(kw_only=True)
class _FlexMessage:
    """A test-only message, flexible from v1: every kind of compact field and null."""

    id: int = 0
    label: str | None = ""
    data: bytes | None = b""
    items: tuple[_FlexItem, ...] | None = ()
    FLEXIBLE_FROM = 1
    FIELDS = (
        codec.Field("id", codec.INT32),
        codec.Field("label", codec.STRING, nullable_from=0),
        codec.Field("data", codec.BYTES, nullable_from=0),
        codec.Field("items", codec.Array(codec.Struct(_FlexItem)), nullable_from=0),
    )


@pytest.mark.parametrize(
    ("value", "wire"),
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
     (0xFFFFFFFF, b"\xff\xff\xff\xff\x0f")],
)
def test_uvarint(value: int, wire: bytes) -> None:
    w = codec.Writer()
    w.uvarint(value)
    assert w.getvalue() == wire == uv(value)
    r = codec.Reader(wire)
    assert r.uvarint() == value
    r.expect_end()


@pytest.mark.parametrize(
    "wire", [b"\xff\xff\xff\xff\x1f", b"\x80\x80\x80\x80\x80\x01", b"\x80", b""]
)
def test_uvarint_over_32_bits_or_truncated_refused(wire: bytes) -> None:
    with pytest.raises(codec.MalformedRequest):
        codec.Reader(wire).uvarint()


def test_flexible_body_layout_and_nulls() -> None:
    msg = _FlexMessage(id=5, label="ab", data=b"\x01", items=(_FlexItem(name="x"),))
    item = cs("x") + NO_TAGS
    flexible = i32(5) + cs("ab") + cb(b"\x01") + carr(item) + NO_TAGS
    assert codec.encode_struct(msg, 1) == flexible
    assert codec.decode_struct(_FlexMessage, flexible, 1) == msg
    # v0 of the same class is not flexible: the classic encodings, byte for byte.
    classic = i32(5) + s("ab") + b(b"\x01") + arr(s("x"))
    assert codec.encode_struct(msg, 0) == classic
    nulls = _FlexMessage(id=1, label=None, data=None, items=None)
    assert codec.encode_struct(nulls, 1) == i32(1) + b"\x00\x00\x00" + NO_TAGS
    assert codec.decode_struct(_FlexMessage, i32(1) + b"\x00\x00\x00" + NO_TAGS, 1) == nulls
    empty = _FlexMessage(id=1, label="", data=b"", items=())
    assert codec.encode_struct(empty, 1) == i32(1) + b"\x01\x01\x01" + NO_TAGS


def test_flexible_null_where_not_nullable_refused() -> None:
    # _FlexItem.name is not nullable: a compact null (0) is an error.
    with pytest.raises(codec.MalformedRequest, match="null string"):
        codec.decode_struct(_FlexMessage, i32(1) + cs("") + cb(b"") + carr(b"\x00" + NO_TAGS)
                            + NO_TAGS, 1)


def test_tagged_fields_are_skipped_at_every_level() -> None:
    # Tag 0 (2 bytes) and tag 7 (0 bytes) on the item, tag 3 (3 bytes) on the message:
    # none is modelled, known or not, so all are skipped.
    item = cs("x") + uv(2) + uv(0) + uv(2) + b"zz" + uv(7) + uv(0)
    body = i32(9) + cs("l") + cb(b"") + carr(item) + uv(1) + uv(3) + uv(3) + b"abc"
    assert codec.decode_struct(_FlexMessage, body, 1) == _FlexMessage(
        id=9, label="l", data=b"", items=(_FlexItem(name="x"),)
    )


def test_tags_out_of_order_refused() -> None:
    tags = uv(2) + uv(4) + uv(0) + uv(4) + uv(0)
    with pytest.raises(codec.MalformedRequest, match="out of order"):
        codec.Reader(tags).skip_tagged_fields()


@pytest.mark.parametrize(
    "body",
    [
        # a tagged-fields count of 2**32-1 in a few bytes
        i32(1) + cs("") + cb(b"") + carr() + uv(0xFFFFFFFF) + b"\x00" * 8,
        # one tagged field claiming 2**32-2 bytes
        i32(1) + cs("") + cb(b"") + carr() + uv(1) + uv(0) + uv(0xFFFFFFFE) + b"\x00" * 8,
        # a compact array of 2**32-2 items
        i32(1) + cs("") + cb(b"") + uv(0xFFFFFFFF) + b"\x00" * 8,
        # compact bytes of 2**32-2 bytes, and a string longer than Kafka allows
        i32(1) + cs("") + uv(0xFFFFFFFF) + b"\x00" * 8,
        i32(1) + uv(0x10000) + b"\x00" * 8,
    ],
)
def test_huge_flexible_lengths_refused_without_allocating(body: bytes) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(codec.MalformedRequest):
            codec.decode_struct(_FlexMessage, body, 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_flexible_array_count_uses_flexible_item_sizes() -> None:
    # Three items of two bytes each (an empty compact string and no tags) in six bytes:
    # the classic minimum (2 per string) would wrongly call this too short.
    body = i32(1) + cs("") + cb(b"") + carr(*[cs("") + NO_TAGS] * 3) + NO_TAGS
    assert len(codec.decode_struct(_FlexMessage, body, 1).items) == 3
    with pytest.raises(codec.MalformedRequest, match="cannot fit"):
        codec.decode_struct(_FlexMessage, i32(1) + cs("") + cb(b"") + uv(5) + b"\x01\x00", 1)


@settings(max_examples=50, deadline=None, database=None)
@given(body=_struct_strategy(_FlexMessage, 1))
def test_flexible_round_trip(body: _FlexMessage) -> None:
    assert codec.decode_struct(_FlexMessage, codec.encode_struct(body, 1), 1) == body


def test_request_header_v2_for_flexible_versions() -> None:
    header = RequestHeader(int(ApiKey.LIST_GROUPS), 3, 7, "cli")
    # Header v2: client_id stays an int16-length string, then tagged fields.
    wire = i16(16) + i16(3) + i32(7) + s("cli") + NO_TAGS + NO_TAGS
    assert apis.encode_request(header, apis.ListGroupsRequest()) == i32(len(wire)) + wire
    # A header tagged field (tag 0, 2 bytes) is skipped.
    tagged = i16(16) + i16(3) + i32(7) + s("cli") + uv(1) + uv(0) + uv(2) + b"xx" + NO_TAGS
    assert apis.decode_request(tagged) == apis.Request(header, apis.ListGroupsRequest())
    # Non-flexible versions keep header v1: no tag byte.
    assert apis.decode_request(request(ApiKey.LIST_GROUPS, 2, b"")).body == (
        apis.ListGroupsRequest()
    )


def test_response_header_v1_for_flexible_versions_but_not_api_versions() -> None:
    out = apis.encode_response(7, 3, apis.ListGroupsResponse())
    assert out == i32(4 + 1 + 4 + 2 + 1 + 1) + i32(7) + NO_TAGS + i32(0) + i16(0) + carr() + NO_TAGS
    assert apis.decode_response(ApiKey.LIST_GROUPS, 3, out[4:]) == (7, apis.ListGroupsResponse())
    assert apis.response_header_flexible(ApiKey.LIST_GROUPS, 3)
    assert not apis.response_header_flexible(ApiKey.LIST_GROUPS, 2)
    # Kafka's rule: ApiVersions answers response header v0 whatever the version.
    assert not apis.response_header_flexible(ApiKey.API_VERSIONS, 3)


def test_list_groups_v3_v4_layouts() -> None:
    v3 = i16(16) + i16(3) + i32(7) + s("cli") + NO_TAGS + NO_TAGS
    assert apis.decode_request(v3).body == apis.ListGroupsRequest()
    v4 = i16(16) + i16(4) + i32(7) + s("cli") + NO_TAGS + carr(cs("Stable"), cs("Empty")) + NO_TAGS
    assert apis.decode_request(v4).body == apis.ListGroupsRequest(states_filter=("Stable", "Empty"))
    resp = apis.ListGroupsResponse(
        groups=(apis.ListedGroup(group_id="g", protocol_type="consumer", group_state="Stable"),)
    )
    group = cs("g") + cs("consumer")
    assert encoded(2, resp) == i32(0) + i16(0) + arr(s("g") + s("consumer"))
    assert encoded(3, resp) == NO_TAGS + i32(0) + i16(0) + carr(group + NO_TAGS) + NO_TAGS
    assert encoded(4, resp) == (
        NO_TAGS + i32(0) + i16(0) + carr(group + cs("Stable") + NO_TAGS) + NO_TAGS
    )


# -- OffsetFetch v6 (flexible) and v7 (require_stable) --------------------------------


def _flex_request(key: ApiKey, version: int, body: bytes) -> bytes:
    """A header v2 request payload (client id stays an int16-length string)."""
    return i16(key) + i16(version) + i32(7) + s("cli") + NO_TAGS + body


def test_offset_fetch_v6_v7_requests() -> None:
    topics = carr(cs("t") + carr(i32(0), i32(1)) + NO_TAGS)
    wanted = (apis.OffsetFetchTopic(name="t", partition_indexes=(0, 1)),)
    v6 = apis.decode_request(_flex_request(ApiKey.OFFSET_FETCH, 6, cs("g") + topics + NO_TAGS))
    assert v6.body == apis.OffsetFetchRequest(group_id="g", topics=wanted)
    v7 = _flex_request(ApiKey.OFFSET_FETCH, 7, cs("g") + topics + i8(1) + NO_TAGS)
    body7 = apis.OffsetFetchRequest(group_id="g", topics=wanted, require_stable=True)
    assert apis.decode_request(v7).body == body7
    header = RequestHeader(int(ApiKey.OFFSET_FETCH), 7, 7, "cli")
    assert apis.encode_request(header, body7) == i32(len(v7)) + v7
    # Compact null (0) = every committed partition; v6 has no require_stable byte.
    every = apis.decode_request(_flex_request(ApiKey.OFFSET_FETCH, 7, cs("g") + b"\x00" + i8(0)
                                              + NO_TAGS))
    assert every.body == apis.OffsetFetchRequest(group_id="g", topics=None)
    with pytest.raises(codec.MalformedRequest):
        apis.decode_request(_flex_request(ApiKey.OFFSET_FETCH, 6, cs("g") + topics + i8(1)
                                          + NO_TAGS))


def test_offset_fetch_v6_v7_responses() -> None:
    resp = apis.OffsetFetchResponse(
        topics=(apis.OffsetFetchTopicResponse(name="t", partitions=(
            apis.OffsetFetchPartitionResponse(partition_index=0, committed_offset=5,
                                              committed_leader_epoch=2, metadata=None,
                                              error_code=88),)),),
    )
    part = i32(0) + i64(5) + i32(2) + cs(None) + i16(88) + NO_TAGS
    flex = NO_TAGS + i32(0) + carr(cs("t") + carr(part) + NO_TAGS) + i16(0) + NO_TAGS
    assert encoded(6, resp) == flex
    assert encoded(7, resp) == flex
    # v5 is still the old layout.
    assert encoded(5, resp) == (
        i32(0) + arr(s("t") + arr(i32(0) + i64(5) + i32(2) + s(None) + i16(88))) + i16(0))
    for version in (5, 6, 7):
        out = apis.encode_response(7, version, resp)
        assert apis.decode_response(ApiKey.OFFSET_FETCH, version, out[4:]) == (7, resp)


def test_offset_fetch_v8_groups_form() -> None:
    group = cs("g") + carr(cs("t") + carr(i32(0)) + NO_TAGS) + NO_TAGS
    every = cs("h") + b"\x00" + NO_TAGS
    wire = _flex_request(ApiKey.OFFSET_FETCH, 8, carr(group, every) + i8(1) + NO_TAGS)
    body = apis.OffsetFetchRequest(require_stable=True, groups=(
        apis.OffsetFetchRequestGroup(
            group_id="g", topics=(apis.OffsetFetchTopic(name="t", partition_indexes=(0,)),)),
        apis.OffsetFetchRequestGroup(group_id="h", topics=None),
    ))
    assert apis.decode_request(wire).body == body
    header = RequestHeader(int(ApiKey.OFFSET_FETCH), 8, 7, "cli")
    assert apis.encode_request(header, body) == i32(len(wire)) + wire
    resp = apis.OffsetFetchResponse(groups=(
        apis.OffsetFetchResponseGroup(group_id="g", topics=(apis.OffsetFetchTopicResponse(
            name="t", partitions=(apis.OffsetFetchPartitionResponse(
                partition_index=0, committed_offset=5, metadata=""),)),)),
        apis.OffsetFetchResponseGroup(group_id="h", error_code=30),
    ))
    part = i32(0) + i64(5) + i32(-1) + cs("") + i16(0) + NO_TAGS
    assert encoded(8, resp) == (
        NO_TAGS + i32(0)
        + carr(cs("g") + carr(cs("t") + carr(part) + NO_TAGS) + i16(0) + NO_TAGS,
               cs("h") + carr() + i16(30) + NO_TAGS)
        + NO_TAGS)
    out = apis.encode_response(7, 8, resp)
    assert apis.decode_response(ApiKey.OFFSET_FETCH, 8, out[4:]) == (7, resp)


# -- the ACL APIs: v0 removed in Kafka 4.0 ---------------------------------------------


@pytest.mark.parametrize("key", [ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS])
def test_acl_apis_v0_refused(key: ApiKey) -> None:
    with pytest.raises(apis.UnsupportedVersion):
        apis.decode_request(request(key, 0, b""))
    assert SPECS[key].min_version == 1 and SPECS[key].max_version == 3


def test_describe_acls_v1_and_v3() -> None:
    v1 = decode(ApiKey.DESCRIBE_ACLS, 1, i8(2) + s(None) + i8(4) + s(None) + s(None) + i8(1)
                + i8(1))
    assert v1 == DescribeAclsRequest(resource_type_filter=2, pattern_type_filter=4,
                                     operation=1, permission_type=1)
    # v3: the USER resource type (7) is a value on the wire like any other.
    v3 = apis.decode_request(_flex_request(
        ApiKey.DESCRIBE_ACLS, 3,
        i8(7) + cs("alice") + i8(3) + b"\x00" + b"\x00" + i8(1) + i8(1) + NO_TAGS,
    ))
    assert v3.body == DescribeAclsRequest(resource_type_filter=7, resource_name_filter="alice",
                                          operation=1, permission_type=1)


# -- Metadata v9+, CreateTopics v5+, DeleteTopics v4+, DescribeCluster (flexible) ------

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0")


def test_librdkafka_all_topics_metadata_frame() -> None:
    # librdkafka 2.x, every topic at v13: a four-byte placeholder for the topic count
    # (read as a varint 0, null) and three bytes past the end, which Kafka never reads.
    payload = bytes.fromhex("0003000d00000005000772646b61666b610000000000010000")
    req = apis.decode_request(payload)
    assert (req.header.api_version, req.body.topics) == (13, None)


def test_metadata_v12_request_by_id() -> None:
    body = carr(TOPIC_ID.bytes + cs(None) + NO_TAGS) + i8(1) + i8(0) + NO_TAGS
    req = apis.decode_request(_flex_request(ApiKey.METADATA, 12, body))
    assert req.body.topics == (apis.MetadataRequestTopic(topic_id=TOPIC_ID, name=None),)
    # v10: the cluster flag is still there (v8-10), between the two others.
    body10 = carr(TOPIC_ID.bytes + cs("t") + NO_TAGS) + i8(1) + i8(1) + i8(0) + NO_TAGS
    r10 = apis.decode_request(_flex_request(ApiKey.METADATA, 10, body10)).body
    assert r10.include_cluster_authorized_operations is True


def test_metadata_response_v13() -> None:
    response = attrs.evolve(
        _metadata_response(),
        topics=(
            apis.MetadataTopic(error_code=0, name="t", topic_id=TOPIC_ID),
            apis.MetadataTopic(error_code=100, name=None, topic_id=TOPIC_ID),
        ),
    )
    assert encoded(13, response) == (
        NO_TAGS                                              # response header v1
        + i32(0)                                             # throttle
        + carr(i32(0) + cs("h") + i32(9092) + cs(None) + NO_TAGS)
        + cs("c") + i32(0)                                   # cluster id, controller
        + carr(
            i16(0) + cs("t") + TOPIC_ID.bytes + i8(0) + carr() + i32(-(2**31)) + NO_TAGS,
            i16(100) + cs(None) + TOPIC_ID.bytes + i8(0) + carr() + i32(-(2**31)) + NO_TAGS,
        )
        + i16(0)                                             # v13: top-level error
        + NO_TAGS                                            # (no cluster ops: v8-10)
    )


def test_create_topics_response_v7() -> None:
    result = apis.CreatableTopicResult(
        name="t", topic_id=TOPIC_ID, num_partitions=3, replication_factor=1,
        configs=(CreatableTopicConfigs(
            name="retention.ms", value="1000", read_only=False, config_source=1,
            is_sensitive=False,
        ),),
    )
    assert encoded(7, apis.CreateTopicsResponse(topics=(result,))) == (
        NO_TAGS + i32(0)
        + carr(
            cs("t") + TOPIC_ID.bytes + i16(0) + cs(None)     # name, id, error, message
            + i32(3) + i16(1)                                # partitions, replication
            + carr(cs("retention.ms") + cs("1000") + i8(0) + i8(1) + i8(0) + NO_TAGS)
            + NO_TAGS                                        # TopicConfigErrorCode omitted
        )
        + NO_TAGS
    )
    # v5 and v6: the same without the topic ID.
    assert TOPIC_ID.bytes not in encoded(6, apis.CreateTopicsResponse(topics=(result,)))


def test_delete_topics_v6_request_and_response() -> None:
    body = carr(cs(None) + TOPIC_ID.bytes + NO_TAGS, cs("t") + bytes(16) + NO_TAGS)
    req = apis.decode_request(_flex_request(ApiKey.DELETE_TOPICS, 6, body + i32(500) + NO_TAGS))
    assert req.body.topics == (
        DeleteTopicState(name=None, topic_id=TOPIC_ID),
        DeleteTopicState(name="t", topic_id=codec.ZERO_UUID),
    )
    assert req.body.timeout_ms == 500
    response = apis.DeleteTopicsResponse(responses=(
        apis.DeletableTopicResult(name=None, topic_id=TOPIC_ID, error_code=100,
                                  error_message="no such ID"),
    ))
    assert encoded(6, response) == (
        NO_TAGS + i32(0)
        + carr(cs(None) + TOPIC_ID.bytes + i16(100) + cs("no such ID") + NO_TAGS) + NO_TAGS
    )


def test_describe_cluster_v2() -> None:
    body = i8(1) + i8(1) + i8(0) + NO_TAGS
    req = apis.decode_request(_flex_request(ApiKey.DESCRIBE_CLUSTER, 2, body))
    assert req.body == DescribeClusterRequest(
        include_cluster_authorized_operations=True, endpoint_type=1,
        include_fenced_brokers=False,
    )
    response = DescribeClusterResponse(
        cluster_id="c", controller_id=0, cluster_authorized_operations=0x0F00,
        brokers=(DescribeClusterBroker(broker_id=0, host="h", port=9092),),
    )
    assert encoded(2, response) == (
        NO_TAGS + i32(0) + i16(0) + cs(None) + i8(1)         # throttle, error, type
        + cs("c") + i32(0)
        + carr(i32(0) + cs("h") + i32(9092) + cs(None) + i8(0) + NO_TAGS)
        + i32(0x0F00) + NO_TAGS
    )
    # v0 has neither the endpoint type nor is_fenced.
    assert encoded(0, response) == (
        NO_TAGS + i32(0) + i16(0) + cs(None) + cs("c") + i32(0)
        + carr(i32(0) + cs("h") + i32(9092) + cs(None) + NO_TAGS)
        + i32(0x0F00) + NO_TAGS
    )


# The generated readers and writers against the field-by-field path, for every API and
# version: tests/kafka/wire/test_generated_codec.py.
