# -*- test-case-name: tests.core.test_fetcher -*-
"""The broker core's reads of partitions: fetches (Kafka and native) and offset lookups.

:class:`Fetcher` is the part of :class:`~brokerd.core.broker.Broker` that reads: its
``reads``, the :class:`~brokerd.core.api.CoreReads` role of the core's face. Its one read
call, :meth:`Fetcher.read`, takes a :class:`~brokerd.storage.types.ReadSpec` (isolation; raw
batches by value or by reference, or decoded records) and answers a
:class:`~brokerd.storage.types.LogRead`. It checks the offset against the partition's
published state in the reactor thread and answers at once, without a Deferred, when it can:
the common "nothing new" case, and a read the log answers from memory (a read by reference
of batches whose position the log remembers, just appended or found ahead by an earlier
read, and whose bytes were checked; a decoding read of just-appended records:
``memory_only`` in ``storage/log/stored_reads.py``, docs/performance.md, "Reads without the
pool hop"). Otherwise the read runs in the read pool and the answer is a Deferred.

Transactions (docs/architecture.md, "Transactions"): a read_committed read never returns a
batch at or past the last stable offset (LSO) and carries the aborted transactions
overlapping its data; an offset in [LSO, high watermark] answers empty. A read of decoded
records (the native fetch) is committed-only.

What it does not do: parse a wire format, park (``waiters.py``), or release the file
regions it hands out (whoever ends up with the answer does).
"""

from __future__ import annotations

from twisted.internet import defer

from brokerd.core.interfaces import Runner
from brokerd.core.topics import Partition, TopicRegistry
from brokerd.errors import OffsetOutOfRange
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.types import LogRead, PartitionOffsets, ReadSpec

__all__ = ["Fetcher"]


class Fetcher:
    """Reads and offset lookups of the broker's partitions (see the module docstring).

    :param partitions: the open partitions (opened on first read if needed).
    :param run_read: runs a blocking read in the read pool.
    """

    def __init__(self, partitions: TopicRegistry, run_read: Runner) -> None:
        self._partitions = partitions
        self._run_read = run_read

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec
    ) -> LogRead | defer.Deferred[LogRead]:
        """The partition's log from ``offset``, as ``spec`` says (``PartitionLog.read``):
        at most ``max_bytes`` of batches (at least one whole one), or of record values
        for decoded records.

        The answer itself when it needs no file read and the partition is open, else a
        Deferred of it. An offset outside [log start, high watermark] raises
        :class:`OffsetOutOfRange` at once for an open partition (else the Deferred fails
        with it); an unknown partition fails the Deferred. An answer by reference holds a
        file region the caller must release.
        """
        part = self._partitions.get((topic, partition))
        if part is None:
            opened = self._partitions.open(topic, partition, create=False)
            return opened.addCallback(self._read_open, offset, max_bytes, spec)
        return self._read_open(part, offset, max_bytes, spec)

    def _read_open(
        self, part: Partition, offset: int, max_bytes: int, spec: ReadSpec
    ) -> LogRead | defer.Deferred[LogRead]:
        log = part.log
        hw, start = log.high_watermark, log.log_start_offset
        if offset > hw or offset < start:
            raise OffsetOutOfRange(offset, start, hw)
        lso = log.last_stable_offset
        if offset == hw or (spec.committed and offset >= lso):
            # The common long-poll case: nothing new, no thread hop needed.
            return LogRead(b"", hw, start, lso)
        answer = log.read(offset, max_bytes, spec, memory_only=True)
        if answer is not None:
            return answer
        return self._run_read(log.read, offset, max_bytes, spec)

    def open_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log if it is open, else None (no I/O, opens nothing)."""
        part = self._partitions.get((topic, partition))
        return None if part is None else part.log

    def _readable(self, topic: str, partition: int) -> defer.Deferred[Partition]:
        return self._partitions.open(topic, partition, create=False)

    def offsets(self, topic: str, partition: int) -> defer.Deferred[PartitionOffsets]:
        """A partition's log start offset, high watermark and LSO (no I/O)."""
        return self._readable(topic, partition).addCallback(
            lambda part: PartitionOffsets(
                part.log.log_start_offset, part.log.high_watermark, part.log.last_stable_offset
            )
        )

    def list_offsets(
        self, topic: str, partition: int, *, read_committed: bool = False
    ) -> defer.Deferred[tuple[int, int]]:
        """``(log_start_offset, latest)``: latest is the high watermark, or with
        ``read_committed`` the LSO (Kafka's ListOffsets by isolation level)."""

        def answer(part: Partition) -> tuple[int, int]:
            log = part.log
            latest = log.last_stable_offset if read_committed else log.high_watermark
            return log.log_start_offset, latest

        return self._readable(topic, partition).addCallback(answer)

    def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> defer.Deferred[tuple[int, int] | None]:
        """The first ``(offset, timestamp)`` at or after ``timestamp_ms``, or None."""
        return self._readable(topic, partition).addCallback(
            lambda part: self._run_read(part.log.offset_for_timestamp, timestamp_ms)
        )

    def max_timestamp_offset(
        self, topic: str, partition: int
    ) -> defer.Deferred[tuple[int, int] | None]:
        """``(offset, timestamp)`` of the record with the largest timestamp, or None."""
        return self._readable(topic, partition).addCallback(
            lambda part: self._run_read(part.log.max_timestamp_offset)
        )

