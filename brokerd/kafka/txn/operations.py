# -*- test-case-name: tests.kafka.txn.test_operations -*-
"""The transaction coordinator's decisions: each operation, given an id's current
value (and the time, and a fresh producer id when it needs one), returns a
:class:`~brokerd.coordinator_runtime.CoordinatorResult` of the records to write and
the answer to give, and the answer for when the write fails (Kafka's retriable error:
the state stays as it was, since the table installs records only once durable).

A decision that ends a transaction writes the Prepare* value and parks the caller
(:class:`~brokerd.coordinator_runtime.ParkedRequest`); its follow-up,
:class:`Complete`, names the durable Prepare* value to complete and how to answer the
caller once it is done. The completion's own result (:func:`completed`,
:func:`not_completed`) writes the Complete* value and releases the parked answer. The
two phases stay as Kafka has them: PREPARE durable, then markers, then COMPLETE.

Pure: no I/O, no clock, no Deferreds. What it does not do: the checks that answer
before any decision (``checks.py``), write markers or hand offsets over
(``completion.py``), or run anything (``coordinator.py`` hands the results to the
coordinator runtime).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import TypeVar

import attrs

from brokerd.coordinator_runtime import CoordinatorResult, ParkedRequest, Release
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.txn.state import (
    NO_EPOCH,
    PREPARED,
    TxnMetadata,
    TxnState,
    bump_epoch,
    epoch_exhausted,
)
from brokerd.kafka.txn.table import Forget, TxnRecord
from brokerd.kafka.txn.types import (
    EndTxnResult,
    InitProducerIdResult,
    TopicPartition,
    TxnOffset,
)

__all__ = [
    "Complete",
    "EndAnswer",
    "TxnResult",
    "add_offsets",
    "add_partitions",
    "completed",
    "end_txn",
    "end_txn_bumping",
    "expire",
    "fence_and_abort",
    "init_producer_id",
    "needs_producer_id",
    "not_completed",
    "rotate_ended",
    "txn_offset_commit",
]

A = TypeVar("A")
TxnResult = CoordinatorResult[TxnRecord, A]
_C = ErrorCode


class EndAnswer(enum.Enum):
    """How the caller parked by a Prepare* decision is answered once it completes."""

    #: InitProducerId that aborted the open transaction: CONCURRENT_TRANSACTIONS either
    #: way (the client retries and gets the epoch after the abort's).
    RETRY = "retry"
    #: EndTxn before v5: NONE once complete, CONCURRENT_TRANSACTIONS if not yet.
    CODE = "code"
    #: EndTxn v5: the producer id and epoch the next transaction uses.
    BUMPED = "bumped"


@attrs.frozen
class Complete:
    """Follow-up of a durable Prepare* value: write its markers, hand its offsets over
    (on commit), log Complete*, then answer ``to`` (None: a timer's completion)."""

    prepared: TxnMetadata
    to: ParkedRequest | None = None
    answer: EndAnswer = EndAnswer.CODE


def _done_answers(follow: Complete, final: TxnMetadata | None) -> tuple[object, object]:
    """(answer once complete, answer if not) for ``follow``'s caller; ``final`` is the
    id's value after completion (None: the rotation it needed could not happen)."""
    if follow.answer is EndAnswer.RETRY:
        retry = InitProducerIdResult(_C.CONCURRENT_TRANSACTIONS)
        return retry, retry
    if follow.answer is EndAnswer.CODE:
        return _C.NONE, _C.CONCURRENT_TRANSACTIONS
    ok = (EndTxnResult(_C.COORDINATOR_NOT_AVAILABLE) if final is None
          else EndTxnResult(_C.NONE, final.producer_id, final.producer_epoch))
    return ok, EndTxnResult(_C.CONCURRENT_TRANSACTIONS)


def _park(
    prepared: TxnMetadata, answer: EndAnswer, if_failed: A
) -> CoordinatorResult[TxnRecord, object]:
    to = ParkedRequest(prepared.transactional_id)
    return CoordinatorResult(
        (prepared,), to, if_failed=if_failed, follow_ups=(Complete(prepared, to, answer),)
    )


# -- InitProducerId ---------------------------------------------------------------------


def needs_producer_id(meta: TxnMetadata | None) -> bool:
    """Whether :func:`init_producer_id` may need a fresh producer id (allocated before
    deciding: a new id, or an exhausted epoch to rotate)."""
    return meta is None or epoch_exhausted(meta.producer_epoch)


def init_producer_id(
    meta: TxnMetadata | None,
    tid: str,
    timeout_ms: int,
    expected_pid: int | None,
    expected_epoch: int,
    now: int,
    fresh_pid: int | None,
) -> CoordinatorResult[TxnRecord, object]:
    """InitProducerId with a transactional id (checks of the request already passed);
    ``fresh_pid`` is the allocated id when :func:`needs_producer_id` said so (None: the
    allocation failed)."""
    unavailable = InitProducerIdResult(_C.COORDINATOR_NOT_AVAILABLE)
    if meta is None:
        if fresh_pid is None:
            return CoordinatorResult((), unavailable)
        meta = TxnMetadata(tid, fresh_pid, NO_EPOCH, timeout_ms, last_update_ms=now)
        fresh_pid = None
    if expected_pid is not None and not (
        meta.producer_epoch == NO_EPOCH
        or expected_pid == meta.producer_id
        or (expected_pid == meta.last_producer_id and epoch_exhausted(expected_epoch))
    ):
        return CoordinatorResult((), InitProducerIdResult(_C.PRODUCER_FENCED))
    if meta.state in PREPARED:
        return CoordinatorResult((), InitProducerIdResult(_C.CONCURRENT_TRANSACTIONS))
    if meta.state is TxnState.ONGOING:
        # Abort what the previous holder left open, with its epoch bumped; the caller
        # is answered once the abort completed (or not) and retries.
        aborting = meta.fence(now).prepare_fenced_abort(now)
        return _park(aborting, EndAnswer.RETRY,
                     InitProducerIdResult(_C.CONCURRENT_TRANSACTIONS))
    expected = None if expected_pid is None else expected_epoch
    if epoch_exhausted(meta.producer_epoch) and expected in (None, meta.producer_epoch):
        if fresh_pid is None:
            return CoordinatorResult((), unavailable)
        last_epoch = NO_EPOCH if expected is None else meta.producer_epoch
        new = meta.reinit(now, timeout_ms, fresh_pid, 0, meta.producer_id, last_epoch)
    else:
        bumped = bump_epoch(meta.producer_epoch, meta.last_producer_epoch, expected)
        if isinstance(bumped, ErrorCode):
            return CoordinatorResult((), InitProducerIdResult(bumped))
        epoch, last_epoch = bumped
        new = meta.reinit(
            now, timeout_ms, meta.producer_id, epoch, meta.last_producer_id, last_epoch
        )
    return CoordinatorResult(
        (new,), InitProducerIdResult(_C.NONE, new.producer_id, new.producer_epoch),
        if_failed=unavailable,
    )


# -- AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit ------------------------------


def add_partitions(
    meta: TxnMetadata, partitions: Sequence[TopicPartition], now: int
) -> TxnResult[dict[TopicPartition, ErrorCode]]:
    return CoordinatorResult(
        (meta.add_partitions(partitions, now),),
        dict.fromkeys(partitions, _C.NONE),
        if_failed=dict.fromkeys(partitions, _C.COORDINATOR_NOT_AVAILABLE),
    )


def add_offsets(meta: TxnMetadata, group_id: str, now: int) -> TxnResult[ErrorCode]:
    return CoordinatorResult(
        (meta.add_group(group_id, now),), _C.NONE, if_failed=_C.COORDINATOR_NOT_AVAILABLE
    )


def txn_offset_commit(
    meta: TxnMetadata,
    group_id: str,
    accepted: Mapping[TopicPartition, TxnOffset],
    results: Mapping[TopicPartition, ErrorCode],
    now: int,
) -> TxnResult[dict[TopicPartition, ErrorCode]]:
    """Remember ``accepted`` offsets in the transaction (joining the group to it if
    AddOffsetsToTxn did not: TxnOffsetCommit v5); ``results`` holds the per-partition
    refusals already decided."""
    base = meta
    if base.state is not TxnState.ONGOING or group_id not in base.offsets:
        base = base.add_group(group_id, now)
    failed = dict(results)
    failed.update(dict.fromkeys(accepted, _C.COORDINATOR_NOT_AVAILABLE))
    return CoordinatorResult(
        (base.with_offsets(group_id, accepted, now),), dict(results), if_failed=failed
    )


# -- EndTxn -----------------------------------------------------------------------------


def end_txn(meta: TxnMetadata, commit: bool, now: int) -> CoordinatorResult[TxnRecord, object]:
    """EndTxn before v5: log the decision, park the caller until it is complete."""
    return _park(meta.prepare(commit, now), EndAnswer.CODE, _C.COORDINATOR_NOT_AVAILABLE)


def end_txn_bumping(
    meta: TxnMetadata, commit: bool, now: int
) -> CoordinatorResult[TxnRecord, object]:
    """EndTxn v5: as :func:`end_txn` with the epoch bumped by the decision."""
    return _park(meta.prepare_bumped(commit, now), EndAnswer.BUMPED,
                 EndTxnResult(_C.COORDINATOR_NOT_AVAILABLE))


def rotate_ended(
    meta: TxnMetadata, now: int, fresh_pid: int | None
) -> TxnResult[EndTxnResult]:
    """The answer to an EndTxn v5 whose transaction is complete: its id and epoch, after
    moving an exhausted epoch to ``fresh_pid`` (None: allocation failed)."""
    if not epoch_exhausted(meta.producer_epoch):
        return CoordinatorResult((), EndTxnResult(_C.NONE, meta.producer_id, meta.producer_epoch))
    unavailable = EndTxnResult(_C.COORDINATOR_NOT_AVAILABLE)
    if fresh_pid is None:
        return CoordinatorResult((), unavailable)
    rotated = meta.rotated(fresh_pid, now)
    return CoordinatorResult(
        (rotated,), EndTxnResult(_C.NONE, rotated.producer_id, rotated.producer_epoch),
        if_failed=unavailable,
    )


# -- completion, timers -----------------------------------------------------------------


def completed(follow: Complete, now: int, fresh_pid: int | None) -> TxnResult[bool]:
    """Markers written and offsets handed over: log Complete* (and, for EndTxn v5 whose
    bump exhausted the epoch, the move to ``fresh_pid``), then answer the caller. The
    result's own answer says whether the completion is durable."""
    done = follow.prepared.complete(now)
    records: tuple[TxnRecord, ...] = (done,)
    final: TxnMetadata | None = done
    if follow.answer is EndAnswer.BUMPED and epoch_exhausted(done.producer_epoch):
        if fresh_pid is None:
            final = None  # complete all the same; the client's retry rotates
        else:
            final = done.rotated(fresh_pid, now)
            records += (final,)
    ok, not_yet = _done_answers(follow, final)
    released = () if follow.to is None else (Release(follow.to, ok, not_yet),)
    return CoordinatorResult(records, True, released, if_failed=False)


def not_completed(follow: Complete) -> TxnResult[bool]:
    """A completion step failed: the Prepare* value stays (retried on the timer) and
    the caller hears it is not complete yet."""
    _, not_yet = _done_answers(follow, None)
    released = () if follow.to is None else (Release(follow.to, not_yet, not_yet),)
    return CoordinatorResult((), False, released)


def fence_and_abort(meta: TxnMetadata, now: int) -> TxnResult[bool]:
    """A timed-out Ongoing transaction: abort it with the epoch bumped (its producer is
    fenced); completed as the follow-up."""
    aborting = meta.fence(now).prepare_fenced_abort(now)
    return CoordinatorResult((aborting,), True, if_failed=False,
                             follow_ups=(Complete(aborting),))


def expire(meta: TxnMetadata, now: int) -> CoordinatorResult[TxnRecord, bool]:
    """Forget an id idle past ``transactional.id.expiration.ms``."""
    meta.transition(TxnState.DEAD, now)  # checks that the table allows it
    return CoordinatorResult((Forget(meta.transactional_id),), True, if_failed=False)
