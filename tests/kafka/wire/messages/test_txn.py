"""Byte-level tests of the transaction APIs' schemas (brokerd.kafka.wire.requests.apis), every
advertised version: frames are written out by hand from Kafka's JSON message schemas
(``AddPartitionsToTxnRequest.json`` etc.), so the codec is not its own oracle. The
hypothesis round trips of tests/kafka/wire/test_codec.py cover these classes too.
"""

from __future__ import annotations

import tracemalloc
import uuid
from typing import Any

import pytest

from brokerd.kafka.wire import codec
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.messages import producers as producer_apis
from brokerd.kafka.wire.messages import txn as txn_apis
from brokerd.kafka.wire.requests import apis

from tests.kafka.wire.test_codec import (
    NO_TAGS,
    arr,
    carr,
    cs,
    i8,
    i16,
    i32,
    i64,
    s,
    uv,
)


def req(key: ApiKey, version: int, body: bytes, *, flexible: bool) -> bytes:
    """A request payload: header v1, or v2 (+ tagged fields) for flexible versions."""
    return i16(key) + i16(version) + i32(7) + s("cli") + (NO_TAGS if flexible else b"") + body


def decode(key: ApiKey, version: int, body: bytes, *, flexible: bool) -> Any:
    request = apis.decode_request(req(key, version, body, flexible=flexible))
    assert request.header == RequestHeader(int(key), version, 7, "cli")
    return request.body


def response(version: int, body: Any, *, flexible: bool) -> bytes:
    """The encoded response minus the size and correlation id (and header tags)."""
    out = apis.encode_response(7, version, body)
    assert out[4:8] == i32(7)
    start = 9 if flexible else 8
    if flexible:
        assert out[8:9] == NO_TAGS
    return out[start:]


def b1(v: bool) -> bytes:
    return i8(1 if v else 0)


# -- AddPartitionsToTxn (24) -----------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_add_partitions_to_txn(version: int) -> None:
    flexible = version >= 3
    if flexible:
        body = (cs("tx") + i64(5) + i16(1)
                + carr(cs("t") + carr(i32(0), i32(2)) + NO_TAGS) + NO_TAGS)
    else:
        body = s("tx") + i64(5) + i16(1) + arr(s("t") + arr(i32(0), i32(2)))
    assert decode(ApiKey.ADD_PARTITIONS_TO_TXN, version, body, flexible=flexible) == (
        apis.AddPartitionsToTxnRequest(
            transactional_id="tx", producer_id=5, producer_epoch=1,
            topics=(apis.AddPartitionsToTxnTopic(name="t", partitions=(0, 2)),)))
    resp = apis.AddPartitionsToTxnResponse(results_by_topic=(
        apis.AddPartitionsToTxnTopicResult(name="t", results_by_partition=(
            apis.AddPartitionsToTxnPartitionResult(partition_index=0, partition_error_code=55),
        )),))
    if flexible:
        want = i32(0) + carr(cs("t") + carr(i32(0) + i16(55) + NO_TAGS) + NO_TAGS) + NO_TAGS
    else:
        want = i32(0) + arr(s("t") + arr(i32(0) + i16(55)))
    assert response(version, resp, flexible=flexible) == want


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_to_txn_batched_form(version: int) -> None:
    """v4+: Transactions (with VerifyOnly) instead of the V3AndBelow fields; the response
    has a top-level ErrorCode and ResultsByTransaction instead of ResultsByTopicV3AndBelow."""
    topic = cs("t") + carr(i32(0), i32(2)) + NO_TAGS
    body = carr(cs("a") + i64(5) + i16(1) + b1(True) + carr(topic) + NO_TAGS,
                cs("b") + i64(6) + i16(0) + b1(False) + carr() + NO_TAGS) + NO_TAGS
    assert decode(ApiKey.ADD_PARTITIONS_TO_TXN, version, body, flexible=True) == (
        apis.AddPartitionsToTxnRequest(transactions=(
            txn_apis.AddPartitionsToTxnTransaction(
                transactional_id="a", producer_id=5, producer_epoch=1, verify_only=True,
                topics=(apis.AddPartitionsToTxnTopic(name="t", partitions=(0, 2)),)),
            txn_apis.AddPartitionsToTxnTransaction(
                transactional_id="b", producer_id=6, producer_epoch=0, verify_only=False),
        )))
    resp = apis.AddPartitionsToTxnResponse(error_code=31, results_by_transaction=(
        txn_apis.AddPartitionsToTxnResult(transactional_id="a", topic_results=(
            apis.AddPartitionsToTxnTopicResult(name="t", results_by_partition=(
                apis.AddPartitionsToTxnPartitionResult(
                    partition_index=0, partition_error_code=48),)),)),))
    want = (i32(0) + i16(31)
            + carr(cs("a") + carr(cs("t") + carr(i32(0) + i16(48) + NO_TAGS) + NO_TAGS)
                   + NO_TAGS)
            + NO_TAGS)
    assert response(version, resp, flexible=True) == want


