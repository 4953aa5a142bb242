"""Creating, reconfiguring and deleting topics: the log directory's side of Kafka's
CreateTopics, AlterConfigs/IncrementalAlterConfigs and DeleteTopics.

:class:`TopicAdminMixin` is part of :class:`~brokerd.storage.logdir.LogDirectory` (kept
in its own module, one concern per module). A new topic's partition directories are
created before the registry names it, and a deleted topic leaves the registry before its
directories go: after a crash a directory the registry does not name is stale and is
removed when its name is used again; the registry never names a topic without data
directories it cannot reopen. Config overrides are validated (``topic_config.py``) and
written to the registry before the open partition logs take them.

What it does not do: decide the Kafka error codes (the handlers map the exceptions), or
anything with Twisted. Blocking; the core runs these in its write pool.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Protocol

import attrs

from brokerd.errors import (
    InvalidPartitions,
    StorageError,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from brokerd.names import validate_topic_name
from brokerd.storage.fileio import fsync_dir
from brokerd.storage.log import PartitionLog
from brokerd.storage.logdir_state import DirectoryState
from brokerd.storage.topic_config import validate_overrides
from brokerd.storage.types import TopicInfo

__all__ = ["TopicAdminMixin"]

log = logging.getLogger("brokerd.storage")


class _DirectoryState(DirectoryState, Protocol):
    """The directory state, and the other parts' methods this mixin calls."""

    def _check_open(self) -> None: ...
    def _write_registry(self) -> None: ...
    def _write_log_starts(self) -> None: ...
    def _forget_offline(self, key: tuple[str, int]) -> None: ...
    def _create_locked(self, info: TopicInfo) -> TopicInfo: ...
    def _remove_stale(self, path: str) -> None: ...
    def _topic_locked(self, name: str) -> TopicInfo: ...
    def _remove_partition_dirs(self, name: str, partitions: int) -> None: ...


class TopicAdminMixin:
    """Topic create, config change and delete on the data directory (module docstring)."""

    def create_topic(
        self: _DirectoryState,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Create a topic with ``partitions`` partitions (1..10000) and the config
        overrides ``configs`` (Kafka names and value syntax); with ``validate_only``
        check everything and create nothing. Raises :class:`InvalidTopic`,
        :class:`TopicAlreadyExists`, :class:`InvalidPartitions` or :class:`InvalidConfig`."""
        from brokerd.storage.logdir import MAX_PARTITIONS

        validate_topic_name(name)
        if isinstance(partitions, bool) or not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitions(f"partition count {partitions} outside 1..{MAX_PARTITIONS}")
        info = TopicInfo(name, partitions, validate_overrides((configs or {}).items()))
        self.config_for(info)  # combinations LogConfig refuses fail before any file exists
        with self._lock:
            self._check_open()
            if name in self._topics:
                raise TopicAlreadyExists(f"topic {name!r} already exists")
            if validate_only:
                return info
            return self._create_locked(info)

    def alter_topic_configs(
        self: _DirectoryState,
        name: str,
        update: Callable[[Mapping[str, str]], Mapping[str, str | None]],
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Replace topic ``name``'s config overrides by ``update(current overrides)``,
        run under the registry lock so concurrent alterations never lose each other's
        changes. The registry is written (atomically), then the open partition logs take
        the new config; with ``validate_only`` nothing changes. Raises
        :class:`UnknownTopicOrPartition` or :class:`InvalidConfig`."""
        validate_topic_name(name)
        with self._lock:
            old = self._topic_locked(name)
            overrides = validate_overrides(update(old.configs).items())
            info = attrs.evolve(old, configs=overrides)
            config = self.config_for(info)
            if validate_only or dict(old.configs) == overrides:
                return info
            self._topics[name] = info
            try:
                self._write_registry()
            except BaseException:
                self._topics[name] = old
                raise
            for plog in filter(None, (self._logs.get((name, p)) for p in range(info.partitions))):
                plog.reconfigure(config)
        log.info("topic %s configs: %s", name, overrides or "broker defaults")
        return info

    def _create_locked(self: _DirectoryState, info: TopicInfo) -> TopicInfo:
        from brokerd.storage.logdir import partition_dir_name

        config = self.config_for(info)
        opened: list[PartitionLog] = []
        dirs: list[str] = []
        try:
            for partition in range(info.partitions):
                path = os.path.join(self.path, partition_dir_name(info.name, partition))
                self._remove_stale(path)
                dirs.append(path)
                opened.append(
                    PartitionLog.open(path, config, recovery_point=None, clock=self._clock)
                )
            self._topics[info.name] = info
            self._write_registry()
        except BaseException:
            self._topics.pop(info.name, None)
            for plog in opened:
                with contextlib.suppress(Exception):
                    plog.close()
            for path in dirs:
                shutil.rmtree(path, ignore_errors=True)
            raise
        for partition, plog in enumerate(opened):
            self._logs[(info.name, partition)] = plog
            self.offline.pop((info.name, partition), None)
        log.info("created topic %s with %d partitions", info.name, info.partitions)
        return info

    def _topic_locked(self: _DirectoryState, name: str) -> TopicInfo:
        """Topic ``name`` of the open directory (the caller holds the lock). Raises
        :class:`UnknownTopicOrPartition` or what ``_check_open`` raises."""
        self._check_open()
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"unknown topic {name!r}")
        return info

    def _remove_stale(self: _DirectoryState, path: str) -> None:
        """A directory for a topic the registry does not know: left by a crash during a
        create or delete. The registry is the truth, so it goes (never followed)."""
        if os.path.islink(path) or os.path.isfile(path):
            log.warning("removing stale %s", path)
            os.unlink(path)
        elif os.path.isdir(path):
            log.warning("removing stale partition directory %s", path)
            shutil.rmtree(path)

    def delete_topic(self: _DirectoryState, name: str) -> None:
        """Delete a topic and its data. Raises :class:`UnknownTopicOrPartition`."""
        validate_topic_name(name)
        with self._lock:
            info = self._topic_locked(name)
            del self._topics[name]
            logs = [self._logs.pop((name, p), None) for p in range(info.partitions)]
            for p in range(info.partitions):
                self._forget_offline((name, p))
            # Whatever state the partitions are in (failed, offline): closing is best
            # effort, the data goes anyway.
            for plog in logs:
                if plog is not None:
                    with contextlib.suppress(Exception):
                        plog.close()
            try:
                # First, so that a topic created later under this name starts at 0.
                self._write_log_starts()
                self._write_registry()
            except StorageError as exc:
                # A full disk: removing the topic's data frees space for the registry.
                # A crash before the retry leaves the topic registered with no data (it
                # reopens empty), never data without a topic.
                log.warning("deleting %s: %s; removing its data first, then retrying", name, exc)
                self._remove_partition_dirs(name, info.partitions)
                try:
                    self._write_log_starts()
                    self._write_registry()
                except StorageError:
                    self._topics[name] = info
                    raise
            self._remove_partition_dirs(name, info.partitions)
        log.info("deleted topic %s", name)

    def _remove_partition_dirs(self: _DirectoryState, name: str, partitions: int) -> None:
        from brokerd.storage.logdir import partition_dir_name

        for p in range(partitions):
            path = os.path.join(self.path, partition_dir_name(name, p))
            if os.path.islink(path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            else:
                shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(OSError):
            fsync_dir(self.path)
