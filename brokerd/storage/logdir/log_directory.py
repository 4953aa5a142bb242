"""LogDirectory: the data directory, its topic registry and every partition log in it.

Layout::

    <data-dir>/topics.json                          topic registry (partition counts,
                                                    per-topic config overrides, topic IDs)
    <data-dir>/topics.journal                       registry changes since topics.json
                                                    (registry_journal.py)
    <data-dir>/recovery-point-offset-checkpoint     Kafka's format: "0", count, then
                                                    "topic partition offset" lines
    <data-dir>/log-start-offset-checkpoint          log start offsets moved by
                                                    DeleteRecords (same format)
    <data-dir>/producer-state-empty-checkpoint      written at a clean close, taken at
                                                    the next start: partitions without
                                                    producer state (producer_empty.py)
    <data-dir>/.clean_shutdown                      present only after a clean close
    <data-dir>/.lock                                flock'd while a broker owns the dir
    <data-dir>/<topic>-<partition>/                 one PartitionLog each

What it does: validates every topic name before a path is built from it; creates, lists
and deletes topics (auto-creating on first produce when allowed; ``logdir/topics.py``);
grows topics and moves log start offsets (``logdir/partitions.py``); retries offline
partitions (``logdir/offline.py``) and syncs what recovery left unsynced
(``logdir/recovered.py``);
opens every partition at start, recovering each from its checkpointed recovery point
unless the previous shutdown was clean; writes checkpoints and the registry atomically
(temp file, fsync, rename, directory fsync); on close flushes everything, checkpoints
and writes the marker.
Topic config overrides (``config/topic_config.py`` validates them) are stored with each topic
and applied to its open partition logs when they change. Each topic has an ID
(``topic_ids.py``), stored with it; a registry written before topic IDs existed gets
one for each of its topics at the first open, written back at once so that the IDs
stay the same from then on.

What it does not do: decide when to checkpoint or run retention (the broker core's
timers call :meth:`checkpoint` and :meth:`enforce_retention`), or anything with Twisted.
Files in the data directory that are not ours are ignored; symlinks are never followed
(a symlinked partition directory is reported offline, not opened).

:class:`LogDirectory` holds those parts; each is given the one
:class:`~brokerd.storage.logdir.directory_state.DirectoryState` they share (its lock guards it).
The registry's format is ``logdir/registry.py``; file names and limits are
``logdir/layout.py``.

Threads: topic create, grow and delete run in a worker thread and do their file-system
work without the directory's lock (``logdir/topics.py``); changes to the registry are
made under the lock. :meth:`topics`, :meth:`topic`, :meth:`topic_by_id`, :meth:`logs` and
:meth:`get` of an existing partition take no lock at all, so the reactor thread never
waits for a create.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from brokerd.errors import InvalidPartitions, StorageError, UnknownTopicOrPartition
from brokerd.names import validate_topic_name
from brokerd.storage.checkpoints import encode_checkpoint, parse_checkpoint
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.fileio import DIR_MODE, FILE_MODE, fsync_dir
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.directory_state import DirectoryState
from brokerd.storage.logdir.layout import (
    CHECKPOINT_FILE,
    CLEAN_SHUTDOWN_FILE,
    LOCK_FILE,
    MAX_PARTITIONS,
    REGISTRY_FILE,
    is_fresh,
    parse_partition_dir,
    read_small,
    write_file,
)
from brokerd.storage.logdir.offline import OfflinePartitions
from brokerd.storage.logdir.partition_dirs import PartitionDirs
from brokerd.storage.logdir.partitions import LogStarts, PartitionChanges
from brokerd.storage.logdir.recovered import RecoveredSync
from brokerd.storage.logdir.registry import journal_parser, parse_registry, unique_ids
from brokerd.storage.logdir.registry_journal import RegistryJournal
from brokerd.storage.logdir.topics import TopicChanges
from brokerd.storage.types import TopicInfo

__all__ = ["LogDirectory"]

log = logging.getLogger("brokerd.storage")

#: Threads opening (and after a crash validating) partitions at start: one per core
#: (measured on 2 cores: more threads only contend for the GIL).
OPEN_THREADS = min(8, os.cpu_count() or 1)


class LogDirectory:
    """The data directory. Open with :meth:`open`."""

    def __init__(self, state: DirectoryState, *, lock_fd: int, was_clean: bool) -> None:
        self.path = state.path
        #: True if the previous shutdown was clean (the marker was there at open).
        self.was_clean = was_clean
        self._lock_fd = lock_fd
        self._checkpoint_lock = threading.Lock()
        self._state = state
        #: Partitions that could not be opened, with the reason.
        self.offline = state.offline
        self._dirs = PartitionDirs(state)
        self._starts = LogStarts(state)
        self._offline = OfflinePartitions(state)
        self._recovered = RecoveredSync(state)
        #: Topic creation, config changes and deletion (CreateTopics, AlterConfigs,
        #: DeleteTopics), called on it directly.
        self.topic_changes = TopicChanges(state, self._dirs, self._starts, self._offline)
        #: CreatePartitions and DeleteRecords, called on it directly.
        self.partition_changes = PartitionChanges(state, self._dirs, self._starts)

    @property
    def default_config(self) -> LogConfig:
        """The broker's log config, before topic overrides."""
        return self._state.default_config

    @default_config.setter
    def default_config(self, config: LogConfig) -> None:
        # Topics created from now on (and configs resolved from now on) use it.
        self._state.set_default_config(config)

    @property
    def auto_create(self) -> bool:
        return self._state.auto_create

    @property
    def default_partitions(self) -> int:
        return self._state.default_partitions

    # --- opening --------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str,
        default_config: LogConfig | None = None,
        *,
        auto_create: bool = True,
        default_partitions: int = 1,
        clock: Callable[[], float] = time.time,
    ) -> LogDirectory:
        """Open (creating if needed) the data directory and every partition in it.

        Raises :class:`StorageError` if the directory cannot be used or another broker
        holds it.
        """
        if not 1 <= default_partitions <= MAX_PARTITIONS:
            raise InvalidPartitions(f"default partition count {default_partitions}")
        config = default_config if default_config is not None else LogConfig()
        try:
            os.makedirs(path, mode=DIR_MODE, exist_ok=True)
            lock_fd = os.open(
                os.path.join(path, LOCK_FILE),
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                FILE_MODE,
            )
        except OSError as exc:
            raise StorageError(f"cannot open data directory {path}: {exc}") from exc
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(lock_fd)
            raise StorageError(f"data directory {path} is in use by another broker") from exc
        try:
            marker = os.path.join(path, CLEAN_SHUTDOWN_FILE)
            # A directory with nothing of ours in it (new) had no shutdown at all, so it
            # is not an unclean one.
            was_clean = (
                os.path.isfile(marker) and not os.path.islink(marker)
            ) or is_fresh(path)
            if os.path.lexists(marker):
                # Gone before any write: a crash from now on must trigger recovery.
                os.unlink(marker)
                fsync_dir(path)
            state = DirectoryState(
                path, config, auto_create=auto_create, default_partitions=default_partitions,
                clock=clock,
            )
            directory = cls(state, lock_fd=lock_fd, was_clean=was_clean)
            directory._load()
        except BaseException:
            os.close(lock_fd)
            raise
        return directory

    def _load(self) -> None:
        assigned: set[str] = set()
        topics = self._read_registry(assigned)
        rebuilt = topics is None
        if topics is None:
            topics = self._discover()
        state = self._state
        journal = RegistryJournal.replay(self.path, topics, journal_parser(assigned))
        state.load(topics, unique_ids(topics, assigned), journal)
        if assigned and not rebuilt:
            log.info("%s: topic IDs given to %d topics", self.path, len(assigned))
        if rebuilt or assigned:
            # Written before anything can see them, so an ID is never shown twice.
            state.write_registry()
            journal.reset()
        for name in sorted(topics):
            other = state.take_collision_key(name)
            if other != name:
                # Made before the rule was enforced: both keep working, no new one.
                log.warning("topics %s and %s collide ('.' versus '_')", other, name)
        points = {} if self.was_clean else self._read_checkpoint()
        jobs: list[tuple[tuple[str, int], str, LogConfig, int | None]] = []
        for name, info in sorted(topics.items()):
            config = state.config_for(info)
            for partition in range(info.partitions):
                key = (name, partition)
                point = None if self.was_clean else points.get(key, 0)
                path = state.partition_path(name, partition)
                jobs.append((key, path, config, point))
        # After a crash, partitions are validated by several threads: reading and CRC
        # checks release the GIL. A clean start is Python work only: one thread.
        threads = 1 if self.was_clean else min(OPEN_THREADS, len(jobs))
        if threads <= 1:
            for key, path, config, point in jobs:
                job = functools.partial(self._open_log, path, config, point)
                self._adopt_opened(key, point, job)
        else:
            with ThreadPoolExecutor(threads, thread_name_prefix="brokerd-open") as pool:
                opened = [(key, point, pool.submit(self._open_log, path, config, point))
                          for key, path, config, point in jobs]
                for key, point, future in opened:
                    self._adopt_opened(key, point, future.result)
        self._starts.restore()

    def _open_log(self, path: str, config: LogConfig, point: int | None) -> PartitionLog:
        return PartitionLog.open(path, config, recovery_point=point, clock=self._state.clock)

    def _adopt_opened(
        self, key: tuple[str, int], point: int | None, opened: Callable[[], PartitionLog]
    ) -> None:
        try:
            self._state.put_online(key, opened())
        except StorageError as exc:
            log.error("partition %s-%d offline: %s", key[0], key[1], exc)
            self._offline.went_offline(key, str(exc), point)

    def _read_registry(self, assigned: set[str]) -> dict[str, TopicInfo] | None:
        path = os.path.join(self.path, REGISTRY_FILE)
        raw = read_small(path)
        if raw is None:
            return None
        try:
            return parse_registry(raw, assigned)
        except Exception as exc:
            raise StorageError(f"corrupt topic registry {path}: {exc}") from exc

    def _discover(self) -> dict[str, TopicInfo]:
        """Rebuild the registry from partition directories (when topics.json is missing)."""
        counts: dict[str, int] = {}
        with os.scandir(self.path) as entries:
            for entry in entries:
                parsed = parse_partition_dir(entry.name)
                if parsed is None or not entry.is_dir(follow_symlinks=False):
                    continue
                topic, partition = parsed
                if partition < MAX_PARTITIONS:
                    counts[topic] = max(counts.get(topic, 0), partition + 1)
        if counts:
            log.warning("%s: no topic registry; rebuilt from %d topics", self.path, len(counts))
        return {name: TopicInfo(name, n) for name, n in counts.items()}

    def _read_checkpoint(self) -> dict[tuple[str, int], int]:
        """Recovery points by partition; a missing or unreadable file means "recover all"."""
        path = os.path.join(self.path, CHECKPOINT_FILE)
        try:
            raw = read_small(path)
        except StorageError as exc:
            log.warning("%s", exc)
            return {}
        if raw is None:
            return {}
        try:
            return parse_checkpoint(raw)
        except Exception as exc:
            log.warning("%s unreadable (%s): recovering every partition fully", path, exc)
            return {}

    # --- topics ---------------------------------------------------------------------------

    def config_for(self, info: TopicInfo) -> LogConfig:
        """The default config with the topic's config overrides applied."""
        return self._state.config_for(info)

    # Readers on the reactor thread never take the lock (a create or delete of a large
    # topic holds it only to publish, but a reader must not wait even for that): a copy
    # or a lookup of a dict of str keys is one C call the GIL makes atomic. A topic
    # enters _topics after its logs are in _logs and leaves it before they go, so a
    # topic a reader sees is complete.

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._state.topics)

    def topic(self, name: str) -> TopicInfo | None:
        """Topic ``name``, or None while it does not exist (or is still being created)."""
        return self._state.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic whose ID is ``topic_id``, or None (never existed, deleted, or still
        being created). A topic deleted and created again under its name has a new ID,
        so the old ID finds nothing."""
        name = self._state.ids.get(topic_id)
        info = None if name is None else self._state.topics.get(name)
        return info if info is not None and info.topic_id == topic_id else None

    def get(self, topic: str, partition: int, *, create: bool = False) -> PartitionLog:
        """The log of ``topic``/``partition``.

        With ``create`` (a produce) and auto-create on, an unknown topic is created with
        the default partition count (blocking: call it from a worker thread then).
        Raises :class:`InvalidTopic`, :class:`UnknownTopicOrPartition`, or
        :class:`StorageError` for an offline partition.
        """
        key = (topic, partition)
        plog = self._state.logs.get(key)
        if plog is not None and topic in self._state.topics:
            return plog
        validate_topic_name(topic)
        self._state.check_open()
        if topic not in self._state.topics:
            if not (create and self.auto_create):
                raise UnknownTopicOrPartition(f"unknown topic {topic!r}")
            self.topic_changes.auto_create(topic)
        return self._state.lookup(topic, partition)

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        """Every open partition log, by (topic, partition)."""
        return dict(self._state.logs)

    # --- offline partitions and recovered segments ---------------------------------------

    def retry_offline(self, now: float | None = None) -> int:
        """Reopen the offline partitions whose retry is due (:class:`OfflinePartitions`)."""
        return self._offline.retry(now)

    def unsynced_partitions(self) -> int:
        """Partitions holding recovered segments not synced yet (:class:`RecoveredSync`)."""
        return self._recovered.unsynced_partitions()

    def sync_recovered(self, *, wait: bool = True) -> bool:
        """Sync what recovery left unsynced: :meth:`RecoveredSync.sync`."""
        return self._recovered.sync(wait=wait)

    # --- durability -----------------------------------------------------------------------

    def enforce_retention(self, now: float | None = None) -> int:
        """Run retention on every partition; returns the number of segments deleted."""
        deleted = 0
        for plog in self.logs().values():
            with contextlib.suppress(UnknownTopicOrPartition):
                deleted += plog.enforce_retention(now)
        return deleted

    def checkpoint(self) -> None:
        """Sync what recovery left unsynced (nothing, mostly), then write every
        partition's recovery point (atomically, Kafka's file format)."""
        self._recovered.sync(wait=False)
        state = self._state
        with state.lock:
            found = {
                key: self._recovered.durable_point(key, plog) for key, plog in state.logs.items()
            }
            # An offline partition keeps the point it had, not a full rescan next time.
            for key, point in self._offline.points().items():
                found.setdefault(key, point)
            points = sorted((t, p, point) for (t, p), point in found.items())
        data = encode_checkpoint(points)
        with self._checkpoint_lock:
            write_file(self.path, CHECKPOINT_FILE, data)

    def _fold_journal(self) -> None:
        """At close: one snapshot holding every topic, and an empty journal, so that the
        next start (or an older broker, which reads topics.json only) needs nothing else."""
        journal = self._state.journal
        if journal is None:
            return
        try:
            if journal.records:
                self._state.write_registry()
                journal.reset()
        except StorageError as exc:
            log.error("%s (the journal still holds the changes)", exc)
        journal.close()

    def close(self) -> None:
        """Flush every partition, checkpoint, close, and mark the shutdown clean.

        The marker is written only if every step succeeded and no partition is failed or
        offline; otherwise the next start recovers from the checkpoint.
        """
        state = self._state
        with self._recovered.lock, state.lock:
            if state.closed:
                return
            clean = not self.offline
            if not self._recovered.sync():
                clean = False
            for plog in state.logs.values():
                try:
                    plog.flush()
                except (StorageError, UnknownTopicOrPartition) as exc:
                    log.error("flush of %s at shutdown failed: %s", plog.path, exc)
                    clean = False
            try:
                self.checkpoint()
            except StorageError as exc:
                log.error("%s", exc)
                clean = False
            for plog in state.logs.values():
                try:
                    plog.close()
                except StorageError as exc:
                    log.error("close of %s failed: %s", plog.path, exc)
                    clean = False
            state.close()
            self._fold_journal()
            try:
                if clean:
                    write_file(self.path, CLEAN_SHUTDOWN_FILE, b"")
            finally:
                os.close(self._lock_fd)
