"""The request checks of the transaction coordinator: which Kafka error a transactional
request gets before anything is written (pure functions over the current metadata).

The order of the checks is Kafka's: the transactional id, then the producer id (a
mismatch is INVALID_PRODUCER_ID_MAPPING), then the epoch (a different one is
PRODUCER_FENCED: the handlers map it to INVALID_PRODUCER_EPOCH for request versions that
predate that code), then an operation in progress or a decided transaction still being
completed (CONCURRENT_TRANSACTIONS, retriable).

What this module does not do: change state, write anything, or check partitions against
the topics that exist (the request handlers do, as Kafka's request layer does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from brokerd.errors import InvalidTopic
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.txn.state import PREPARED, TxnMetadata, TxnState
from brokerd.kafka.txn.types import TopicPartition
from brokerd.names import MAX_GROUP_ID_LENGTH, validate_topic_name
from brokerd.storage.stores.txn_log import MAX_TRANSACTIONAL_ID_BYTES

__all__ = [
    "BUMPED_END_RETRY",
    "MAX_OFFSETS_PER_TXN",
    "MAX_PARTITIONS_PER_TXN",
    "bumped_end_txn_error",
    "check_producer",
    "end_txn_error",
    "group_id_error",
    "partition_error",
    "too_many_offsets",
    "transactional_id_error",
]

#: Kafka puts no cap on a transaction's size; these keep one client from making every
#: log record of its id (each holds the whole state) arbitrarily large. Beyond them:
#: INVALID_REQUEST.
MAX_PARTITIONS_PER_TXN = 10_000
MAX_OFFSETS_PER_TXN = 10_000

_INT32_MAX = 2**31 - 1


def transactional_id_error(transactional_id: str) -> ErrorCode:
    """INVALID_REQUEST for an empty id (as Kafka) or one longer than a wire string."""
    raw = transactional_id.encode("utf-8", "surrogatepass")
    if not raw or len(raw) > MAX_TRANSACTIONAL_ID_BYTES:
        return ErrorCode.INVALID_REQUEST
    return ErrorCode.NONE


def group_id_error(group_id: str) -> ErrorCode:
    if len(group_id.encode("utf-8", "surrogatepass")) > MAX_GROUP_ID_LENGTH:
        return ErrorCode.INVALID_GROUP_ID
    return ErrorCode.NONE


def partition_error(partition: TopicPartition) -> ErrorCode:
    """UNKNOWN_TOPIC_OR_PARTITION for a name no topic can have or a negative partition."""
    topic, index = partition
    try:
        validate_topic_name(topic)
    except InvalidTopic:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not 0 <= index <= _INT32_MAX:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NONE


def check_producer(
    meta: TxnMetadata | None, producer_id: int, producer_epoch: int, busy: bool
) -> ErrorCode:
    """The checks every request of a running transaction shares (AddPartitionsToTxn,
    AddOffsetsToTxn, TxnOffsetCommit): the id is known and the caller is its current
    producer, and the id is free to change."""
    if meta is None or meta.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if busy or meta.state in PREPARED:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    return ErrorCode.NONE


def end_txn_error(
    meta: TxnMetadata | None, producer_id: int, producer_epoch: int, commit: bool, busy: bool
) -> ErrorCode | None:
    """EndTxn's answer when no completion is to be started, or None when ``meta`` is an
    Ongoing transaction that this request ends. A retry of the decision that completed
    (or is completing) is NONE (or CONCURRENT_TRANSACTIONS); the other decision, or no
    transaction at all, is INVALID_TXN_STATE."""
    if meta is None or meta.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if busy:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    state = meta.state
    if state is TxnState.ONGOING:
        return None
    same = commit == (state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT))
    if state in PREPARED:
        return ErrorCode.CONCURRENT_TRANSACTIONS if same else ErrorCode.INVALID_TXN_STATE
    if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) and same:
        return ErrorCode.NONE
    return ErrorCode.INVALID_TXN_STATE


#: :func:`bumped_end_txn_error`'s answer for a retry of an EndTxn v5 that has completed.
BUMPED_END_RETRY = "retry"


def bumped_end_txn_error(
    meta: TxnMetadata | None, producer_id: int, producer_epoch: int, commit: bool, busy: bool
) -> ErrorCode | str | None:
    """EndTxn v5's (KIP-890 part 2) answer when no completion is to be started, or None
    when this request ends the transaction (bumping the epoch). The epoch was bumped by
    the attempt that ended it, so a retry comes with the epoch before
    (``last_producer_epoch``), and after a rotation with the id before: a retry of the
    decision that completed is :data:`BUMPED_END_RETRY` (answered with the current id
    and epoch), of one still completing CONCURRENT_TRANSACTIONS. With the current epoch,
    an Ongoing transaction ends; an abort with nothing ongoing is allowed (an empty
    transaction, as Kafka allows it from v5), a commit is INVALID_TXN_STATE."""
    if meta is None:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    state = meta.state
    ended = state in PREPARED or state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
    known_id = producer_id == meta.producer_id or (
        meta.last_producer_id != -1 and producer_id == meta.last_producer_id
    )
    if not known_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if busy:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if ended and producer_epoch == meta.last_producer_epoch != -1:
        if commit != (state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)):
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.CONCURRENT_TRANSACTIONS if state in PREPARED else BUMPED_END_RETRY
    if producer_id != meta.producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch != meta.producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if state is TxnState.ONGOING:
        return None
    if state in PREPARED:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if not commit and state in (
        TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT
    ):
        return None
    return ErrorCode.INVALID_TXN_STATE


def too_many_offsets(
    offsets: Mapping[str, Mapping[TopicPartition, object]],
    group_id: str,
    new: Iterable[TopicPartition],
) -> bool:
    """True if adding ``new`` offsets to ``group_id`` would pass :data:`MAX_OFFSETS_PER_TXN`."""
    current = offsets.get(group_id, {})
    added = sum(1 for key in set(new) if key not in current)
    return sum(len(e) for e in offsets.values()) + added > MAX_OFFSETS_PER_TXN
