"""brokerd/after_answer.py: the wake-ups one broker holds until an answer is written,
run in the order first held, one per holder, each once, a failing one logged."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from brokerd.after_answer import AfterAnswer


class AfterAnswerTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.wakeups = AfterAnswer()
        self.ran: list[str] = []

    def note(self, name: str) -> None:
        self.ran.append(name)

    def test_held_wake_ups_run_once_an_answer_is_written_in_order(self) -> None:
        self.wakeups.hold("a", lambda: self.note("a"))
        self.wakeups.hold("b", lambda: self.note("b"))
        self.assertEqual((self.ran, self.wakeups.pending), ([], 2))
        self.wakeups.answer_written()
        self.assertEqual((self.ran, self.wakeups.pending), (["a", "b"], 0))
        self.wakeups.answer_written()  # each runs once
        self.assertEqual(self.ran, ["a", "b"])

    def test_a_second_wake_up_of_a_holder_replaces_the_first_in_its_place(self) -> None:
        self.wakeups.hold("a", lambda: self.note("a1"))
        self.wakeups.hold("b", lambda: self.note("b"))
        self.wakeups.hold("a", lambda: self.note("a2"))
        self.assertEqual(self.wakeups.pending, 2)
        self.wakeups.answer_written()
        self.assertEqual(self.ran, ["a2", "b"])

    def test_a_forgotten_wake_up_does_not_run(self) -> None:
        self.wakeups.hold("a", lambda: self.note("a"))
        self.wakeups.hold("b", lambda: self.note("b"))
        self.wakeups.forget("a")
        self.wakeups.forget("never held")
        self.wakeups.answer_written()
        self.assertEqual(self.ran, ["b"])

    def test_a_nested_answer_leaves_the_work_to_the_running_loop(self) -> None:
        def first() -> None:
            self.note("first")
            # A woken Fetch's answer is written, and its append holds another wake-up.
            self.wakeups.hold("later", lambda: self.note("later"))
            self.wakeups.answer_written()
            self.assertEqual(self.ran, ["first"], "the nested call ran nothing")

        self.wakeups.hold("first", first)
        self.wakeups.hold("second", lambda: self.note("second"))
        self.wakeups.answer_written()
        self.assertEqual(self.ran, ["first", "second", "later"])
        self.assertEqual(self.wakeups.pending, 0)

    def test_a_failing_wake_up_is_logged_and_the_others_still_run(self) -> None:
        def boom() -> None:
            raise RuntimeError("boom")

        self.wakeups.hold("a", boom)
        self.wakeups.hold("b", lambda: self.note("b"))
        self.wakeups.answer_written()
        self.assertEqual(self.ran, ["b"])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.assertEqual(self.wakeups.pending, 0)
        # The loop is not left running: the next answer runs the next wake-ups.
        self.wakeups.hold("c", lambda: self.note("c"))
        self.wakeups.answer_written()
        self.assertEqual(self.ran, ["b", "c"])

    def test_two_holders_of_wake_ups_are_independent(self) -> None:
        other = AfterAnswer()
        self.wakeups.hold("a", lambda: self.note("a"))
        other.answer_written()
        self.assertEqual((self.ran, self.wakeups.pending), ([], 1))