def test_add_partitions_to_txn_v6_not_accepted() -> None:
    with pytest.raises(apis.UnsupportedVersion):
        apis.decode_request(req(ApiKey.ADD_PARTITIONS_TO_TXN, 6, b"", flexible=True))


# -- AddOffsetsToTxn (25) and EndTxn (26) -----------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_add_offsets_to_txn(version: int) -> None:
    flexible = version >= 3
    if flexible:
        body = cs("tx") + i64(5) + i16(1) + cs("g") + NO_TAGS
    else:
        body = s("tx") + i64(5) + i16(1) + s("g")
    assert decode(ApiKey.ADD_OFFSETS_TO_TXN, version, body, flexible=flexible) == (
        apis.AddOffsetsToTxnRequest(transactional_id="tx", producer_id=5, producer_epoch=1,
                                    group_id="g"))
    resp = apis.AddOffsetsToTxnResponse(error_code=90)
    want = i32(0) + i16(90) + (NO_TAGS if flexible else b"")
    assert response(version, resp, flexible=flexible) == want


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_end_txn(version: int) -> None:
    flexible = version >= 3
    for committed in (True, False):
        if flexible:
            body = cs("tx") + i64(5) + i16(1) + b1(committed) + NO_TAGS
        else:
            body = s("tx") + i64(5) + i16(1) + b1(committed)
        assert decode(ApiKey.END_TXN, version, body, flexible=flexible) == apis.EndTxnRequest(
            transactional_id="tx", producer_id=5, producer_epoch=1, committed=committed)
    want = i32(0) + i16(48) + (NO_TAGS if flexible else b"")
    assert response(version, apis.EndTxnResponse(error_code=48), flexible=flexible) == want


def test_end_txn_v5_answers_the_producer_id_and_epoch() -> None:
    body = cs("tx") + i64(5) + i16(1) + b1(True) + NO_TAGS
    assert decode(ApiKey.END_TXN, 5, body, flexible=True) == apis.EndTxnRequest(
        transactional_id="tx", producer_id=5, producer_epoch=1, committed=True)
    resp = apis.EndTxnResponse(error_code=0, producer_id=5, producer_epoch=2)
    assert response(5, resp, flexible=True) == i32(0) + i16(0) + i64(5) + i16(2) + NO_TAGS


@pytest.mark.parametrize(("key", "version"), [(ApiKey.END_TXN, 6), (ApiKey.TXN_OFFSET_COMMIT, 7)])
def test_versions_past_the_range_not_accepted(key: ApiKey, version: int) -> None:
    with pytest.raises(apis.UnsupportedVersion):
        apis.decode_request(req(key, version, b"", flexible=True))


# -- TxnOffsetCommit (28) ----------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_txn_offset_commit(version: int) -> None:
    flexible = version >= 3
    epoch = i32(4) if version >= 2 else b""
    if flexible:
        part = i32(1) + i64(100) + epoch + cs("md") + NO_TAGS
        body = (cs("tx") + cs("g") + i64(5) + i16(1) + i32(3) + cs("m") + cs("inst")
                + carr(cs("t") + carr(part) + NO_TAGS) + NO_TAGS)
    else:
        part = i32(1) + i64(100) + epoch + s("md")
        body = s("tx") + s("g") + i64(5) + i16(1) + arr(s("t") + arr(part))
    got = decode(ApiKey.TXN_OFFSET_COMMIT, version, body, flexible=flexible)
    assert got == apis.TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=5, producer_epoch=1,
        generation_id=3 if flexible else -1, member_id="m" if flexible else "",
        group_instance_id="inst" if flexible else None,
        topics=(apis.TxnOffsetCommitRequestTopic(name="t", partitions=(
            apis.TxnOffsetCommitRequestPartition(
                partition_index=1, committed_offset=100,
                committed_leader_epoch=4 if version >= 2 else -1, committed_metadata="md"),
        )),))
    resp = apis.TxnOffsetCommitResponse(topics=(apis.TxnOffsetCommitResponseTopic(
        name="t", partitions=(apis.TxnOffsetCommitResponsePartition(
            partition_index=1, error_code=22),)),))
    if flexible:
        want = i32(0) + carr(cs("t") + carr(i32(1) + i16(22) + NO_TAGS) + NO_TAGS) + NO_TAGS
    else:
        want = i32(0) + arr(s("t") + arr(i32(1) + i16(22)))
    assert response(version, resp, flexible=flexible) == want


