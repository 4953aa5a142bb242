"""LogAppendTime: the broker's time stamped into each batch's header, its CRC recomputed, the
records untouched."""

from __future__ import annotations

from brokerd.storage.record.append_time import stamp_log_append_time
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches

BIG = 1 << 20

def test_log_append_time_stamps_header_and_crc_only() -> None:
    first = encode_batch([b"a", b"b"], timestamp_ms=111)
    second = encode_batch([b"c"], timestamp_ms=222)
    data = first + second
    headers = parse_batches(data, max_batch_bytes=BIG)
    stamped, new_headers = stamp_log_append_time(data, headers, 9_999)
    again = parse_batches(stamped, max_batch_bytes=BIG)  # CRCs are valid
    assert again == new_headers
    assert all(h.log_append_time and h.max_timestamp == 9_999 for h in again)
    assert [h.base_timestamp for h in again] == [111, 222]
    records = decode_records(stamped[: len(first)], max_uncompressed=BIG)
    assert [r.value for r in records] == [b"a", b"b"]
