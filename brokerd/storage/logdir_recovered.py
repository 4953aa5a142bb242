"""Syncing what crash recovery validated but left unsynced, and the recovery points a
checkpoint may record meanwhile.

Recovery does not sync the segments it validates (``brokerd/storage/recovery.py``): until
they are synced, a partition's durable point is the recovery point it was recovered from,
whatever its log's own ``recovery_point`` says after later flushes.
:meth:`RecoveredSyncMixin.sync_recovered` syncs them partition by partition (the core runs
it in the write pool right after the start; checkpoints and close run it too).
What it does not do: schedule itself, or anything with Twisted.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from brokerd.storage.log import PartitionLog
from brokerd.storage.recovery import sync_recovered

__all__ = ["RecoveredSyncMixin"]

log = logging.getLogger("brokerd.storage")


class _State(Protocol):
    _logs: dict[tuple[str, int], PartitionLog]
    _lock: threading.RLock
    _sync_lock: threading.RLock
    _recovery_synced: dict[tuple[str, int], PartitionLog]

    def _unsynced(self, key: tuple[str, int], plog: PartitionLog) -> bool: ...
    def _sync_recovered_locked(self) -> bool: ...


class RecoveredSyncMixin:
    """:class:`~brokerd.storage.logdir.LogDirectory`'s sync of recovered segments."""

    def _unsynced(self: _State, key: tuple[str, int], plog: PartitionLog) -> bool:
        """True while ``plog`` holds segments recovery validated but did not sync."""
        synced = self._recovery_synced.get(key) is plog
        return plog.recovery.unsynced_from is not None and not synced

    def _durable_point(self: _State, key: tuple[str, int], plog: PartitionLog) -> int:
        if self._unsynced(key, plog):
            # Its recovered segments are not on stable storage yet: the point it was
            # recovered from still holds.
            return min(plog.recovery_point, plog.recovery.recovery_point or 0)
        return plog.recovery_point

    def unsynced_partitions(self: _State) -> int:
        """Partitions holding segments recovery validated and did not sync yet."""
        with self._lock:
            return sum(self._unsynced(key, plog) for key, plog in self._logs.items())

    def sync_recovered(self: _State, *, wait: bool = True) -> bool:
        """Sync what recovery validated and left unsynced (see ``recovery.py``), partition
        by partition; afterwards checkpoints may record their recovery points. False if a
        sync failed: that partition keeps its old recovery point (and the next shutdown
        is not marked clean), so the next start validates it again. Without ``wait``, a
        pass already running in another thread is left to finish the work."""
        if not self._sync_lock.acquire(blocking=wait):
            return True
        try:
            return self._sync_recovered_locked()
        finally:
            self._sync_lock.release()

    def _sync_recovered_locked(self: _State) -> bool:
        ok = True
        with self._lock:
            due = [(k, plog) for k, plog in self._logs.items() if self._unsynced(k, plog)]
            # Deleted or reopened partitions' entries go.
            self._recovery_synced = {
                k: p for k, p in self._recovery_synced.items() if self._logs.get(k) is p
            }
        for key, plog in due:
            unsynced_from = plog.recovery.unsynced_from
            assert unsynced_from is not None
            try:
                sync_recovered(plog.segments, unsynced_from)
            except OSError as exc:
                log.error("%s: syncing the recovered segments failed: %s", plog.path, exc)
                ok = False
                continue
            with self._lock:
                if self._logs.get(key) is plog:
                    self._recovery_synced[key] = plog
        return ok
