"""Partition directories on disk: opening a topic's new, empty partitions and removing a
topic's directories (and stale ones a crash left behind).

A new partition's directory is created and the data directory synced before the
registry names it; a directory the registry does not name was left by a crash during a
create or delete and goes when its name is used again. Runs without the directory's
lock: the caller has reserved the topic's name. Blocking; no Twisted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil

from brokerd.errors import StorageError
from brokerd.storage.fileio import fsync_dir
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.directory_state import DirectoryState
from brokerd.storage.types import TopicInfo

__all__ = ["PartitionDirs", "close_all"]

log = logging.getLogger("brokerd.storage")


class PartitionDirs:
    """The partition directories of one data directory."""

    def __init__(self, state: DirectoryState) -> None:
        self._state = state

    def open_new(self, info: TopicInfo, first: int, total: int) -> list[PartitionLog]:
        """Open empty partitions ``first..total-1`` of ``info`` (stale directories of an
        earlier crash removed first) and sync the data directory, so that they are
        durable before the registry names them. On failure, closes what it opened and
        removes those directories."""
        state = self._state
        config = state.config_for(info)
        opened: list[PartitionLog] = []
        try:
            for partition in range(first, total):
                path = state.partition_path(info.name, partition)
                self.remove_stale(path)
                opened.append(
                    PartitionLog.open(path, config, recovery_point=None, clock=state.clock)
                )
            fsync_dir(state.path)
        except BaseException as exc:
            close_all(opened)
            self.remove_new(info.name, first, total)
            if isinstance(exc, OSError):
                raise StorageError(f"cannot create partitions of {info.name!r}: {exc}") from exc
            raise
        return opened

    def remove_new(self, name: str, first: int, total: int) -> None:
        """Remove the directories of partitions ``first..total-1`` of ``name``."""
        for partition in range(first, total):
            shutil.rmtree(self._state.partition_path(name, partition), ignore_errors=True)

    def remove_stale(self, path: str) -> None:
        """A directory for a topic the registry does not know: left by a crash during a
        create or delete. The registry is the truth, so it goes (never followed)."""
        if os.path.islink(path) or os.path.isfile(path):
            log.warning("removing stale %s", path)
            os.unlink(path)
        elif os.path.isdir(path):
            log.warning("removing stale partition directory %s", path)
            shutil.rmtree(path)

    def remove(self, name: str, partitions: int) -> None:
        """Remove every partition directory of topic ``name`` (a symlink is unlinked,
        never followed) and sync the data directory, best effort."""
        for p in range(partitions):
            path = self._state.partition_path(name, p)
            if os.path.islink(path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            else:
                shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(OSError):
            fsync_dir(self._state.path)


def close_all(logs: list[PartitionLog] | list[PartitionLog | None]) -> None:
    """Close logs whose data goes anyway: best effort, whatever state they are in
    (failed, offline). Closing twice is harmless."""
    for plog in logs:
        if plog is not None:
            with contextlib.suppress(Exception):
                plog.close()
