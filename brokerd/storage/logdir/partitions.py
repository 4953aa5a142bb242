"""Growing topics and moving log start offsets: the log directory's side of Kafka's
CreatePartitions and DeleteRecords.

:class:`PartitionChanges` is held by :class:`~brokerd.storage.logdir.log_directory.LogDirectory`; it
and
:class:`LogStarts` work on the directory's shared state (``logdir/directory_state.py``):

- :meth:`~PartitionChanges.create_partitions` adds empty partitions to a topic. The
  new directories are created and synced (without the directory's lock: other clients'
  requests go on) before the registry records the new count in one journal record:
  after a crash the topic has the old count (a leftover directory is removed as stale
  when the topic grows again) or the new one.
- :meth:`~PartitionChanges.delete_records` moves a partition's log start offset
  (``PartitionLog.delete_records_before``) and has :class:`LogStarts` rewrite the
  ``log-start-offset-checkpoint`` file before returning, so the new start survives a
  restart and a crash; at open the directory applies that file to its partitions.

What it does not do: decide the Kafka error codes (the handlers map the exceptions), or
anything with Twisted. Blocking; the core runs these in its write pool.
"""

from __future__ import annotations

import logging

import attrs

from brokerd.errors import InvalidPartitions, PolicyViolation, StorageError
from brokerd.names import validate_topic_name
from brokerd.storage.checkpoints import read_start_offsets, write_start_offsets
from brokerd.storage.logdir.directory_state import DirectoryState
from brokerd.storage.logdir.layout import MAX_PARTITIONS
from brokerd.storage.logdir.partition_dirs import PartitionDirs, close_all
from brokerd.storage.types import TopicInfo

__all__ = ["DELETE_TO_HIGH_WATERMARK", "LogStarts", "PartitionChanges"]

log = logging.getLogger("brokerd.storage")

#: DeleteRecords' offset meaning "up to the high watermark" (Kafka's HIGH_WATERMARK).
DELETE_TO_HIGH_WATERMARK = -1


class LogStarts:
    """The ``log-start-offset-checkpoint`` file: log start offsets moved by DeleteRecords."""

    def __init__(self, state: DirectoryState) -> None:
        self._state = state

    def write(self) -> None:
        """Rewrite the checkpoint from every open partition. Under the directory's lock,
        so that two writers cannot store their snapshots out of order."""
        state = self._state
        with state.lock:
            entries = [
                (t, p, plog.log_start_offset)
                for (t, p), plog in state.logs.items()
                if plog.log_start_offset > plog.segment_bases[0]
            ]
            write_start_offsets(state.path, entries)

    def restore(self) -> None:
        """At open: apply the checkpointed log start offsets to the open partitions."""
        state = self._state
        for key, offset in read_start_offsets(state.path).items():
            plog = state.logs.get(key)
            if plog is None:
                continue
            try:
                plog.restore_log_start(offset)
            except StorageError as exc:
                log.error("partition %s-%d offline: %s", key[0], key[1], exc)
                state.put_offline(key, str(exc))
                close_all([plog])


class PartitionChanges:
    """CreatePartitions and DeleteRecords on the data directory (module docstring)."""

    def __init__(self, state: DirectoryState, dirs: PartitionDirs, starts: LogStarts) -> None:
        self._state = state
        self._dirs = dirs
        self._starts = starts

    def create_partitions(self, name: str, total: int) -> TopicInfo:
        """Grow topic ``name`` to ``total`` partitions, the new ones empty.

        Raises :class:`UnknownTopicOrPartition`, :class:`InvalidPartitions` when
        ``total`` is not larger than the current count or above the limit, or
        :class:`StorageError`.
        """
        state = self._state
        validate_topic_name(name)
        with state.lock:
            info = state.idle_topic_locked(name)
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
            state.mark_busy(name)
        try:
            # The directory work runs without the lock (readers and other topics' admin
            # go on); the new partitions appear, all at once, when the count is published.
            opened = self._dirs.open_new(info, info.partitions, total)
            grown = attrs.evolve(info, partitions=total)
            with state.lock:
                try:
                    state.check_open()
                    state.record_topic(grown)
                except BaseException:
                    close_all(opened)
                    self._dirs.remove_new(name, info.partitions, total)
                    raise
                for partition, plog in enumerate(opened, start=info.partitions):
                    state.put_online((name, partition), plog)
                state.publish_topic(grown)
        finally:
            with state.lock:
                state.end_busy(name)
        log.info("topic %s grown from %d to %d partitions", name, info.partitions, total)
        return grown

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Move the partition's log start offset up to ``offset``
        (:data:`DELETE_TO_HIGH_WATERMARK`: the high watermark) and return the log start
        offset afterwards; the checkpoint file is written before this returns.

        Raises :class:`UnknownTopicOrPartition`, :class:`OffsetOutOfRange` (negative or
        above the high watermark), :class:`PolicyViolation` (``cleanup.policy`` without
        ``delete``, as Kafka refuses) or :class:`StorageError`.
        """
        validate_topic_name(topic)
        self._state.check_open()
        plog = self._state.lookup(topic, partition)
        if not plog.config.delete:
            raise PolicyViolation(
                f"records of {topic}-{partition} cannot be deleted: cleanup.policy is "
                f"{','.join(sorted(plog.config.cleanup_policy))}"
            )
        if offset == DELETE_TO_HIGH_WATERMARK:
            offset = plog.high_watermark
        return plog.delete_records_before(offset, persist=self._starts.write)
