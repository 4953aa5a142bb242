"""brokerd.core.stopping: the latch and the one refusal once it is set."""

from __future__ import annotations

from twisted.internet import defer
from twisted.python.failure import Failure

from brokerd.core.stopping import StopLatch, refused_when_stopping
from brokerd.errors import ShuttingDown

from tests.deferreds import outcome_of, result_of


class _Part:
    def __init__(self) -> None:
        self.stop_latch = StopLatch()
        self.calls: list[int] = []

    @refused_when_stopping
    def work(self, n: int) -> defer.Deferred[int]:
        self.calls.append(n)
        return defer.succeed(n * 2)


def test_latch_starts_unset_and_stays_set() -> None:
    latch = StopLatch()
    assert latch.stopping is False
    latch.stop()
    latch.stop()
    assert latch.stopping is True


def test_method_runs_until_stopping_then_refuses_without_running() -> None:
    part = _Part()
    assert result_of(part.work(3)) == 6
    part.stop_latch.stop()
    d = part.work(4)
    failure = outcome_of(d)
    assert isinstance(failure, Failure) and failure.check(ShuttingDown)
    assert part.calls == [3]
    assert part.work.__name__ == "work"
