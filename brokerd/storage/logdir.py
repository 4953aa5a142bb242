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
and deletes topics (auto-creating on first produce when allowed; ``logdir_topics.py``);
opens every partition at start, recovering each from its checkpointed recovery point
unless the previous shutdown was clean; writes checkpoints and the registry atomically
(temp file, fsync, rename, directory fsync); on close flushes everything, checkpoints
and writes the marker.
Topic config overrides (``topic_config.py`` validates them) are stored with each topic
and applied to its open partition logs when they change. Each topic has an ID
(``topic_ids.py``), stored with it; a registry written before topic IDs existed gets
one for each of its topics at the first open, written back at once so that the IDs
stay the same from then on.

What it does not do: decide when to checkpoint or run retention (the broker core's
timers call :meth:`checkpoint` and :meth:`enforce_retention`), or anything with Twisted.
Files in the data directory that are not ours are ignored; symlinks are never followed
(a symlinked partition directory is reported offline, not opened).

Threads: topic create, grow and delete run in a worker thread and do their file-system
work without the directory's lock (``logdir_topics.py``); changes to the registry are
made under the lock. :meth:`topics`, :meth:`topic`, :meth:`topic_by_id`, :meth:`logs` and
:meth:`get` of an existing partition take no lock at all, so the reactor thread never
waits for a create.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

import attrs

from brokerd.errors import (
    InvalidConfig,
    InvalidPartitions,
    StorageError,
    UnknownTopicOrPartition,
)
from brokerd.names import collision_key, validate_topic_name
from brokerd.storage.fileio import DIR_MODE, FILE_MODE, atomic_write, fsync_dir, read_file
from brokerd.storage.log import LogConfig, PartitionLog
from brokerd.storage.logdir_offline import OfflineRetryMixin
from brokerd.storage.logdir_partitions import PartitionAdminMixin
from brokerd.storage.logdir_recovered import RecoveredSyncMixin
from brokerd.storage.logdir_topics import TopicAdminMixin
from brokerd.storage.offline_backoff import RetrySchedule
from brokerd.storage.offset_checkpoints import encode_checkpoint, parse_checkpoint
from brokerd.storage.registry_journal import (
    JOURNAL_FILE,
    EntryParser,
    RegistryJournal,
    apply_journal,
)
from brokerd.storage.topic_config import to_log_config, validate_overrides
from brokerd.storage.topic_ids import (
    RESERVED_TOPIC_IDS,
    format_topic_id,
    new_topic_id,
    parse_topic_id,
)
from brokerd.storage.types import TopicInfo

__all__ = [
    "CHECKPOINT_FILE",
    "CLEAN_SHUTDOWN_FILE",
    "MAX_PARTITIONS",
    "REGISTRY_FILE",
    "LogDirectory",
    "parse_partition_dir",
    "partition_dir_name",
    "read_registry",
]

log = logging.getLogger("brokerd.storage")

REGISTRY_FILE = "topics.json"
CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
LOCK_FILE = ".lock"
#: Partitions per topic accepted by create (auto-create uses the default count).
MAX_PARTITIONS = 10000
#: Threads opening (and after a crash validating) partitions at start: one per core
#: (measured on 2 cores: more threads only contend for the GIL).
OPEN_THREADS = min(8, os.cpu_count() or 1)
#: Version 2 stores each topic's config overrides (and, since topic IDs, its
#: ``topic_id``: an entry without one is from before them); version 1 (retention_bytes
#: and retention_ms only) is still read.
_REGISTRY_VERSION = 2
_OLD_REGISTRY_VERSION = 1
_PARTITION_DIR_RE = re.compile(r"(.+)-(\d+)\Z")


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``; the topic must already be validated."""
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """Split a partition directory name at its LAST '-' (topics may contain '-')."""
    match = _PARTITION_DIR_RE.match(name)
    if match is None:
        return None
    topic = match.group(1)
    try:
        validate_topic_name(topic)
    except Exception:
        return None
    return topic, int(match.group(2))


def _atomic_write(directory: str, name: str, data: bytes) -> None:
    """Replace ``directory/name`` by ``data`` so that a crash leaves old or new, never half."""
    final = os.path.join(directory, name)
    try:
        atomic_write(final, data)
    except OSError as exc:
        raise StorageError(f"cannot write {final}: {exc}") from exc


def _is_fresh(path: str) -> bool:
    """True if ``path`` holds no registry, no checkpoint and no partition directory."""
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.name in (REGISTRY_FILE, CHECKPOINT_FILE):
                return False
            if parse_partition_dir(entry.name) is not None:
                return False
    return True


def _read_small(path: str) -> bytes | None:
    try:
        return read_file(path)
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc}") from exc


def _registry_configs(name: str, entry: Mapping[str, object], version: int) -> dict[str, str]:
    """A registry entry's config overrides, validated (version 1 kept two fields)."""
    if version == _OLD_REGISTRY_VERSION:
        configs: dict[str, str] = {}
        for field in ("retention_bytes", "retention_ms"):
            key = field.replace("_", ".")
            value = entry.get(field)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"topic {name!r}: {field} {value!r}")
            if value is not None and value >= 0:
                configs[key] = str(value)
        return configs
    raw = entry.get("configs", {})
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise ValueError(f"topic {name!r}: configs {raw!r}")
    try:
        return validate_overrides(raw.items())
    except InvalidConfig as exc:
        raise ValueError(f"topic {name!r}: {exc}") from exc


