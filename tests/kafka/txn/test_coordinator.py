"""The transaction coordinator (brokerd.kafka.txn.coordinator) with a ``task.Clock``, a real
transaction log and offsets store on disk, the real group coordinator and producer-id
allocator, and a fake core (markers are recorded; a failing or slow disk is simulated)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any, TypeVar

from twisted.internet import defer, task
from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from brokerd.errors import InvalidProducerEpoch, InvalidTxnState, StorageError
from brokerd.kafka.errors import ErrorCode as C
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.txn.coordinator import TransactionCoordinator
from brokerd.kafka.txn.deps import OffsetEntry
from brokerd.kafka.txn.types import InitProducerIdResult, TxnOffset
from brokerd.storage.stores.offsets import OffsetStore
from brokerd.storage.stores.producer_ids import ProducerIdAllocator
from brokerd.storage.stores.txn_log import StoredTxn, TxnLog

from tests.deferreds import result_of
from tests.fake_core import FakeCore

T = TypeVar("T")
WALL0 = 1_700_000_000.0
TIMEOUT_MS = 60_000
TID = "tx-1"
P0, P1 = ("orders", 0), ("orders", 1)


class FailingGroups:
    """The real group coordinator whose offset hand-over can be made to fail."""

    def __init__(self, real: GroupCoordinator) -> None:
        self.real = real
        self.fail = False

    def commit_txn_offsets(
        self, group_id: str, offsets: list[OffsetEntry]
    ) -> Deferred[dict[tuple[str, int], int]]:
        if self.fail:
            return defer.succeed({(t, p): int(C.UNKNOWN_SERVER_ERROR) for t, p, *_ in offsets})
        return self.real.commit_txn_offsets(group_id, offsets)

    def check_txn_member(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> C:
        return self.real.check_txn_member(group_id, generation_id, member_id, group_instance_id)


class CoordinatorTestCase(SynchronousTestCase):
    def temp_path(self) -> str:
        """A fresh path in a private temporary directory removed after the test."""
        base = tempfile.mkdtemp(prefix="brokerd-txn-")
        self.addCleanup(shutil.rmtree, base, True)
        return os.path.join(base, "d")

    def setUp(self) -> None:
        self.dir = self.temp_path()
        os.makedirs(self.dir)
        self.clock = task.Clock()
        self.core = FakeCore()
        self.offsets = OffsetStore.open(os.path.join(self.dir, "consumer-offsets.log"))
        self.addCleanup(self.offsets.close)
        self.group_coordinator = GroupCoordinator(
            clock=self.clock, offsets=self.offsets, run_blocking=defer.maybeDeferred
        )
        self.groups = FailingGroups(self.group_coordinator)
        self.pids = ProducerIdAllocator(self.dir)
        self.addCleanup(self.pids.close)
        self.log_fails = False
        self.coordinator = self.make()

    def wall(self) -> float:
        return WALL0 + self.clock.seconds()

    def run_blocking(self, f: Callable[..., Any], *args: Any, **kw: Any) -> Deferred[Any]:
        if self.log_fails and getattr(f, "__name__", "") in ("write", "write_records"):
            return defer.fail(StorageError("journal disk full"))
        return defer.maybeDeferred(f, *args, **kw)

    def make(self, **kw: Any) -> TransactionCoordinator:
        self.txn_log = TxnLog.open(self.dir)
        self.addCleanup(self.txn_log.close)
        coordinator = TransactionCoordinator(
            clock=self.clock,
            log=self.txn_log,
            run_blocking=self.run_blocking,
            allocate_producer_id=self.pids.next_id,
            core=self.core,
            groups=self.groups,
            wall_clock=self.wall,
            **kw,
        )
        coordinator.startService()
        self.addCleanup(coordinator.stopService)
        return coordinator

    def restart(self, **kw: Any) -> TransactionCoordinator:
        result_of(self.coordinator.stopService())
        self.txn_log.close()
        self.coordinator = self.make(**kw)
        return self.coordinator

    def stored(self, tid: str = TID) -> StoredTxn:
        return self.stored_all()[tid]

    def stored_all(self) -> dict[str, StoredTxn]:
        copy = TxnLog.open(self.mktemp_copy())
        try:
            return copy.transactions()
        finally:
            copy.close()

    def mktemp_copy(self) -> str:
        """A copy of the journal file, read as a restart would read it."""
        src = os.path.join(self.dir, "transactions.log")
        dst = self.temp_path()
        with open(src, "rb") as f, open(dst, "wb") as g:
            g.write(f.read())
        return dst

    # -- shorthands -----------------------------------------------------------------------

    def init(self, tid: str = TID, timeout: int = TIMEOUT_MS, **kw: int) -> InitProducerIdResult:
        return result_of(self.coordinator.init_producer_id(tid, timeout, **kw))

    def begin(self, *partitions: tuple[str, int], tid: str = TID) -> InitProducerIdResult:
        r = self.init(tid)
        self.assertEqual(r.error, C.NONE)
        if partitions:
            codes = result_of(
                self.coordinator.add_partitions(tid, r.producer_id, r.producer_epoch, partitions)
            )
            self.assertEqual(codes, dict.fromkeys(partitions, C.NONE))
        return r

    def add_offsets(self, r: InitProducerIdResult, group: str = "g", tid: str = TID) -> C:
        return result_of(self.coordinator.add_offsets(tid, r.producer_id, r.producer_epoch, group))

    def commit_offsets(
        self, r: InitProducerIdResult, offsets: dict[tuple[str, int], TxnOffset], **kw: Any
    ) -> dict[tuple[str, int], C]:
        return result_of(
            self.coordinator.txn_offset_commit(
                TID, "g", r.producer_id, r.producer_epoch, offsets, **kw
            )
        )

    def end(self, r: InitProducerIdResult, commit: bool, tid: str = TID) -> C:
        return result_of(self.coordinator.end_txn(tid, r.producer_id, r.producer_epoch, commit))

    def state(self, tid: str = TID) -> str:
        return self.coordinator.describe([tid])[0].state

    def committed(self) -> dict[tuple[str, int], tuple[int, int, str | None]]:
        return self.offsets.committed("g")


class InitProducerIdTests(CoordinatorTestCase):
    def test_new_id_gets_a_producer_id_and_epoch_0_durably(self) -> None:
        r = self.init()
        self.assertEqual((r.error, r.producer_epoch), (C.NONE, 0))
        self.assertGreaterEqual(r.producer_id, 0)
        stored = self.stored()
        self.assertEqual((stored.producer_id, stored.producer_epoch), (r.producer_id, 0))
        self.assertEqual((stored.state, stored.timeout_ms), ("Empty", TIMEOUT_MS))

    def test_ids_get_distinct_producer_ids(self) -> None:
        self.assertNotEqual(self.init("a").producer_id, self.init("b").producer_id)

    def test_reinit_bumps_the_epoch_and_fences_the_previous_holder(self) -> None:
        old = self.begin(P0)
        self.assertEqual(self.end(old, True), C.NONE)
        new = self.init()
        self.assertEqual((new.producer_id, new.producer_epoch), (old.producer_id, 1))
        codes = result_of(self.coordinator.add_partitions(TID, old.producer_id, 0, [P1]))
        self.assertEqual(codes, {P1: C.PRODUCER_FENCED})
        self.assertEqual(self.end(old, True), C.PRODUCER_FENCED)

    def test_bad_requests(self) -> None:
        self.assertEqual(self.init("").error, C.INVALID_REQUEST)
        self.assertEqual(self.init("x" * 40_000).error, C.INVALID_REQUEST)
        self.assertEqual(self.init(timeout=0).error, C.INVALID_TRANSACTION_TIMEOUT)
        self.assertEqual(self.init(timeout=900_001).error, C.INVALID_TRANSACTION_TIMEOUT)
        self.assertEqual(self.init(timeout=900_000).error, C.NONE)

    def test_configured_max_timeout(self) -> None:
        self.restart(max_timeout_ms=1000)
        self.assertEqual(self.init(timeout=1001).error, C.INVALID_TRANSACTION_TIMEOUT)

    def test_epoch_exhaustion_rotates_the_producer_id(self) -> None:
        r = self.init()
        self.txn_log.write([self.with_epoch(self.stored(), 32766)])
        self.restart()
        new = self.init()
        self.assertEqual(new.error, C.NONE)
        self.assertNotEqual(new.producer_id, r.producer_id)
        self.assertEqual(new.producer_epoch, 0)
        stored = self.stored()
        self.assertEqual((stored.last_producer_id, stored.last_producer_epoch), (r.producer_id, -1))

    @staticmethod
    def with_epoch(stored: StoredTxn, epoch: int) -> StoredTxn:
        import attrs

        return attrs.evolve(stored, producer_epoch=epoch)

    def test_kip360_current_id_and_epoch(self) -> None:
        r = self.init()
        bumped = self.init(producer_id=r.producer_id, producer_epoch=0)
        self.assertEqual((bumped.error, bumped.producer_epoch), (C.NONE, 1))
        # The answer was lost: the retry with the previous epoch gets the same epoch.
        again = self.init(producer_id=r.producer_id, producer_epoch=0)
        self.assertEqual((again.error, again.producer_epoch), (C.NONE, 1))
        fenced = self.init(producer_id=r.producer_id, producer_epoch=7)
        self.assertEqual(fenced.error, C.PRODUCER_FENCED)
        other = self.init(producer_id=r.producer_id + 100, producer_epoch=1)
        self.assertEqual(other.error, C.PRODUCER_FENCED)

    def test_kip360_new_id_with_producer_given(self) -> None:
        r = self.init(producer_id=5, producer_epoch=3)
        self.assertEqual((r.error, r.producer_epoch), (C.NONE, 0))

    def test_init_on_an_ongoing_transaction_aborts_it_fenced(self) -> None:
        old = self.begin(P0, P1)
        r = self.init()
        self.assertEqual(r.error, C.CONCURRENT_TRANSACTIONS)
        self.assertEqual(self.core.markers, [((P0, P1), old.producer_id, 1, False)])
        self.assertEqual(self.state(), "CompleteAbort")
        retry = self.init()
        self.assertEqual((retry.error, retry.producer_epoch), (C.NONE, 2))
        self.assertEqual(self.end(old, True), C.PRODUCER_FENCED)

    def test_journal_failure_answers_retriably_and_keeps_nothing(self) -> None:
        self.log_fails = True
        self.assertEqual(self.init().error, C.COORDINATOR_NOT_AVAILABLE)
        self.assertEqual(self.coordinator.describe([TID])[0].error, C.TRANSACTIONAL_ID_NOT_FOUND)
        self.log_fails = False
        self.assertEqual(self.init().producer_epoch, 0)


class TransactionTests(CoordinatorTestCase):
    def test_add_partitions_checks(self) -> None:
        r = self.init()
        pid, epoch = r.producer_id, r.producer_epoch
        add = self.coordinator.add_partitions
        self.assertEqual(
            result_of(add("nope", pid, epoch, [P0])), {P0: C.INVALID_PRODUCER_ID_MAPPING}
        )
        self.assertEqual(
            result_of(add(TID, pid + 1, epoch, [P0])), {P0: C.INVALID_PRODUCER_ID_MAPPING}
        )
        self.assertEqual(result_of(add(TID, pid, epoch + 1, [P0])), {P0: C.PRODUCER_FENCED})
        self.assertEqual(result_of(add("", pid, epoch, [P0])), {P0: C.INVALID_REQUEST})
        bad = result_of(add(TID, pid, epoch, [P0, ("bad/topic", 0), ("t", -1)]))
        self.assertEqual(bad[("bad/topic", 0)], C.UNKNOWN_TOPIC_OR_PARTITION)
        self.assertEqual(bad[("t", -1)], C.UNKNOWN_TOPIC_OR_PARTITION)
        self.assertEqual(self.state(), "Empty")  # nothing was added
        self.assertEqual(result_of(add(TID, pid, epoch, [P0])), {P0: C.NONE})
        self.assertEqual(result_of(add(TID, pid, epoch, [P0, P1])), {P0: C.NONE, P1: C.NONE})
        d = self.coordinator.describe([TID])[0]
        self.assertEqual((d.state, d.partitions), ("Ongoing", (P0, P1)))
        self.assertEqual(d.start_time_ms, int(WALL0 * 1000))
        self.assertEqual(self.stored().partitions, (P0, P1))

    def test_verifier(self) -> None:
        r = self.begin(P0)
        assert self.core.verifier is not None
        verify = self.core.verifier
        verify("orders", 0, r.producer_id, r.producer_epoch)
        self.assertRaises(InvalidTxnState, verify, "orders", 1, r.producer_id, 0)
        self.assertRaises(InvalidTxnState, verify, "orders", 0, r.producer_id + 9, 0)
        self.assertRaises(InvalidTxnState, verify, "orders", 0, r.producer_id, 1)
        self.assertEqual(self.end(r, True), C.NONE)
        # Committed: the partition is no longer part of an ongoing transaction.
        self.assertRaises(InvalidTxnState, verify, "orders", 0, r.producer_id, 0)
        self.init()
        self.assertRaises(InvalidProducerEpoch, verify, "orders", 0, r.producer_id, 0)

    def test_commit_writes_markers_then_hands_offsets_over(self) -> None:
        r = self.begin(P0, P1)
        self.assertEqual(self.add_offsets(r), C.NONE)
        codes = self.commit_offsets(r, {("in", 0): TxnOffset(42, 3, "m"), ("in", 1): TxnOffset(7)})
        self.assertEqual(codes, {("in", 0): C.NONE, ("in", 1): C.NONE})
        self.assertEqual(self.committed(), {})  # not before the commit
        self.assertEqual(self.stored().offsets[0][0], "g")
        self.assertEqual(self.end(r, True), C.NONE)
        self.assertEqual(self.core.markers, [((P0, P1), r.producer_id, 0, True)])
        self.assertEqual(self.committed(), {("in", 0): (42, 3, "m"), ("in", 1): (7, -1, None)})
        self.assertEqual(self.state(), "CompleteCommit")
        stored = self.stored()
        self.assertEqual(
            (stored.state, stored.partitions, stored.offsets), ("CompleteCommit", (), ())
        )
        # A retry of the same decision is answered; the other one is not.
        self.assertEqual(self.end(r, True), C.NONE)
        self.assertEqual(self.end(r, False), C.INVALID_TXN_STATE)
        self.assertEqual(len(self.core.markers), 1)

    def test_abort_drops_offsets(self) -> None:
        r = self.begin(P0)
        self.add_offsets(r)
        self.commit_offsets(r, {("in", 0): TxnOffset(42)})
        self.assertEqual(self.end(r, False), C.NONE)
        self.assertEqual(self.core.markers, [((P0,), r.producer_id, 0, False)])
        self.assertEqual(self.committed(), {})
        self.assertEqual(self.state(), "CompleteAbort")
        self.assertEqual(self.end(r, False), C.NONE)
        self.assertEqual(self.end(r, True), C.INVALID_TXN_STATE)

    def test_next_transaction_after_complete(self) -> None:
        r = self.begin(P0)
        self.end(r, True)
        codes = result_of(self.coordinator.add_partitions(TID, r.producer_id, 0, [P1]))
        self.assertEqual(codes, {P1: C.NONE})
        self.assertEqual(self.coordinator.describe([TID])[0].partitions, (P1,))
        self.assertEqual(self.end(r, False), C.NONE)
        self.assertEqual(self.core.markers[-1], ((P1,), r.producer_id, 0, False))

    def test_end_txn_without_a_transaction(self) -> None:
        r = self.init()
        self.assertEqual(self.end(r, True), C.INVALID_TXN_STATE)
        self.assertEqual(self.end(r, False), C.INVALID_TXN_STATE)
        self.assertEqual(
            result_of(self.coordinator.end_txn("x", 1, 0, True)), C.INVALID_PRODUCER_ID_MAPPING
        )

    def test_offsets_only_transaction(self) -> None:
        r = self.init()
        self.assertEqual(self.add_offsets(r), C.NONE)
        self.assertEqual(self.state(), "Ongoing")
        self.commit_offsets(r, {("in", 0): TxnOffset(5)})
        self.assertEqual(self.end(r, True), C.NONE)
        self.assertEqual(self.core.markers, [])  # no partition: no marker
        self.assertEqual(self.committed(), {("in", 0): (5, -1, None)})

    def test_txn_offset_commit_checks(self) -> None:
        r = self.begin(P0)
        offsets = {("in", 0): TxnOffset(5)}
        self.assertEqual(self.commit_offsets(r, offsets), {("in", 0): C.INVALID_TXN_STATE})
        self.add_offsets(r)
        self.assertEqual(
            self.commit_offsets(r, offsets, member_id="ghost"), {("in", 0): C.UNKNOWN_MEMBER_ID}
        )
        self.assertEqual(
            self.commit_offsets(r, offsets, generation_id=3), {("in", 0): C.ILLEGAL_GENERATION}
        )
        self.assertEqual(self.commit_offsets(r, offsets, generation_id=0), {("in", 0): C.NONE})
        mixed = self.commit_offsets(
            r, {("in", 1): TxnOffset(1, metadata="x" * 5000), ("in", 2): TxnOffset(2)}
        )
        self.assertEqual(mixed, {("in", 1): C.OFFSET_METADATA_TOO_LARGE, ("in", 2): C.NONE})
        stale = result_of(self.coordinator.txn_offset_commit(TID, "g", r.producer_id, 9, offsets))
        self.assertEqual(stale, {("in", 0): C.PRODUCER_FENCED})
        self.assertEqual(self.end(r, True), C.NONE)
        self.assertEqual(self.committed(), {("in", 0): (5, -1, None), ("in", 2): (2, -1, None)})

    def test_txn_offset_commit_member_of_a_real_group(self) -> None:
        d = self.group_coordinator.join(
            "g", "", client_id="c", client_host="h", session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000, protocol_type="consumer",
            protocols=[("range", b"")], group_instance_id=None, require_known_member_id=False,
        )  # fmt: skip
        self.clock.advance(1)  # the initial rebalance delay
        join = result_of(d)
        r = self.begin(P0)
        self.add_offsets(r)
        offsets = {("in", 0): TxnOffset(5)}
        ok = self.commit_offsets(
            r, offsets, generation_id=join.generation_id, member_id=join.member_id
        )
        self.assertEqual(ok, {("in", 0): C.NONE})
        stale = self.commit_offsets(
            r, offsets, generation_id=join.generation_id + 1, member_id=join.member_id
        )
        self.assertEqual(stale, {("in", 0): C.ILLEGAL_GENERATION})

    def test_add_offsets_bad_group(self) -> None:
        r = self.init()
        self.assertEqual(self.add_offsets(r, group="g" * 300), C.INVALID_GROUP_ID)


class ConcurrencyTests(CoordinatorTestCase):
    def test_requests_while_completing_get_concurrent_transactions(self) -> None:
        r = self.begin(P0)
        self.core.hold_markers = True
        ending = self.coordinator.end_txn(TID, r.producer_id, 0, True)
        self.assertNoResult(ending)
        self.assertEqual(self.end(r, True), C.CONCURRENT_TRANSACTIONS)
        self.assertEqual(self.init().error, C.CONCURRENT_TRANSACTIONS)
        codes = result_of(self.coordinator.add_partitions(TID, r.producer_id, 0, [P1]))
        self.assertEqual(codes, {P1: C.CONCURRENT_TRANSACTIONS})
        self.assertEqual(self.add_offsets(r), C.CONCURRENT_TRANSACTIONS)
        self.assertEqual(self.state(), "PrepareCommit")
        # Other ids are not held up.
        self.assertEqual(self.init("other").error, C.NONE)
        self.core.release_markers()
        self.assertEqual(result_of(ending), C.NONE)
        self.assertEqual(self.state(), "CompleteCommit")
        self.assertEqual(self.init().producer_epoch, 1)


class TimeoutTests(CoordinatorTestCase):
    def test_timed_out_transaction_is_aborted_and_producer_fenced(self) -> None:
        r = self.begin(P0)
        self.clock.advance(TIMEOUT_MS / 1000 - 1)
        self.assertEqual(self.state(), "Ongoing")
        self.clock.advance(1)
        self.assertEqual(self.state(), "CompleteAbort")
        self.assertEqual(self.core.markers, [((P0,), r.producer_id, 1, False)])
        self.assertEqual(self.end(r, True), C.PRODUCER_FENCED)
        self.assertEqual(self.coordinator.describe([TID])[0].producer_epoch, 1)
        self.assertEqual(self.init().producer_epoch, 2)

    def test_idle_ids_expire(self) -> None:
        self.restart(id_expiration_ms=10_000)
        r = self.begin(P0)
        self.end(r, True)
        self.init("idle")
        self.clock.advance(9)
        self.assertEqual(len(self.coordinator.list_transactions([], [])), 2)
        self.clock.advance(1)
        self.assertEqual(self.coordinator.list_transactions([], []), [])
        self.assertEqual(self.stored_all(), {})


class FailureTests(CoordinatorTestCase):
    def test_marker_failure_is_retried_on_the_timer(self) -> None:
        r = self.begin(P0)
        self.add_offsets(r)
        self.commit_offsets(r, {("in", 0): TxnOffset(9)})
        self.core.marker_error = StorageError("disk on fire")
        self.assertEqual(self.end(r, True), C.CONCURRENT_TRANSACTIONS)
        self.assertEqual(self.stored().state, "PrepareCommit")
        self.assertEqual(self.end(r, True), C.CONCURRENT_TRANSACTIONS)
        self.assertEqual(self.end(r, False), C.INVALID_TXN_STATE)
        self.assertEqual(self.committed(), {})
        self.clock.advance(1)
        self.assertEqual(self.state(), "PrepareCommit")
        self.core.marker_error = None
        self.clock.advance(1)
        self.assertEqual(self.core.markers, [((P0,), r.producer_id, 0, True)])
        self.assertEqual(self.state(), "CompleteCommit")
        self.assertEqual(self.committed(), {("in", 0): (9, -1, None)})
        self.assertEqual(self.end(r, True), C.NONE)

    def test_completion_retries_on_a_full_disk_log_one_line_per_window(self) -> None:
        """The timer retries a completion every second; a disk that stays full must not
        log a line per retry: one per 10 s, with the count of those left out."""
        from twisted.logger import formatEvent, globalLogPublisher

        lines: list[str] = []

        def observer(event: dict[str, Any]) -> None:
            text = formatEvent(event)
            if "markers failed" in text:
                lines.append(text)

        globalLogPublisher.addObserver(observer)
        self.addCleanup(globalLogPublisher.removeObserver, observer)
        r = self.begin(P0)
        self.core.marker_error = StorageError("disk on fire")
        self.assertEqual(self.end(r, True), C.CONCURRENT_TRANSACTIONS)
        for _ in range(25):
            self.clock.advance(1)
        self.assertEqual(len(lines), 3, lines)  # at 0 s, 10 s and 20 s
        self.assertIn("9 more completion failures not logged", lines[1])
        self.core.marker_error = None
        self.clock.advance(1)
        self.assertEqual(self.state(), "CompleteCommit")

    def test_offset_hand_over_failure_is_retried(self) -> None:
        r = self.begin(P0)
        self.add_offsets(r)
        self.commit_offsets(r, {("in", 0): TxnOffset(9)})
        self.groups.fail = True
        self.assertEqual(self.end(r, True), C.CONCURRENT_TRANSACTIONS)
        self.groups.fail = False
        self.clock.advance(1)
        self.assertEqual(self.state(), "CompleteCommit")
        self.assertEqual(self.committed(), {("in", 0): (9, -1, None)})
        # The retry skipped the markers, already written for this decision.
        self.assertEqual(len(self.core.markers), 1)

    def test_a_completion_retry_does_not_hand_the_offsets_over_again(self) -> None:
        # Markers and offsets succeed, logging CompleteCommit fails; meanwhile the group
        # commits a newer offset. The retry must not put the transaction's older one back.
        r = self.begin(P0)
        self.add_offsets(r)
        self.commit_offsets(r, {("in", 0): TxnOffset(9)})
        self.core.hold_markers = True
        ending = self.coordinator.end_txn(TID, r.producer_id, r.producer_epoch, True)
        self.log_fails = True
        self.core.release_markers()
        self.assertEqual(result_of(ending), C.CONCURRENT_TRANSACTIONS)
        self.assertEqual(self.committed(), {("in", 0): (9, -1, None)})
        newer = self.group_coordinator.commit_txn_offsets("g", [("in", 0, 12, -1, None)])
        self.assertEqual(result_of(newer), {("in", 0): 0})
        self.log_fails = False
        self.core.hold_markers = False
        self.clock.advance(1)
        self.assertEqual(self.state(), "CompleteCommit")
        self.assertEqual(self.committed(), {("in", 0): (12, -1, None)})
        self.assertEqual(len(self.core.markers), 1)

    def test_prepare_write_failure_leaves_the_transaction_ongoing(self) -> None:
        r = self.begin(P0)
        self.log_fails = True
        self.assertEqual(self.end(r, True), C.COORDINATOR_NOT_AVAILABLE)
        self.assertEqual(self.state(), "Ongoing")
        self.assertEqual(self.core.markers, [])
        self.log_fails = False
        self.assertEqual(self.end(r, True), C.NONE)


class RestartTests(CoordinatorTestCase):
    def test_ongoing_keeps_its_timeout_across_a_restart(self) -> None:
        r = self.begin(P0)
        self.clock.advance(30)
        self.restart()
        self.assertEqual(self.state(), "Ongoing")
        assert self.core.verifier is not None
        self.core.verifier("orders", 0, r.producer_id, 0)
        self.clock.advance(29)
        self.assertEqual(self.state(), "Ongoing")
        self.clock.advance(1)
        self.assertEqual(self.state(), "CompleteAbort")
        self.assertEqual(self.core.markers, [((P0,), r.producer_id, 1, False)])

    def test_prepare_commit_with_failed_markers_completes_at_start(self) -> None:
        r = self.begin(P0, P1)
        self.add_offsets(r)
        self.commit_offsets(r, {("in", 0): TxnOffset(9)})
        self.core.marker_error = StorageError("disk on fire")
        self.assertEqual(self.end(r, True), C.CONCURRENT_TRANSACTIONS)
        self.core.marker_error = None
        self.restart()
        self.assertEqual(self.core.markers, [((P0, P1), r.producer_id, 0, True)])
        self.assertEqual(self.state(), "CompleteCommit")
        self.assertEqual(self.stored().state, "CompleteCommit")
        self.assertEqual(self.committed(), {("in", 0): (9, -1, None)})
        self.assertEqual(self.end(r, True), C.NONE)

    def test_prepare_abort_completes_at_start(self) -> None:
        r = self.begin(P0)
        self.add_offsets(r)
        self.commit_offsets(r, {("in", 0): TxnOffset(9)})
        self.core.marker_error = StorageError("disk on fire")
        self.assertEqual(self.end(r, False), C.CONCURRENT_TRANSACTIONS)
        self.core.marker_error = None
        self.restart()
        self.assertEqual(self.core.markers, [((P0,), r.producer_id, 0, False)])
        self.assertEqual(self.state(), "CompleteAbort")
        self.assertEqual(self.committed(), {})

    def test_complete_and_empty_states_survive(self) -> None:
        a = self.begin(P0, tid="a")
        self.end(a, True, tid="a")
        b = self.init("b")
        self.restart()
        self.assertEqual(self.state("a"), "CompleteCommit")
        self.assertEqual(self.state("b"), "Empty")
        self.assertEqual(self.init("b").producer_epoch, b.producer_epoch + 1)
        self.assertEqual(self.core.markers, [((P0,), a.producer_id, 0, True)])


class StopAndQueryTests(CoordinatorTestCase):
    def test_stop_waits_for_the_operation_in_progress(self) -> None:
        r = self.begin(P0)
        self.core.hold_markers = True
        ending = self.coordinator.end_txn(TID, r.producer_id, 0, True)
        stopped = self.coordinator.stopService()
        self.assertNoResult(stopped)
        self.assertEqual(self.init("x").error, C.COORDINATOR_NOT_AVAILABLE)
        self.assertEqual(self.end(r, True), C.COORDINATOR_NOT_AVAILABLE)
        self.assertEqual(self.coordinator.list_transactions([], []), [])
        self.assertEqual(self.coordinator.describe([TID])[0].error, C.COORDINATOR_NOT_AVAILABLE)
        self.core.release_markers()
        self.assertEqual(result_of(ending), C.NONE)
        self.assertIsNone(result_of(stopped))
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_describe(self) -> None:
        r = self.begin(P1, P0)
        d = self.coordinator.describe([TID, "unknown", ""])
        self.assertEqual(d[0].error, C.NONE)
        self.assertEqual(
            (d[0].state, d[0].producer_id, d[0].producer_epoch, d[0].timeout_ms, d[0].partitions),
            ("Ongoing", r.producer_id, 0, TIMEOUT_MS, (P0, P1)),
        )
        self.assertEqual(d[1].error, C.TRANSACTIONAL_ID_NOT_FOUND)
        self.assertEqual(d[2].error, C.INVALID_REQUEST)
        self.end(r, True)
        done = self.coordinator.describe([TID])[0]
        self.assertEqual(
            (done.state, done.start_time_ms, done.partitions), ("CompleteCommit", -1, ())
        )

    def test_list_filters(self) -> None:
        a = self.begin(P0, tid="a")
        b = self.init("b")
        listing = self.coordinator.list_transactions
        self.assertEqual([x.transactional_id for x in listing([], [])], ["a", "b"])
        self.assertEqual([x.transactional_id for x in listing(["Ongoing"], [])], ["a"])
        self.assertEqual([x.state for x in listing(["Empty", "Dead"], [])], ["Empty"])
        self.assertEqual([x.transactional_id for x in listing([], [b.producer_id])], ["b"])
        self.assertEqual(listing(["Ongoing"], [b.producer_id]), [])
        self.assertEqual(listing(["NoSuchState"], []), [])
        self.assertEqual(listing([], [a.producer_id])[0].producer_id, a.producer_id)

    def test_list_duration_and_pattern_filters(self) -> None:
        self.begin(P0, tid="orders-1")
        self.clock.advance(10)
        self.begin(P1, tid="orders-2")
        self.init("billing")
        listing = self.coordinator.list_transactions

        def ids(**kw: Any) -> list[str]:
            return sorted(x.transactional_id for x in listing([], [], **kw))

        # Running for longer than the filter; an id with nothing running never matches.
        self.assertEqual(ids(duration_filter_ms=5000), ["orders-1"])
        self.assertEqual(ids(duration_filter_ms=0), ["orders-1"])  # orders-2: 0 ms so far
        self.clock.advance(1)
        self.assertEqual(ids(duration_filter_ms=0), ["orders-1", "orders-2"])
        self.assertEqual(ids(duration_filter_ms=-1), ["billing", "orders-1", "orders-2"])


class VerifyPartitionsTests(CoordinatorTestCase):
    def test_each_partition_in_the_ongoing_transaction_or_not(self) -> None:
        r = self.begin(P0)
        verify = self.coordinator.verify_partitions
        self.assertEqual(verify(TID, r.producer_id, 0, [P0, P1]),
                         {P0: C.NONE, P1: C.INVALID_TXN_STATE})
        self.assertEqual(verify(TID, r.producer_id, 1, [P0]), {P0: C.PRODUCER_FENCED})
        self.assertEqual(verify(TID, r.producer_id + 1, 0, [P0]),
                         {P0: C.INVALID_PRODUCER_ID_MAPPING})
        self.assertEqual(verify("other", 1, 0, [P0]), {P0: C.INVALID_PRODUCER_ID_MAPPING})
        self.assertEqual(verify("", 1, 0, [P0]), {P0: C.INVALID_REQUEST})
        self.assertEqual(self.coordinator.describe([TID])[0].partitions, (P0,))  # unchanged
        self.end(r, True)
        self.assertEqual(verify(TID, r.producer_id, 0, [P0]), {P0: C.INVALID_TXN_STATE})


class BumpingEndTxnTests(CoordinatorTestCase):
    """EndTxn v5 (KIP-890 part 2): an epoch bump at every end."""

    def end5(self, pid: int, epoch: int, commit: bool) -> tuple[C, int, int]:
        got = result_of(self.coordinator.end_txn_bumping(TID, pid, epoch, commit))
        return got.error, got.producer_id, got.producer_epoch

    def test_commit_bumps_the_epoch_and_the_markers_carry_it(self) -> None:
        r = self.begin(P0)
        pid = r.producer_id
        self.assertEqual(self.end5(pid, 0, True), (C.NONE, pid, 1))
        self.assertEqual(self.core.markers, [((P0,), pid, 1, True)])
        stored = self.stored()
        self.assertEqual((stored.state, stored.producer_epoch, stored.last_producer_epoch),
                         ("CompleteCommit", 1, 0))
        # A retry with the epoch it was sent with is answered with the new one; the
        # other decision is not.
        self.assertEqual(self.end5(pid, 0, True), (C.NONE, pid, 1))
        self.assertEqual(self.end5(pid, 0, False)[0], C.INVALID_TXN_STATE)
        self.assertEqual(len(self.core.markers), 1)
        # The old epoch is fenced; the next transaction runs at the new one.
        codes = result_of(self.coordinator.add_partitions(TID, pid, 0, [P1]))
        self.assertEqual(codes, {P1: C.PRODUCER_FENCED})
        codes = result_of(self.coordinator.add_partitions(TID, pid, 1, [P1]))
        self.assertEqual(codes, {P1: C.NONE})
        self.assertEqual(self.end5(pid, 1, False), (C.NONE, pid, 2))
        self.assertEqual(self.core.markers[-1], ((P1,), pid, 2, False))

    def test_an_empty_abort_bumps_the_epoch_a_commit_is_refused(self) -> None:
        r = self.init()
        pid = r.producer_id
        self.assertEqual(self.end5(pid, 0, True)[0], C.INVALID_TXN_STATE)
        self.assertEqual(self.end5(pid, 0, False), (C.NONE, pid, 1))
        self.assertEqual(self.core.markers, [])
        self.assertEqual(self.state(), "CompleteAbort")
        self.assertEqual(self.end5(pid, 1, False), (C.NONE, pid, 2))

    def test_wrong_id_or_epoch(self) -> None:
        r = self.begin(P0)
        pid = r.producer_id
        self.assertEqual(self.end5(pid + 1, 0, True)[0], C.INVALID_PRODUCER_ID_MAPPING)
        self.assertEqual(self.end5(pid, 5, True)[0], C.PRODUCER_FENCED)
        self.assertEqual(
            result_of(self.coordinator.end_txn_bumping("nope", pid, 0, True)).error,
            C.INVALID_PRODUCER_ID_MAPPING,
        )
        self.assertEqual(self.state(), "Ongoing")

    def test_an_exhausted_epoch_moves_to_a_new_producer_id(self) -> None:
        import attrs

        r = self.begin(P0)
        self.txn_log.write([attrs.evolve(self.stored(), producer_epoch=32765)])
        self.restart()
        pid = r.producer_id
        error, new_pid, epoch = self.end5(pid, 32765, True)
        self.assertEqual(error, C.NONE)
        self.assertNotEqual(new_pid, pid)
        self.assertEqual(epoch, 0)
        # The markers carry the old id with the bumped epoch.
        self.assertEqual(self.core.markers, [((P0,), pid, 32766, True)])
        self.assertEqual(self.end5(pid, 32765, True), (C.NONE, new_pid, 0))  # a retry
        codes = result_of(self.coordinator.add_partitions(TID, new_pid, 0, [P1]))
        self.assertEqual(codes, {P1: C.NONE})

    def test_a_completion_cut_short_is_concurrent_then_answered(self) -> None:
        r = self.begin(P0)
        pid = r.producer_id
        self.core.marker_error = StorageError("disk on fire")
        self.assertEqual(self.end5(pid, 0, True)[0], C.CONCURRENT_TRANSACTIONS)
        self.assertEqual(self.end5(pid, 0, True)[0], C.CONCURRENT_TRANSACTIONS)
        self.core.marker_error = None
        self.clock.advance(1)  # the timer completes it
        self.assertEqual(self.end5(pid, 0, True), (C.NONE, pid, 1))


class ImplicitAddOffsetsTests(CoordinatorTestCase):
    """TxnOffsetCommit v5 (KIP-890 part 2): no AddOffsetsToTxn first."""

    def test_the_commit_adds_the_group_and_starts_the_transaction(self) -> None:
        r = self.init()
        offsets = {("in", 0): TxnOffset(5)}
        self.assertEqual(self.commit_offsets(r, offsets), {("in", 0): C.INVALID_TXN_STATE})
        self.assertEqual(self.commit_offsets(r, offsets, add_group=True), {("in", 0): C.NONE})
        self.assertEqual(self.state(), "Ongoing")
        self.assertEqual(self.end(r, True), C.NONE)
        self.assertEqual(self.committed(), {("in", 0): (5, -1, None)})