def test_txn_offset_commit_v6_names_topics_by_id() -> None:
    """v6 (KIP-1319): the topic name is gone, a 16-byte topic ID in its place, in the
    request and the answer."""
    topic_id = uuid.UUID(int=0x1234)
    part = i32(1) + i64(100) + i32(4) + cs("md") + NO_TAGS
    body = (cs("tx") + cs("g") + i64(5) + i16(1) + i32(3) + cs("m") + b"\x00"
            + carr(topic_id.bytes + carr(part) + NO_TAGS) + NO_TAGS)
    got = decode(ApiKey.TXN_OFFSET_COMMIT, 6, body, flexible=True)
    assert got.topics == (apis.TxnOffsetCommitRequestTopic(topic_id=topic_id, partitions=(
        apis.TxnOffsetCommitRequestPartition(
            partition_index=1, committed_offset=100, committed_leader_epoch=4,
            committed_metadata="md"),
    )),)
    resp = apis.TxnOffsetCommitResponse(topics=(apis.TxnOffsetCommitResponseTopic(
        name="t", topic_id=topic_id, partitions=(apis.TxnOffsetCommitResponsePartition(
            partition_index=1, error_code=100),)),))
    want = (i32(0) + carr(topic_id.bytes + carr(i32(1) + i16(100) + NO_TAGS) + NO_TAGS)
            + NO_TAGS)
    assert response(6, resp, flexible=True) == want


def test_txn_offset_commit_v3_null_instance_and_metadata() -> None:
    part = i32(0) + i64(1) + i32(-1) + b"\x00" + NO_TAGS
    body = (cs("tx") + cs("g") + i64(5) + i16(1) + i32(-1) + cs("") + b"\x00"
            + carr(cs("t") + carr(part) + NO_TAGS) + NO_TAGS)
    got = decode(ApiKey.TXN_OFFSET_COMMIT, 3, body, flexible=True)
    assert got.group_instance_id is None
    assert got.topics[0].partitions[0].committed_metadata is None


# -- DescribeTransactions (65) and ListTransactions (66) ---------------------------------


def test_describe_transactions() -> None:
    body = carr(cs("a"), cs("b")) + NO_TAGS
    assert decode(ApiKey.DESCRIBE_TRANSACTIONS, 0, body, flexible=True) == (
        apis.DescribeTransactionsRequest(transactional_ids=("a", "b")))
    resp = apis.DescribeTransactionsResponse(transaction_states=(
        apis.DescribeTransactionsState(
            error_code=0, transactional_id="a", transaction_state="Ongoing",
            transaction_timeout_ms=60000, transaction_start_time_ms=1234, producer_id=5,
            producer_epoch=1, topic_partitions=(
                apis.DescribeTransactionsTopicData(name="t", partition_indexes=(0, 1)),)),
    ))
    state = (i16(0) + cs("a") + cs("Ongoing") + i32(60000) + i64(1234) + i64(5)
             + i16(1)  # the epoch, an int16 as Kafka 4.x clients read it
             + carr(cs("t") + carr(i32(0), i32(1)) + NO_TAGS) + NO_TAGS)
    assert response(0, resp, flexible=True) == i32(0) + carr(state) + NO_TAGS


@pytest.mark.parametrize("version", [0, 1, 2])
def test_list_transactions(version: int) -> None:
    body = (carr(cs("Ongoing")) + carr(i64(5), i64(6))
            + (i64(30000) if version >= 1 else b"")
            + (cs("orders-.*") if version >= 2 else b"")
            + NO_TAGS)
    assert decode(ApiKey.LIST_TRANSACTIONS, version, body, flexible=True) == (
        apis.ListTransactionsRequest(
            state_filters=("Ongoing",), producer_id_filters=(5, 6),
            duration_filter=30000 if version >= 1 else -1,
            transactional_id_pattern="orders-.*" if version >= 2 else None))
    resp = apis.ListTransactionsResponse(
        unknown_state_filters=("Bogus",),
        transaction_states=(apis.ListTransactionsState(
            transactional_id="a", producer_id=5, transaction_state="Ongoing"),))
    want = (i32(0) + i16(0) + carr(cs("Bogus"))
            + carr(cs("a") + i64(5) + cs("Ongoing") + NO_TAGS) + NO_TAGS)
    assert response(version, resp, flexible=True) == want


