"""Bringing offline partitions back: a partition that could not be opened (a disk that
was full during recovery, an I/O error) is retried with exponential backoff, so that it
returns once the fault clears, without a restart.

What it does: :meth:`OfflineRetryMixin.retry_offline` reopens the offline partitions whose
retry is due, with the recovery point they had when they went offline (kept in the
recovery-point checkpoint meanwhile, so a crash does not turn it into a full rescan).
What it does not do: schedule itself (the broker core's periodic tasks call it, in the
write pool) or anything with Twisted.
"""

from __future__ import annotations

import logging
import os
from typing import Protocol

from brokerd.errors import StorageError
from brokerd.storage.log import PartitionLog
from brokerd.storage.logdir_state import DirectoryState
from brokerd.storage.offline_backoff import (
    OFFLINE_RETRY_FIRST_SECONDS,
    OFFLINE_RETRY_MAX_SECONDS,
    RetrySchedule,
)

__all__ = ["OFFLINE_RETRY_FIRST_SECONDS", "OFFLINE_RETRY_MAX_SECONDS", "OfflineRetryMixin"]

log = logging.getLogger("brokerd.storage")


class _DirectoryState(DirectoryState, Protocol):
    """The directory state, and the offline retries' own tables."""

    _offline_points: dict[tuple[str, int], int | None]
    _offline_retry: dict[tuple[str, int], RetrySchedule]


class OfflineRetryMixin:
    """:class:`~brokerd.storage.logdir.LogDirectory`'s offline-partition retries."""

    def _went_offline(
        self: _DirectoryState, key: tuple[str, int], reason: str, point: int | None
    ) -> None:
        self.offline[key] = reason
        self._offline_points[key] = point
        previous = self._offline_retry.get(key)
        now = self._clock()
        self._offline_retry[key] = (
            RetrySchedule.first(now) if previous is None else previous.after_failure(now)
        )

    def _forget_offline(self: _DirectoryState, key: tuple[str, int]) -> None:
        self.offline.pop(key, None)
        self._offline_points.pop(key, None)
        self._offline_retry.pop(key, None)

    def retry_offline(self: _DirectoryState, now: float | None = None) -> int:
        """Try to open every offline partition whose retry is due; returns how many came
        back. A failure doubles that partition's delay (up to the maximum)."""
        from brokerd.storage.logdir import partition_dir_name

        when = self._clock() if now is None else now
        back = 0
        with self._lock:
            due = [k for k, schedule in self._offline_retry.items() if schedule.due(when)]
            for key in due:
                topic, partition = key
                info = self._topics.get(topic)
                if info is None or partition >= info.partitions:
                    OfflineRetryMixin._forget_offline(self, key)
                    continue
                point = self._offline_points.get(key, 0)
                try:
                    plog = PartitionLog.open(
                        os.path.join(self.path, partition_dir_name(topic, partition)),
                        self.config_for(info),
                        recovery_point=point,
                        clock=self._clock,
                    )
                except StorageError as exc:
                    schedule = self._offline_retry[key].after_failure(when)
                    self._offline_retry[key] = schedule
                    self.offline[key] = str(exc)
                    log.warning(
                        "partition %s-%d still offline (next try in %.0f s): %s",
                        topic,
                        partition,
                        schedule.delay,
                        exc,
                    )
                    continue
                self._logs[key] = plog
                OfflineRetryMixin._forget_offline(self, key)
                log.warning("partition %s-%d is back online", topic, partition)
                back += 1
        return back
