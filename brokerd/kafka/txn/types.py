"""What the Kafka request handlers ask of the transaction coordinator, and its answers.

The handlers (``txn_handlers.py``) decode the transactional APIs and call a
:class:`TransactionCoordinatorLike`; the coordinator (``transactions.py``) implements it.
Errors are Kafka error codes chosen for the newest request version: ``PRODUCER_FENCED``
where a newer epoch exists. The handlers map that code for older request versions (to
``INVALID_PRODUCER_EPOCH``), as Kafka does. Pure: no Twisted beyond the Deferred type, no
I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs
from twisted.internet.defer import Deferred

from brokerd.kafka.errors import ErrorCode

#: ``(topic, partition)``.
TopicPartition = tuple[str, int]

#: Kafka's transaction states, by the names DescribeTransactions and ListTransactions use.
TXN_STATE_NAMES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


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


class TransactionCoordinatorLike(Protocol):
    """The transaction coordinator as the Kafka handlers use it. Every method runs in
    the reactor thread; a Deferred fires only after the state it reports is durable."""

    def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> Deferred[InitProducerIdResult]:
        """InitProducerId with a transactional id: a new producer id, or the stored one
        with its epoch bumped (fencing the previous holder and aborting, or completing,
        the transaction it left open). ``producer_id``/``producer_epoch`` are v3+'s
        current id and epoch (-1 when absent)."""
        ...

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> Deferred[dict[TopicPartition, ErrorCode]]:
        """AddPartitionsToTxn: one code per partition (Kafka answers all of them with
        ``OPERATION_NOT_ATTEMPTED`` when one fails; the handler does that)."""
        ...

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> Deferred[ErrorCode]:
        """AddOffsetsToTxn."""
        ...

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Deferred[ErrorCode]:
        """EndTxn: fires once the decision is durable, every marker is written and
        committed offsets are stored (see ``docs/transactions.md``)."""
        ...

    def end_txn_bumping(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Deferred[EndTxnResult]:
        """EndTxn v5 (KIP-890 part 2): EndTxn with the producer epoch bumped by the
        decision; an abort with nothing ongoing is accepted. The answer carries the id
        and epoch to use next."""
        ...

    def txn_offset_commit(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, TxnOffset],
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        add_group: bool = False,
    ) -> Deferred[dict[TopicPartition, ErrorCode]]:
        """TxnOffsetCommit: remember ``offsets`` durably as part of the transaction;
        they become visible to OffsetFetch when it commits and are dropped on abort.
        ``add_group`` (v5): add the group to the transaction first, as AddOffsetsToTxn."""
        ...

    def describe(self, transactional_ids: Sequence[str]) -> list[TxnDescription]:
        """DescribeTransactions (from memory)."""
        ...

    def pending_offsets(self, group_id: str) -> frozenset[TopicPartition]:
        """The group's partitions whose transactional offset commit is not yet complete
        (OffsetFetch's ``require_stable``; from memory)."""
        ...

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn's VerifyOnly (v4+): whether each partition is in the
        producer's ongoing transaction (from memory)."""
        ...

    def list_transactions(
        self,
        state_filters: Sequence[str],
        producer_id_filters: Sequence[int],
        *,
        duration_filter_ms: int = -1,
    ) -> list[TxnListing]:
        """ListTransactions (from memory); empty filters match everything, a negative
        duration too. (The transactional-id pattern is matched by the handler, in
        slices.)"""
        ...
