"""Kafka codec micro-benchmark: brokerd's hand-written codec beside ``kio``.

For each API it times, per request, decoding the request frame payload (header and body)
and encoding the response frame (size, response header, body), at typical sizes: a
Produce of 16 KiB of batches, a Fetch response of 1 MiB of records, Metadata for 10 topics
of 4 partitions, a three-member JoinGroup/SyncGroup, OffsetCommit/OffsetFetch of 10
partitions. Versions are the highest brokerd advertises.

The kio objects are obtained by decoding brokerd's own bytes with kio, and kio's
re-encoding is compared with brokerd's bytes first, so both sides handle the same
message and agree on the wire format.

Run: ``.venv/bin/python bench/codec_bench.py`` (``pip install kio`` first; without it
only the hand-written codec is measured). Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import io
import struct
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis
from brokerd.storage.record.encode import encode_batch

try:
    from kio.index import load_request_schema, load_response_schema
    from kio.serial import entity_reader, entity_writer
except ImportError:  # measured without kio
    HAVE_KIO = False
else:
    HAVE_KIO = True

_I32 = struct.Struct(">i")
PRODUCE_TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def _batches(total: int, value_size: int = 1000) -> bytes:
    """Uncompressed RecordBatches of about ``total`` bytes, 100 records each."""
    out = bytearray()
    values = [b"v" * value_size] * 100
    while len(out) < total:
        out += encode_batch(values, timestamp_ms=1_700_000_000_000)
    return bytes(out)


def cases() -> list[tuple[str, ApiKey, int, Any, Any]]:
    """(label, api key, version, request body, response body)."""
    produce_records = _batches(16 * 1024, 160)
    fetch_records = _batches(1024 * 1024)
    fetch_topic_id = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    topics = [f"topic-{i}" for i in range(10)]
    meta_resp = apis.MetadataResponse(
        brokers=(apis.MetadataBroker(node_id=0, host="localhost", port=9092),),
        cluster_id="cluster",
        controller_id=0,
        topics=tuple(
            apis.MetadataTopic(
                name=t,
                partitions=tuple(
                    apis.MetadataPartition(
                        partition_index=p, leader_id=0, leader_epoch=0,
                        replica_nodes=(0,), isr_nodes=(0,),
                    )
                    for p in range(4)
                ),
            )
            for t in topics
        ),
    )
    members = [f"consumer-{i}-{'x' * 36}" for i in range(3)]
    sub = b"\x00\x01" + b"\x00" * 60
    produce_v13 = apis.ProduceRequest(
        acks=-1, timeout_ms=30_000,
        topic_data=(apis.ProduceTopicData(topic_id=PRODUCE_TOPIC_ID, partition_data=(
            apis.ProducePartitionData(index=0, records=produce_records),)),),
    )
    return [
        (
            "Produce 16 KiB", ApiKey.PRODUCE, 13, produce_v13,
            apis.ProduceResponse(responses=(apis.ProduceTopicResponse(
                topic_id=PRODUCE_TOPIC_ID, partition_responses=(
                    apis.ProducePartitionResponse(index=0, base_offset=42, log_start_offset=0),
                )),)),
        ),
        (
            # The last non-flexible version, named by topic name (what most clients send).
            "Produce 16 KiB", ApiKey.PRODUCE, 8,
            apis.ProduceRequest(
                acks=-1, timeout_ms=30_000,
                topic_data=(apis.ProduceTopicData(name="t", partition_data=(
                    apis.ProducePartitionData(index=0, records=produce_records),)),),
            ),
            apis.ProduceResponse(responses=(apis.ProduceTopicResponse(
                name="t", partition_responses=(
                    apis.ProducePartitionResponse(index=0, base_offset=42, log_start_offset=0),
                )),)),
        ),
        (
            "Fetch 1 MiB", ApiKey.FETCH, 18,
            apis.FetchRequest(
                max_wait_ms=500, min_bytes=1, max_bytes=50 << 20,
                topics=(apis.FetchTopic(topic_id=fetch_topic_id, partitions=(
                    apis.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),),
            ),
            apis.FetchResponse(responses=(apis.FetchTopicResponse(
                topic_id=fetch_topic_id, partitions=(apis.FetchPartitionResponse(
                    partition_index=0, high_watermark=10_000, last_stable_offset=10_000,
                    log_start_offset=0, records=fetch_records,
                ),)),)),
        ),
        (
            # The last non-flexible version, topics by name.
            "Fetch 1 MiB", ApiKey.FETCH, 11,
            apis.FetchRequest(
                max_wait_ms=500, min_bytes=1, max_bytes=50 << 20,
                topics=(apis.FetchTopic(topic="t", partitions=(apis.FetchPartition(
                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),),
            ),
            apis.FetchResponse(responses=(apis.FetchTopicResponse(topic="t", partitions=(
                apis.FetchPartitionResponse(
                    partition_index=0, high_watermark=10_000, last_stable_offset=10_000,
                    log_start_offset=0, records=fetch_records,
                ),)),)),
        ),
        (
            "ListOffsets 4 partitions", ApiKey.LIST_OFFSETS, 5,
            apis.ListOffsetsRequest(topics=(apis.ListOffsetsTopic(name="t", partitions=tuple(
                apis.ListOffsetsPartition(partition_index=p, timestamp=-1)
                for p in range(4))),)),
            apis.ListOffsetsResponse(topics=(apis.ListOffsetsTopicResponse(
                name="t", partitions=tuple(
                    apis.ListOffsetsPartitionResponse(
                        partition_index=p, timestamp=-1, offset=1000, leader_epoch=0)
                    for p in range(4))),)),
        ),
        (
            "Metadata 10 topics", ApiKey.METADATA, 8,
            apis.MetadataRequest(
                topics=tuple(apis.MetadataRequestTopic(name=t) for t in topics)
            ),
            meta_resp,
        ),
        (
            "JoinGroup 3 members", ApiKey.JOIN_GROUP, 5,
            apis.JoinGroupRequest(
                group_id="group", session_timeout_ms=10_000, rebalance_timeout_ms=300_000,
                member_id=members[0], protocol_type="consumer",
                protocols=(apis.JoinGroupProtocol(name="range", metadata=sub),),
            ),
            apis.JoinGroupResponse(
                generation_id=3, protocol_name="range", leader=members[0],
                member_id=members[0],
                members=tuple(apis.JoinGroupMember(member_id=m, metadata=sub) for m in members),
            ),
        ),
        (
            "SyncGroup 3 members", ApiKey.SYNC_GROUP, 3,
            apis.SyncGroupRequest(
                group_id="group", generation_id=3, member_id=members[0],
                assignments=tuple(
                    apis.SyncGroupAssignment(member_id=m, assignment=sub) for m in members
                ),
            ),
            apis.SyncGroupResponse(assignment=sub),
        ),
        (
            "OffsetCommit 10 partitions", ApiKey.OFFSET_COMMIT, 7,
            apis.OffsetCommitRequest(
                group_id="group", generation_id=3, member_id=members[0],
                topics=(apis.OffsetCommitTopic(name="t", partitions=tuple(
                    apis.OffsetCommitPartition(partition_index=p, committed_offset=1000 + p)
                    for p in range(10))),),
            ),
            apis.OffsetCommitResponse(topics=(apis.OffsetCommitTopicResponse(
                name="t", partitions=tuple(
                    apis.OffsetCommitPartitionResponse(partition_index=p) for p in range(10)
                )),)),
        ),
        (
            "OffsetFetch 10 partitions", ApiKey.OFFSET_FETCH, 5,
            apis.OffsetFetchRequest(group_id="group", topics=(apis.OffsetFetchTopic(
                name="t", partition_indexes=tuple(range(10))),)),
            apis.OffsetFetchResponse(topics=(apis.OffsetFetchTopicResponse(
                name="t", partitions=tuple(
                    apis.OffsetFetchPartitionResponse(
                        partition_index=p, committed_offset=1000 + p, metadata="")
                    for p in range(10))),)),
        ),
        (
            "Heartbeat", ApiKey.HEARTBEAT, 3,
            apis.HeartbeatRequest(group_id="group", generation_id=3, member_id=members[0]),
            apis.HeartbeatResponse(),
        ),
    ]


def per_op_us(fn: Callable[[], object], budget: float) -> float:
    """Best of five runs of the mean time per call, in microseconds."""
    n = 1
    while True:  # grow the loop until one run takes about budget / 5
        t = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - t
        if elapsed >= budget / 5 or n >= 1 << 20:
            break
        n *= 2
    best = elapsed / n
    for _ in range(4):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best * 1e6


def kio_ops(
    key: ApiKey, version: int, request_payload: bytes, response_frame: bytes
) -> tuple[Callable[[], object], Callable[[], object]]:
    """kio's decode-request and encode-response callables for the same messages."""
    from kio.schema.request_header.v1.header import RequestHeader as KioHeader

    header_reader = entity_reader(KioHeader)
    req_cls = load_request_schema(int(key), version)
    resp_cls = load_response_schema(int(key), version)
    body_reader = entity_reader(req_cls)
    resp_writer = entity_writer(resp_cls)

    def decode() -> object:
        header, size = header_reader(request_payload, 0)
        body, used = body_reader(request_payload, size)
        if size + used != len(request_payload):
            raise ValueError("trailing bytes")
        return header, body

    response_body, used = entity_reader(resp_cls)(response_frame, 8)
    assert 8 + used == len(response_frame)

    def encode() -> bytes:
        buf = io.BytesIO()
        resp_writer(buf, response_body)
        body = buf.getvalue()
        return _I32.pack(len(body) + 4) + _I32.pack(7) + body

    # Same bytes both ways, or the comparison would be meaningless.
    decode()
    assert encode() == response_frame, f"kio re-encodes {key.name} v{version} differently"
    return decode, encode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    args = parser.parse_args()
    if not HAVE_KIO:
        print("kio is not installed (pip install kio): measuring brokerd's codec only",
              file=sys.stderr)
    print(f"{'API (version)':<34}{'decode request µs':>22}{'encode response µs':>22}")
    print(f"{'':<34}{'brokerd':>11}{'kio':>11}{'brokerd':>11}{'kio':>11}")
    for label, key, version, request, response in cases():
        header = RequestHeader(int(key), version, 7, "bench-client")
        request_payload = apis.encode_request(header, request)[4:]
        response_frame = apis.encode_response(7, version, response)
        ours_decode = per_op_us(lambda p=request_payload: apis.decode_request(p), args.budget)
        ours_encode = per_op_us(
            lambda v=version, r=response: apis.encode_response(7, v, r), args.budget
        )
        kio_decode = kio_encode = "-"
        if HAVE_KIO:
            k_dec, k_enc = kio_ops(key, version, request_payload, response_frame)
            kio_decode = f"{per_op_us(k_dec, args.budget):.1f}"
            kio_encode = f"{per_op_us(k_enc, args.budget):.1f}"
        print(
            f"{label + f' (v{version})':<34}{ours_decode:>11.1f}{kio_decode:>11}"
            f"{ours_encode:>11.1f}{kio_encode:>11}"
        )


if __name__ == "__main__":
    main()
