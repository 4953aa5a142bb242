"""The coordinator runtime: its ordered journal writer (order, group commit, answers
released after the write, a failed write failing everything made on its state) and
:class:`CoordinatorRuntime`'s contract with the coordinators."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from brokerd.coordinator_runtime import (
    CoordinatorResult,
    CoordinatorRuntime,
    OrderedJournalWriter,
    ParkedRequest,
    Release,
)
from brokerd.errors import StorageError

from tests.deferreds import watch


class Pool:
    """A write pool whose jobs run when the test says."""

    def __init__(self) -> None:
        self.jobs: list[tuple[defer.Deferred[Any], Callable[[], Any]]] = []

    def __call__(self, f: Callable[..., Any], /, *args: Any) -> defer.Deferred[Any]:
        d: defer.Deferred[Any] = defer.Deferred()
        self.jobs.append((d, lambda: f(*args)))
        return d

    def run_next(self) -> None:
        d, job = self.jobs.pop(0)
        defer.maybeDeferred(job).chainDeferred(d)




def writer(
    pool: Pool, journal: list[list[str]], *, reopens: list[int] | None = None
) -> tuple[OrderedJournalWriter[str], list[int]]:
    reloads: list[int] = []
    counter = reopens if reopens is not None else [0]
    w: OrderedJournalWriter[str] = OrderedJournalWriter(
        journal.append, pool, lambda: reloads.append(1), reopens=lambda: counter[0],
        name="test journal",
    )
    return w, reloads


def test_what_is_submitted_during_a_write_forms_the_next_write_in_order() -> None:
    pool, journal = Pool(), []
    w, _ = writer(pool, journal)
    first = watch(w.submit(["a"]))
    later = [watch(w.submit([r])) for r in ("b", "c")]
    nothing = watch(w.submit([]))
    assert nothing == [None]  # no records: answered at once, no write
    assert len(pool.jobs) == 1 and not first
    pool.run_next()
    assert first == [None] and not any(later)
    assert len(pool.jobs) == 1  # b and c: one write, one sync
    pool.run_next()
    assert later == [[None], [None]]
    assert journal == [["a"], ["b", "c"]] and w.writes == 2 and w.idle


def test_the_next_write_starts_before_the_last_ones_answers() -> None:
    """The records that waited go to the pool before the finished write's callbacks
    run: an answer sent from a callback does not hold up the next sync."""
    pool, journal = Pool(), []
    w, _ = writer(pool, journal)
    queued_then: list[int] = []
    w.submit(["a"]).addCallback(lambda _: queued_then.append(len(pool.jobs)))
    later = watch(w.submit(["b"]))
    pool.run_next()
    assert queued_then == [1] and not later  # b's write was queued before a's answer
    pool.run_next()
    assert later == [None] and journal == [["a"], ["b"]]


def test_submit_many_lands_in_one_write_and_apply_answers_after_it() -> None:
    pool, journal = Pool(), []
    w, _ = writer(pool, journal)
    outs = [watch(d) for d in w.submit_many([["x"], [], ["y", "z"]])]
    answer = watch(w.apply(CoordinatorResult(("w",), "joined")))
    assert outs[1] == [None] and not outs[0] and not answer
    pool.run_next()
    pool.run_next()
    assert journal == [["x", "y", "z"], ["w"]] and answer == ["joined"]


def test_a_failed_write_reloads_and_fails_every_pending_result() -> None:
    pool, journal = Pool(), []
    w, reloads = writer(pool, journal)
    first = watch(w.submit(["a"]))
    second = watch(w.submit(["b"]))
    d, _job = pool.jobs.pop(0)
    d.errback(StorageError("disk gone"))
    assert reloads == [1]
    assert isinstance(first[0], Failure) and isinstance(second[0], Failure)
    assert not pool.jobs and journal == []  # b was made on the discarded state
    third = watch(w.submit(["c"]))
    pool.run_next()
    assert third == [None] and journal == [["c"]]


def test_a_journal_reopened_from_disk_reloads_and_fails_what_was_pending() -> None:
    pool, journal, reopens = Pool(), [], [0]
    w, reloads = writer(pool, journal, reopens=reopens)
    first = watch(w.submit(["a"]))
    second = watch(w.submit(["b"]))
    reopens[0] += 1  # the store replayed the file while a was being written
    pool.run_next()
    assert first == [None] and reloads == [1]
    assert isinstance(second[0], Failure) and second[0].check(StorageError)
    assert "reopened" in second[0].getErrorMessage() and journal == [["a"]]


def test_without_reload_a_failed_write_fails_its_own_batch_only() -> None:
    pool, journal = Pool(), []
    w: OrderedJournalWriter[str] = OrderedJournalWriter(journal.append, pool, None)
    first = watch(w.submit(["a"]))
    second = watch(w.submit(["b"]))
    d, _job = pool.jobs.pop(0)
    d.errback(StorageError("disk full"))
    assert isinstance(first[0], Failure) and not second
    pool.run_next()
    assert second == [None] and journal == [["b"]]


def test_withdraw_takes_back_what_no_write_took_and_drained_waits_for_the_rest() -> None:
    pool, journal = Pool(), []
    w: OrderedJournalWriter[str] = OrderedJournalWriter(journal.append, pool, None)
    assert watch(w.drained()) == [None]  # idle: at once
    running = w.submit(["a"])
    waiting = w.submit(["b"])
    kept = w.submit(["c"])
    assert not w.withdraw(running)  # being written
    assert w.withdraw(waiting) and not w.withdraw(waiting)
    drained = watch(w.drained())
    pool.run_next()
    assert not drained
    pool.run_next()
    assert journal == [["a"], ["c"]] and drained == [None]
    assert watch(kept) == [None] and not watch(waiting)


class RuntimeContractTests(SynchronousTestCase):
    """:class:`CoordinatorRuntime`: the one place a coordinator's results take effect."""

    def setUp(self) -> None:
        self.pool = Pool()
        self.journal: list[list[str]] = []
        self.writer: OrderedJournalWriter[str] = OrderedJournalWriter(
            self.journal.append, self.pool, None, name="test journal"
        )
        self.cancelled: list[ParkedRequest] = []
        self.runtime: CoordinatorRuntime[str] = CoordinatorRuntime(self.writer, self._cancel)

    def _cancel(self, parked: ParkedRequest) -> CoordinatorResult[str, None]:
        self.cancelled.append(parked)
        return CoordinatorResult(("cancelled",), None)

    def test_answers_are_not_released_before_the_sync(self) -> None:
        parked = ParkedRequest("g")
        held = self.runtime.run(CoordinatorResult((), parked))
        d = self.runtime.run(CoordinatorResult(
            ("stable",), "synced", (Release(parked, "joined", "failed"),)
        ))
        self.assertNoResult(held)
        self.assertNoResult(d)
        self.assertEqual(len(self.pool.jobs), 1)
        self.pool.run_next()
        self.assertEqual(self.successResultOf(held), "joined")
        self.assertEqual(self.successResultOf(d), "synced")
        self.assertEqual(self.journal, [["stable"]])
        self.assertEqual(self.runtime.parked, 0)

    def test_answers_leave_in_submission_order_even_without_records(self) -> None:
        order: list[str] = []
        first = self.runtime.run(CoordinatorResult(("a",), "first"))
        # No records of its own, but it may report state that "a" carries: it waits.
        second = self.runtime.run(CoordinatorResult((), "second"))
        for d in (first, second):
            d.addCallback(order.append)
        self.assertEqual(order, [])
        self.pool.run_next()
        self.assertEqual(order, ["first", "second"])
        self.assertEqual(self.writer.writes, 1)  # the empty result cost no write
        # Nothing pending: a result without records is answered at once.
        self.assertEqual(self.successResultOf(self.runtime.run(CoordinatorResult((), 3))), 3)

    def test_a_failed_write_gives_the_failure_answers_and_loses_nothing_after_it(
        self,
    ) -> None:
        parked = ParkedRequest("g")
        held = self.runtime.run(CoordinatorResult((), parked))
        busy = self.runtime.run(CoordinatorResult(("first",), "first"))
        failing = self.runtime.run(CoordinatorResult(
            ("lost",), "ok", (Release(parked, "joined", "NOT_COORDINATOR"),),
            if_failed="NOT_COORDINATOR",
        ))
        errored = self.runtime.run(CoordinatorResult(("lost too",), "ok"))
        independent = self.runtime.run(CoordinatorResult((), "read"))
        self.pool.run_next()
        self.assertEqual(self.successResultOf(busy), "first")
        job, _ = self.pool.jobs.pop(0)  # the next three results' one write fails
        job.errback(StorageError("No space left on device"))
        self.assertEqual(self.successResultOf(held), "NOT_COORDINATOR")
        self.assertEqual(self.successResultOf(failing), "NOT_COORDINATOR")
        self.failureResultOf(errored, StorageError)  # no if_failed: the write's error
        self.assertEqual(self.successResultOf(independent), "read")
        later = self.runtime.run(CoordinatorResult(("kept",), "ok"))
        self.pool.run_next()
        self.assertEqual(self.successResultOf(later), "ok")
        self.assertEqual(self.journal, [["first"], ["kept"]])

    def test_group_commit_n_operations_one_sync(self) -> None:
        first = self.runtime.run(CoordinatorResult(("r0",), 0))
        rest = [self.runtime.run(CoordinatorResult((f"r{i}",), i)) for i in range(1, 50)]
        self.pool.run_next()
        self.assertEqual(self.successResultOf(first), 0)
        self.assertEqual(len(self.pool.jobs), 1)  # the 49 that came during the write
        self.pool.run_next()
        self.assertEqual([self.successResultOf(d) for d in rest], list(range(1, 50)))
        self.assertEqual(self.writer.writes, 2)
        self.assertEqual(self.journal[1], [f"r{i}" for i in range(1, 50)])

    def test_a_cancelled_parked_request_goes_back_to_the_coordinator(self) -> None:
        parked = ParkedRequest("g")
        held = self.runtime.run(CoordinatorResult((), parked))
        held.cancel()
        self.failureResultOf(held, defer.CancelledError)
        self.assertEqual(self.cancelled, [parked])
        self.pool.run_next()
        self.assertEqual(self.journal, [["cancelled"]])  # the cancel's result applied too
        # A later answer to it goes nowhere.
        late = self.runtime.run(CoordinatorResult((), None, (Release(parked, "x", "y"),)))
        self.assertIsNone(self.successResultOf(late))
        self.assertEqual(self.runtime.parked, 0)


