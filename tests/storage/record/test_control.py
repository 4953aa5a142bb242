"""Control batches (transaction markers): a marker round-trips with its header bits, what is not
one is refused, and clients may not send control or pidless transactional batches."""

from __future__ import annotations

import struct

import pytest

from brokerd.errors import CorruptBatch, InvalidRecord
from brokerd.storage.record.control import ControlType, encode_marker, parse_marker
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches, read_header

from tests.compaction_helpers import T0
from tests.storage.log.test_txns_log import BIG


def test_marker_round_trip_and_header_bits() -> None:
    data = encode_marker(7, 2, commit=True, coordinator_epoch=9, timestamp_ms=T0, base_offset=5)
    header = read_header(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, -1)
    assert header.base_offset == 5 and header.records_count == 1
    m = parse_marker(data)
    assert (m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch) == (7, 2, True, 9)
    (record,) = decode_records(data, max_uncompressed=BIG)
    assert record.key == struct.pack(">hh", 0, ControlType.COMMIT)
    assert record.value == struct.pack(">hi", 0, 9)
    assert not parse_marker(
        encode_marker(7, 2, commit=False, coordinator_epoch=0, timestamp_ms=0)
    ).commit


def test_parse_marker_refuses_what_is_not_one() -> None:
    with pytest.raises(CorruptBatch, match="not a control batch"):
        parse_marker(encode_batch([b"x"], timestamp_ms=0))
    bad_key = encode_batch(
        [b"v"], keys=[struct.pack(">hh", 0, 9)], timestamp_ms=0, control=True, transactional=True
    )
    with pytest.raises(CorruptBatch, match="type 9"):
        parse_marker(bad_key)
    with pytest.raises(CorruptBatch, match="truncated"):
        parse_marker(b"\x00" * 10)
    with pytest.raises(ValueError):
        encode_marker(-1, 0, commit=True, coordinator_epoch=0, timestamp_ms=0)


def test_clients_may_not_send_control_or_pidless_transactional_batches() -> None:
    control = encode_marker(1, 0, commit=True, coordinator_epoch=0, timestamp_ms=0)
    with pytest.raises(InvalidRecord, match="control batches"):
        parse_batches(control, max_batch_bytes=BIG)
    pidless = encode_batch([b"v"], timestamp_ms=0, transactional=True)
    with pytest.raises(InvalidRecord, match="producer id"):
        parse_batches(pidless, max_batch_bytes=BIG)
