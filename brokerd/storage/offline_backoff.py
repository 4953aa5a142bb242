"""The retry schedule of anything in storage that went offline and reopens by itself: a
partition that could not be opened (``logdir/offline.py``) and a journal store that lost
trust in its file (``journal/faults.py``) follow the same backoff.

What it does: :class:`RetrySchedule` says when the next reopen is due; the first comes
:data:`OFFLINE_RETRY_FIRST_SECONDS` after going offline, and each failed reopen doubles
the delay up to :data:`OFFLINE_RETRY_MAX_SECONDS`. What it does not do: keep time, run
anything, or know what is being reopened. Pure.
"""

from __future__ import annotations

import attrs

__all__ = ["OFFLINE_RETRY_FIRST_SECONDS", "OFFLINE_RETRY_MAX_SECONDS", "RetrySchedule"]

#: Delay before the first reopen of something that went offline; doubled after each failure.
OFFLINE_RETRY_FIRST_SECONDS = 5.0
#: Longest delay between two reopen attempts.
OFFLINE_RETRY_MAX_SECONDS = 300.0


@attrs.frozen
class RetrySchedule:
    """The next reopen attempt: due at ``at`` (clock seconds), ``delay`` after the last."""

    at: float
    delay: float

    @classmethod
    def first(cls, now: float) -> RetrySchedule:
        return cls(now + OFFLINE_RETRY_FIRST_SECONDS, OFFLINE_RETRY_FIRST_SECONDS)

    def after_failure(self, now: float) -> RetrySchedule:
        """The schedule after an attempt at ``now`` failed: the delay doubles (capped)."""
        delay = min(self.delay * 2, OFFLINE_RETRY_MAX_SECONDS)
        return RetrySchedule(now + delay, delay)

    def due(self, now: float) -> bool:
        return self.at <= now
