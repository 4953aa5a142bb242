"""What a journal store (the consumer-offsets journal, the transaction log) does when a
write fails: recover like a partition instead of failing until a restart.

A failed write is one of two kinds, told apart by *where* it failed, not by its errno:

- **transient**: ``write`` failed (ENOSPC, EDQUOT, EIO, ...) and the file is back at its
  last good length (cut back, and checked with ``fstat``). Nothing was acknowledged and
  nothing earlier is in doubt (every earlier record was synced), so the store stays
  online: the request gets an error and the next write simply tries again, which
  succeeds once space returns.
- **lost trust**: ``fdatasync`` failed (the kernel may have dropped the dirty pages, so a
  retried sync could falsely succeed), a partial record could not be cut off (the next
  record would land behind garbage), or a compaction's rename or directory sync failed
  (which file a crash leaves is unknown). The store goes **offline**: every write is
  refused, ``/readyz`` says so, and it is reopened from its durable state (the file is
  replayed from disk, a torn tail cut off, file and directory synced) on the
  :class:`~brokerd.storage.offline_backoff.RetrySchedule` partitions use, until a reopen
  succeeds.

:class:`StoreFaults` is that state machine (:class:`StoreState`, :data:`TRANSITIONS`, walked
by :func:`brokerd.fsm.step`: a pair it refuses is a bug) and
its rate-limited log (one line per store per 10 s, with a count; no tracebacks).
:func:`append_records` is the journals' append that feeds it; :func:`reopen_if_due` and
:func:`settle` are the reopen step both stores share. What it does not do: replay a
journal (each store knows its file format), scheduling (the broker polls
``retry_reopen`` of each store: ``brokerd/core/store_recovery.py``), or anything with
Twisted.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Callable
from typing import TypeVar

from brokerd.errors import StorageError
from brokerd.fsm import step
from brokerd.storage import fileio
from brokerd.storage.offline_backoff import RetrySchedule
from brokerd.storage.write_errors import RateLimitedLog

__all__ = [
    "TRANSITIONS",
    "StoreEvent",
    "StoreFaults",
    "StoreOffline",
    "StoreState",
    "append_records",
    "reopen_if_due",
    "settle",
]

T = TypeVar("T")

log = logging.getLogger("brokerd.storage")


class StoreState(enum.Enum):
    ONLINE = "online"
    #: Lost trust in its file: refuses writes until a reopen from disk succeeds.
    OFFLINE = "offline"
    CLOSED = "closed"


class StoreEvent(enum.Enum):
    WRITE_FAILED = "write failed"
    LOST_TRUST = "lost trust"
    REOPENED = "reopened"
    REOPEN_FAILED = "reopen failed"
    CLOSE = "close"


TRANSITIONS: dict[tuple[StoreState, StoreEvent], StoreState] = {
    (StoreState.ONLINE, StoreEvent.WRITE_FAILED): StoreState.ONLINE,
    (StoreState.ONLINE, StoreEvent.LOST_TRUST): StoreState.OFFLINE,
    (StoreState.OFFLINE, StoreEvent.REOPEN_FAILED): StoreState.OFFLINE,
    (StoreState.OFFLINE, StoreEvent.REOPENED): StoreState.ONLINE,
    (StoreState.ONLINE, StoreEvent.CLOSE): StoreState.CLOSED,
    (StoreState.OFFLINE, StoreEvent.CLOSE): StoreState.CLOSED,
    (StoreState.CLOSED, StoreEvent.CLOSE): StoreState.CLOSED,
}


class StoreOffline(StorageError):
    """The store refused a write: it is offline until it is reopened from disk."""


class StoreFaults:
    """One store's fault state and fault log. Events come from the store's writer (under
    its write lock); :attr:`offline_reason` may be read from any thread.

    :param name: what the store is, for operators (``"consumer offsets store"``).
    :param path: its file.
    :param clock: seconds; drives the log window and the reopen schedule.
    """

    def __init__(self, name: str, path: str, clock: Callable[[], float]) -> None:
        self.name = name
        self.path = path
        self._clock = clock
        self.state = StoreState.ONLINE
        #: Why the store is offline (None while it is not).
        self._reason: str | None = None
        self._schedule: RetrySchedule | None = None
        self._lines = RateLimitedLog(f"{name} {path}", clock, suppressed_noun="store errors")
        #: Failed writes (of either kind) and refused writes since open.
        self.errors = 0

    def _move(self, event: StoreEvent) -> None:
        self.state = step(TRANSITIONS, self.state, event, self.name)

    @property
    def offline_reason(self) -> str | None:
        """Why the store is offline, or None (online or closed)."""
        return self._reason if self.state is StoreState.OFFLINE else None

    @property
    def next_reopen_at(self) -> float | None:
        return None if self._schedule is None else self._schedule.at

    # -- the writer's events ------------------------------------------------------------

    def check_writable(self) -> None:
        """Raise unless a write may be tried now."""
        if self.state is StoreState.CLOSED:
            raise StorageError(f"{self.name} {self.path} is closed")
        if self.state is StoreState.OFFLINE:
            self.errors += 1
            self._lines.error(f"write refused: offline ({self._reason})")
            raise StoreOffline(
                f"{self.name} {self.path} is offline until it is reopened: {self._reason}"
            )

    def write_failed(self, exc: OSError) -> StorageError:
        """A transient failure: logged (rate-limited); returns the error to raise."""
        self._move(StoreEvent.WRITE_FAILED)
        self.errors += 1
        self._lines.error(f"write failed, nothing stored (the next write tries again): {exc}")
        return StorageError(f"write to {self.name} {self.path} failed: {exc}")

    def lost_trust(self, why: str) -> StorageError:
        """The store goes offline; returns the error to raise (if the caller raises)."""
        self._move(StoreEvent.LOST_TRUST)
        self.errors += 1
        self._reason = why
        self._schedule = RetrySchedule.first(self._clock())
        self._lines.error(
            f"offline: {why}; reopening from disk in {self._schedule.delay:.0f} s"
        )
        return StoreOffline(f"{self.name} {self.path} went offline: {why}")

    # -- reopening ----------------------------------------------------------------------

    def reopen_due(self, now: float | None = None) -> bool:
        when = self._clock() if now is None else now
        return (
            self.state is StoreState.OFFLINE
            and self._schedule is not None
            and self._schedule.due(when)
        )

    def reopened(self) -> None:
        self._move(StoreEvent.REOPENED)
        self._reason = None
        self._schedule = None
        # Once per offline spell, which lasts at least the first retry delay.
        log.warning("%s %s is back online (reopened from disk)", self.name, self.path)

    def reopen_failed(self, exc: Exception, now: float | None = None) -> None:
        self._move(StoreEvent.REOPEN_FAILED)
        assert self._schedule is not None
        self._schedule = self._schedule.after_failure(self._clock() if now is None else now)
        self._lines.error(
            f"still offline (next reopen in {self._schedule.delay:.0f} s): {exc}"
        )

    def close(self) -> None:
        self._move(StoreEvent.CLOSE)


def settle(fd: int, path: str) -> None:
    """Make a reopened journal's content and name durable before it takes writes again
    (whatever the failure left unsure: a record's bytes, a compaction's rename)."""
    os.fsync(fd)
    fileio.fsync_dir(os.path.dirname(os.path.abspath(path)))


def reopen_if_due(
    faults: StoreFaults,
    now: float | None,
    open_again: Callable[[], T],
    adopt: Callable[[T], None],
) -> bool:
    """The reopen step both stores share (caller holds the store's write lock): if a
    reopen is due, ``open_again()`` (replay from disk, then :func:`settle`) and
    ``adopt`` what it opened; a failure only reschedules. True if the store is back."""
    if not faults.reopen_due(now):
        return False
    try:
        fresh = open_again()
    except (StorageError, OSError) as exc:
        faults.reopen_failed(exc, now)
        return False
    adopt(fresh)
    faults.reopened()
    return True


def append_records(fd: int, data: bytes, size: int, faults: StoreFaults) -> None:
    """Append whole framed records to a journal whose intact part is ``size`` bytes (its
    descriptor is in append mode) and fdatasync them.

    :raises StorageError: the write failed and the file is back at ``size`` (transient;
        the store stays online).
    :raises StoreOffline: the sync failed, or a partial write could not be cut off; the
        store is now offline.
    """
    try:
        fileio.write_all(fd, data)
    except OSError as exc:
        if fileio.cut_back(fd, size):
            raise faults.write_failed(exc) from exc
        raise faults.lost_trust(
            f"write failed ({exc}) and the partial record could not be cut off"
        ) from exc
    try:
        fileio.datasync(fd)
    except OSError as exc:
        # Best effort: a reopen's replay drops a torn record anyway.
        fileio.cut_back(fd, size)
        raise faults.lost_trust(f"fdatasync failed: {exc}") from exc
