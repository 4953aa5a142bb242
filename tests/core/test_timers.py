"""The core's periodic tasks on a fake clock: each runs every period (first after one),
a period of zero leaves it off, a failing task is logged and stopped alone, and stop()
ends them all."""

from __future__ import annotations

from twisted.internet import task
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.timers import PeriodicTasks


class PeriodicTasksTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = task.Clock()
        self.tasks = PeriodicTasks(self.clock)
        self.calls: list[str] = []

    def test_each_runs_every_period_and_first_after_one(self) -> None:
        self.tasks.every(2.0, lambda: self.calls.append("fast"))
        self.tasks.every(5.0, lambda: self.calls.append("slow"))
        self.assertEqual(self.calls, [])
        self.clock.pump([1.0] * 10)
        self.assertEqual(self.calls.count("fast"), 5)
        self.assertEqual(self.calls.count("slow"), 2)

    def test_a_period_of_zero_or_less_leaves_the_task_off(self) -> None:
        self.tasks.every(0, lambda: self.calls.append("zero"))
        self.tasks.every(-1, lambda: self.calls.append("negative"))
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_a_failing_task_is_logged_and_stopped_the_others_go_on(self) -> None:
        def broken() -> None:
            self.calls.append("broken")
            raise OSError("disk gone")

        self.tasks.every(1.0, broken)
        self.tasks.every(1.0, lambda: self.calls.append("ok"))
        self.clock.pump([1.0] * 3)
        self.assertEqual(self.calls.count("broken"), 1)
        self.assertEqual(self.calls.count("ok"), 3)
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 1)

    def test_stop_ends_every_task(self) -> None:
        self.tasks.every(1.0, lambda: self.calls.append("a"))
        self.tasks.every(3.0, lambda: self.calls.append("b"))
        self.clock.advance(1.0)
        self.tasks.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.clock.pump([1.0] * 5)
        self.assertEqual(self.calls, ["a"])
