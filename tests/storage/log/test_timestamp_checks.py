"""The timestamp windows of ``message.timestamp.before.max.ms`` and ``after.max.ms``: records
outside them refused with Kafka's message, the first one too old named, LogAppendTime topics
and missing timestamps let through."""

from __future__ import annotations

import pytest

from brokerd.errors import InvalidTimestamp
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.timestamp_checks import check_timestamps
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches

NOW = 1_700_000_000_000



# -- message.timestamp.before.max.ms / after.max.ms -------------------------------------


def _check(config: LogConfig, data: bytes) -> None:
    check_timestamps(config, data, parse_batches(data, max_batch_bytes=len(data)), NOW)


def test_timestamps_outside_the_window_are_refused() -> None:
    config = LogConfig(
        message_timestamp_before_max_ms=60_000, message_timestamp_after_max_ms=1_000
    )
    _check(config, encode_batch([b"a"], timestamp_ms=NOW - 60_000))
    _check(config, encode_batch([b"a"], timestamp_ms=NOW + 1_000))
    with pytest.raises(InvalidTimestamp) as info:
        _check(config, encode_batch([b"a"], timestamp_ms=NOW + 1_001))
    assert str(info.value) == (
        f"Timestamp {NOW + 1_001} of message with offset 0 is out of range. "
        f"The timestamp should be within [{NOW - 60_000}, {NOW + 1_000}]"
    )
    with pytest.raises(InvalidTimestamp):
        _check(config, encode_batch([b"a"], timestamp_ms=NOW - 60_001, compression=Compression.LZ4))


def test_the_first_record_too_old_is_named() -> None:
    batch = bytearray(encode_batch([b"a", b"b", b"c"], timestamp_ms=NOW))
    config = LogConfig(message_timestamp_before_max_ms=10)
    _check(config, bytes(batch))
    # A batch whose newest record is fine but whose base timestamp is too old.
    old = encode_batch([b"x"], timestamp_ms=NOW - 11) + encode_batch([b"y"], timestamp_ms=NOW)
    with pytest.raises(InvalidTimestamp) as info:
        _check(config, old)
    assert info.value.record_index == 0


def test_log_append_time_topics_and_missing_timestamps_pass() -> None:
    far = encode_batch([b"a"], timestamp_ms=NOW + 10**9)
    _check(LogConfig(message_timestamp_type="LogAppendTime",
                     message_timestamp_after_max_ms=0), far)
    _check(LogConfig(message_timestamp_before_max_ms=0), encode_batch([b"a"], timestamp_ms=-1))
    _check(LogConfig(), far)  # no window: LogConfig's own default checks nothing
