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

__all__ = ["OFFLINE_RETRY_FIRST_SECONDS", "OFFLINE_RETRY_MAX_SECONDS", "OfflineRetryMixin"]

log = logging.getLogger("brokerd.storage")

#: Delay before the first retry of an offline partition; doubled after each failure.
OFFLINE_RETRY_FIRST_SECONDS = 5.0
#: Longest delay between two retries of one offline partition.
OFFLINE_RETRY_MAX_SECONDS = 300.0


class _DirectoryState(DirectoryState, Protocol):
    """The directory state, and the offline retries' own tables."""

    _offline_points: dict[tuple[str, int], int | None]
    _offline_retry: dict[tuple[str, int], tuple[float, float]]


class OfflineRetryMixin:
    """:class:`~brokerd.storage.logdir.LogDirectory`'s offline-partition retries."""

    def _went_offline(
        self: _DirectoryState, key: tuple[str, int], reason: str, point: int | None
    ) -> None:
        self.offline[key] = reason
        self._offline_points[key] = point
        previous = self._offline_retry.get(key)
        delay = (
            OFFLINE_RETRY_FIRST_SECONDS
            if previous is None
            else min(previous[1] * 2, OFFLINE_RETRY_MAX_SECONDS)
        )
        self._offline_retry[key] = (self._clock() + delay, delay)

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
            due = [k for k, (at, _d) in self._offline_retry.items() if at <= when]
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
                    delay = self._offline_retry[key][1]
                    delay = min(delay * 2, OFFLINE_RETRY_MAX_SECONDS)
                    self._offline_retry[key] = (when + delay, delay)
                    self.offline[key] = str(exc)
                    log.warning(
                        "partition %s-%d still offline (next try in %.0f s): %s",
                        topic,
                        partition,
                        delay,
                        exc,
                    )
                    continue
                self._logs[key] = plog
                OfflineRetryMixin._forget_offline(self, key)
                log.warning("partition %s-%d is back online", topic, partition)
                back += 1
        return back
