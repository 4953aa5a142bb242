"""The coordinator runtime's ordered journal writer: order, group commit, answers
released after the write, and a failed write failing everything made on its state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from brokerd.core.coordinator_runtime import CoordinatorResult, OrderedJournalWriter
from brokerd.errors import StorageError


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


def fired(d: defer.Deferred[Any]) -> list[Any]:
    out: list[Any] = []
    d.addBoth(out.append)
    return out


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
    first = fired(w.submit(["a"]))
    later = [fired(w.submit([r])) for r in ("b", "c")]
    nothing = fired(w.submit([]))
    assert nothing == [None]  # no records: answered at once, no write
    assert len(pool.jobs) == 1 and not first
    pool.run_next()
    assert first == [None] and not any(later)
    assert len(pool.jobs) == 1  # b and c: one write, one sync
    pool.run_next()
    assert later == [[None], [None]]
    assert journal == [["a"], ["b", "c"]] and w.writes == 2 and w.idle


def test_submit_many_lands_in_one_write_and_apply_answers_after_it() -> None:
    pool, journal = Pool(), []
    w, _ = writer(pool, journal)
    outs = [fired(d) for d in w.submit_many([["x"], [], ["y", "z"]])]
    answer = fired(w.apply(CoordinatorResult(("w",), "joined")))
    assert outs[1] == [None] and not outs[0] and not answer
    pool.run_next()
    pool.run_next()
    assert journal == [["x", "y", "z"], ["w"]] and answer == ["joined"]


def test_a_failed_write_reloads_and_fails_every_pending_result() -> None:
    pool, journal = Pool(), []
    w, reloads = writer(pool, journal)
    first = fired(w.submit(["a"]))
    second = fired(w.submit(["b"]))
    d, _job = pool.jobs.pop(0)
    d.errback(StorageError("disk gone"))
    assert reloads == [1]
    assert isinstance(first[0], Failure) and isinstance(second[0], Failure)
    assert not pool.jobs and journal == []  # b was made on the discarded state
    third = fired(w.submit(["c"]))
    pool.run_next()
    assert third == [None] and journal == [["c"]]


def test_a_journal_reopened_from_disk_reloads_and_fails_what_was_pending() -> None:
    pool, journal, reopens = Pool(), [], [0]
    w, reloads = writer(pool, journal, reopens=reopens)
    first = fired(w.submit(["a"]))
    second = fired(w.submit(["b"]))
    reopens[0] += 1  # the store replayed the file while a was being written
    pool.run_next()
    assert first == [None] and reloads == [1]
    assert isinstance(second[0], Failure) and second[0].check(StorageError)
    assert "reopened" in second[0].getErrorMessage() and journal == [["a"]]


def test_without_reload_a_failed_write_fails_its_own_batch_only() -> None:
    pool, journal = Pool(), []
    w: OrderedJournalWriter[str] = OrderedJournalWriter(journal.append, pool, None)
    first = fired(w.submit(["a"]))
    second = fired(w.submit(["b"]))
    d, _job = pool.jobs.pop(0)
    d.errback(StorageError("disk full"))
    assert isinstance(first[0], Failure) and not second
    pool.run_next()
    assert second == [None] and journal == [["b"]]


def test_withdraw_takes_back_what_no_write_took_and_drained_waits_for_the_rest() -> None:
    pool, journal = Pool(), []
    w: OrderedJournalWriter[str] = OrderedJournalWriter(journal.append, pool, None)
    assert fired(w.drained()) == [None]  # idle: at once
    running = w.submit(["a"])
    waiting = w.submit(["b"])
    kept = w.submit(["c"])
    assert not w.withdraw(running)  # being written
    assert w.withdraw(waiting) and not w.withdraw(waiting)
    drained = fired(w.drained())
    pool.run_next()
    assert not drained
    pool.run_next()
    assert journal == [["a"], ["c"]] and drained == [None]
    assert fired(kept) == [None] and not fired(waiting)
