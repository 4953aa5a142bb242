"""The state the log directory's parts share, and the primitives they all use.

:class:`DirectoryState` is one object: the published topics and their logs, the names
being created or changed, the registry's journal, and the lock that guards them. Its
fields are read-only views; the parts change them through its mutators, which keep a
topic and its ID, a partition's open log and its offline reason, and a name and its
collision key together. Each part of the directory (``logdir/topics.py``,
``logdir/partitions.py``, ``logdir/offline.py``, ``logdir/recovered.py``,
``logdir/partition_dirs.py``) is given this object and works on it under its lock;
:class:`~brokerd.storage.logdir.log_directory.LogDirectory` holds the parts. Readers on
the reactor thread take no lock (``logdir/log_directory.py`` says why that is safe).

No Twisted; the registry writes block (fsync).
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Final

from brokerd.errors import StorageError, UnknownTopicOrPartition
from brokerd.names import collision_key
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.config.topic_config import to_log_config
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.layout import REGISTRY_FILE, partition_dir_name, write_file
from brokerd.storage.logdir.registry import encode_registry
from brokerd.storage.logdir.registry_journal import RegistryJournal
from brokerd.storage.types import TopicInfo

__all__ = ["DirectoryState"]

log = logging.getLogger("brokerd.storage")


class DirectoryState:
    """What every part of the data directory reads and changes (under :attr:`lock`)."""

    def __init__(
        self,
        path: str,
        default_config: LogConfig,
        *,
        auto_create: bool,
        default_partitions: int,
        clock: Callable[[], float],
    ) -> None:
        self.path: Final = path
        self._default_config = default_config
        self.auto_create: Final = auto_create
        self.default_partitions: Final = default_partitions
        self.clock: Final = clock
        self.lock: Final = threading.RLock()
        #: Signalled (under the lock) whenever a name leaves ``creating`` or ``busy``.
        self.changed: Final = threading.Condition(self.lock)
        self._topics: dict[str, TopicInfo] = {}
        self._ids: dict[uuid.UUID, str] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._offline: dict[tuple[str, int], str] = {}
        self._creating: set[str] = set()
        self._busy: set[str] = set()
        self._collisions: dict[str, str] = {}
        self._journal: RegistryJournal | None = None
        self._closed = False

    # -- read-only views (readers on the reactor thread take no lock) ------------------

    @property
    def default_config(self) -> LogConfig:
        return self._default_config

    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        """Every published topic by name."""
        return self._topics

    @property
    def ids(self) -> Mapping[uuid.UUID, str]:
        """topic_id -> name of every published topic (kept with :attr:`topics`)."""
        return self._ids

    @property
    def logs(self) -> Mapping[tuple[str, int], PartitionLog]:
        """The open partition logs (never also :attr:`offline`)."""
        return self._logs

    @property
    def offline(self) -> Mapping[tuple[str, int], str]:
        """Partitions that could not be opened, with the reason."""
        return self._offline

    @property
    def creating(self) -> AbstractSet[str]:
        """Names whose create is running outside the lock: reserved, not yet visible."""
        return self._creating

    @property
    def busy(self) -> AbstractSet[str]:
        """Existing topics being grown or having their data removed outside the lock."""
        return self._busy

    @property
    def collisions(self) -> Mapping[str, str]:
        """collision_key(name) -> name, for every topic existing or being created."""
        return self._collisions

    @property
    def journal(self) -> RegistryJournal | None:
        """The changes since topics.json (set once the registry is loaded)."""
        return self._journal

    @property
    def closed(self) -> bool:
        return self._closed

    # -- mutators (the caller holds the lock, or no other thread sees the state yet) ---

    def load(
        self, topics: dict[str, TopicInfo], ids: dict[uuid.UUID, str], journal: RegistryJournal
    ) -> None:
        """Install the registry read at open."""
        self._topics, self._ids, self._journal = topics, ids, journal

    def set_default_config(self, config: LogConfig) -> None:
        """Topics created (and configs resolved) from now on use ``config``."""
        self._default_config = config

    def publish_topic(self, info: TopicInfo) -> None:
        """Make ``info`` the topic of its name (new, grown or reconfigured), with its ID."""
        self._topics[info.name] = info
        self._ids[info.topic_id] = info.name

    def unpublish_topic(self, info: TopicInfo) -> list[PartitionLog | None]:
        """Take topic ``info`` and its logs out (topic first: a reader that sees the
        topic finds its logs); returns the logs by partition."""
        del self._topics[info.name]
        self._ids.pop(info.topic_id, None)
        return [self._logs.pop((info.name, p), None) for p in range(info.partitions)]

    def put_online(self, key: tuple[str, int], plog: PartitionLog) -> None:
        """Partition ``key`` is open as ``plog`` (and so not offline)."""
        self._logs[key] = plog
        self._offline.pop(key, None)

    def put_offline(self, key: tuple[str, int], reason: str) -> PartitionLog | None:
        """Partition ``key`` is offline for ``reason``; returns the log it had open."""
        self._offline[key] = reason
        return self._logs.pop(key, None)

    def forget_offline(self, key: tuple[str, int]) -> None:
        self._offline.pop(key, None)

    def reserve_name(self, name: str) -> None:
        """A create of ``name`` begins: reserved, its collision key taken."""
        self._creating.add(name)
        self._collisions[collision_key(name)] = name

    def end_create(self, name: str, *, created: bool) -> None:
        """The create of ``name`` ended (``created`` or not); waiters are woken."""
        self._creating.discard(name)
        if not created:
            self.release_collision(name)
        self.changed.notify_all()

    def release_collision(self, name: str) -> None:
        """``name`` no longer exists: a topic that collided with it (made before the
        rule) owns its collision key now, or no one does."""
        key = collision_key(name)
        if self._collisions.get(key) != name:
            return
        del self._collisions[key]
        for other in self._topics:
            if collision_key(other) == key:
                self._collisions[key] = other
                break

    def take_collision_key(self, name: str) -> str:
        """At load: ``name`` takes its collision key unless a topic has it; returns the
        name holding it."""
        return self._collisions.setdefault(collision_key(name), name)

    def mark_busy(self, name: str) -> None:
        self._busy.add(name)

    def end_busy(self, name: str) -> None:
        """``name`` is no longer grown or deleted; waiters are woken."""
        self._busy.discard(name)
        self.changed.notify_all()

    def close(self) -> None:
        self._closed = True

    def config_for(self, info: TopicInfo) -> LogConfig:
        """The default config with the topic's config overrides applied."""
        return to_log_config(self.default_config, info.configs)

    def partition_path(self, topic: str, partition: int) -> str:
        return os.path.join(self.path, partition_dir_name(topic, partition))

    def check_open(self) -> None:
        if self.closed:
            raise StorageError(f"data directory {self.path} is closed")

    def topic_locked(self, name: str) -> TopicInfo:
        """Topic ``name`` of the open directory (the caller holds the lock). Raises
        :class:`UnknownTopicOrPartition` or what :meth:`check_open` raises."""
        self.check_open()
        info = self.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"unknown topic {name!r}")
        return info

    def wait_idle_locked(self, name: str) -> None:
        """Wait (releasing the lock) while topic ``name`` is being grown or having its
        data removed by another thread."""
        while name in self.busy:
            self.changed.wait()
        self.check_open()

    def idle_topic_locked(self, name: str) -> TopicInfo:
        """Topic ``name`` once no other thread is changing it (the caller holds the lock;
        the lock is released while waiting). Raises :class:`UnknownTopicOrPartition`
        before the wait, and after it if the topic went meanwhile."""
        self.topic_locked(name)
        self.wait_idle_locked(name)
        return self.topic_locked(name)

    def lookup(self, topic: str, partition: int) -> PartitionLog:
        """The open log of an existing partition. Raises :class:`StorageError` for an
        offline one, :class:`UnknownTopicOrPartition` for one that does not exist."""
        plog = self.logs.get((topic, partition))
        if plog is not None and topic in self.topics:
            return plog
        reason = self.offline.get((topic, partition))
        if reason is not None:
            raise StorageError(f"partition {topic}-{partition} is offline: {reason}")
        if topic not in self.topics:
            raise UnknownTopicOrPartition(f"unknown topic {topic!r}")
        raise UnknownTopicOrPartition(f"topic {topic!r} has no partition {partition}")

    # -- the registry ---------------------------------------------------------------------

    def write_registry(self, extra: TopicInfo | None = None) -> None:
        """Write the snapshot of the topics (with ``extra`` as well, or instead of the
        entry of its name: a topic not yet published)."""
        topics = self._topics if extra is None else {**self._topics, extra.name: extra}
        write_file(self.path, REGISTRY_FILE, encode_registry(topics))

    def record_topic(self, info: TopicInfo) -> None:
        """Make topic ``info`` (published or about to be) durable: one journal record,
        or a fresh snapshot when the journal is due for one. Caller holds the lock."""
        journal = self._journal
        assert journal is not None
        if journal.due(len(self.topics)):
            self.write_registry(info)
            journal.reset()
        else:
            journal.record_put(info)

    def record_deleted(self, name: str) -> None:
        """Make the deletion of topic ``name`` (already gone from the topics) durable."""
        journal = self._journal
        assert journal is not None
        if journal.due(len(self.topics)):
            self.write_registry()
            journal.reset()
        else:
            journal.record_delete(name)
