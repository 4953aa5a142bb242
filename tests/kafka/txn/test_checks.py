"""The transaction coordinator's request checks (:mod:`brokerd.kafka.txn.checks`): which
Kafka error a request gets, in Kafka's order, before anything is written."""

from __future__ import annotations

import attrs
import pytest

from brokerd.kafka.errors import ErrorCode as C
from brokerd.kafka.txn import checks
from brokerd.kafka.txn.state import TxnMetadata, TxnState
from brokerd.names import MAX_GROUP_ID_LENGTH
from brokerd.storage.stores.txn_log import MAX_TRANSACTIONAL_ID_BYTES

S = TxnState


def meta(state: TxnState = S.ONGOING, **changes: object) -> TxnMetadata:
    base = TxnMetadata("tid", 1000, 3, 60_000, state=state)
    return attrs.evolve(base, **changes)  # type: ignore[arg-type]


def test_ids_and_partitions_that_cannot_be() -> None:
    assert checks.transactional_id_error("tid") is C.NONE
    assert checks.transactional_id_error("") is C.INVALID_REQUEST
    assert checks.transactional_id_error("x" * (MAX_TRANSACTIONAL_ID_BYTES + 1)) is (
        C.INVALID_REQUEST)
    assert checks.group_id_error("g" * MAX_GROUP_ID_LENGTH) is C.NONE
    assert checks.group_id_error("g" * (MAX_GROUP_ID_LENGTH + 1)) is C.INVALID_GROUP_ID
    assert checks.partition_error(("t", 0)) is C.NONE
    assert checks.partition_error(("t", -1)) is C.UNKNOWN_TOPIC_OR_PARTITION
    assert checks.partition_error(("t", 2**31)) is C.UNKNOWN_TOPIC_OR_PARTITION
    assert checks.partition_error(("bad/name", 0)) is C.UNKNOWN_TOPIC_OR_PARTITION


def test_check_producer_in_kafkas_order() -> None:
    assert checks.check_producer(None, 1000, 3, False) is C.INVALID_PRODUCER_ID_MAPPING
    assert checks.check_producer(meta(), 999, 4, True) is C.INVALID_PRODUCER_ID_MAPPING
    assert checks.check_producer(meta(), 1000, 4, True) is C.PRODUCER_FENCED
    assert checks.check_producer(meta(), 1000, 3, True) is C.CONCURRENT_TRANSACTIONS
    assert checks.check_producer(meta(S.PREPARE_ABORT), 1000, 3, False) is (
        C.CONCURRENT_TRANSACTIONS)
    assert checks.check_producer(meta(), 1000, 3, False) is C.NONE


@pytest.mark.parametrize(("state", "commit", "expected"), [
    (S.ONGOING, True, None),
    (S.ONGOING, False, None),
    (S.PREPARE_COMMIT, True, C.CONCURRENT_TRANSACTIONS),
    (S.PREPARE_COMMIT, False, C.INVALID_TXN_STATE),
    (S.COMPLETE_COMMIT, True, C.NONE),
    (S.COMPLETE_ABORT, False, C.NONE),
    (S.COMPLETE_ABORT, True, C.INVALID_TXN_STATE),
    (S.EMPTY, False, C.INVALID_TXN_STATE),
])
def test_end_txn_by_state_and_decision(
    state: TxnState, commit: bool, expected: C | None
) -> None:
    assert checks.end_txn_error(meta(state), 1000, 3, commit, False) is expected


def test_end_txn_checks_the_producer_then_a_change_in_progress() -> None:
    assert checks.end_txn_error(None, 1000, 3, True, False) is C.INVALID_PRODUCER_ID_MAPPING
    assert checks.end_txn_error(meta(), 1000, 2, True, False) is C.PRODUCER_FENCED
    assert checks.end_txn_error(meta(), 1000, 3, True, True) is C.CONCURRENT_TRANSACTIONS


def test_bumped_end_txn_retries_and_empty_aborts() -> None:
    # The attempt that ended it bumped 3 -> 4; a retry comes with the epoch before.
    done = meta(S.COMPLETE_COMMIT, producer_epoch=4, last_producer_epoch=3)
    assert checks.bumped_end_txn_error(done, 1000, 3, True, False) == checks.BUMPED_END_RETRY
    assert checks.bumped_end_txn_error(done, 1000, 3, False, False) is C.INVALID_TXN_STATE
    completing = meta(S.PREPARE_COMMIT, producer_epoch=4, last_producer_epoch=3)
    assert checks.bumped_end_txn_error(completing, 1000, 3, True, False) is (
        C.CONCURRENT_TRANSACTIONS)
    # After a rotation the retry may come with the id before.
    rotated = meta(S.COMPLETE_ABORT, producer_id=2000, producer_epoch=0,
                   last_producer_id=1000, last_producer_epoch=3)
    assert checks.bumped_end_txn_error(rotated, 1000, 3, False, False) == (
        checks.BUMPED_END_RETRY)
    assert checks.bumped_end_txn_error(rotated, 1000, 5, False, False) is (
        C.INVALID_PRODUCER_ID_MAPPING)
    assert checks.bumped_end_txn_error(rotated, 3000, 0, False, False) is (
        C.INVALID_PRODUCER_ID_MAPPING)
    # With the current epoch: ongoing ends, an empty abort is allowed, a commit is not.
    assert checks.bumped_end_txn_error(meta(), 1000, 3, True, False) is None
    assert checks.bumped_end_txn_error(meta(S.EMPTY), 1000, 3, False, False) is None
    assert checks.bumped_end_txn_error(meta(S.EMPTY), 1000, 3, True, False) is (
        C.INVALID_TXN_STATE)
    assert checks.bumped_end_txn_error(meta(), 1000, 2, True, False) is C.PRODUCER_FENCED
    assert checks.bumped_end_txn_error(meta(), 1000, 3, True, True) is (
        C.CONCURRENT_TRANSACTIONS)
    assert checks.bumped_end_txn_error(None, 1000, 3, True, False) is (
        C.INVALID_PRODUCER_ID_MAPPING)


def test_too_many_offsets_counts_only_new_partitions_across_groups(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(checks, "MAX_OFFSETS_PER_TXN", 3)
    offsets = {"g1": {("t", 0): 1, ("t", 1): 1}, "g2": {("t", 0): 1}}
    assert not checks.too_many_offsets(offsets, "g1", [("t", 0), ("t", 1)])
    assert checks.too_many_offsets(offsets, "g1", [("t", 2)])
    assert not checks.too_many_offsets({"g1": {("t", 0): 1}}, "g2", [("t", 0), ("t", 0)])