def _registry_topic_id(
    name: str, entry: Mapping[str, object], previous: TopicInfo | None, assigned: set[str]
) -> uuid.UUID:
    """An entry's topic ID. An entry from before topic IDs has none: it keeps the ID
    its topic already has in the registry (a journal record of a change to it), else
    draws one and adds ``name`` to ``assigned`` (the caller writes it back)."""
    raw = entry.get("topic_id")
    if raw is None:
        if previous is not None:
            return previous.topic_id
        assigned.add(name)
        return new_topic_id()
    if not isinstance(raw, str):
        raise ValueError(f"topic {name!r}: topic_id {raw!r}")
    try:
        topic_id = parse_topic_id(raw)
    except ValueError as exc:
        raise ValueError(f"topic {name!r}: topic_id: {exc}") from exc
    if topic_id in RESERVED_TOPIC_IDS:
        raise ValueError(f"topic {name!r}: reserved topic_id {raw!r}")
    return topic_id


def _parse_entry(
    name: str,
    entry: Mapping[str, object],
    version: int,
    previous: TopicInfo | None,
    assigned: set[str],
) -> TopicInfo:
    """One topic of the registry (snapshot or journal); raises on anything invalid."""
    validate_topic_name(name)
    partitions = entry["partitions"]
    if not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"topic {name!r}: partitions {partitions!r}")
    return TopicInfo(
        name,
        partitions,
        _registry_configs(name, entry, version),
        topic_id=_registry_topic_id(name, entry, previous, assigned),
    )


def _journal_parser(assigned: set[str]) -> EntryParser:
    def parse(name: str, entry: Mapping[str, object], previous: TopicInfo | None) -> TopicInfo:
        return _parse_entry(name, entry, _REGISTRY_VERSION, previous, assigned)

    return parse


def _parse_registry(raw: bytes, assigned: set[str]) -> dict[str, TopicInfo]:
    """The topics of a registry file (either version); raises on anything invalid.
    Names of topics that had no ID (and got one now) are added to ``assigned``."""
    doc = json.loads(raw)
    version = doc.get("version")
    if version not in (_REGISTRY_VERSION, _OLD_REGISTRY_VERSION):
        raise ValueError(f"unknown version {version!r}")
    return {
        name: _parse_entry(name, entry, version, None, assigned)
        for name, entry in doc["topics"].items()
    }


def read_registry(path: str) -> dict[str, TopicInfo]:
    """The topics the registry of data directory ``path`` names (snapshot and journal),
    read without opening the directory (inspection, tests). A registry from before topic
    IDs gets IDs here that are not written: only opening the directory fixes them."""
    assigned: set[str] = set()
    raw = _read_small(os.path.join(path, REGISTRY_FILE))
    topics = {} if raw is None else _parse_registry(raw, assigned)
    journal = os.path.join(path, JOURNAL_FILE)
    apply_journal(_read_small(journal) or b"", topics, _journal_parser(assigned), journal)
    return topics


def _unique_ids(topics: dict[str, TopicInfo], assigned: set[str]) -> dict[uuid.UUID, str]:
    """The index of ``topics`` by ID. A second topic holding an ID already taken (a
    registry edited by hand) gets a new one, added to ``assigned``: one ID, one topic."""
    ids: dict[uuid.UUID, str] = {}
    for name in sorted(topics):
        info = topics[name]
        if info.topic_id in ids:
            log.warning(
                "topics %s and %s have the same topic ID; %s gets a new one",
                ids[info.topic_id], name, name,
            )
            info = attrs.evolve(info, topic_id=new_topic_id(ids))
            topics[name] = info
            assigned.add(name)
        ids[info.topic_id] = name
    return ids


