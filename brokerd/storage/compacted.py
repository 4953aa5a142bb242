"""What a compacted topic accepts: every record must have a key (pure, no I/O).

Kafka refuses a produce holding a record without a key to a topic whose
``cleanup.policy`` includes ``compact`` ("Compacted topic cannot accept message without
key in topic partition ..."): such a record could never be compacted away. Checking
means reading every record's key, which uncompressed batches allow in place and
compressed ones only after decompressing, so the broker calls this for compacted topics
only: no per-record work on other topics.

What it does not do: decide whether a topic is compacted (the caller reads
``log.config.compact``) or map the error to a wire code (the protocols do).
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.errors import CorruptBatch, InvalidRecord
from brokerd.storage.batch import BatchHeader, decode_records

__all__ = ["MAX_CHECKED_BATCH_BYTES", "keyless_message", "refuse_keyless"]

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
    """Raise :class:`InvalidRecord` if a record of the validated batches ``data``
    (``headers`` from ``parse_batches``) has no key."""
    pos = 0
    for header in headers:
        try:
            records = decode_records(
                data[pos : pos + header.size], max_uncompressed=MAX_CHECKED_BATCH_BYTES
            )
        except CorruptBatch as exc:
            raise CorruptBatch(f"batch at offset {header.base_offset}: {exc}") from exc
        for index, record in enumerate(records):
            if record.key is None:
                raise InvalidRecord(keyless_message(topic, partition), index)
        pos += header.size
