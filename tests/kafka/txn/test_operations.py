"""The transaction coordinator's contract with the coordinator runtime: each operation
decides on the id's value and returns a result (records, answer, follow-ups) that the
runtime applies; an answer leaves only once its records are synced, a failed write
answers Kafka's retriable error and changes nothing, answers leave in order and
changes of several ids share one sync; EndTxn keeps its two phases (PREPARE durable,
then markers, then COMPLETE durable, then the answer).

The decisions are pure (:mod:`brokerd.kafka.txn.operations`), checked first without
any I/O; then the coordinator on a real transaction log whose writes the test releases
one at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from brokerd.coordinator_runtime import ParkedRequest, Release
from brokerd.errors import StorageError
from brokerd.kafka.errors import ErrorCode as C
from brokerd.kafka.txn import operations as ops
from brokerd.kafka.txn.state import TxnMetadata, TxnState
from brokerd.kafka.txn.table import Forget
from brokerd.kafka.txn.types import EndTxnResult, InitProducerIdResult

from tests.kafka.txn.test_coordinator import P0, P1, TID, CoordinatorTestCase

NOW = 1_700_000_000_000


def ongoing(epoch: int = 3) -> TxnMetadata:
    meta = TxnMetadata(TID, 1000, epoch, 60_000, last_update_ms=NOW)
    return meta.add_partitions([P0], NOW)


class DecisionTests(SynchronousTestCase):
    """The pure decisions: records and answers from a value, nothing written."""

    def test_add_partitions_writes_the_new_value_and_fails_retriably(self) -> None:
        meta = ongoing()
        r = ops.add_partitions(meta, [P1], NOW + 5)
        (new,) = r.records
        assert isinstance(new, TxnMetadata)
        self.assertEqual(new.partitions, frozenset({P0, P1}))
        self.assertEqual(r.answer, {P1: C.NONE})
        self.assertEqual(r.if_failed, {P1: C.COORDINATOR_NOT_AVAILABLE})
        self.assertEqual(meta.partitions, frozenset({P0}))  # the value given is untouched

    def test_end_txn_parks_the_caller_with_the_completion_as_follow_up(self) -> None:
        r = ops.end_txn(ongoing(), True, NOW)
        (prepared,) = r.records
        assert isinstance(prepared, TxnMetadata)
        self.assertIs(prepared.state, TxnState.PREPARE_COMMIT)
        self.assertIsInstance(r.answer, ParkedRequest)
        self.assertEqual(r.follow_ups, (ops.Complete(prepared, r.answer, ops.EndAnswer.CODE),))
        self.assertEqual(r.if_failed, C.COORDINATOR_NOT_AVAILABLE)

    def test_completion_logs_complete_and_releases_the_caller(self) -> None:
        prepared = ongoing().prepare(False, NOW)
        to = ParkedRequest(TID)
        r = ops.completed(ops.Complete(prepared, to), NOW + 1, None)
        (done,) = r.records
        assert isinstance(done, TxnMetadata)
        self.assertIs(done.state, TxnState.COMPLETE_ABORT)
        self.assertEqual(r.released, (Release(to, C.NONE, C.CONCURRENT_TRANSACTIONS),))
        failed = ops.not_completed(ops.Complete(prepared, to))
        self.assertEqual(failed.records, ())
        self.assertEqual(failed.released, (Release(to, C.CONCURRENT_TRANSACTIONS,
                                                   C.CONCURRENT_TRANSACTIONS),))

    def test_bumped_end_that_exhausts_the_epoch_rotates_in_the_same_write(self) -> None:
        meta = ongoing(epoch=32765)
        r = ops.end_txn_bumping(meta, True, NOW)
        (follow,) = r.follow_ups
        assert isinstance(follow, ops.Complete)
        done = ops.completed(follow, NOW + 1, 2000)
        states = [(m.producer_id, m.producer_epoch) for m in done.records
                  if isinstance(m, TxnMetadata)]
        self.assertEqual(states[-1], (2000, 0))
        (release,) = done.released
        self.assertEqual(release.answer, EndTxnResult(C.NONE, 2000, 0))

    def test_init_on_an_ongoing_transaction_aborts_it_and_answers_retry(self) -> None:
        r = ops.init_producer_id(ongoing(), TID, 60_000, None, -1, NOW, None)
        (aborting,) = r.records
        assert isinstance(aborting, TxnMetadata)
        self.assertIs(aborting.state, TxnState.PREPARE_ABORT)
        self.assertEqual(aborting.producer_epoch, 4)  # fenced
        (follow,) = r.follow_ups
        assert isinstance(follow, ops.Complete)
        self.assertIs(follow.answer, ops.EndAnswer.RETRY)
        retry = InitProducerIdResult(C.CONCURRENT_TRANSACTIONS)
        self.assertEqual(r.if_failed, retry)

    def test_expire_writes_a_tombstone(self) -> None:
        meta = ongoing().prepare(True, NOW).complete(NOW)
        self.assertEqual(ops.expire(meta, NOW).records, (Forget(TID),))


class RuntimeContractTests(CoordinatorTestCase):
    """The coordinator applying its decisions through the runtime; the transaction
    log's writes wait for the test."""

    def setUp(self) -> None:
        self.writes: list[tuple[Deferred[Any], Callable[[], Any]]] = []
        self.fail_next = False
        super().setUp()

    def run_blocking(self, f: Callable[..., Any], *args: Any, **kw: Any) -> Deferred[Any]:
        if getattr(f, "__name__", "") != "write":
            return defer.maybeDeferred(f, *args, **kw)
        d: Deferred[Any] = Deferred()
        self.writes.append((d, lambda: f(*args, **kw)))
        return d

    def sync(self, *, fail: bool = False) -> None:
        """Run the next transaction log write (and its fsync), or fail it."""
        d, job = self.writes.pop(0)
        if fail:
            d.errback(StorageError("No space left on device"))
        else:
            defer.maybeDeferred(job).chainDeferred(d)

    def begun(self, tid: str = TID) -> InitProducerIdResult:
        d = self.coordinator.init_producer_id(tid, 60_000)
        self.sync()
        r = self.successResultOf(d)
        self.assertEqual(r.error, C.NONE)
        return r

    def test_an_answer_is_not_released_before_its_sync(self) -> None:
        d = self.coordinator.init_producer_id(TID, 60_000)
        self.assertNoResult(d)
        self.assertEqual(self.stored_all(), {})
        self.assertEqual(self.state(), "")  # memory holds nothing before it is durable
        self.sync()
        r = self.successResultOf(d)
        self.assertEqual((r.error, r.producer_epoch), (C.NONE, 0))
        self.assertEqual(self.stored().producer_id, r.producer_id)
        added = self.coordinator.add_partitions(TID, r.producer_id, 0, [P0])
        self.assertNoResult(added)
        # Not yet durable: a produce to it is refused, the id is busy.
        self.assertEqual(
            self.successResultOf(self.coordinator.add_offsets(TID, r.producer_id, 0, "g")),
            C.CONCURRENT_TRANSACTIONS,
        )
        self.sync()
        self.assertEqual(self.successResultOf(added), {P0: C.NONE})
        self.assertEqual(self.stored().state, "Ongoing")

    def test_a_failed_write_answers_kafkas_error_and_changes_no_state(self) -> None:
        r = self.begun()
        before = self.stored()
        d = self.coordinator.add_partitions(TID, r.producer_id, r.producer_epoch, [P0])
        self.sync(fail=True)
        self.assertEqual(self.successResultOf(d), {P0: C.COORDINATOR_NOT_AVAILABLE})
        self.assertEqual(self.stored(), before)
        self.assertEqual(self.state(), "Empty")
        self.assertEqual(
            self.coordinator.verify_partitions(TID, r.producer_id, r.producer_epoch, [P0]),
            {P0: C.INVALID_TXN_STATE},
        )
        # The id is free again and the retry succeeds.
        d = self.coordinator.add_partitions(TID, r.producer_id, r.producer_epoch, [P0])
        self.sync()
        self.assertEqual(self.successResultOf(d), {P0: C.NONE})

    def test_a_failed_prepare_writes_no_marker_and_answers_retriably(self) -> None:
        r = self.begun()
        d = self.coordinator.add_partitions(TID, r.producer_id, r.producer_epoch, [P0])
        self.sync()
        self.successResultOf(d)
        end = self.coordinator.end_txn(TID, r.producer_id, r.producer_epoch, True)
        self.sync(fail=True)
        self.assertEqual(self.successResultOf(end), C.COORDINATOR_NOT_AVAILABLE)
        self.assertEqual(self.core.markers, [])
        self.assertEqual(self.state(), "Ongoing")

    def test_end_txn_prepare_durable_then_markers_then_complete_then_answer(self) -> None:
        r = self.begun()
        d = self.coordinator.add_partitions(TID, r.producer_id, r.producer_epoch, [P0])
        self.sync()
        self.successResultOf(d)
        end = self.coordinator.end_txn(TID, r.producer_id, r.producer_epoch, True)
        self.assertEqual(self.core.markers, [])  # PREPARE not durable yet
        self.sync()
        self.assertEqual(self.stored().state, "PrepareCommit")
        self.assertEqual(self.core.markers, [((P0,), r.producer_id, 0, True)])
        self.assertNoResult(end)  # COMPLETE not durable yet
        self.assertEqual(self.state(), "PrepareCommit")
        self.sync()
        self.assertEqual(self.stored().state, "CompleteCommit")
        self.assertEqual(self.successResultOf(end), C.NONE)

    def test_changes_of_several_ids_share_one_sync_and_answer_in_order(self) -> None:
        order: list[str] = []
        first = self.coordinator.init_producer_id("a", 60_000)
        rest = [self.coordinator.init_producer_id(t, 60_000) for t in ("b", "c", "d")]
        for tid, d in zip("abcd", [first, *rest], strict=True):
            d.addCallback(lambda _, tid=tid: order.append(tid))
        self.assertEqual(len(self.writes), 1)  # b, c and d wait for the next write
        self.sync()
        self.assertEqual(order, ["a"])
        self.assertEqual(len(self.writes), 1)
        self.sync()
        self.assertEqual(order, ["a", "b", "c", "d"])
        self.assertEqual(set(self.stored_all()), {"a", "b", "c", "d"})
