"""The core's periodic tasks: interval fsync, retention passes, recovery checkpoints,
offline-partition retries.

:class:`PeriodicTasks` runs callables every so many seconds on the injected clock, logs
(and stops) a task that fails, and stops them all at once at shutdown. A period of zero
or less leaves a task off (tests turn retention and checkpoints off that way). What each
task does is the caller's: it only keeps time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from twisted.internet import task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.clock import Clock

#: Default seconds between retention passes and between recovery-point checkpoints.
RETENTION_CHECK_SECONDS = 300.0
CHECKPOINT_SECONDS = 60.0
#: Seconds between polls for offline partitions due for a retry (each has its own
#: backoff, see brokerd/storage/logdir/offline.py).
OFFLINE_CHECK_SECONDS = 5.0


class PeriodicTasks:
    """Named periodic calls on one clock (reactor thread)."""

    _log = Logger()

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._loops: list[task.LoopingCall] = []

    def every(self, seconds: float, f: Callable[[], object]) -> None:
        """Call ``f`` every ``seconds`` (the first time after one period)."""
        if seconds <= 0:
            return
        loop = task.LoopingCall(f)
        # A Clock Protocol, not the zope interface Twisted declares: same methods.
        loop.clock = cast(IReactorTime, self._clock)
        loop.start(seconds, now=False).addErrback(self._failed)
        self._loops.append(loop)

    def _failed(self, failure: Failure) -> None:
        self._log.failure("periodic task failed", failure)

    def stop(self) -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
