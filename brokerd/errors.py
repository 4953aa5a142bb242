"""Errors shared by the storage layer, the broker core and both protocols.

Each protocol maps these to its own wire codes (``brokerd.native.messages.ErrorCode``
and Kafka's error codes in ``brokerd.kafka``). Pure Python: no Twisted, no I/O.
"""

from __future__ import annotations


class BrokerError(Exception):
    """Base class of every error a client may be told about."""


class InvalidTopic(BrokerError):
    """A topic name breaks Kafka's rule: ``[a-zA-Z0-9._-]{1,249}``, not ``.`` or ``..``."""


class UnknownTopicOrPartition(BrokerError):
    """The topic does not exist (and was not auto-created), or has no such partition."""


class TopicAlreadyExists(BrokerError):
    """An explicit create named a topic that exists."""


class InvalidPartitions(BrokerError):
    """A partition count outside the accepted range."""


class OffsetOutOfRange(BrokerError):
    """A fetch offset below the log start offset or above the high watermark."""

    def __init__(self, offset: int, log_start: int, high_watermark: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start}, {high_watermark}]")
        self.offset = offset
        self.log_start = log_start
        self.high_watermark = high_watermark


class CorruptBatch(BrokerError):
    """Bytes that are not a valid RecordBatch v2 (length, magic, CRC or counts)."""


class InvalidRecord(CorruptBatch):
    """A valid batch the partition refuses. ``record_errors`` names each refused record
    (a record without a key in a compacted topic) as (its index in its batch, why);
    it is empty when the batch as a whole is refused (a control batch from a client)."""

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestamp(BrokerError):
    """A CreateTime record whose timestamp lies outside the window its topic's
    ``message.timestamp.before.max.ms`` / ``after.max.ms`` allow. ``record_index`` is
    that record's index in its batch."""

    def __init__(self, message: str, record_index: int = 0) -> None:
        super().__init__(message)
        self.record_index = record_index


class RecordTooLarge(BrokerError):
    """A produce payload or a single batch above the configured limit."""


class StorageError(BrokerError):
    """The disk failed (write or fsync error). The partition refuses further appends,
    because after a failed fsync the kernel may have dropped the dirty pages."""


class CorruptStoredBatch(StorageError):
    """A stored batch failed validation when read back (CRC, length, magic or offsets):
    the disk returned damaged bytes. Not an I/O failure: the partition stays writable and
    the rest of its log is served; only reads reaching the damage fail. Kafka answers
    CORRUPT_MESSAGE, the native protocol CORRUPT_RECORD."""


class ShuttingDown(BrokerError):
    """The broker is stopping and takes no new work."""


class TooManyWaiters(BrokerError):
    """A long-poll fetch was refused because the per-connection or global limit of
    parked fetches is reached."""


class DuplicateSequence(BrokerError):
    """An idempotent producer re-sent a batch that is already stored."""


class OutOfOrderSequence(BrokerError):
    """An idempotent producer's sequence number leaves a gap."""


class InvalidProducerEpoch(BrokerError):
    """An idempotent producer's epoch is older than the one stored."""


class InvalidTxnState(BrokerError):
    """A transactional write the transaction coordinator does not expect: the producer
    has no ongoing transaction holding that partition (it was never added, or the
    transaction already ended), or a client sent a control batch."""


class AuthorizationFailed(BrokerError):
    """The connection's principal may not do this to the topic (ACLs, ``docs/security.md``).
    Said the same way whether the topic exists or not."""


class InvalidConfig(BrokerError):
    """A topic config name brokerd does not know, or a value Kafka's rules refuse (the
    message names the key)."""


class PolicyViolation(BrokerError):
    """A request the topic's configuration forbids (DeleteRecords on a topic whose
    ``cleanup.policy`` does not include ``delete``)."""
