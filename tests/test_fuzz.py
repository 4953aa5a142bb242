"""Hostile input for every decoder that reads bytes from a client or the disk.

Invariant: a decoder answers garbage with its own typed error, never another exception,
and never allocates from a length before checking it (bounded by the input here). The
short runs are part of ``make test``; ``make test-long`` (``-m slow``) runs the same
properties with far more examples.
"""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokerd.errors import CorruptBatch, RecordTooLarge
from brokerd.kafka.wire import codec
from brokerd.kafka.wire.requests import apis
from brokerd.native.batch_framing import frame_batches
from brokerd.native.messages import RequestEvent
from brokerd.native.server_codec import RequestDecoder
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches

SHORT = settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(deadline=None, max_examples=20_000, suppress_health_check=[HealthCheck.too_slow])

KAFKA_HEADERS = st.sampled_from(
    [
        (int(key), version)
        for key, (low, high) in apis.SUPPORTED_VERSIONS.items()
        for version in range(low, high + 1)
    ]
)


def native_garbage(request_type: int, tail: bytes) -> None:
    decoder = RequestDecoder(max_produce_bytes=4096)
    data = struct.pack(">H", request_type) + tail
    for i in range(0, len(data), 7):
        for event in decoder.feed(data[i : i + 7]):
            assert isinstance(event, RequestEvent)
    assert decoder.buffered <= len(data)


def kafka_garbage(header: tuple[int, int], body: bytes) -> None:
    key, version = header
    payload = struct.pack(">hhi", key, version, 1) + body
    with contextlib.suppress(codec.CodecError):
        apis.decode_request(payload)
    frames = codec.FrameDecoder(1 << 16)
    with contextlib.suppress(codec.FrameError):
        frames.feed(struct.pack(">i", len(payload)) + payload)


def batch_garbage(data: bytes, flip: int) -> None:
    with contextlib.suppress(CorruptBatch, RecordTooLarge):
        parse_batches(data, max_batch_bytes=1 << 20)
    # A valid batch with one byte changed: the CRC (or the header checks) must catch it.
    good = bytearray(encode_batch([data[:50], b"v"], timestamp_ms=1))
    good[flip % len(good)] ^= 0xFF
    try:
        headers = parse_batches(bytes(good), max_batch_bytes=1 << 20)
    except (CorruptBatch, RecordTooLarge):
        return
    # Only bytes outside the CRC can change unnoticed: base offset and leader epoch.
    assert flip % len(good) < 17, headers
    with contextlib.suppress(CorruptBatch):
        decode_records(bytes(good), max_uncompressed=1 << 20)


def framing_garbage(data: bytes, flip: int, count: int) -> None:
    # The Fetch framing trusts the read's CRC check, but never its own arithmetic: a
    # changed byte anywhere (past the CRC) is damage, a refusal of the bulk path, or a
    # framing of values inside the batch; never another exception or an overrun.
    with contextlib.suppress(CorruptBatch):
        frame_batches(data, 0, 1 << 20)
    good = bytearray(encode_batch([data[:40]] * count, timestamp_ms=1))
    good[flip % len(good)] ^= 0xFF
    try:
        framed = frame_batches(bytes(good), 0, 1 << 20)
    except CorruptBatch:
        return
    if framed is not None:
        assert len(framed.body()) <= len(good)


@SHORT
@given(st.binary(max_size=300), st.integers(0, 10_000), st.integers(1, 80))
def test_fetch_framing_short(data: bytes, flip: int, count: int) -> None:
    framing_garbage(data, flip, count)


@pytest.mark.slow
@LONG
@given(st.binary(max_size=2000), st.integers(0, 100_000), st.integers(1, 300))
def test_fetch_framing_long(data: bytes, flip: int, count: int) -> None:
    framing_garbage(data, flip, count)


@SHORT
@given(st.integers(0, 8), st.binary(max_size=300))
def test_native_decoder_short(request_type: int, tail: bytes) -> None:
    native_garbage(request_type, tail)


@SHORT
@given(KAFKA_HEADERS, st.binary(max_size=300))
def test_kafka_decoder_short(header: tuple[int, int], body: bytes) -> None:
    kafka_garbage(header, body)


@SHORT
@given(st.binary(max_size=300), st.integers(0, 10_000))
def test_batch_decoder_short(data: bytes, flip: int) -> None:
    batch_garbage(data, flip)


@pytest.mark.slow
@LONG
@given(st.integers(0, 8), st.binary(max_size=2000))
def test_native_decoder_long(request_type: int, tail: bytes) -> None:
    native_garbage(request_type, tail)


@pytest.mark.slow
@LONG
@given(KAFKA_HEADERS, st.binary(max_size=2000))
def test_kafka_decoder_long(header: tuple[int, int], body: bytes) -> None:
    kafka_garbage(header, body)


@pytest.mark.slow
@LONG
@given(st.binary(max_size=2000), st.integers(0, 10_000))
def test_batch_decoder_long(data: bytes, flip: int) -> None:
    batch_garbage(data, flip)
