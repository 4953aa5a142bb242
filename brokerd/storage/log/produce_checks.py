# -*- test-case-name: tests.storage.log.test_produce_checks -*-
"""What a topic's configs let a produce append (pure, no I/O).

:func:`check_batches` and :func:`check_values` apply a partition's :class:`LogConfig` to
a validated produce: every batch within ``max.message.bytes`` (Kafka's
RecordTooLargeException wording), and, on a compacted topic, a key on every record.
As Kafka does, the refusal names every keyless record of the first batch holding any
(its index in the batch), so that a client fails exactly those records and may send
the others again.

Kafka refuses a produce holding a record without a key to a topic whose
``cleanup.policy`` includes ``compact`` ("Compacted topic cannot accept message without
key in topic partition ..."): such a record could never be compacted away. Checking
means reading every record's key, which uncompressed batches allow in place and
compressed ones only after decompressing, so the broker calls this for compacted topics
only: no per-record work on other topics.

What it does not do: validate the batches themselves (``record/header.parse_batches`` does) or map
the errors to wire codes (the protocols do).
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.errors import CorruptBatch, InvalidRecord, RecordTooLarge
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.header import BatchHeader

__all__ = [
    "MAX_CHECKED_BATCH_BYTES",
    "check_batches",
    "check_values",
    "keyless_message",
    "refuse_keyless",
]

#: Bound of one batch's decompressed records while its keys are checked.
MAX_CHECKED_BATCH_BYTES = 64 * 1024 * 1024


def keyless_message(topic: str, partition: int) -> str:
    """Kafka's text for the refusal."""
    return (
        "Compacted topic cannot accept message without key in topic partition "
        f"{topic}-{partition}."
    )


def refuse_keyless(
    data: bytes, headers: Sequence[BatchHeader], topic: str, partition: int
) -> None:
    """Raise :class:`InvalidRecord` naming every record without a key in the first of
    the validated batches ``data`` (``headers`` from ``parse_batches``) that has one."""
    pos = 0
    for header in headers:
        try:
            records = decode_records(
                data[pos : pos + header.size], max_uncompressed=MAX_CHECKED_BATCH_BYTES
            )
        except CorruptBatch as exc:
            raise CorruptBatch(f"batch at offset {header.base_offset}: {exc}") from exc
        keyless = [index for index, record in enumerate(records) if record.key is None]
        if keyless:
            text = keyless_message(topic, partition)
            raise InvalidRecord(
                _summary(keyless, text), tuple((index, text) for index in keyless)
            )
        pos += header.size


#: Indexes a summary names before "...": the record errors carry every one.
_SUMMARY_INDEXES = 3


def _summary(indexes: Sequence[int], text: str) -> str:
    shown = ", ".join(str(i) for i in indexes[:_SUMMARY_INDEXES])
    more = ", ..." if len(indexes) > _SUMMARY_INDEXES else ""
    return f"{len(indexes)} record(s) refused (batch index {shown}{more}): {text}"


def check_batches(
    config: LogConfig, data: bytes, headers: Sequence[BatchHeader], topic: str, partition: int
) -> None:
    """Raise :class:`RecordTooLarge` or :class:`InvalidRecord` if the topic refuses them."""
    limit = config.max_message_bytes
    for header in headers:
        if header.size > limit:
            raise RecordTooLarge(
                f"The record batch size in the append to {topic}-{partition} is "
                f"{header.size} bytes which exceeds the maximum configured value of {limit}."
            )
    if config.compact:
        refuse_keyless(data, headers, topic, partition)


def check_values(config: LogConfig, topic: str, partition: int) -> None:
    """Native produce carries values only: a compacted topic never accepts it."""
    if config.compact:
        raise InvalidRecord(keyless_message(topic, partition))
