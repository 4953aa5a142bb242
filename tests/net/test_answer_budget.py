"""The listener-wide budget for answer bytes held in memory
(:class:`~brokerd.net.answer_budget.AnswerBudget`): taking, charging, giving back and
waking its waiters in order."""

from __future__ import annotations

from twisted.internet import defer
from twisted.trial.unittest import SynchronousTestCase

from brokerd.net.answer_budget import AnswerBudget


class AnswerBudgetTests(SynchronousTestCase):
    def test_room_waits_while_full_and_cancelling_forgets(self) -> None:
        budget = AnswerBudget(100)
        self.assertTrue(budget.try_take(60))
        self.assertTrue(budget.try_take(60))  # not full yet: passes the limit once
        self.assertFalse(budget.try_take(1))
        first, second = budget.room(), budget.room()
        self.assertNoResult(first)
        second.cancel()
        self.failureResultOf(second, defer.CancelledError)
        budget.give(60)
        self.assertIsNone(self.successResultOf(first))
        self.assertEqual(budget.waiting, 0)
        self.assertEqual(budget.peak, 120)

    def test_unbounded_never_waits(self) -> None:
        budget = AnswerBudget(None)
        self.assertTrue(budget.try_take(1 << 40))
        self.assertIsNone(self.successResultOf(budget.room()))

    def test_a_limit_that_is_not_positive_is_refused(self) -> None:
        for limit in (0, -1):
            with self.assertRaises(ValueError):
                AnswerBudget(limit)

    def test_waiters_wake_oldest_first_only_while_there_is_room(self) -> None:
        budget = AnswerBudget(10)
        budget.charge(10)
        woken: list[str] = []

        def first() -> None:
            woken.append("first")
            budget.charge(10)  # fills the budget again

        budget.when_room(first)
        budget.when_room(lambda: woken.append("second"))
        budget.give(10)
        self.assertEqual(woken, ["first"])  # the second waits: the first refilled it
        self.assertEqual(budget.waiting, 1)
        budget.give(10)
        self.assertEqual(woken, ["first", "second"])

    def test_forgetting_a_waiter_keeps_it_from_waking(self) -> None:
        budget = AnswerBudget(5)
        budget.charge(5)
        woken: list[int] = []
        forget = budget.when_room(lambda: woken.append(1))
        forget()
        forget()  # a second forget is harmless
        budget.give(5)
        self.assertEqual(woken, [])
        self.assertFalse(budget.full)

    def test_giving_back_more_than_held_stops_at_zero(self) -> None:
        budget = AnswerBudget(100)
        budget.charge(30)
        budget.give(50)
        self.assertEqual(budget.in_use, 0)
        self.assertEqual(budget.peak, 30)
