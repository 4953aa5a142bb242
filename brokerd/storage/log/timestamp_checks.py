# -*- test-case-name: tests.storage.log.test_timestamp_checks -*-
"""A topic's ``message.timestamp.before.max.ms`` / ``after.max.ms``: CreateTime records
whose timestamps are too far from the broker's clock are refused (INVALID_TIMESTAMP).

As Kafka: only on a CreateTime topic (LogAppendTime replaces the timestamps anyway);
a record without a timestamp (-1) passes; the whole produce to the partition is refused,
naming the first bad record. A batch's header holds its newest timestamp, so the
forward check (Kafka 4.x's default of one hour) costs nothing per record; the backward
check has to read every record's timestamp, so it runs only on topics that set one
(Kafka's default is no limit). Pure: no I/O, no Twisted.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.errors import InvalidTimestamp
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.header import BatchHeader

__all__ = ["MAX_CHECKED_BATCH_BYTES", "check_timestamps"]

#: Bound of one batch's decompressed records while its timestamps are checked.
MAX_CHECKED_BATCH_BYTES = 64 * 1024 * 1024
_NO_TIMESTAMP = -1


def check_timestamps(
    config: LogConfig, data: bytes, headers: Sequence[BatchHeader], now_ms: int
) -> None:
    """Raise :class:`InvalidTimestamp` if a record of the validated batches ``data``
    is outside ``[now - before, now + after]``."""
    if config.message_timestamp_type != "CreateTime":
        return
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    if before is None and after is None:
        return
    low = None if before is None else now_ms - before
    high = None if after is None else now_ms + after
    pos = 0
    for header in headers:
        start, pos = pos, pos + header.size
        if low is None and high is not None and header.max_timestamp <= high:
            continue  # the newest record is in range, and nothing is too old
        batch = memoryview(data)[start:pos]
        for index, record in enumerate(
            decode_records(batch, max_uncompressed=MAX_CHECKED_BATCH_BYTES)
        ):
            ts = record.timestamp
            if ts == _NO_TIMESTAMP:
                continue
            if (low is not None and ts < low) or (high is not None and ts > high):
                raise InvalidTimestamp(_message(ts, record.offset, low, high), index)


def _message(ts: int, offset: int, low: int | None, high: int | None) -> str:
    # Kafka's wording; an unbounded side is shown as Kafka's Long range end.
    lo = -(2**63) if low is None else low
    hi = 2**63 - 1 if high is None else high
    return (
        f"Timestamp {ts} of message with offset {offset} is out of range. "
        f"The timestamp should be within [{lo}, {hi}]"
    )
