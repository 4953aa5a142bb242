"""What the Kafka request handlers ask of the transaction coordinator, and its answers.

The handlers (``brokerd/kafka/server/handlers/txn.py``) decode the transactional APIs and
call the :class:`~brokerd.kafka.txn.coordinator.TransactionCoordinator`, which answers
with these values.
Errors are Kafka error codes chosen for the newest request version: ``PRODUCER_FENCED``
where a newer epoch exists. The handlers map that code for older request versions (to
``INVALID_PRODUCER_EPOCH``), as Kafka does. Pure: no Twisted beyond the Deferred type, no
I/O.
"""

from __future__ import annotations

import attrs

from brokerd.kafka.errors import ErrorCode

#: ``(topic, partition)``.
TopicPartition = tuple[str, int]



@attrs.frozen
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@attrs.frozen
class EndTxnResult:
    """EndTxn v5's answer: the id and epoch the producer's next transaction uses."""

    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@attrs.frozen
class TxnOffset:
    """One offset of a TxnOffsetCommit, stored when its transaction commits."""

    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@attrs.frozen
class TxnDescription:
    """One transactional id for DescribeTransactions."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    #: Wall-clock ms when the ongoing transaction began; -1 when none is ongoing.
    start_time_ms: int = -1
    partitions: tuple[TopicPartition, ...] = ()


@attrs.frozen
class TxnListing:
    """One transactional id for ListTransactions."""

    transactional_id: str
    producer_id: int
    state: str
