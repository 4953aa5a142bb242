"""Growing topics and moving log start offsets: the log directory's side of Kafka's
CreatePartitions and DeleteRecords.

:class:`PartitionAdminMixin` is part of :class:`~brokerd.storage.logdir.LogDirectory`
(kept in its own module, one concern per module):

- :meth:`~PartitionAdminMixin.create_partitions` adds empty partitions to a topic. The
  new directories are created and synced (without the directory's lock: other clients'
  requests go on) before the registry records the new count in one journal record:
  after a crash the topic has the old count (a leftover directory is removed as stale
  when the topic grows again) or the new one.
- :meth:`~PartitionAdminMixin.delete_records` moves a partition's log start offset
  (:meth:`~brokerd.storage.log_start.LogStartMixin.delete_records_before`) and rewrites
  the ``log-start-offset-checkpoint`` file before returning, so the new start survives a
  restart and a crash; at open the directory applies that file to its partitions.

What it does not do: decide the Kafka error codes (the handlers map the exceptions), or
anything with Twisted. Blocking; the core runs these in its write pool.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
from typing import Protocol

import attrs

from brokerd.errors import InvalidPartitions, PolicyViolation, StorageError
from brokerd.names import validate_topic_name
from brokerd.storage.log import PartitionLog
from brokerd.storage.logdir_state import DirectoryState
from brokerd.storage.offset_checkpoints import read_start_offsets, write_start_offsets
from brokerd.storage.types import TopicInfo

__all__ = ["DELETE_TO_HIGH_WATERMARK", "PartitionAdminMixin"]

log = logging.getLogger("brokerd.storage")

#: DeleteRecords' offset meaning "up to the high watermark" (Kafka's HIGH_WATERMARK).
DELETE_TO_HIGH_WATERMARK = -1


class _DirectoryState(DirectoryState, Protocol):
    """The directory state, and the other parts' methods this mixin calls."""

    _busy: set[str]
    _changed: threading.Condition

    def _check_open(self) -> None: ...
    def _wait_idle_locked(self, name: str) -> None: ...
    def _open_new_partitions(
        self, info: TopicInfo, first: int, total: int
    ) -> list[PartitionLog]: ...
    def _record_topic(self, info: TopicInfo) -> None: ...
    def _remove_new_dirs(self, name: str, first: int, total: int) -> None: ...
    def _topic_locked(self, name: str) -> TopicInfo: ...
    def get(self, topic: str, partition: int, *, create: bool = False) -> PartitionLog: ...
    def _write_log_starts(self) -> None: ...


class PartitionAdminMixin:
    """CreatePartitions and DeleteRecords on the data directory (module docstring)."""

    def create_partitions(self: _DirectoryState, name: str, total: int) -> TopicInfo:
        """Grow topic ``name`` to ``total`` partitions, the new ones empty.

        Raises :class:`UnknownTopicOrPartition`, :class:`InvalidPartitions` when
        ``total`` is not larger than the current count or above the limit, or
        :class:`StorageError`.
        """
        # Imported here: logdir imports this module.
        from brokerd.storage.logdir import MAX_PARTITIONS

        validate_topic_name(name)
        with self._lock:
            self._topic_locked(name)
            self._wait_idle_locked(name)
            info = self._topic_locked(name)
            if isinstance(total, bool) or total < info.partitions:
                raise InvalidPartitions(
                    f"topic {name!r} currently has {info.partitions} partitions, "
                    f"{total} would not be an increase"
                )
            if total == info.partitions:
                raise InvalidPartitions(f"topic {name!r} already has {total} partitions")
            if total > MAX_PARTITIONS:
                raise InvalidPartitions(f"partition count {total} above {MAX_PARTITIONS}")
            # Busy: no config change, delete or other grow of it until this is done.
            self._busy.add(name)
        try:
            # The directory work runs without the lock (readers and other topics' admin
            # go on); the new partitions appear, all at once, when the count is published.
            opened = self._open_new_partitions(info, info.partitions, total)
            grown = attrs.evolve(info, partitions=total)
            with self._lock:
                try:
                    self._check_open()
                    self._record_topic(grown)
                except BaseException:
                    for plog in opened:
                        with contextlib.suppress(Exception):
                            plog.close()
                    self._remove_new_dirs(name, info.partitions, total)
                    raise
                for partition, plog in enumerate(opened, start=info.partitions):
                    self._logs[(name, partition)] = plog
                    self.offline.pop((name, partition), None)
                self._topics[name] = grown
        finally:
            with self._lock:
                self._busy.discard(name)
                self._changed.notify_all()
        log.info("topic %s grown from %d to %d partitions", name, info.partitions, total)
        return grown

    def _remove_new_dirs(self: _DirectoryState, name: str, first: int, total: int) -> None:
        from brokerd.storage.logdir import partition_dir_name

        for partition in range(first, total):
            shutil.rmtree(
                os.path.join(self.path, partition_dir_name(name, partition)), ignore_errors=True
            )

    def delete_records(self: _DirectoryState, topic: str, partition: int, offset: int) -> int:
        """Move the partition's log start offset up to ``offset``
        (:data:`DELETE_TO_HIGH_WATERMARK`: the high watermark) and return the log start
        offset afterwards; the checkpoint file is written before this returns.

        Raises :class:`UnknownTopicOrPartition`, :class:`OffsetOutOfRange` (negative or
        above the high watermark), :class:`PolicyViolation` (``cleanup.policy`` without
        ``delete``, as Kafka refuses) or :class:`StorageError`.
        """
        plog = self.get(topic, partition)
        if not plog.config.delete:
            raise PolicyViolation(
                f"records of {topic}-{partition} cannot be deleted: cleanup.policy is "
                f"{','.join(sorted(plog.config.cleanup_policy))}"
            )
        if offset == DELETE_TO_HIGH_WATERMARK:
            offset = plog.high_watermark
        return plog.delete_records_before(offset, persist=self._write_log_starts)

    def _write_log_starts(self: _DirectoryState) -> None:
        """Rewrite the log-start checkpoint from every open partition. Under the registry
        lock, so that two writers cannot store their snapshots out of order."""
        with self._lock:
            entries = [
                (t, p, plog.log_start_offset)
                for (t, p), plog in self._logs.items()
                if plog.log_start_offset > plog.segment_bases[0]
            ]
            write_start_offsets(self.path, entries)

    def _restore_log_starts(self: _DirectoryState) -> None:
        """At open: apply the checkpointed log start offsets to the open partitions."""
        for key, offset in read_start_offsets(self.path).items():
            plog = self._logs.get(key)
            if plog is None:
                continue
            try:
                plog.restore_log_start(offset)
            except StorageError as exc:
                log.error("partition %s-%d offline: %s", key[0], key[1], exc)
                self.offline[key] = str(exc)
                del self._logs[key]
                with contextlib.suppress(Exception):
                    plog.close()
