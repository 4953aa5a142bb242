"""The state the log directory's parts share, and the primitives they all use.

:class:`DirectoryState` is one object: the published topics and their logs, the names
being created or changed, the registry's journal, and the lock that guards them. Each
part of the directory (``logdir/topics.py``, ``logdir/partitions.py``,
``logdir/offline.py``, ``logdir/recovered.py``, ``logdir/partition_dirs.py``) is given this object
and works on it under its lock; :class:`~brokerd.storage.logdir.log_directory.LogDirectory` holds
the
parts. Readers on the reactor thread take no lock (``logdir/log_directory.py`` says why that is
safe).

No Twisted; the registry writes block (fsync).
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable

from brokerd.errors import StorageError, UnknownTopicOrPartition
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
        self.path = path
        self.default_config = default_config
        self.auto_create = auto_create
        self.default_partitions = default_partitions
        self.clock = clock
        self.lock = threading.RLock()
        #: Signalled (under the lock) whenever a name leaves ``creating`` or ``busy``.
        self.changed = threading.Condition(self.lock)
        self.topics: dict[str, TopicInfo] = {}
        #: topic_id -> name of every published topic (kept with ``topics``).
        self.ids: dict[uuid.UUID, str] = {}
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        #: Partitions that could not be opened, with the reason.
        self.offline: dict[tuple[str, int], str] = {}
        #: Names whose create is running outside the lock: reserved, not yet visible.
        self.creating: set[str] = set()
        #: Existing topics being grown or having their data removed outside the lock.
        self.busy: set[str] = set()
        #: collision_key(name) -> name, for every topic existing or being created.
        self.collisions: dict[str, str] = {}
        #: The changes since topics.json (set once the registry is loaded).
        self.journal: RegistryJournal | None = None
        self.closed = False

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
        topics = self.topics if extra is None else {**self.topics, extra.name: extra}
        write_file(self.path, REGISTRY_FILE, encode_registry(topics))

    def record_topic(self, info: TopicInfo) -> None:
        """Make topic ``info`` (published or about to be) durable: one journal record,
        or a fresh snapshot when the journal is due for one. Caller holds the lock."""
        journal = self.journal
        assert journal is not None
        if journal.due(len(self.topics)):
            self.write_registry(info)
            journal.reset()
        else:
            journal.record_put(info)

    def record_deleted(self, name: str) -> None:
        """Make the deletion of topic ``name`` (already gone from the topics) durable."""
        journal = self.journal
        assert journal is not None
        if journal.due(len(self.topics)):
            self.write_registry()
            journal.reset()
        else:
            journal.record_delete(name)