def test_list_transactions_v2_null_pattern() -> None:
    body = carr() + carr() + i64(-1) + uv(0) + NO_TAGS
    got = decode(ApiKey.LIST_TRANSACTIONS, 2, body, flexible=True)
    assert got.transactional_id_pattern is None


@pytest.mark.parametrize(
    ("key", "version"),
    [(ApiKey.DESCRIBE_TRANSACTIONS, 1), (ApiKey.LIST_TRANSACTIONS, 3),
     (ApiKey.DESCRIBE_PRODUCERS, 1), (ApiKey.WRITE_TXN_MARKERS, 0),
     (ApiKey.WRITE_TXN_MARKERS, 3)],
)
def test_versions_not_accepted(key: ApiKey, version: int) -> None:
    with pytest.raises(apis.UnsupportedVersion):
        apis.decode_request(req(key, version, b"", flexible=True))


# -- DescribeProducers (61) and WriteTxnMarkers (27) -------------------------------------


def test_describe_producers() -> None:
    body = carr(cs("t") + carr(i32(0), i32(3)) + NO_TAGS) + NO_TAGS
    assert decode(ApiKey.DESCRIBE_PRODUCERS, 0, body, flexible=True) == (
        producer_apis.DescribeProducersRequest(topics=(
            producer_apis.DescribeProducersTopicRequest(name="t", partition_indexes=(0, 3)),)))
    resp = producer_apis.DescribeProducersResponse(topics=(
        producer_apis.DescribeProducersTopicResponse(name="t", partitions=(
            producer_apis.DescribeProducersPartitionResponse(
                partition_index=0, active_producers=(producer_apis.ProducerStateEntry(
                    producer_id=7, producer_epoch=2, last_sequence=9, last_timestamp=1234,
                    coordinator_epoch=0, current_txn_start_offset=40),)),
            producer_apis.DescribeProducersPartitionResponse(
                partition_index=3, error_code=3, error_message="gone"),
        )),))
    producer = i64(7) + i32(2) + i32(9) + i64(1234) + i32(0) + i64(40) + NO_TAGS
    want = (i32(0) + carr(cs("t") + carr(
        i32(0) + i16(0) + uv(0) + carr(producer) + NO_TAGS,  # a null message
        i32(3) + i16(3) + cs("gone") + carr() + NO_TAGS,
    ) + NO_TAGS) + NO_TAGS)
    assert response(0, resp, flexible=True) == want


def test_write_txn_markers() -> None:
    marker = (i64(7) + i16(2) + b1(False) + carr(cs("t") + carr(i32(0)) + NO_TAGS)
              + i32(0) + NO_TAGS)
    assert decode(ApiKey.WRITE_TXN_MARKERS, 1, carr(marker) + NO_TAGS, flexible=True) == (
        txn_apis.WriteTxnMarkersRequest(markers=(txn_apis.WritableTxnMarker(
            producer_id=7, producer_epoch=2, transaction_result=False, coordinator_epoch=0,
            topics=(txn_apis.WritableTxnMarkerTopic(name="t", partition_indexes=(0,)),)),)))
    resp = txn_apis.WriteTxnMarkersResponse(markers=(txn_apis.WritableTxnMarkerResult(
        producer_id=7, topics=(txn_apis.WritableTxnMarkerTopicResult(name="t", partitions=(
            txn_apis.WritableTxnMarkerPartitionResult(partition_index=0, error_code=0),)),)),))
    want = (carr(i64(7) + carr(cs("t") + carr(i32(0) + i16(0) + NO_TAGS)
                                           + NO_TAGS) + NO_TAGS) + NO_TAGS)
    assert response(1, resp, flexible=True) == want
    # v2 adds the marker's transaction version (an int8) after the coordinator epoch.
    v2 = carr(marker[:-1] + i8(2) + NO_TAGS) + NO_TAGS
    (got,) = decode(ApiKey.WRITE_TXN_MARKERS, 2, v2, flexible=True).markers
    assert got.transaction_version == 2
    assert response(2, resp, flexible=True) == want


