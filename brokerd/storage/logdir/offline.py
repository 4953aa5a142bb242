"""Bringing offline partitions back: a partition that could not be opened (a disk that
was full during recovery, an I/O error) is retried with exponential backoff, so that it
returns once the fault clears, without a restart.

What it does: :meth:`OfflinePartitions.retry` reopens the offline partitions whose
retry is due, with the recovery point they had when they went offline (kept in the
recovery-point checkpoint meanwhile, so a crash does not turn it into a full rescan).
What it does not do: schedule itself (the broker core's periodic tasks call it, in the
write pool) or anything with Twisted.
"""

from __future__ import annotations

import logging

from brokerd.errors import StorageError
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.directory_state import DirectoryState
from brokerd.storage.offline_backoff import (
    OFFLINE_RETRY_FIRST_SECONDS,
    OFFLINE_RETRY_MAX_SECONDS,
    RetrySchedule,
)

__all__ = ["OFFLINE_RETRY_FIRST_SECONDS", "OFFLINE_RETRY_MAX_SECONDS", "OfflinePartitions"]

log = logging.getLogger("brokerd.storage")


class OfflinePartitions:
    """The data directory's offline partitions: why each is offline (in the shared
    state, which readers consult), the recovery point each keeps, and its retries."""

    def __init__(self, state: DirectoryState) -> None:
        self._state = state
        self._points: dict[tuple[str, int], int | None] = {}
        self._retry: dict[tuple[str, int], RetrySchedule] = {}

    def went_offline(self, key: tuple[str, int], reason: str, point: int | None) -> None:
        self._state.put_offline(key, reason)
        self._points[key] = point
        previous = self._retry.get(key)
        now = self._state.clock()
        self._retry[key] = (
            RetrySchedule.first(now) if previous is None else previous.after_failure(now)
        )

    def forget(self, key: tuple[str, int]) -> None:
        self._state.forget_offline(key)
        self._points.pop(key, None)
        self._retry.pop(key, None)

    def points(self) -> dict[tuple[str, int], int]:
        """The recovery points offline partitions keep in the checkpoint (caller holds
        the lock), so a crash meanwhile does not turn them into a full rescan."""
        return {key: point for key, point in self._points.items() if point is not None}

    def retry(self, now: float | None = None) -> int:
        """Try to open every offline partition whose retry is due; returns how many came
        back. A failure doubles that partition's delay (up to the maximum)."""
        state = self._state
        when = state.clock() if now is None else now
        back = 0
        with state.lock:
            due = [k for k, schedule in self._retry.items() if schedule.due(when)]
            for key in due:
                topic, partition = key
                info = state.topics.get(topic)
                if info is None or partition >= info.partitions:
                    self.forget(key)
                    continue
                try:
                    plog = PartitionLog.open(
                        state.partition_path(topic, partition),
                        state.config_for(info),
                        recovery_point=self._points.get(key, 0),
                        clock=state.clock,
                    )
                except StorageError as exc:
                    schedule = self._retry[key].after_failure(when)
                    self._retry[key] = schedule
                    state.put_offline(key, str(exc))
                    log.warning(
                        "partition %s-%d still offline (next try in %.0f s): %s",
                        topic, partition, schedule.delay, exc,
                    )
                    continue
                state.put_online(key, plog)
                self.forget(key)
                log.warning("partition %s-%d is back online", topic, partition)
                back += 1
        return back
