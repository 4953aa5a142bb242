"""Syncing what crash recovery validated but left unsynced, and the recovery points a
checkpoint may record meanwhile.

Recovery does not sync the segments it validates (``brokerd/storage/log/loader.py``): until
they are synced, a partition's durable point is the recovery point it was recovered from,
whatever its log's own ``recovery_point`` says after later flushes.
:meth:`RecoveredSync.sync` syncs them partition by partition (the core runs
it in the write pool right after the start; checkpoints and close run it too).
What it does not do: schedule itself, or anything with Twisted.
"""

from __future__ import annotations

import logging
import threading

from brokerd.storage.log.loader import sync_recovered
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.directory_state import DirectoryState

__all__ = ["RecoveredSync"]

log = logging.getLogger("brokerd.storage")


class RecoveredSync:
    """The data directory's sync of recovered segments."""

    def __init__(self, state: DirectoryState) -> None:
        self._state = state
        #: Held while recovered segments are synced (one such pass at a time) and by the
        #: directory's close; always taken before the state's lock, never while holding it.
        self.lock = threading.RLock()
        # Partitions whose recovered segments are synced (the log object that was).
        self._synced: dict[tuple[str, int], PartitionLog] = {}

    def _unsynced(self, key: tuple[str, int], plog: PartitionLog) -> bool:
        """True while ``plog`` holds segments recovery validated but did not sync."""
        synced = self._synced.get(key) is plog
        return plog.recovery.unsynced_from is not None and not synced

    def durable_point(self, key: tuple[str, int], plog: PartitionLog) -> int:
        """The recovery point a checkpoint may record for ``plog`` now."""
        if self._unsynced(key, plog):
            # Its recovered segments are not on stable storage yet: the point it was
            # recovered from still holds.
            return min(plog.recovery_point, plog.recovery.recovery_point or 0)
        return plog.recovery_point

    def unsynced_partitions(self) -> int:
        """Partitions holding segments recovery validated and did not sync yet."""
        with self._state.lock:
            return sum(self._unsynced(key, plog) for key, plog in self._state.logs.items())

    def sync(self, *, wait: bool = True) -> bool:
        """Sync what recovery validated and left unsynced (see ``log/loader.py``), partition
        by partition; afterwards checkpoints may record their recovery points. False if a
        sync failed: that partition keeps its old recovery point (and the next shutdown
        is not marked clean), so the next start validates it again. Without ``wait``, a
        pass already running in another thread is left to finish the work."""
        if not self.lock.acquire(blocking=wait):
            return True
        try:
            return self._sync_locked()
        finally:
            self.lock.release()

    def _sync_locked(self) -> bool:
        state = self._state
        ok = True
        with state.lock:
            due = [(k, plog) for k, plog in state.logs.items() if self._unsynced(k, plog)]
            # Deleted or reopened partitions' entries go.
            self._synced = {k: p for k, p in self._synced.items() if state.logs.get(k) is p}
        for key, plog in due:
            unsynced_from = plog.recovery.unsynced_from
            assert unsynced_from is not None
            try:
                sync_recovered(plog.segments, unsynced_from)
            except OSError as exc:
                log.error("%s: syncing the recovered segments failed: %s", plog.path, exc)
                ok = False
                continue
            with state.lock:
                if state.logs.get(key) is plog:
                    self._synced[key] = plog
        return ok
