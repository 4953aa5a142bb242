"""The run's progress display and its hard time bound.

One line per step on stderr: its number, name, duration, the time elapsed so far and an
estimate of the whole run, from each step's expected duration scaled by how the finished
steps compared with theirs. The bound is a deadline: a step that cannot start before it
is skipped, and a step still running at it is interrupted (``TimeBound`` raised in the main
thread by SIGALRM, so that its ``finally`` blocks stop its servers). Nothing here measures
anything or knows what the steps do.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import TextIO

# The pace of the steps finished so far predicts the rest, within these bounds; the
# expected durations count as PRIOR_SECONDS of evidence, so that a first short step does
# not turn the estimate into nonsense.
MIN_PACE = 0.5
MAX_PACE = 4.0
PRIOR_SECONDS = 30.0


class TimeBound(Exception):
    """The run's time bound was reached while a step was running."""


@dataclass(frozen=True)
class Step:
    name: str
    expected_seconds: float
    run: Callable[[], None]


def clock_text(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """Runs steps in order under a deadline, printing one line per step."""

    def __init__(
        self,
        steps: list[Step],
        *,
        limit_seconds: float,
        out: TextIO = sys.stderr,
        now: Callable[[], float] = time.monotonic,
        use_alarm: bool = True,
    ) -> None:
        self.steps = steps
        self.limit = limit_seconds
        self.out = out
        self.now = now
        self.use_alarm = use_alarm
        self.start = now()
        self.done_actual = 0.0
        self.done_expected = 0.0
        # (name, seconds, status) of every step, in order.
        self.record: list[tuple[str, float, str]] = []

    def remaining(self) -> float:
        return self.limit - (self.now() - self.start)

    def estimate_total(self, index: int) -> float:
        """Estimated length of the whole run once steps ``[0, index)`` are finished."""
        pace = (self.done_actual + PRIOR_SECONDS) / (self.done_expected + PRIOR_SECONDS)
        pace = min(MAX_PACE, max(MIN_PACE, pace))
        rest = sum(s.expected_seconds for s in self.steps[index:]) * pace
        return min(self.limit, (self.now() - self.start) + rest)

    def run_all(self, on_error: Callable[[Step, BaseException], str]) -> None:
        """Run every step; ``on_error`` turns a step's exception into its status text."""
        total = len(self.steps)
        width = max(len(s.name) for s in self.steps)
        for i, step in enumerate(self.steps):
            head = f"[{i + 1:>2}/{total}] {step.name:<{width}}"
            if self.remaining() <= 0:
                self._finish(i, step, head, 0.0, "skipped: time bound reached")
                continue
            if self._is_terminal():
                print(head, end=" ", file=self.out, flush=True)
            began = self.now()
            status = "ok"
            self._arm()
            try:
                step.run()
            except TimeBound:
                status = "cut short: time bound reached"
            except Exception as exc:  # one failing step must not lose the others' rows
                status = on_error(step, exc)
            finally:
                self._disarm()
            self._finish(i, step, head, self.now() - began, status)

    def _finish(self, i: int, step: Step, head: str, seconds: float, status: str) -> None:
        self.record.append((step.name, seconds, status))
        if status == "ok":
            self.done_actual += seconds
            self.done_expected += step.expected_seconds
        so_far = self.now() - self.start
        total = self.estimate_total(i + 1)
        tail = "" if status == "ok" else f"  [{status}]"
        # The line is written whole when the step ends: a step's own output (a client's log
        # line on stderr) would otherwise split it. A terminal sees the name while the step
        # runs, and the whole line written over it.
        back = "\r" if self._is_terminal() else ""
        print(
            f"{back}{head} {seconds:6.1f} s   elapsed {clock_text(so_far)}, "
            f"run ~{clock_text(total)}, ~{clock_text(total - so_far)} left{tail}",
            file=self.out,
            flush=True,
        )

    def _is_terminal(self) -> bool:
        isatty = getattr(self.out, "isatty", None)
        return bool(isatty is not None and isatty())

    def _arm(self) -> None:
        if not self.use_alarm:
            return

        def fire(signum: int, frame: FrameType | None) -> None:
            raise TimeBound()

        signal.signal(signal.SIGALRM, fire)
        signal.setitimer(signal.ITIMER_REAL, max(0.001, self.remaining()))

    def _disarm(self) -> None:
        if self.use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
