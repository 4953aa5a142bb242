"""A request's timeout over an operation that is not cancelled
(:func:`~brokerd.kafka.server.deadline.within`)."""

from __future__ import annotations

from twisted.internet import defer, task
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.server.deadline import DeadlinePassed, within


class WithinTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = task.Clock()

    def test_a_result_in_time_passes_and_the_timer_stops(self) -> None:
        op: defer.Deferred[int] = defer.Deferred()
        out = within(op, 5.0, self.clock, "too slow")
        op.callback(7)
        self.assertEqual(self.successResultOf(out), 7)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_a_failure_in_time_is_passed_on(self) -> None:
        op: defer.Deferred[int] = defer.Deferred()
        out = within(op, 5.0, self.clock, "too slow")
        op.errback(KeyError("gone"))
        self.failureResultOf(out, KeyError)

    def test_the_deadline_fails_with_the_message_and_does_not_cancel(self) -> None:
        op: defer.Deferred[int] = defer.Deferred()
        out = within(op, 5.0, self.clock, "took too long")
        self.clock.advance(4.9)
        self.assertNoResult(out)
        self.clock.advance(0.1)
        failure = self.failureResultOf(out, DeadlinePassed)
        self.assertEqual(str(failure.value), "took too long")
        self.assertFalse(op.called)  # the operation goes on

    def test_a_late_outcome_is_dropped(self) -> None:
        op: defer.Deferred[int] = defer.Deferred()
        out = within(op, 1.0, self.clock, "late")
        self.clock.advance(1.0)
        self.failureResultOf(out, DeadlinePassed)
        op.errback(KeyError("late failure"))  # dropped: no unhandled error
        self.assertIsNone(self.successResultOf(op))
