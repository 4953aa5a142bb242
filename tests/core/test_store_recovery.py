"""brokerd.core.store_recovery: the poll of offline journal stores (one reopen attempt per
store at a time), their ``/readyz`` lines, and the poll's stop; fake stores on a fake
clock (tests/storage/journal/test_faults.py runs it over real stores)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from twisted.internet import defer, task
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.store_recovery import StoreRecovery
from brokerd.storage.journal.engine import JournalStore


class _Journal:
    def __init__(self, name: str) -> None:
        self.name = name
        self.offline_reason: str | None = None


class _Store:
    def __init__(self, name: str) -> None:
        self.journal = _Journal(name)
        self.reopens = 0

    def retry_reopen(self, now: float | None = None) -> bool:
        self.reopens += 1
        self.journal.offline_reason = None
        return True


class StoreRecoveryTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = task.Clock()
        self.a, self.b = _Store("offsets store"), _Store("transaction log")
        self.pending: list[tuple[Callable[[], Any], defer.Deferred[Any]]] = []
        self.recovery = StoreRecovery(
            [cast(JournalStore, self.a), cast(JournalStore, self.b)],
            clock=self.clock, run_blocking=self.run_blocking, poll_seconds=1.0)

    def run_blocking(self, f: Callable[[], Any]) -> defer.Deferred[Any]:
        d: defer.Deferred[Any] = defer.Deferred()
        self.pending.append((f, d))
        return d

    def finish(self) -> None:
        f, d = self.pending.pop(0)
        d.callback(f())

    def test_problems_list_each_offline_store(self) -> None:
        self.assertEqual(self.recovery.problems(), [])
        self.b.journal.offline_reason = "fsync failed"
        self.assertEqual(self.recovery.problems(),
                         ["transaction log offline (reopening from disk): fsync failed"])
        self.assertEqual(self.recovery.stores, (self.a, self.b))

    def test_polls_only_offline_stores_one_attempt_at_a_time(self) -> None:
        self.recovery.startService()
        self.addCleanup(self.recovery.stopService)
        self.clock.advance(1)
        self.assertEqual(self.pending, [])
        self.a.journal.offline_reason = "EIO"
        self.clock.advance(1)
        self.assertEqual(len(self.pending), 1)
        self.clock.advance(1)  # still reopening: no second attempt
        self.assertEqual(len(self.pending), 1)
        self.finish()
        self.assertEqual((self.a.reopens, self.b.reopens), (1, 0))
        self.assertEqual(self.recovery.problems(), [])
        self.a.journal.offline_reason = "EIO again"
        self.clock.advance(1)  # the attempt finished: the next one may start
        self.assertEqual(len(self.pending), 1)

    def test_an_unexpected_failure_is_logged_and_frees_the_store(self) -> None:
        self.a.journal.offline_reason = "EIO"
        self.recovery.poll()
        _, d = self.pending.pop()
        d.errback(RuntimeError("bug"))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.recovery.poll()
        self.assertEqual(len(self.pending), 1)

    def test_stop_ends_the_poll(self) -> None:
        self.recovery.startService()
        self.recovery.stopService()
        self.a.journal.offline_reason = "EIO"
        self.clock.advance(5)
        self.assertEqual(self.pending, [])
        self.assertEqual(self.clock.getDelayedCalls(), [])