class DurableHookTests(SynchronousTestCase):
    """A coordinator whose memory follows its journal (the transaction coordinator):
    ``on_durable`` sees each result once its records are durable and before its
    answers, and starts its follow-ups; a failed write never reaches it."""

    def setUp(self) -> None:
        self.pool = Pool()
        self.journal: list[list[str]] = []
        self.writer: OrderedJournalWriter[str] = OrderedJournalWriter(
            self.journal.append, self.pool, None, name="test journal"
        )
        self.events: list[str] = []
        self.runtime: CoordinatorRuntime[str] = CoordinatorRuntime(
            self.writer, lambda _p: CoordinatorResult((), None), self._durable
        )

    def _durable(self, result: CoordinatorResult[str, Any]) -> None:
        self.events.append(f"installed {','.join(result.records)}")
        for follow in result.follow_ups:
            assert isinstance(follow, ParkedRequest)
            # The follow-up's own result releases the parked caller.
            self.runtime.run(CoordinatorResult(
                ("complete",), None, (Release(follow, "done", "not yet"),)
            ))

    def test_installed_before_answered_and_follow_up_after_the_sync(self) -> None:
        parked = ParkedRequest("tx")
        d = self.runtime.run(CoordinatorResult(
            ("prepare",), parked, if_failed="unavailable", follow_ups=(parked,)
        ))
        d.addCallback(lambda answer: self.events.append(f"answered {answer}"))
        self.assertEqual(self.events, [])
        self.pool.run_next()
        self.assertEqual(self.events, ["installed prepare"])  # parked: not answered yet
        self.assertEqual(len(self.pool.jobs), 1)  # the follow-up's record
        self.pool.run_next()
        self.assertEqual(self.events, ["installed prepare", "installed complete",
                                       "answered done"])
        self.assertEqual(self.journal, [["prepare"], ["complete"]])

    def test_a_failed_write_installs_nothing_and_answers_a_parked_caller(self) -> None:
        parked = ParkedRequest("tx")
        d = self.runtime.run(CoordinatorResult(
            ("prepare",), parked, if_failed="unavailable", follow_ups=(parked,)
        ))
        job, _ = self.pool.jobs.pop(0)
        job.errback(StorageError("No space left on device"))
        self.assertEqual(self.successResultOf(d), "unavailable")
        self.assertEqual((self.events, self.pool.jobs, self.runtime.parked), ([], [], 0))