# -- InitProducerId (22), every version ---------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_init_producer_id_every_version(version: int) -> None:
    flexible = version >= 2
    ids = i64(9) + i16(3) if version >= 3 else b""
    body = cs("tx") + i32(100) + ids + NO_TAGS if flexible else s("tx") + i32(100)
    got = decode(ApiKey.INIT_PRODUCER_ID, version, body, flexible=flexible)
    assert got == apis.InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=100,
        producer_id=9 if version >= 3 else -1, producer_epoch=3 if version >= 3 else -1)
    resp = apis.InitProducerIdResponse(error_code=0, producer_id=9, producer_epoch=4)
    want = i32(0) + i16(0) + i64(9) + i16(4) + (NO_TAGS if flexible else b"")
    assert response(version, resp, flexible=flexible) == want


# -- bounds: hostile counts cost nothing ---------------------------------------------------


@pytest.mark.parametrize(
    ("key", "version", "body", "flexible"),
    [
        # AddPartitionsToTxn v2: 2**31-1 topics, then v3 as a compact count.
        (ApiKey.ADD_PARTITIONS_TO_TXN, 2, s("tx") + i64(1) + i16(0) + i32(0x7FFFFFFF), False),
        (ApiKey.ADD_PARTITIONS_TO_TXN, 3,
         cs("tx") + i64(1) + i16(0) + uv(0xFFFFFFFF) + b"\x00" * 8, True),
        # ... a topic claiming 2**31-1 partitions.
        (ApiKey.ADD_PARTITIONS_TO_TXN, 1,
         s("tx") + i64(1) + i16(0) + i32(1) + s("t") + i32(0x7FFFFFFF), False),
        # TxnOffsetCommit: topics, then partitions.
        (ApiKey.TXN_OFFSET_COMMIT, 2,
         s("tx") + s("g") + i64(1) + i16(0) + i32(0x7FFFFFFF), False),
        (ApiKey.TXN_OFFSET_COMMIT, 3, cs("tx") + cs("g") + i64(1) + i16(0) + i32(-1) + cs("")
         + b"\x00" + uv(2) + cs("t") + uv(0xFFFFFFFF) + b"\x00" * 8, True),
        # AddPartitionsToTxn v4: 2**32-2 transactions.
        (ApiKey.ADD_PARTITIONS_TO_TXN, 4, uv(0xFFFFFFFF) + b"\x00" * 8, True),
        # DescribeProducers: topics, then partitions; WriteTxnMarkers: markers.
        (ApiKey.DESCRIBE_PRODUCERS, 0, uv(0xFFFFFFFF) + b"\x00" * 8, True),
        (ApiKey.DESCRIBE_PRODUCERS, 0, uv(2) + cs("t") + uv(0xFFFFFFFF) + b"\x00" * 8, True),
        (ApiKey.WRITE_TXN_MARKERS, 1, uv(0xFFFFFFFF) + b"\x00" * 8, True),
        # ListTransactions: 2**32-2 producer ids; DescribeTransactions: as many ids.
        (ApiKey.LIST_TRANSACTIONS, 0, carr() + uv(0xFFFFFFFF) + b"\x00" * 8, True),
        (ApiKey.DESCRIBE_TRANSACTIONS, 0, uv(0xFFFFFFFF) + b"\x00" * 8, True),
        # A transactional id longer than the frame.
        (ApiKey.END_TXN, 3, uv(0x7000) + b"x" * 10, True),
    ],
)
def test_huge_counts_refused_without_allocating(
    key: ApiKey, version: int, body: bytes, flexible: bool
) -> None:
    payload = req(key, version, body, flexible=flexible)
    tracemalloc.start()
    try:
        with pytest.raises(codec.MalformedRequest):
            apis.decode_request(payload)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_truncated_and_trailing_bodies_refused() -> None:
    whole = cs("tx") + i64(5) + i16(1) + b1(True) + NO_TAGS
    with pytest.raises(codec.MalformedRequest):
        apis.decode_request(req(ApiKey.END_TXN, 3, whole[:-2], flexible=True))
    with pytest.raises(codec.MalformedRequest):
        apis.decode_request(req(ApiKey.END_TXN, 3, whole + b"\x00", flexible=True))


def test_null_transactional_id_refused_where_the_schema_forbids_it() -> None:
    body = b"\x00" + i64(5) + i16(1) + b1(True) + NO_TAGS
    with pytest.raises(codec.MalformedRequest, match="null string"):
        apis.decode_request(req(ApiKey.END_TXN, 3, body, flexible=True))