class LogDirectory(TopicAdminMixin, PartitionAdminMixin, OfflineRetryMixin, RecoveredSyncMixin):
    """The data directory. Open with :meth:`open`."""

    def __init__(
        self,
        path: str,
        default_config: LogConfig,
        *,
        auto_create: bool,
        default_partitions: int,
        clock: Callable[[], float],
        lock_fd: int,
        was_clean: bool,
    ) -> None:
        self.path = path
        self.default_config = default_config
        self.auto_create = auto_create
        self.default_partitions = default_partitions
        #: True if the previous shutdown was clean (the marker was there at open).
        self.was_clean = was_clean
        self._clock = clock
        self._lock_fd = lock_fd
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        # Held while recovered segments are synced (one such pass at a time) and by
        # close; always taken before _lock, never while holding it.
        self._sync_lock = threading.RLock()
        # Partitions whose recovered segments are synced (the log object that was).
        self._recovery_synced: dict[tuple[str, int], PartitionLog] = {}
        self._topics: dict[str, TopicInfo] = {}
        # topic_id -> name of every published topic (kept with _topics).
        self._ids: dict[uuid.UUID, str] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        #: Partitions that could not be opened, with the reason.
        self.offline: dict[tuple[str, int], str] = {}
        # Their recovery points (kept in the checkpoint) and (next retry, delay).
        self._offline_points: dict[tuple[str, int], int | None] = {}
        self._offline_retry: dict[tuple[str, int], RetrySchedule] = {}
        self._closed = False
        # Set by _load: the changes since topics.json (registry_journal.py).
        self._journal: RegistryJournal | None = None
        # Signalled (under _lock) whenever a name leaves _creating or _busy.
        self._changed = threading.Condition(self._lock)
        # Names whose create is running outside the lock: reserved, not yet visible.
        self._creating: set[str] = set()
        # Existing topics being grown or having their data removed outside the lock.
        self._busy: set[str] = set()
        # collision_key(name) -> name, for every topic existing or being created.
        self._collisions: dict[str, str] = {}

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
            ) or _is_fresh(path)
            if os.path.lexists(marker):
                # Gone before any write: a crash from now on must trigger recovery.
                os.unlink(marker)
                fsync_dir(path)
            directory = cls(
                path,
                config,
                auto_create=auto_create,
                default_partitions=default_partitions,
                clock=clock,
                lock_fd=lock_fd,
                was_clean=was_clean,
            )
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
        self._journal = RegistryJournal.replay(self.path, topics, _journal_parser(assigned))
        self._ids = _unique_ids(topics, assigned)
        self._topics = topics
        if assigned and not rebuilt:
            log.info("%s: topic IDs given to %d topics", self.path, len(assigned))
        if rebuilt or assigned:
            # Written before anything can see them, so an ID is never shown twice.
            self._write_registry()
            self._journal.reset()
        for name in sorted(topics):
            other = self._collisions.setdefault(collision_key(name), name)
            if other != name:
                # Made before the rule was enforced: both keep working, no new one.
                log.warning("topics %s and %s collide ('.' versus '_')", other, name)
        points = {} if self.was_clean else self._read_checkpoint()
        jobs: list[tuple[tuple[str, int], str, LogConfig, int | None]] = []
        for name, info in sorted(topics.items()):
            config = self.config_for(info)
            for partition in range(info.partitions):
                key = (name, partition)
                point = None if self.was_clean else points.get(key, 0)
                path = os.path.join(self.path, partition_dir_name(name, partition))
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
        self._restore_log_starts()

    def _open_log(self, path: str, config: LogConfig, point: int | None) -> PartitionLog:
        return PartitionLog.open(path, config, recovery_point=point, clock=self._clock)

    def _adopt_opened(
        self, key: tuple[str, int], point: int | None, opened: Callable[[], PartitionLog]
    ) -> None:
        try:
            self._logs[key] = opened()
        except StorageError as exc:
            log.error("partition %s-%d offline: %s", key[0], key[1], exc)
            self._went_offline(key, str(exc), point)

    def _read_registry(self, assigned: set[str]) -> dict[str, TopicInfo] | None:
        path = os.path.join(self.path, REGISTRY_FILE)
        raw = _read_small(path)
        if raw is None:
            return None
        try:
            return _parse_registry(raw, assigned)
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

    def _write_registry(self, extra: TopicInfo | None = None) -> None:
        """Write the snapshot of ``_topics`` (with ``extra`` as well, or instead of the
        entry of its name: a topic not yet published)."""
        topics = self._topics if extra is None else {**self._topics, extra.name: extra}
        doc = {
            "version": _REGISTRY_VERSION,
            "topics": {
                name: {
                    "partitions": info.partitions,
                    "configs": dict(info.configs),
                    "topic_id": format_topic_id(info.topic_id),
                }
                for name, info in sorted(topics.items())
            },
        }
        # No indent: json's C encoder (an indented dump runs in Python, ~10x slower).
        _atomic_write(self.path, REGISTRY_FILE, json.dumps(doc).encode() + b"\n")

    def _record_topic(self, info: TopicInfo) -> None:
        """Make topic ``info`` (published or about to be) durable: one journal record,
        or a fresh snapshot when the journal is due for one. Caller holds the lock."""
        journal = self._journal
        assert journal is not None
        if journal.due(len(self._topics)):
            self._write_registry(info)
            journal.reset()
        else:
            journal.record_put(info)

    def _record_deleted(self, name: str) -> None:
        """Make the deletion of topic ``name`` (already gone from ``_topics``) durable."""
        journal = self._journal
        assert journal is not None
        if journal.due(len(self._topics)):
            self._write_registry()
            journal.reset()
        else:
            journal.record_delete(name)

    def _read_checkpoint(self) -> dict[tuple[str, int], int]:
        """Recovery points by partition; a missing or unreadable file means "recover all"."""
        path = os.path.join(self.path, CHECKPOINT_FILE)
        try:
            raw = _read_small(path)
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
        return to_log_config(self.default_config, info.configs)

    # Readers on the reactor thread never take the lock (a create or delete of a large
    # topic holds it only to publish, but a reader must not wait even for that): a copy
    # or a lookup of a dict of str keys is one C call the GIL makes atomic. A topic
    # enters _topics after its logs are in _logs and leaves it before they go, so a
    # topic a reader sees is complete.

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        """Topic ``name``, or None while it does not exist (or is still being created)."""
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic whose ID is ``topic_id``, or None (never existed, deleted, or still
        being created). A topic deleted and created again under its name has a new ID,
        so the old ID finds nothing."""
        name = self._ids.get(topic_id)
        info = None if name is None else self._topics.get(name)
        return info if info is not None and info.topic_id == topic_id else None

    def get(self, topic: str, partition: int, *, create: bool = False) -> PartitionLog:
        """The log of ``topic``/``partition``.

        With ``create`` (a produce) and auto-create on, an unknown topic is created with
        the default partition count (blocking: call it from a worker thread then).
        Raises :class:`InvalidTopic`, :class:`UnknownTopicOrPartition`, or
        :class:`StorageError` for an offline partition.
        """
        key = (topic, partition)
        plog = self._logs.get(key)
        if plog is not None and topic in self._topics:
            return plog
        validate_topic_name(topic)
        self._check_open()
        if topic not in self._topics:
            if not (create and self.auto_create):
                raise UnknownTopicOrPartition(f"unknown topic {topic!r}")
            self._auto_create(topic)
        plog = self._logs.get(key)
        if plog is not None:
            return plog
        reason = self.offline.get(key)
        if reason is not None:
            raise StorageError(f"partition {topic}-{partition} is offline: {reason}")
        raise UnknownTopicOrPartition(f"topic {topic!r} has no partition {partition}")

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        """Every open partition log, by (topic, partition)."""
        return dict(self._logs)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"data directory {self.path} is closed")

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
        self.sync_recovered(wait=False)
        with self._lock:
            found = {key: self._durable_point(key, plog) for key, plog in self._logs.items()}
            # An offline partition keeps the point it had, not a full rescan next time.
            for key, point in self._offline_points.items():
                if point is not None:
                    found.setdefault(key, point)
            points = sorted((t, p, point) for (t, p), point in found.items())
        data = encode_checkpoint(points)
        with self._checkpoint_lock:
            _atomic_write(self.path, CHECKPOINT_FILE, data)

    def _fold_journal(self) -> None:
        """At close: one snapshot holding every topic, and an empty journal, so that the
        next start (or an older broker, which reads topics.json only) needs nothing else."""
        journal = self._journal
        if journal is None:
            return
        try:
            if journal.records:
                self._write_registry()
                journal.reset()
        except StorageError as exc:
            log.error("%s (the journal still holds the changes)", exc)
        journal.close()

    def close(self) -> None:
        """Flush every partition, checkpoint, close, and mark the shutdown clean.

        The marker is written only if every step succeeded and no partition is failed or
        offline; otherwise the next start recovers from the checkpoint.
        """
        with self._sync_lock, self._lock:
            if self._closed:
                return
            clean = not self.offline
            if not self.sync_recovered():
                clean = False
            for plog in self._logs.values():
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
            for plog in self._logs.values():
                try:
                    plog.close()
                except StorageError as exc:
                    log.error("close of %s failed: %s", plog.path, exc)
                    clean = False
            self._closed = True
            self._fold_journal()
            try:
                if clean:
                    _atomic_write(self.path, CLEAN_SHUTDOWN_FILE, b"")
            finally:
                os.close(self._lock_fd)
