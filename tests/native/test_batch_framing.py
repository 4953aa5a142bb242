"""The one-pass framing of stored batches into a type-2 Fetch answer: the same bytes as
the decoded path for every batch it takes, the general path for every batch it does not,
the cap, and damage refused rather than read past."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokerd.errors import CorruptBatch
from brokerd.native import server_codec
from brokerd.native.batch_framing import frame_batches, raw_fetch_budget
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.decode import decode_run
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.types import Record

MiB = 1024 * 1024


def batches(*runs: list[bytes | None], start: int = 0, **kw: object) -> bytes:
    out = []
    offset = start
    for values in runs:
        out.append(encode_batch(values, timestamp_ms=7, base_offset=offset, **kw))  # type: ignore[arg-type]
        offset += len(values)
    return b"".join(out)


def decoded_answer(data: bytes, offset: int, cap: int) -> bytes:
    """The answer of the general path (decode, then encode) for the same read."""
    out: list[Record] = []
    decode_run(
        data, 0, len(data), expected_offset=0, min_offset=offset, max_value_bytes=cap,
        total=0, out=out, max_uncompressed=64 * MiB,
    )
    return server_codec.encode_fetch_response([r.value for r in out])


def framed_answer(data: bytes, offset: int, cap: int) -> bytes:
    framed = frame_batches(data, offset, cap)
    assert framed is not None
    return server_codec.encode_framed_fetch_response(framed)


def test_frames_values_and_nulls_as_the_decoded_path_does() -> None:
    data = batches([b"a", None, b"", b"x" * 300], [b"y" * 20_000])
    assert framed_answer(data, 0, MiB) == decoded_answer(data, 0, MiB)
    assert framed_answer(data, 0, MiB)[:4] == struct.pack(">I", 5)


def test_starts_at_the_offset_inside_a_batch() -> None:
    data = batches([b"a", b"b", b"c"], [b"d"])
    framed = frame_batches(data, 2, MiB)
    assert framed is not None
    assert framed.count == 2
    assert framed.body() == b"\0\0\0\x01c\0\0\0\x01d"


def test_cap_counts_values_but_always_answers_one() -> None:
    data = batches([b"x" * 600, b"y" * 600, b"z" * 10])
    framed = frame_batches(data, 0, 1000)
    assert framed is not None and framed.count == 1 and framed.full
    framed = frame_batches(data, 1, 1000)
    assert framed is not None and framed.count == 2
    huge = batches([b"h" * 5000, b"i"])
    framed = frame_batches(huge, 0, 100)
    assert framed is not None and (framed.count, framed.value_bytes) == (1, 5000)


def test_trailing_partial_batch_is_left_for_the_next_fetch() -> None:
    data = batches([b"a"], [b"b"])
    framed = frame_batches(data[:-3], 0, MiB)
    assert framed is not None and framed.count == 1


def test_keys_are_stepped_over() -> None:
    data = encode_batch([b"v1", b"v2"], timestamp_ms=1, keys=[b"key", None])
    assert framed_answer(data, 0, MiB) == decoded_answer(data, 0, MiB)


@pytest.mark.parametrize(
    "kw",
    [
        {"compression": Compression.GZIP},
        {"transactional": True, "producer_id": 5, "producer_epoch": 0, "base_sequence": 0},
    ],
)
def test_batches_needing_the_general_path_are_not_framed(kw: dict[str, object]) -> None:
    data = batches([b"plain"]) + batches([b"other"], start=1, **kw)
    assert frame_batches(data, 0, MiB) is None


def test_a_record_overrunning_its_batch_is_damage() -> None:
    data = bytearray(batches([b"abc"]))
    # The value's length varint (zig-zag 3 = 6) sits before the last 4 bytes: abc, 0.
    assert data[-5] == 6
    data[-5] = 40  # 20 bytes: past the record and the batch
    with pytest.raises(CorruptBatch):
        frame_batches(bytes(data), 0, MiB)


def test_raw_budget_is_bounded() -> None:
    assert MiB < raw_fetch_budget(MiB) <= MiB + 256 * 1024
    assert raw_fetch_budget(1000) == 2000


values = st.lists(st.one_of(st.none(), st.binary(max_size=300)), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(st.lists(values, min_size=1, max_size=4), st.integers(0, 200), st.integers(0, 4000))
def test_same_answer_as_the_decoded_path(
    runs: list[list[bytes | None]], offset: int, cap: int
) -> None:
    data = batches(*runs)
    offset = min(offset, sum(map(len, runs)) - 1)
    assert framed_answer(data, offset, cap) == decoded_answer(data, offset, cap)


def test_equal_values_take_the_bulk_path_and_match_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from brokerd.native import batch_framing

    data = batches([bytes([i % 251]) * 100 for i in range(3000)], [b"z" * 7] * 70)

    def no_loop(*args: object, **kw: object) -> object:
        raise AssertionError("the per-record loop was used")

    with monkeypatch.context() as m:
        m.setattr(batch_framing, "_frame_records", no_loop)
        for offset, cap in ((0, MiB), (17, MiB), (2999, 50), (100, 10_000), (3050, 0)):
            assert framed_answer(data, offset, cap) == decoded_answer(data, offset, cap)


@pytest.mark.parametrize("where", [0, 1, 2, 3, 4, 5, 6, -1])
def test_a_changed_head_byte_leaves_the_bulk_path(
    where: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One record's head (or its header count, -1) differs from the others': the bulk
    # check refuses the batch, and the loop answers it (as it would without the bulk
    # path) or calls it damage. (The stored CRC would catch this first; the framing
    # does not lean on it.)
    from brokerd.native import batch_framing

    data = bytearray(batches([b"v" * 30] * 60))
    size = (len(data) - 61) // 60  # offset deltas of one byte: records of one size
    record = 61 + 10 * size
    data[record + size - 1 if where == -1 else record + where] ^= 0x01
    try:
        got = framed_answer(bytes(data), 0, MiB)
    except CorruptBatch:
        got = None
    with monkeypatch.context() as m:
        m.setattr(batch_framing, "_frame_uniform", lambda *a, **k: None)
        try:
            loop = framed_answer(bytes(data), 0, MiB)
        except CorruptBatch:
            loop = None
    assert got == loop


def test_client_decodes_equal_and_mixed_sizes_alike() -> None:
    from brokerd.native import client_codec
    from brokerd.native.messages import FetchResponse, RequestType

    values = [b"a" * 5] * 50 + [b"b" * 6] + [b"c" * 5] * 10 + [b""] * 3
    answer = server_codec.encode_fetch_response(values)
    for chunk in (1, 7, 64, len(answer)):
        decoder = client_codec.ResponseDecoder()
        decoder.expect(RequestType.FETCH)
        got = []
        for i in range(0, len(answer), chunk):
            got.extend(decoder.feed(answer[i : i + chunk]))
        assert got == [FetchResponse(tuple(values))]


equal_runs = st.builds(
    lambda value, n: [value] * n, st.binary(max_size=300), st.integers(1, 150)
)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(equal_runs, values), min_size=1, max_size=3), st.integers(0, 400),
       st.integers(0, 20_000))
def test_equal_runs_same_answer_as_the_decoded_path(
    runs: list[list[bytes | None]], offset: int, cap: int
) -> None:
    data = batches(*runs)
    offset = min(offset, sum(map(len, runs)) - 1)
    assert framed_answer(data, offset, cap) == decoded_answer(data, offset, cap)
