"""The failed-authentication throttle and the failure log's rate limit, on a fake clock."""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from brokerd.security.auth_throttle import FORGET_AFTER, MAX_DELAY, AuthThrottle, FailureLog


class AuthThrottleTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.throttle = AuthThrottle(self.clock.seconds)

    def test_backoff_doubles_per_pair_up_to_the_cap(self) -> None:
        waits = []
        for _ in range(9):
            waits.append(self.throttle.failed("10.0.0.1", "svc"))
            self.clock.advance(waits[-1])
        self.assertEqual(waits, [0.1, 0.2, 0.4, 0.8, 1.6] + [MAX_DELAY] * 4)
        # Other pairs start from the beginning.
        self.assertEqual(self.throttle.failed("10.0.0.1", "other"), 0.1)
        self.assertEqual(self.throttle.failed("10.0.0.2", "svc"), 0.1)

    def test_hold_lasts_until_the_failure_is_answered(self) -> None:
        self.assertEqual(self.throttle.hold("a", "u"), 0)
        self.throttle.failed("a", "u")
        self.throttle.failed("a", "u")
        self.assertAlmostEqual(self.throttle.hold("a", "u"), 0.2)
        self.clock.advance(0.15)
        self.assertAlmostEqual(self.throttle.hold("a", "u"), 0.05)
        self.assertEqual(self.throttle.hold("a", "someone else"), 0)
        self.clock.advance(0.05)
        self.assertEqual(self.throttle.hold("a", "u"), 0)

    def test_held_failure_waits_at_least_its_hold(self) -> None:
        for _ in range(7):
            self.throttle.failed("a", "u")
        self.assertEqual(self.throttle.failed("a", "u", held=MAX_DELAY), MAX_DELAY)
        throttle = AuthThrottle(self.clock.seconds)
        self.assertEqual(throttle.failed("a", "u", held=2.0), 2.0)

    def test_success_and_time_forget_a_pair(self) -> None:
        for _ in range(5):
            self.throttle.failed("a", "u")
        self.throttle.succeeded("a", "u")
        self.assertEqual(self.throttle.failures("a", "u"), 0)
        self.assertEqual(self.throttle.failed("a", "u"), 0.1)
        self.throttle.failed("a", "u")
        self.clock.advance(FORGET_AFTER)
        self.assertEqual(self.throttle.failures("a", "u"), 0)
        self.assertEqual(self.throttle.failed("a", "u"), 0.1)

    def test_table_is_bounded(self) -> None:
        throttle = AuthThrottle(self.clock.seconds, max_pairs=3)
        for user in ("a", "b", "c"):
            throttle.failed("x", user)
        throttle.failed("x", "a")  # now the most recent
        throttle.failed("x", "d")  # forgets "b", the least recently failed
        self.assertEqual(len(throttle), 3)
        self.assertEqual([throttle.failures("x", u) for u in "abcd"], [2, 0, 1, 1])
        for n in range(1000):
            throttle.failed(f"10.0.{n // 256}.{n % 256}", "u")
        self.assertEqual(len(throttle), 3)

    def test_zero_delay_turns_the_throttle_off(self) -> None:
        throttle = AuthThrottle(self.clock.seconds, delay=0)
        for _ in range(20):
            self.assertEqual(throttle.failed("a", "u"), 0)
        self.assertEqual(throttle.hold("a", "u"), 0)

    def test_limits_checked(self) -> None:
        for kwargs in ({"delay": -1}, {"delay": 2, "max_delay": 1}, {"max_pairs": 0},
                       {"forget_after": 0}):
            with self.assertRaises(ValueError):
                AuthThrottle(self.clock.seconds, **kwargs)  # type: ignore[arg-type]


class FailureLogTests(SynchronousTestCase):
    def test_one_line_per_kind_per_interval_with_the_count(self) -> None:
        clock = Clock()
        log = FailureLog(clock.seconds, interval=10)
        self.assertEqual(log.admit("SCRAM-SHA-256"), 0)
        for _ in range(50):
            self.assertIsNone(log.admit("SCRAM-SHA-256"))
            clock.advance(0.05)
        self.assertEqual(log.admit("PLAIN"), 0)  # another kind has its own budget
        clock.advance(10)
        self.assertEqual(log.admit("SCRAM-SHA-256"), 50)
        self.assertIsNone(log.admit("SCRAM-SHA-256"))
