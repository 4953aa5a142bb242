"""Rate-limited logging of storage faults (a full disk fails every append and every
commit until space is freed; one line per failed request would flood the log).

What it does: :class:`RateLimitedLog` logs the first fault of one subject (a partition, a
journal store), then at most one line per :data:`WRITE_ERROR_LOG_SECONDS` with the count
of faults suppressed since, and never a traceback (these are expected OS errors, not bugs).
:class:`WriteErrorLog` is a partition's use of it for failed appends.
What it does not do: decide anything about the subject (appends after a failed write are
still tried; see ``log/partition_log.py`` and ``journal/faults.py``). No Twisted, no I/O besides
logging.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["WRITE_ERROR_LOG_SECONDS", "RateLimitedLog", "WriteErrorLog"]

log = logging.getLogger("brokerd.storage")

#: At most one logged fault per subject (partition or store) in this many seconds.
WRITE_ERROR_LOG_SECONDS = 10.0


class RateLimitedLog:
    """One subject's rate-limited fault log (any thread).

    :param subject: what every line starts with (``"partition t-0"``).
    :param clock: seconds, for the window.
    :param suppressed_noun: what the suppressed count counts (``"failed appends"``).
    :param emit: where a line goes (default: the ``brokerd.storage`` logger at ERROR); a
        layer with its own logger passes its own.
    """

    def __init__(
        self,
        subject: str,
        clock: Callable[[], float],
        *,
        suppressed_noun: str = "faults",
        emit: Callable[[str], None] | None = None,
    ) -> None:
        self._emit = emit if emit is not None else log.error
        self._subject = subject
        self._clock = clock
        self._noun = suppressed_noun
        self._lock = threading.Lock()
        self._last: float | None = None
        self._suppressed = 0

    def error(self, message: str) -> bool:
        """Log ``subject: message`` unless a line was logged in the window (then it is
        only counted); returns whether it was logged."""
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last < WRITE_ERROR_LOG_SECONDS:
                self._suppressed += 1
                return False
            suppressed, self._suppressed, self._last = self._suppressed, 0, now
        line = f"{self._subject}: {message}"
        if suppressed:
            line += (
                f" ({suppressed} more {self._noun} not logged in the last"
                f" {WRITE_ERROR_LOG_SECONDS:.0f} s)"
            )
        self._emit(line)
        return True


class WriteErrorLog:
    """One partition's rate-limited append-error log (any thread)."""

    def __init__(self, name: str, clock: Callable[[], float]) -> None:
        self._lines = RateLimitedLog(
            f"partition {name}", clock, suppressed_noun="failed appends"
        )

    def report(self, error: Exception) -> None:
        self._lines.error(f"append failed: {error}")
