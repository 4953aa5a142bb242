"""Test helpers for the native protocol: raw frame builders written straight from the wire
tables (plain ``struct``, independent of the codec under test), and the answers a fake
core gives (the fake whose Deferreds the tests fire by hand is
:class:`tests.fake_core.HandFiredCore`)."""

from __future__ import annotations

import struct

from brokerd.storage.record.encode import encode_batch
from brokerd.storage.types import AppendInfo, LogRead, Record


def topic_field(topic: str | bytes, *, length: int | None = None) -> bytes:
    raw = topic.encode() if isinstance(topic, str) else topic
    return struct.pack(">H", len(raw) if length is None else length) + raw


def produce_frame(
    topic: str | bytes, partition: int, values: list[bytes], *, count: int | None = None
) -> bytes:
    body = b"".join(struct.pack(">I", len(v)) + v for v in values)
    n = len(values) if count is None else count
    return struct.pack(">H", 1) + topic_field(topic) + struct.pack(">II", partition, n) + body


def fetch_frame(topic: str | bytes, partition: int, offset: int) -> bytes:
    return struct.pack(">H", 2) + topic_field(topic) + struct.pack(">IQ", partition, offset)


def create_topic_frame(topic: str | bytes, partitions: int) -> bytes:
    return struct.pack(">H", 3) + topic_field(topic) + struct.pack(">I", partitions)


def list_offsets_frame(topic: str | bytes, partition: int) -> bytes:
    return struct.pack(">H", 4) + topic_field(topic) + struct.pack(">I", partition)


def list_topics_frame() -> bytes:
    return struct.pack(">H", 5)


def long_poll_frame(
    topic: str | bytes,
    partition: int,
    offset: int,
    *,
    max_wait_ms: int,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
) -> bytes:
    return (
        struct.pack(">H", 6)
        + topic_field(topic)
        + struct.pack(">IQIII", partition, offset, max_wait_ms, min_bytes, max_bytes)
    )


def error_body(code: int, message: str) -> bytes:
    raw = message.encode()
    return struct.pack(">HH", code, len(raw)) + raw


def fetch_error(code: int, message: str) -> bytes:
    return struct.pack(">I", 0xFFFFFFFF) + error_body(code, message)


def produce_ok(base_offset: int) -> bytes:
    return struct.pack(">HQ", 0, base_offset)


def fetch_ok(values: list[bytes]) -> bytes:
    return struct.pack(">I", len(values)) + b"".join(struct.pack(">I", len(v)) + v for v in values)


def records(
    start: int, values: list[bytes | None], *, high_watermark: int | None = None
) -> LogRead:
    """A read holding ``values`` at offsets from ``start``: as one stored batch (what a
    type-2 Fetch frames) and as decoded records (what the other reads answer)."""
    recs = tuple(Record(start + i, 0, None, v) for i, v in enumerate(values))
    hw = start + len(values) if high_watermark is None else high_watermark
    stored = encode_batch(values, timestamp_ms=0, base_offset=start) if values else b""
    return LogRead(stored, hw, 0, hw, decoded=recs)


def append_info(base: int, count: int = 1) -> AppendInfo:
    return AppendInfo(base, base + count - 1, 0)
