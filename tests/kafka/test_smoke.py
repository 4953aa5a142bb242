"""Smoke test of the Kafka listener against a real ``twistd broker`` process: raw-socket
checks of the framing rules, then kafka-python producing, consuming in a group and
committing. (The four-client matrix lives elsewhere.)
"""

from __future__ import annotations

import contextlib
import socket
import struct

import pytest

from brokerd.kafka.wire import codec
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis
from brokerd.testing import LaunchedBroker

pytestmark = pytest.mark.clients


def _exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        size = struct.unpack(">i", _recv_exactly(s, 4))[0]
        return _recv_exactly(s, size)


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def test_raw_socket_rules(brokerd: LaunchedBroker) -> None:
    port = int(brokerd.bootstrap_servers.rpartition(":")[2])
    # ApiVersions v3 (flexible: header v2, compact client software name and version) is
    # answered with response header v0 and a compact body listing every API.
    flexible = struct.pack(">hhi", 18, 3, 42) + b"\x00\x01x\x00\x02a\x02b\x00"
    answer = _exchange(port, codec.frame(flexible))
    assert answer[:6] == struct.pack(">ih", 42, 0)  # no tag byte after the correlation id
    _, versions = apis.decode_response(ApiKey.API_VERSIONS, 3, answer)
    assert {r.api_key: (r.min_version, r.max_version) for r in versions.api_keys} == {
        int(k): v for k, v in apis.SUPPORTED_VERSIONS.items()
    }
    # A version above brokerd's (v6) gets the version-0 fallback body.
    later = struct.pack(">hhi", 18, 6, 43) + b"\x00\x01x\x00\x02a\x02b\x00"
    assert _exchange(port, codec.frame(later)) == struct.pack(">ihi3h", 43, 35, 1, 18, 0, 5)
    # Metadata advertises the real listener address.
    req = apis.encode_request(RequestHeader(3, 8, 1, "smoke"), apis.MetadataRequest(topics=None))
    _, meta = apis.decode_response(ApiKey.METADATA, 8, _exchange(port, req))
    assert [(b.host, b.port) for b in meta.brokers] == [("127.0.0.1", port)]
    # An oversized frame is refused from its size alone: the broker aborts.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", 1 << 30))
        with contextlib.suppress(ConnectionResetError):  # an abort may arrive as RST
            assert s.recv(10) == b""


def test_kafka_python_produce_consume_commit(brokerd: LaunchedBroker) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka.admin import NewTopic

    bootstrap = brokerd.bootstrap_servers
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic("smoke", 2, 1)])
        assert "smoke" in admin.list_topics()
    finally:
        admin.close()

    # kafka-python's default producer is idempotent with acks=all (InitProducerId).
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
    try:
        sent = [producer.send("smoke", b"v%d" % i, partition=i % 2) for i in range(20)]
        offsets = sorted((f.get(10).partition, f.get(10).offset) for f in sent)
    finally:
        producer.close()
    assert offsets == sorted((p, o) for p in (0, 1) for o in range(10))

    def consume(want: int, idle_ms: int) -> list[bytes]:
        """Up to ``want`` records, stopping after ``idle_ms`` without one (the first
        wait includes joining the group)."""
        consumer = kafka.KafkaConsumer(
            "smoke", bootstrap_servers=bootstrap, group_id="smoke-group",
            auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=idle_ms,
        )
        try:
            values: list[bytes] = []
            for r in consumer:
                values.append(r.value)
                if len(values) == want:
                    break
            consumer.commit()
        finally:
            consumer.close()
        return values

    assert sorted(consume(20, 30_000)) == sorted(b"v%d" % i for i in range(20))
    assert consume(1, 3000) == []  # resumed from the committed offsets
