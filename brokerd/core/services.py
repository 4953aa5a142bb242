"""Service-tree pieces of the core: ordered shutdown, and the log directory's service.

:class:`SequentialMultiService` stops its children one at a time, the last added first,
each after the previous one's stop finished (Twisted's ``MultiService`` stops them all at
once). The core's shutdown order is therefore the order its children were added in,
reversed: whatever the application adds to the broker (the group coordinator and its
offsets store) stops before the log directory closes, which happens before the worker
pools stop. A child whose stop fails is logged and the next one still stops.

:class:`LogDirectoryService` is the log directory's life in the core: at start it
restores every partition's idempotent-producer state (blocking, before serving) and,
after a crash, has the segments recovery validated synced in the write pool (recovery
leaves that to the background, see ``brokerd/storage/log/loader.py``); while running it
writes recovery checkpoints and producer-state snapshots, and tells the directory's
usage (DescribeLogDirs); at stop it writes the last snapshots and closes the directory
(sync, checkpoint, clean-shutdown marker) in the write pool.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from twisted.application import service
from twisted.internet import defer
from twisted.logger import Logger

from brokerd.core.interfaces import Runner
from brokerd.core.producers import write_snapshots
from brokerd.core.topics import TopicRegistry
from brokerd.errors import BrokerError
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.producer_empty import take_empty_ends, write_empty_ends
from brokerd.storage.log.producer_state import load_table
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.types import LogDirUsage


class SequentialMultiService(service.MultiService):
    """A ``MultiService`` that stops its children in reverse order, one at a time."""

    _log = Logger()

    def stopService(self) -> defer.Deferred[None]:
        service.Service.stopService(self)
        return defer.Deferred.fromCoroutine(self.stop_children())

    async def stop_children(self) -> None:
        for child in reversed(list(self)):
            try:
                await defer.maybeDeferred(child.stopService)
            except Exception:
                self._log.failure("stopping {service!r} failed", service=child)


class LogDirectoryService(service.Service):
    """Restores producer state at start; snapshots, checkpoints and closes the logs."""

    name = "log-directory"
    _log = Logger()

    def __init__(self, logdir: LogDirectory, registry: TopicRegistry, *, run_write: Runner) -> None:
        self._logdir = logdir
        self._registry = registry
        self._run_write = run_write

    def startService(self) -> None:
        service.Service.startService(self)
        self._restore_producers()
        logdir = self._logdir
        if logdir.unsynced_partitions():
            # After a crash: recovery validated the logs without syncing them (the
            # listeners start sooner); sync them now, in the background, and checkpoint
            # the recovery points that then hold.
            d: defer.Deferred[bool] = self._run_write(logdir.sync_recovered)
            d.addCallback(lambda _: self.checkpoint())
            d.addErrback(lambda f: self._log.failure("syncing recovered segments failed", f))

    def _restore_producers(self) -> None:
        logdir = self._logdir
        # Partitions whose producer table was empty at the clean close, at this end.
        empty = take_empty_ends(logdir.path, trust=logdir.was_clean)
        for (topic, index), log in logdir.logs().items():
            self._registry.adopt(topic, index, log)
            if empty.get((topic, index)) == log.log_end_offset:
                continue
            try:
                load_table(log, log.producers)
            except BrokerError as e:
                self._log.warn(
                    "{topic}-{index}: producer state not restored: {error}",
                    topic=topic,
                    index=index,
                    error=e,
                )

    def snapshot_producers(self) -> defer.Deferred[None]:
        """Write every partition's producer state that changed since its last snapshot."""
        due = [
            part.snapshots
            for part in self._registry
            if part.snapshots.snapshot_due(part.writer.acked_end)
        ]
        return write_snapshots(due, self._run_write)

    def checkpoint(self) -> defer.Deferred[None]:
        """Write recovery points, then producer-state snapshots; failures are logged."""
        d: defer.Deferred[None] = self._run_write(self._logdir.checkpoint)
        d.addCallback(lambda _: self.snapshot_producers())
        d.addErrback(lambda f: self._log.failure("recovery checkpoint failed", f))
        return d

    def stopService(self) -> defer.Deferred[None]:
        service.Service.stopService(self)
        return defer.Deferred.fromCoroutine(self._close())

    async def _close(self) -> None:
        try:
            await self.snapshot_producers()
            # Taken with the tables (in the reactor): the end each empty table covered.
            empty = [
                (part.topic, part.index, part.writer.acked_end)
                for part in self._registry
                if not part.log.producers
            ]
            await self._run_write(self._close_blocking, empty)
        except Exception:
            self._log.failure("closing the log directory failed")

    def _close_blocking(self, empty: list[tuple[str, int, int]]) -> None:
        """Before the clean-shutdown marker: the partitions without producer state."""
        write_empty_ends(self._logdir.path, empty)
        self._logdir.close()

    def open_logs(self) -> Mapping[tuple[str, int], PartitionLog]:
        """Every open partition's log, by ``(topic, partition)`` (no I/O): the operator
        views read their offsets and sizes."""
        return self._logdir.logs()

    def offline_partitions(self) -> Mapping[tuple[str, int], str]:
        """The partitions that could not be opened, with the reason (no I/O)."""
        return self._logdir.offline

    def describe_log_dirs(self) -> LogDirUsage:
        """The data directory's absolute path, every open partition's size on disk and
        the size and free space of its filesystem (one statvfs, no file I/O)."""
        logs = self._logdir.logs()
        path = os.path.abspath(self._logdir.path)
        try:
            fs = os.statvfs(path)
        except OSError:
            total = usable = -1
        else:
            total, usable = fs.f_blocks * fs.f_frsize, fs.f_bavail * fs.f_frsize
        return LogDirUsage(
            path, {key: log.size_bytes for key, log in logs.items()}, total, usable
        )
