"""Creating, reconfiguring and deleting topics: the log directory's side of Kafka's
CreateTopics, AlterConfigs/IncrementalAlterConfigs and DeleteTopics.

:class:`TopicChanges` is held by :class:`~brokerd.storage.logdir.log_directory.LogDirectory`
and works on the directory's shared state (``logdir/directory_state.py``). A new topic's
partition directories are created before the registry names it, and a deleted topic
leaves the registry before its directories go: after a crash a directory the registry
does not name is stale and is removed when its name is used again; the registry never
names a topic without data directories it cannot reopen. Config overrides are validated
(``config/topic_config.py``) and written to the registry before the open partition logs take them.

The file-system work of a create or delete (one directory and two files per partition:
seconds for ten thousand partitions) runs without the directory's lock: a create first
reserves the name under the lock, opens the partitions, then takes the lock again only
to record the topic (one journal record, ``logdir/registry_journal.py``) and publish it, so
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

import logging
from collections.abc import Callable, Mapping

import attrs

from brokerd.errors import (
    InvalidPartitions,
    StorageError,
    TopicAlreadyExists,
)
from brokerd.names import (
    COLLISION_WARNING,
    collision_error,
    collision_key,
    has_collision_chars,
    refuse_internal_topic,
    validate_topic_name,
)
from brokerd.storage.config.topic_config import validate_overrides
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.directory_state import DirectoryState
from brokerd.storage.logdir.layout import MAX_PARTITIONS
from brokerd.storage.logdir.offline import OfflinePartitions
from brokerd.storage.logdir.partition_dirs import PartitionDirs, close_all
from brokerd.storage.logdir.partitions import LogStarts
from brokerd.storage.topic_ids import new_topic_id
from brokerd.storage.types import TopicInfo

__all__ = ["TopicChanges"]

log = logging.getLogger("brokerd.storage")


class TopicChanges:
    """Topic create, config change and delete on the data directory (module docstring)."""

    def __init__(
        self,
        state: DirectoryState,
        dirs: PartitionDirs,
        starts: LogStarts,
        offline: OfflinePartitions,
    ) -> None:
        self._state = state
        self._dirs = dirs
        self._starts = starts
        self._offline = offline

    def create_topic(
        self,
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
        state = self._state
        validate_topic_name(name)
        refuse_internal_topic(name, "create")
        if isinstance(partitions, bool) or not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitions(f"partition count {partitions} outside 1..{MAX_PARTITIONS}")
        # A new ID every time: a topic created again after a delete is another topic.
        info = TopicInfo(
            name,
            partitions,
            validate_overrides((configs or {}).items()),
            topic_id=new_topic_id(state.ids),
        )
        state.config_for(info)  # combinations LogConfig refuses fail before any file exists
        with state.lock:
            state.check_open()
            state.wait_idle_locked(name)
            if name in state.topics or name in state.creating:
                raise TopicAlreadyExists(f"topic {name!r} already exists")
            other = state.collisions.get(collision_key(name))
            if other is not None:
                raise collision_error(name, other)
            if validate_only:
                return info
            self._reserve_locked(info)
        return self._build_topic(info)

    def auto_create(self, name: str) -> None:
        """Create topic ``name`` with the default partition count for a produce, or wait
        for the create of it already running. Raises :class:`InvalidTopic` for a name
        Kafka's rules refuse for a new topic."""
        state = self._state
        refuse_internal_topic(name, "create")
        with state.lock:
            state.check_open()
            while name in state.creating:
                state.changed.wait()
            state.wait_idle_locked(name)
            if name in state.topics:
                return
            other = state.collisions.get(collision_key(name))
            if other is not None:
                raise collision_error(name, other)
            info = TopicInfo(name, state.default_partitions, topic_id=new_topic_id(state.ids))
            self._reserve_locked(info)
        self._build_topic(info)

    def _reserve_locked(self, info: TopicInfo) -> None:
        self._state.reserve_name(info.name)
        if has_collision_chars(info.name):
            log.warning("topic %s: %s", info.name, COLLISION_WARNING)

    def _build_topic(self, info: TopicInfo) -> TopicInfo:
        """Open the reserved topic's partitions without the lock, then record and publish
        it under the lock; on any failure the reservation and the directories go."""
        state = self._state
        name = info.name
        opened: list[PartitionLog] = []
        try:
            opened = self._dirs.open_new(info, 0, info.partitions)
            with state.lock:
                state.check_open()
                state.record_topic(info)
                # Logs first, topic after: a reader that sees the topic finds its logs.
                for partition, plog in enumerate(opened):
                    state.put_online((name, partition), plog)
                state.publish_topic(info)
                state.end_create(name, created=True)
        except BaseException:
            close_all(opened)
            self._dirs.remove(name, info.partitions)
            with state.lock:
                state.end_create(name, created=False)
            raise
        log.info("created topic %s with %d partitions", name, info.partitions)
        return info

    def alter_topic_configs(
        self,
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
        state = self._state
        validate_topic_name(name)
        with state.lock:
            old = state.idle_topic_locked(name)
            overrides = validate_overrides(update(old.configs).items())
            info = attrs.evolve(old, configs=overrides)
            config = state.config_for(info)
            if validate_only or dict(old.configs) == overrides:
                return info
            state.publish_topic(info)
            try:
                state.record_topic(info)
            except BaseException:
                state.publish_topic(old)
                raise
            for plog in filter(None, (state.logs.get((name, p)) for p in range(info.partitions))):
                plog.reconfigure(config)
        log.info("topic %s configs: %s", name, overrides or "broker defaults")
        return info

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its data. Raises :class:`UnknownTopicOrPartition`.

        The topic leaves the registry under the lock; its logs are closed and its
        directories removed after, without it (the name stays busy until then)."""
        state = self._state
        validate_topic_name(name)
        with state.lock:
            info = state.idle_topic_locked(name)
            logs = state.unpublish_topic(info)
            for p in range(info.partitions):
                self._offline.forget((name, p))
            state.mark_busy(name)
            try:
                self._unregister_locked(info, logs)
            except BaseException:
                state.end_busy(name)
                raise
        try:
            close_all(logs)
            self._dirs.remove(name, info.partitions)
        finally:
            with state.lock:
                state.end_busy(name)
        log.info("deleted topic %s", name)

    def _unregister_locked(self, info: TopicInfo, logs: list[PartitionLog | None]) -> None:
        """Record the deletion of ``info`` (already out of the topics and logs)."""
        state = self._state
        name = info.name
        try:
            # First, so that a topic created later under this name starts at 0.
            self._starts.write()
            state.record_deleted(name)
        except StorageError as exc:
            # A full disk: removing the topic's data frees space for the registry.
            # A crash before the retry leaves the topic registered with no data (it
            # reopens empty), never data without a topic.
            log.warning("deleting %s: %s; removing its data first, then retrying", name, exc)
            close_all(logs)
            self._dirs.remove(name, info.partitions)
            try:
                self._starts.write()
                state.record_deleted(name)
            except StorageError:
                state.publish_topic(info)
                raise
        state.release_collision(name)

