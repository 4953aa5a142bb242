"""Creating, reconfiguring and deleting topics: the log directory's side of Kafka's
CreateTopics, AlterConfigs/IncrementalAlterConfigs and DeleteTopics.

:class:`TopicAdminMixin` is part of :class:`~brokerd.storage.logdir.LogDirectory` (kept
in its own module, one concern per module). A new topic's partition directories are
created before the registry names it, and a deleted topic leaves the registry before its
directories go: after a crash a directory the registry does not name is stale and is
removed when its name is used again; the registry never names a topic without data
directories it cannot reopen. Config overrides are validated (``topic_config.py``) and
written to the registry before the open partition logs take them.

The file-system work of a create or delete (one directory and two files per partition:
seconds for ten thousand partitions) runs without the directory's lock: a create first
reserves the name under the lock, opens the partitions, then takes the lock again only
to record the topic (one journal record, ``registry_journal.py``) and publish it, so
other clients see the topic absent or complete; a delete unpublishes the topic under the
lock and removes its data after. A second create of a name being created is refused as
existing (as Kafka answers); a create of a name whose data is still being removed, and
any change to a topic being grown, wait for that to finish.

Names follow Kafka's rules for new topics (``brokerd.names``): the syntax, no internal
topic name (``__consumer_offsets``, ...), and no name that collides with an existing
one once '.' and '_' are taken as the same character. Topics made before those rules
were enforced keep working.

What it does not do: decide the Kafka error codes (the handlers map the exceptions), or
anything with Twisted. Blocking; the core runs these in its write pool.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

import attrs

from brokerd.errors import (
    InvalidPartitions,
    StorageError,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from brokerd.names import (
    COLLISION_WARNING,
    collision_error,
    collision_key,
    has_collision_chars,
    refuse_internal_topic,
    validate_topic_name,
)
from brokerd.storage.fileio import fsync_dir
from brokerd.storage.log import PartitionLog
from brokerd.storage.logdir_state import DirectoryState
from brokerd.storage.topic_config import validate_overrides
from brokerd.storage.topic_ids import new_topic_id
from brokerd.storage.types import TopicInfo

__all__ = ["TopicAdminMixin"]

log = logging.getLogger("brokerd.storage")


class _DirectoryState(DirectoryState, Protocol):
    """The directory state, and the other parts' methods this mixin calls."""

    _changed: threading.Condition
    _creating: set[str]
    _busy: set[str]
    _collisions: dict[str, str]
    _ids: dict[uuid.UUID, str]
    default_partitions: int

    def _check_open(self) -> None: ...
    def _record_topic(self, info: TopicInfo) -> None: ...
    def _record_deleted(self, name: str) -> None: ...
    def _write_log_starts(self) -> None: ...
    def _forget_offline(self, key: tuple[str, int]) -> None: ...
    def _reserve_locked(self, info: TopicInfo) -> None: ...
    def _build_topic(self, info: TopicInfo) -> TopicInfo: ...
    def _open_new_partitions(
        self, info: TopicInfo, first: int, total: int
    ) -> list[PartitionLog]: ...
    def _wait_idle_locked(self, name: str) -> None: ...
    def _remove_stale(self, path: str) -> None: ...
    def _topic_locked(self, name: str) -> TopicInfo: ...
    def _remove_partition_dirs(self, name: str, partitions: int) -> None: ...
    def _unregister_locked(
        self, info: TopicInfo, logs: list[PartitionLog | None]
    ) -> None: ...


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
        check everything and create nothing. Raises :class:`InvalidTopic` (syntax,
        internal name, collision), :class:`TopicAlreadyExists`,
        :class:`InvalidPartitions` or :class:`InvalidConfig`."""
        from brokerd.storage.logdir import MAX_PARTITIONS

        validate_topic_name(name)
        refuse_internal_topic(name, "create")
        if isinstance(partitions, bool) or not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitions(f"partition count {partitions} outside 1..{MAX_PARTITIONS}")
        # A new ID every time: a topic created again after a delete is another topic.
        info = TopicInfo(
            name,
            partitions,
            validate_overrides((configs or {}).items()),
            topic_id=new_topic_id(self._ids),
        )
        self.config_for(info)  # combinations LogConfig refuses fail before any file exists
        with self._lock:
            self._check_open()
            self._wait_idle_locked(name)
            if name in self._topics or name in self._creating:
                raise TopicAlreadyExists(f"topic {name!r} already exists")
            other = self._collisions.get(collision_key(name))
            if other is not None:
                raise collision_error(name, other)
            if validate_only:
                return info
            self._reserve_locked(info)
        return self._build_topic(info)

    def _auto_create(self: _DirectoryState, name: str) -> None:
        """Create topic ``name`` with the default partition count for a produce, or wait
        for the create of it already running. Raises :class:`InvalidTopic` for a name
        Kafka's rules refuse for a new topic."""
        refuse_internal_topic(name, "create")
        with self._lock:
            self._check_open()
            while name in self._creating:
                self._changed.wait()
            self._wait_idle_locked(name)
            if name in self._topics:
                return
            other = self._collisions.get(collision_key(name))
            if other is not None:
                raise collision_error(name, other)
            info = TopicInfo(name, self.default_partitions, topic_id=new_topic_id(self._ids))
            self._reserve_locked(info)
        self._build_topic(info)

    def _wait_idle_locked(self: _DirectoryState, name: str) -> None:
        """Wait (releasing the lock) while topic ``name`` is being grown or having its
        data removed by another thread."""
        while name in self._busy:
            self._changed.wait()
        self._check_open()

    def _reserve_locked(self: _DirectoryState, info: TopicInfo) -> None:
        self._creating.add(info.name)
        self._collisions[collision_key(info.name)] = info.name
        if has_collision_chars(info.name):
            log.warning("topic %s: %s", info.name, COLLISION_WARNING)

    def _build_topic(self: _DirectoryState, info: TopicInfo) -> TopicInfo:
        """Open the reserved topic's partitions without the lock, then record and publish
        it under the lock; on any failure the reservation and the directories go."""
        name = info.name
        opened: list[PartitionLog] = []
        try:
            opened = self._open_new_partitions(info, 0, info.partitions)
            with self._lock:
                self._check_open()
                self._record_topic(info)
                # Logs first, topic after: a reader that sees the topic finds its logs.
                for partition, plog in enumerate(opened):
                    self._logs[(name, partition)] = plog
                    self.offline.pop((name, partition), None)
                self._topics[name] = info
                self._ids[info.topic_id] = name
                self._creating.discard(name)
                self._changed.notify_all()
        except BaseException:
            for plog in opened:
                with contextlib.suppress(Exception):
                    plog.close()
            self._remove_partition_dirs(name, info.partitions)
            with self._lock:
                self._creating.discard(name)
                if self._collisions.get(collision_key(name)) == name:
                    del self._collisions[collision_key(name)]
                self._changed.notify_all()
            raise
        log.info("created topic %s with %d partitions", name, info.partitions)
        return info

    def _open_new_partitions(
        self: _DirectoryState, info: TopicInfo, first: int, total: int
    ) -> list[PartitionLog]:
        """Open empty partitions ``first..total-1`` of ``info`` (stale directories of an
        earlier crash removed first) and sync the data directory, so that they are
        durable before the registry names them. Runs without the lock: the caller has
        reserved the name. On failure, closes what it opened and removes those
        directories."""
        from brokerd.storage.logdir import partition_dir_name

        config = self.config_for(info)
        opened: list[PartitionLog] = []
        try:
            for partition in range(first, total):
                path = os.path.join(self.path, partition_dir_name(info.name, partition))
                self._remove_stale(path)
                opened.append(
                    PartitionLog.open(path, config, recovery_point=None, clock=self._clock)
                )
            fsync_dir(self.path)
        except BaseException as exc:
            for plog in opened:
                with contextlib.suppress(Exception):
                    plog.close()
            for partition in range(first, total):
                path = os.path.join(self.path, partition_dir_name(info.name, partition))
                shutil.rmtree(path, ignore_errors=True)
            if isinstance(exc, OSError):
                raise StorageError(f"cannot create partitions of {info.name!r}: {exc}") from exc
            raise
        return opened

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
            self._topic_locked(name)
            self._wait_idle_locked(name)
            old = self._topic_locked(name)
            overrides = validate_overrides(update(old.configs).items())
            info = attrs.evolve(old, configs=overrides)
            config = self.config_for(info)
            if validate_only or dict(old.configs) == overrides:
                return info
            self._topics[name] = info
            try:
                self._record_topic(info)
            except BaseException:
                self._topics[name] = old
                raise
            for plog in filter(None, (self._logs.get((name, p)) for p in range(info.partitions))):
                plog.reconfigure(config)
        log.info("topic %s configs: %s", name, overrides or "broker defaults")
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
        """Delete a topic and its data. Raises :class:`UnknownTopicOrPartition`.

        The topic leaves the registry under the lock; its logs are closed and its
        directories removed after, without it (the name stays busy until then)."""
        validate_topic_name(name)
        with self._lock:
            self._topic_locked(name)
            self._wait_idle_locked(name)
            info = self._topic_locked(name)
            # Topic first, logs after: a reader that sees the topic finds its logs.
            del self._topics[name]
            self._ids.pop(info.topic_id, None)
            logs = [self._logs.pop((name, p), None) for p in range(info.partitions)]
            for p in range(info.partitions):
                self._forget_offline((name, p))
            self._busy.add(name)
            try:
                self._unregister_locked(info, logs)
            except BaseException:
                self._busy.discard(name)
                self._changed.notify_all()
                raise
        try:
            _close_all(logs)
            self._remove_partition_dirs(name, info.partitions)
        finally:
            with self._lock:
                self._busy.discard(name)
                self._changed.notify_all()
        log.info("deleted topic %s", name)

    def _unregister_locked(
        self: _DirectoryState, info: TopicInfo, logs: list[PartitionLog | None]
    ) -> None:
        """Record the deletion of ``info`` (already out of ``_topics`` and ``_logs``)."""
        name = info.name
        try:
            # First, so that a topic created later under this name starts at 0.
            self._write_log_starts()
            self._record_deleted(name)
        except StorageError as exc:
            # A full disk: removing the topic's data frees space for the registry.
            # A crash before the retry leaves the topic registered with no data (it
            # reopens empty), never data without a topic.
            log.warning("deleting %s: %s; removing its data first, then retrying", name, exc)
            _close_all(logs)
            self._remove_partition_dirs(name, info.partitions)
            try:
                self._write_log_starts()
                self._record_deleted(name)
            except StorageError:
                self._topics[name] = info
                self._ids[info.topic_id] = name
                raise
        key = collision_key(name)
        if self._collisions.get(key) == name:
            del self._collisions[key]
            # A topic that collided with this one (made before the rule) now owns the key.
            for other in self._topics:
                if collision_key(other) == key:
                    self._collisions[key] = other
                    break

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


def _close_all(logs: list[PartitionLog | None]) -> None:
    """Close a deleted topic's logs: best effort, whatever state they are in (failed,
    offline), since the data goes anyway. Closing twice is harmless."""
    for plog in logs:
        if plog is not None:
            with contextlib.suppress(Exception):
                plog.close()
