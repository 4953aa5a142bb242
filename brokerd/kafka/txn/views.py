"""Answers the transaction coordinator gives from memory: the produce verifier,
DescribeTransactions and ListTransactions.

What this module does not do: change any state or touch the log.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.errors import InvalidProducerEpoch, InvalidTxnState
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.txn.checks import check_producer, transactional_id_error
from brokerd.kafka.txn.state import TxnState
from brokerd.kafka.txn.table import TxnTable
from brokerd.kafka.txn.types import TopicPartition, TxnDescription, TxnListing

__all__ = [
    "describe_transactions",
    "list_transactions",
    "pending_offsets",
    "verify_partitions",
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
    table: TxnTable,
    state_filters: Sequence[str],
    producer_id_filters: Sequence[int],
    *,
    now_ms: int,
    duration_filter_ms: int = -1,
) -> list[TxnListing]:
    """ListTransactions: every id whose state and producer id match (an empty filter
    matches everything; an unknown state name matches nothing), whose transaction has
    been running for more than ``duration_filter_ms`` (when it is not negative: an id
    with no transaction running then never matches)."""
    states, pids = set(state_filters), set(producer_id_filters)
    out: list[TxnListing] = []
    for m in table.values():
        if states and m.state.value not in states:
            continue
        if pids and m.producer_id not in pids:
            continue
        if duration_filter_ms >= 0 and (
            m.start_time_ms < 0 or now_ms - m.start_time_ms <= duration_filter_ms
        ):
            continue
        out.append(TxnListing(m.transactional_id, m.producer_id, m.state.value))
    return out


def verify_partitions(
    table: TxnTable,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Sequence[TopicPartition],
    busy: bool,
) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn v4+ with VerifyOnly: NONE for each partition already in the
    producer's ongoing transaction, INVALID_TXN_STATE for the others; the producer
    checks of a running transaction first (one code for every partition)."""
    meta = table.get(transactional_id)
    code = transactional_id_error(transactional_id) or check_producer(
        meta, producer_id, producer_epoch, busy
    )
    if code or meta is None:
        return dict.fromkeys(partitions, code or ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    ongoing = meta.state is TxnState.ONGOING
    return {
        tp: ErrorCode.NONE if ongoing and tp in meta.partitions else ErrorCode.INVALID_TXN_STATE
        for tp in partitions
    }


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
