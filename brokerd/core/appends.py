"""What one request asks the log to append: client batches, plain values or a marker.

:data:`Append` is a union of three frozen classes: a Kafka produce brings validated
RecordBatches (:class:`BatchesAppend`), a native produce brings values for the broker to
encode (:class:`ValuesAppend`), the transaction coordinator ends a transaction with a
marker (:class:`MarkerAppend`). Each also says how much it adds toward a long-poll's
``min_bytes`` in either measure. No I/O and no Twisted here.
"""

from __future__ import annotations

import attrs

from brokerd.storage.log.prepared_append import PreparedBatches
from brokerd.storage.record.encode import stored_size

#: Wake-up amount for an append whose value bytes are unknown without decompressing:
#: more than anyone waits for, so the waiter wakes and its reader measures.
UNKNOWN_BYTES = 1 << 62


@attrs.frozen
class ValuesAppend:
    """Values the broker encodes as one uncompressed batch (the native produce)."""

    values: tuple[bytes | None, ...]

    def value_bytes(self) -> int:
        values = self.values
        if None in values:
            return sum(len(v) for v in values if v is not None)
        return sum(map(len, values))  # type: ignore[arg-type]

    def stored_bytes(self) -> int:
        return stored_size(self.values)


@attrs.frozen
class BatchesAppend:
    """Client RecordBatches (the Kafka produce), prepared against the topic's configs;
    the log checks the producer state and stores them in its write job."""

    prepared: PreparedBatches

    def value_bytes(self) -> int:
        """An upper bound of the value bytes, or :data:`UNKNOWN_BYTES` if compressed."""
        if any(h.compression for h in self.prepared.headers):
            return UNKNOWN_BYTES
        return len(self.prepared.data)

    def stored_bytes(self) -> int:
        return len(self.prepared.data)


@attrs.frozen
class MarkerAppend:
    """A transaction marker (COMMIT or ABORT) for one producer on one partition.

    Its sizes are :data:`UNKNOWN_BYTES`: a commit may make many bytes stable at once, so
    a marker wakes every parked fetch of its partition, which then reads again."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int = 0

    def value_bytes(self) -> int:
        return UNKNOWN_BYTES

    def stored_bytes(self) -> int:
        return UNKNOWN_BYTES


Append = ValuesAppend | BatchesAppend | MarkerAppend


def wake_bytes(append: Append, *, values: bool) -> int:
    """What an append adds toward a waiter's ``min_bytes``: value bytes (a native
    reader) or stored bytes (Kafka's ``MinBytes``). Exact, or else more: a native reader
    re-checks after waking, so it must never sleep through enough data."""
    return append.value_bytes() if values else append.stored_bytes()
