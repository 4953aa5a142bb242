"""brokerd.core.roles.long_poll: the read-park-read loop on its own, with scripted reads
and parks on a fake clock (the real parking is tests/core/test_waiters.py's)."""

from __future__ import annotations

from twisted.internet import defer, task
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.roles.long_poll import MAX_WAIT_MS, Shortfall, long_poll
from brokerd.errors import TooManyWaiters


class LongPollTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = task.Clock()
        self.found: list[int] = [0]  # what each read finds, the last one repeated
        self.reads = 0
        self.parks: list[tuple[int, int]] = []  # (needed, ms_left) of each park
        self.answers: list[defer.Deferred[bool]] = []
        self.cancelled: list[int] = []

    def read(self) -> defer.Deferred[int]:
        value = self.found[min(self.reads, len(self.found) - 1)]
        self.reads += 1
        return defer.succeed(value)

    def short_of(self, have: int) -> Shortfall | None:
        return Shortfall(have, 10, {("t", 0): 0})

    def park(self, short: Shortfall, ms_left: int) -> defer.Deferred[bool]:
        self.parks.append((short.needed, ms_left))
        d: defer.Deferred[bool] = defer.Deferred(lambda _: self.cancelled.append(ms_left))
        self.answers.append(d)
        return d

    def poll(self, max_wait_ms: int = 1000) -> defer.Deferred[int]:
        return long_poll(self.read, self.short_of, self.park, clock=self.clock,
                         max_wait_ms=max_wait_ms)

    def test_shortfall_needed(self) -> None:
        self.assertEqual(Shortfall(3, 10, {}).needed, 7)

    def test_enough_or_nothing_to_wait_for_answers_without_parking(self) -> None:
        self.found = [12]
        self.assertEqual(self.successResultOf(self.poll()), 12)
        d = long_poll(self.read, lambda _: None, self.park, clock=self.clock, max_wait_ms=1000)
        self.assertEqual(self.successResultOf(d), 12)
        self.assertEqual(self.parks, [])

    def test_reparks_with_what_is_left_of_one_deadline(self) -> None:
        self.found = [0, 4, 10]
        d = self.poll(1000)
        self.clock.advance(0.3)
        self.answers[0].callback(True)
        self.assertNoResult(d)
        self.answers[1].callback(True)
        self.assertEqual(self.successResultOf(d), 10)
        self.assertEqual(self.parks, [(10, 1000), (6, 700)])
        self.assertEqual(self.reads, 3)

    def test_past_the_deadline_answers_with_the_last_read(self) -> None:
        d = self.poll(500)
        self.clock.advance(0.5)
        self.answers[0].callback(True)
        self.assertEqual(self.successResultOf(d), 0)
        self.assertEqual(len(self.parks), 1)

    def test_the_wait_is_capped(self) -> None:
        self.poll(10 * MAX_WAIT_MS)
        self.assertEqual(self.parks, [(10, MAX_WAIT_MS)])

    def test_a_park_answered_false_ends_without_rereading(self) -> None:
        d = self.poll()
        self.answers[0].callback(False)
        self.assertEqual(self.successResultOf(d), 0)
        self.assertEqual(self.reads, 1)

    def test_too_many_waiters_fails_the_first_park_only(self) -> None:
        first = self.poll()
        self.answers[0].errback(TooManyWaiters("full"))
        self.failureResultOf(first, TooManyWaiters)
        self.found = [0, 3]
        self.reads = 0
        later = self.poll()
        self.answers[1].callback(True)
        self.answers[2].errback(TooManyWaiters("full"))
        self.assertEqual(self.successResultOf(later), 3)

    def test_cancel_cancels_the_park(self) -> None:
        d = self.poll()
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertEqual(self.cancelled, [1000])
        self.assertEqual(self.reads, 1)
