"""Rate-limited logging of write errors on the produce path (a full disk fails every
append until space is freed; one line per append would flood the log).

What it does: :class:`WriteErrorLog` logs the first error of a partition, then at most one
line per :data:`WRITE_ERROR_LOG_SECONDS` with the count of errors suppressed since.
What it does not do: decide anything about the partition (appends after a failed write
are still tried; see ``log.py``). No Twisted, no I/O besides logging.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["WRITE_ERROR_LOG_SECONDS", "WriteErrorLog"]

log = logging.getLogger("brokerd.storage")

#: At most one logged write error per partition in this many seconds.
WRITE_ERROR_LOG_SECONDS = 10.0


class WriteErrorLog:
    """One partition's rate-limited write-error log (any thread)."""

    def __init__(self, name: str, clock: Callable[[], float]) -> None:
        self._name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._last: float | None = None
        self._suppressed = 0

    def report(self, error: Exception) -> None:
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last < WRITE_ERROR_LOG_SECONDS:
                self._suppressed += 1
                return
            suppressed, self._suppressed, self._last = self._suppressed, 0, now
        if suppressed:
            log.error(
                "partition %s: append failed: %s (%d more failed appends not logged in the "
                "last %.0f s)",
                self._name,
                error,
                suppressed,
                WRITE_ERROR_LOG_SECONDS,
            )
        else:
            log.error("partition %s: append failed: %s", self._name, error)
