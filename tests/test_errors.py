"""brokerd.errors: the errors that carry more than a message keep what they were given."""

from __future__ import annotations

from brokerd import errors


def test_errors_keep_their_details() -> None:
    out = errors.OffsetOutOfRange(12, 3, 10)
    assert str(out) == "offset 12 is outside [3, 10]"
    assert (out.offset, out.log_start, out.high_watermark) == (12, 3, 10)
    record = errors.InvalidRecord("no key", ((1, "null key"),))
    assert str(record) == "no key" and record.record_errors == ((1, "null key"),)
    assert errors.InvalidRecord("control batch").record_errors == ()
    stamp = errors.InvalidTimestamp("too old", record_index=4)
    assert str(stamp) == "too old" and stamp.record_index == 4
    assert errors.InvalidTimestamp("x").record_index == 0
    assert isinstance(record, errors.CorruptBatch)
    assert isinstance(errors.CorruptStoredBatch("crc"), errors.StorageError)
