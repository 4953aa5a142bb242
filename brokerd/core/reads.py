# -*- test-case-name: tests.test_broker -*-
"""The broker core's reads: Kafka fetch, native fetch, offsets (part of ``Broker``).

:class:`BrokerReads` is a mixin of :class:`~brokerd.core.broker.Broker` (one concern
per module). Each read checks the offset against the partition's published state in the
reactor thread, answers the common "nothing new" case without a thread hop, and runs the
read itself in the read pool, except a read the log answers from memory: a Kafka fetch
of batches whose position the log remembers (just appended, or found ahead by an earlier
read) and whose bytes were checked, and a native fetch of just-appended records
(``read_stored_known`` and ``read_records_known``, ``storage/log/stored_reads.py``): those are
answered in the reactor thread, without the pool hop (docs/performance.md, "Reads
without the pool hop").

A Kafka fetch on a plain TCP connection uses :meth:`BrokerReads.fetch_stored`: the same
read, with bytes checked before handed out by reference so the listener can send them
with ``os.sendfile`` (docs/performance.md).

Transactions (docs/architecture.md, "Transactions"): a read_committed Kafka fetch never
returns a batch at or past the last stable offset (LSO) and carries the aborted
transactions overlapping its data; an offset in [LSO, high watermark] answers empty. The
native fetch is always committed-only (``PartitionLog.read_records``). What it does not
do: parse a wire format or park (``waiters.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar, cast

from twisted.internet import defer

from brokerd.core.interfaces import PartitionStore, Runner
from brokerd.core.topics import Partition, TopicRegistry
from brokerd.errors import OffsetOutOfRange
from brokerd.storage.segment.stored import StoredRead
from brokerd.storage.types import PartitionOffsets, ReadResult, RecordsResult

R = TypeVar("R")


class _StoredReader(Protocol):
    """``PartitionLog.read_stored``: the zero-copy Kafka read (not every store has it)."""

    def read_stored(
        self, offset: int, max_bytes: int, *, read_committed: bool = False
    ) -> StoredRead: ...


class _KnownReader(Protocol):
    """``PartitionLog``'s reads from memory (None: not known, read in the pool)."""

    def read_stored_known(
        self, offset: int, max_bytes: int, *, read_committed: bool = False
    ) -> StoredRead | None: ...

    def read_records_known(self, offset: int, max_value_bytes: int) -> RecordsResult | None: ...


def _known(log: PartitionStore) -> _KnownReader | None:
    return cast(_KnownReader, log) if hasattr(log, "read_stored_known") else None


def _answer_now(
    log: PartitionStore,
    offset: int,
    at_end: Callable[[int, int, int], R],
    *,
    committed: bool,
    known: Callable[[_KnownReader], R | None] | None,
) -> R | None:
    """The answer of a read from ``offset`` that needs no thread hop (see
    ``BrokerReads._read_from``), or None; raises for an offset out of range."""
    hw, start = log.high_watermark, log.log_start_offset
    if offset > hw or offset < start:
        raise OffsetOutOfRange(offset, start, hw)
    lso = log.last_stable_offset
    if offset == hw or (committed and offset >= lso):
        # The common long-poll case: nothing new, no thread hop needed.
        return at_end(hw, start, lso)
    if known is not None:
        reader = _known(log)
        if reader is not None:
            return known(reader)
    return None


class BrokerReads:
    """Fetches and offsets (see the module docstring)."""

    partitions: TopicRegistry
    _run_read: Runner

    def _readable(self, topic: str, partition: int) -> defer.Deferred[Partition]:
        return self.partitions.open(topic, partition, create=False)

    def _read_from(
        self,
        topic: str,
        partition: int,
        offset: int,
        at_end: Callable[[int, int, int], R],
        read: Callable[[PartitionStore], defer.Deferred[R]],
        *,
        committed: bool,
        known: Callable[[_KnownReader], R | None] | None = None,
    ) -> defer.Deferred[R]:
        """``read`` the partition's log from ``offset`` in the read pool, after checking
        the offset is in range; ``at_end(high_watermark, log_start, lso)`` when there is
        nothing to read (at the high watermark, or for ``committed`` at or past the
        LSO); ``known(log)`` first, in this thread, when the log can answer from memory
        (its None means it cannot)."""

        def check(part: Partition) -> R | defer.Deferred[R]:
            answer = _answer_now(part.log, offset, at_end, committed=committed, known=known)
            return read(part.log) if answer is None else answer

        return self._readable(topic, partition).addCallback(check)

    def fetch_stored_now(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        *,
        read_committed: bool = False,
    ) -> StoredRead | None:
        """:meth:`fetch_stored`'s answer when it needs neither a file read nor a
        Deferred: the partition is open and there is nothing to read, or the log knows
        where the bytes lie (``read_stored_known``). None otherwise: then call
        :meth:`fetch_stored`. Raises what :meth:`fetch_stored` would fail with."""
        part = self.partitions.get((topic, partition))
        if part is None:
            return None
        return _answer_now(
            part.log,
            offset,
            lambda hw, start, lso: StoredRead(b"", None, hw, start, lso),
            committed=read_committed,
            known=lambda log: log.read_stored_known(
                offset, max_bytes, read_committed=read_committed
            ),
        )

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        *,
        read_committed: bool = False,
    ) -> defer.Deferred[ReadResult]:
        """Raw log bytes from the batch holding ``offset`` (Kafka Fetch); with
        ``read_committed`` only below the LSO, with the aborted transactions."""
        return self._read_from(
            topic,
            partition,
            offset,
            lambda hw, start, lso: ReadResult(b"", hw, start, lso),
            lambda log: self._run_read(log.read, offset, max_bytes, read_committed=read_committed),
            committed=read_committed,
        )

    def fetch_stored(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        *,
        read_committed: bool = False,
    ) -> defer.Deferred[StoredRead]:
        """:meth:`fetch`, with bytes checked before handed out by reference (a
        :class:`~brokerd.storage.segment.stored.StoredSpan` the caller must release) for
        ``os.sendfile``; see ``PartitionLog.read_stored``."""
        return self._read_from(
            topic,
            partition,
            offset,
            lambda hw, start, lso: StoredRead(b"", None, hw, start, lso),
            lambda log: self._run_read(
                cast(_StoredReader, log).read_stored,
                offset,
                max_bytes,
                read_committed=read_committed,
            ),
            committed=read_committed,
            known=lambda log: log.read_stored_known(
                offset, max_bytes, read_committed=read_committed
            ),
        )

    def fetch_records(
        self, topic: str, partition: int, offset: int, max_value_bytes: int
    ) -> defer.Deferred[RecordsResult]:
        """Decoded committed records from ``offset`` (the native fetch)."""
        return self._read_from(
            topic,
            partition,
            offset,
            lambda hw, start, _lso: RecordsResult((), hw, start),
            lambda log: self._run_read(log.read_records, offset, max_value_bytes),
            committed=True,
            known=lambda log: log.read_records_known(offset, max_value_bytes),
        )

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
