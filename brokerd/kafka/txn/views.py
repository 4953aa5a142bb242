"""Answers the transaction coordinator gives from memory: the produce verifier,
DescribeTransactions and ListTransactions.

What this module does not do: change any state or touch the log.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.errors import InvalidProducerEpoch, InvalidTxnState
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.txn.checks import transactional_id_error
from brokerd.kafka.txn.state import TxnState
from brokerd.kafka.txn.table import TxnTable
from brokerd.kafka.txn.types import TopicPartition, TxnDescription, TxnListing

__all__ = [
    "describe_transactions",
    "list_transactions",
    "pending_offsets",
    "verify_produce",
]


def verify_produce(
    table: TxnTable, topic: str, partition: int, producer_id: int, producer_epoch: int
) -> None:
    """Return if ``producer_id`` has an Ongoing transaction with ``producer_epoch`` that
    includes the partition (AddPartitionsToTxn was answered for it).

    :raises InvalidProducerEpoch: the epoch is older than the id's (a fenced producer).
    :raises InvalidTxnState: any other mismatch.
    """
    meta = table.by_producer_id(producer_id)
    if meta is None:
        raise InvalidTxnState(f"producer id {producer_id} has no transaction")
    if producer_epoch < meta.producer_epoch:
        raise InvalidProducerEpoch(
            f"producer epoch {producer_epoch} is fenced by {meta.producer_epoch}"
        )
    if producer_epoch != meta.producer_epoch or meta.state is not TxnState.ONGOING:
        raise InvalidTxnState(
            f"producer id {producer_id} epoch {producer_epoch} has no ongoing transaction"
        )
    if (topic, partition) not in meta.partitions:
        raise InvalidTxnState(
            f"{topic}-{partition} was not added to the transaction of producer id {producer_id}"
        )


def describe_transactions(
    table: TxnTable, transactional_ids: Sequence[str], unavailable: ErrorCode
) -> list[TxnDescription]:
    """DescribeTransactions: ``unavailable`` (COORDINATOR_NOT_AVAILABLE once stopped) for
    every id, INVALID_REQUEST for an empty id, TRANSACTIONAL_ID_NOT_FOUND for an unknown
    one."""
    out: list[TxnDescription] = []
    for tid in transactional_ids:
        meta = table.get(tid)
        code = unavailable or transactional_id_error(tid)
        if not code and meta is None:
            code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        if code or meta is None:
            out.append(TxnDescription(tid, code))
            continue
        out.append(
            TxnDescription(
                transactional_id=tid,
                error=ErrorCode.NONE,
                state=meta.state.value,
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                timeout_ms=meta.timeout_ms,
                start_time_ms=meta.start_time_ms,
                partitions=tuple(sorted(meta.partitions)),
            )
        )
    return out


def list_transactions(
    table: TxnTable, state_filters: Sequence[str], producer_id_filters: Sequence[int]
) -> list[TxnListing]:
    """ListTransactions: every id whose state and producer id match (an empty filter
    matches everything; an unknown state name matches nothing), sorted by id."""
    states, pids = set(state_filters), set(producer_id_filters)
    return [
        TxnListing(m.transactional_id, m.producer_id, m.state.value)
        for m in table.values()
        if (not states or m.state.value in states) and (not pids or m.producer_id in pids)
    ]


def pending_offsets(table: TxnTable, group_id: str) -> frozenset[TopicPartition]:
    """The partitions of ``group_id`` with a transactional offset commit not yet
    completed: TxnOffsetCommit answered, the transaction's markers and offsets not yet
    written (a transaction keeps its offsets until it completes, commit or abort)."""
    out: set[TopicPartition] = set()
    for meta in table.values():
        entries = meta.offsets.get(group_id)
        if entries:
            out.update(entries)
    return frozenset(out)
