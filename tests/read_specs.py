"""The read specs tests pass to ``PartitionLog.read`` and the core's ``read``, and what
the tests look at in their answers."""

from __future__ import annotations

from brokerd.storage.types import (
    COMMITTED_RECORDS,
    Delivery,
    FileRegion,
    Isolation,
    LogRead,
    ReadSpec,
    StoredRecords,
)

__all__ = [
    "BYTES",
    "COMMITTED",
    "COMMITTED_RECORDS",
    "COMMITTED_REFERENCE",
    "REFERENCE",
    "data_of",
    "span_of",
]

#: Raw batches by value, up to the high watermark (Kafka's default fetch).
BYTES = ReadSpec()
#: Raw batches by value, below the LSO, with the aborted transactions.
COMMITTED = ReadSpec(Isolation.READ_COMMITTED)
#: Raw batches, those checked before by reference (a fetch on a plain socket).
REFERENCE = ReadSpec(delivery=Delivery.REFERENCE)
COMMITTED_REFERENCE = ReadSpec(Isolation.READ_COMMITTED, Delivery.REFERENCE)


def span_of(read: LogRead | None) -> FileRegion | None:
    """The file region a read by reference answered, None when it answered bytes."""
    if read is None or not isinstance(read.records, StoredRecords):
        return None
    payload = read.records.payload
    return None if isinstance(payload, bytes) else payload


def data_of(read: LogRead) -> bytes:
    """The bytes a read answered by value (empty when it answered a file region)."""
    records = read.records
    if isinstance(records, bytes):
        return records
    return records.payload if isinstance(records.payload, bytes) else b""
