# -*- test-case-name: tests.core.share.test_service -*-
"""Share groups against the broker's logs: reads, durable changes, lock timers.

:class:`ShareService` runs the :class:`~brokerd.core.share.engine.ShareEngine`
operations on the reactor thread with the log reads they need and makes every change
durable in the share-state journal before it answers:

- :meth:`~ShareService.acquire` initialises the share-partition on first use (the
  group's ``share.auto.offset.reset`` against the log's start and end), reads the log
  from the share-partition's fetch offset (read_committed unless the group's
  ``share.isolation.level`` says otherwise: only below the last stable offset, aborted
  transactions' batches and control batches archived, never delivered), acquires, and
  answers the acquired ranges with the whole batches holding them;
- :meth:`~ShareService.acknowledge`, :meth:`~ShareService.release_member`, offsets and
  group admin;
- :meth:`~ShareService.acquire_many`: a long poll over several partitions with the core's
  :func:`~brokerd.core.waiters.long_poll` (parks until an append lands or the wait ends).

Journal writes go through one queue in order (:class:`_JournalQueue`): what is pending
while a write runs forms the next write, one fdatasync for the lot (group commit), so
the file's order is the engine's order. Lock expiry runs on a timer of the injected
clock. What it does not do: group membership or any wire format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs
from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.clock import Clock, DelayedCall
from brokerd.core.api import CoreLongPoll, CoreReads
from brokerd.core.share.config import DEFAULTS, AutoOffsetReset, IsolationLevel
from brokerd.core.share.engine import ShareEngine, TopicPartition
from brokerd.core.share.partition import AckBatch, AcquiredRange, LogSpan, PartitionSummary
from brokerd.core.waiters import Shortfall, long_poll
from brokerd.errors import OffsetOutOfRange, StorageError
from brokerd.storage.record.header import BATCH_HEADER_SIZE, read_header
from brokerd.storage.stores.share_state import ShareStateRecord, ShareStateStore
from brokerd.storage.types import Delivery, Isolation, LogRead, ReadSpec

__all__ = ["AcquireResult", "ShareCore", "ShareService", "spans_of"]

#: How a share fetch reads the log: stored batches by value, committed or not.
COMMITTED_BYTES = ReadSpec(Isolation.READ_COMMITTED, Delivery.BYTES)
UNCOMMITTED_BYTES = ReadSpec(Isolation.READ_UNCOMMITTED, Delivery.BYTES)
#: Most bytes one partition's share fetch reads from the log.
MAX_READ_BYTES = 1 << 20
#: How often the lock timer looks when no lock is held (it is set to the next deadline
#: otherwise).
IDLE_CHECK_SECONDS = 1.0


class ShareCore(CoreReads, CoreLongPoll, Protocol):
    """What the service needs of :class:`brokerd.core.Broker`: its reads and long poll
    (the core's face), and its write pool for the journal's writes."""

    def run_write(
        self, f: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> defer.Deferred[Any]: ...


@attrs.frozen
class AcquireResult:
    """One partition's acquisition: the ranges, and the whole batches holding them."""

    topic: str
    partition: int
    ranges: tuple[AcquiredRange, ...] = ()
    records: bytes = b""
    error: BaseException | None = None


def spans_of(
    data: bytes, aborted: Iterable[tuple[int, int]]
) -> tuple[list[LogSpan], list[tuple[int, int, int]]]:
    """The whole batches of ``data`` as spans (control batches and batches of aborted
    transactions to skip), and each batch's (first offset, last offset, byte end)."""
    pending = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    spans: list[LogSpan] = []
    bounds: list[tuple[int, int, int]] = []
    pos = 0
    while pos + BATCH_HEADER_SIZE <= len(data):
        header = read_header(data, pos)
        end = pos + header.size
        if end > len(data):
            break
        while pending and pending[0][1] <= header.last_offset:
            active.add(pending.pop(0)[0])
        skip = header.is_control
        if header.is_control:
            active.discard(header.producer_id)
        elif header.is_transactional and header.producer_id in active:
            skip = True
        spans.append(LogSpan(header.base_offset, header.last_offset, skip))
        bounds.append((header.base_offset, header.last_offset, end))
        pos = end
    return spans, bounds


class _JournalQueue:
    """Ordered group commit of journal records in the write pool.

    Memory must not run ahead of the journal for good: when a write fails, or a write
    finds the journal was reopened from disk since the engine last loaded it, ``reload``
    loads the engine from the journal's view, and every write still pending (its
    records were made on the state just discarded) fails with the batch. Their callers
    answer an error; nothing they changed stays applied.
    """

    def __init__(
        self,
        store: ShareStateStore,
        run_write: Callable[..., defer.Deferred[Any]],
        reload: Callable[[], None],
    ) -> None:
        self._store = store
        self._run_write = run_write
        self._reload = reload
        self._loaded_at = store.reopens
        self._pending: list[tuple[list[ShareStateRecord], defer.Deferred[None]]] = []
        self._running = False

    def write(self, records: list[ShareStateRecord]) -> defer.Deferred[None]:
        d: defer.Deferred[None] = defer.Deferred()
        if not records:
            d.callback(None)
            return d
        self._pending.append((records, d))
        if not self._running:
            self._next()
        return d

    def _next(self) -> None:
        if not self._pending:
            self._running = False
            return
        self._running = True
        batch, self._pending = self._pending, []
        records = [r for recs, _ in batch for r in recs]

        def done(result: object) -> None:
            if isinstance(result, Failure):
                stored, failed, reason = [], batch, result
            else:
                stored, failed = batch, []
                reason = Failure(StorageError(
                    f"the {self._store.journal.name} was reopened from disk: retry"
                ))
            if failed or self._store.reopens != self._loaded_at:
                failed = failed + self._pending
                self._pending = []
                self._loaded_at = self._store.reopens
                self._reload()
            for _, d in stored:
                d.callback(None)
            for _, d in failed:
                d.errback(reason)
            self._next()

        self._run_write(self._store.write, records).addBoth(done)


class ShareService:
    """See the module docstring.

    :param core: the broker (reads, offsets, the write pool, long-poll parks).
    :param store: the share-state journal (already opened and replayed).
    :param clock: the reactor or a ``task.Clock``.
    :param defaults: the broker's default of each group config (``group.share.*``).
    """

    _log = Logger()

    def __init__(
        self,
        core: ShareCore,
        store: ShareStateStore,
        *,
        clock: Clock,
        defaults: Mapping[str, str] = DEFAULTS,
    ) -> None:
        self._core = core
        self._store = store
        self._clock = clock
        self.engine = ShareEngine(defaults)
        self.engine.restore(store.partitions(), store.group_configs())
        self._journal = _JournalQueue(store, core.run_write, self._reload)
        self._timer: DelayedCall | None = None
        self._stopped = False
        #: Partitions whose acquisition or initialisation is under way (one at a time).
        self._busy: dict[tuple[str, str, int], defer.Deferred[None]] = {}

    def now_ms(self) -> float:
        return self._clock.seconds() * 1000.0

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self._stopped = False
        self._schedule()

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _schedule(self) -> None:
        if self._stopped:
            return
        if self._timer is not None and self._timer.active():
            # It fires within IDLE_CHECK_SECONDS, before any lock taken since expires.
            return
        deadline = self.engine.next_deadline()
        delay = IDLE_CHECK_SECONDS
        if deadline is not None:
            delay = max(0.0, min(delay, (deadline - self.now_ms()) / 1000.0))
        self._timer = self._clock.callLater(delay, self._expire)

    def _expire(self) -> None:
        self._timer = None
        records = self.engine.expire_locks(self.now_ms())
        if records:
            self._journal.write(records).addErrback(self._write_failed)
        self._schedule()

    def _write_failed(self, failure: Failure) -> None:
        self._log.warn("share-state write failed: {error}", error=failure.getErrorMessage())

    def _reload(self) -> None:
        self._log.warn("share-state: reloading the share-partitions from the journal")
        self.engine.reload(self._store.partitions(), self._store.group_configs())

    # -- acquiring -----------------------------------------------------------------------

    async def acquire(
        self,
        group: str,
        topic: str,
        partition: int,
        member: str,
        *,
        max_records: int,
        max_bytes: int = MAX_READ_BYTES,
    ) -> AcquireResult:
        """Acquire up to ``max_records`` records of the partition for ``member``; durable
        when it returns. Errors (unknown partition, storage) come back in ``error``."""
        key = (group, topic, partition)
        while key in self._busy:
            await self._busy[key]
        gate: defer.Deferred[None] = defer.Deferred()
        self._busy[key] = gate
        try:
            return await self._acquire(group, topic, partition, member, max_records, max_bytes)
        except Exception as exc:  # answered per partition
            return AcquireResult(topic, partition, error=exc)
        finally:
            del self._busy[key]
            gate.callback(None)

    async def _acquire(
        self,
        group: str,
        topic: str,
        partition: int,
        member: str,
        max_records: int,
        max_bytes: int,
    ) -> AcquireResult:
        offsets = await self._core.offsets(topic, partition)
        config = self.engine.config(group)
        committed = config.isolation_level is IsolationLevel.READ_COMMITTED
        end = offsets.last_stable_offset if committed else offsets.high_watermark
        found = None
        if config.auto_offset_reset is AutoOffsetReset.BY_DURATION and self.engine.needs_reset(
            group, topic, partition, log_end=end
        ):
            since = int(self.now_ms()) - config.reset_duration_ms
            first = await self._core.offset_for_timestamp(topic, partition, since)
            found = None if first is None else first[0]
        part, records = self.engine.ensure(
            group,
            topic,
            partition,
            log_start=offsets.log_start_offset,
            log_end=end,
            found=found,
        )
        if records:
            await self._journal.write(records)
        offset = part.fetch_offset()
        if offset >= end or max_records <= 0:
            return AcquireResult(topic, partition)
        try:
            got = self._core.read(
                topic,
                partition,
                offset,
                min(max_bytes, MAX_READ_BYTES),
                COMMITTED_BYTES if committed else UNCOMMITTED_BYTES,
            )
            read = got if isinstance(got, LogRead) else await got
        except OffsetOutOfRange:
            return AcquireResult(topic, partition)
        assert isinstance(read.records, bytes), "a read by value answers bytes"
        data = read.records
        spans, bounds = spans_of(data, ((a.producer_id, a.first_offset) for a in read.aborted))
        if not spans:
            return AcquireResult(topic, partition)
        ranges, records = self.engine.acquire(
            group,
            topic,
            partition,
            member,
            spans,
            max_records,
            self.now_ms(),
        )
        # Not durable: the write's failure reloaded the engine from the journal, so the
        # records are back with the group, and the error is answered instead of them.
        await self._journal.write(records)
        self._schedule()
        return AcquireResult(
            topic,
            partition,
            tuple(ranges),
            _batches_holding(data, bounds, ranges),
        )

    def acquire_many(
        self,
        group: str,
        member: str,
        partitions: Sequence[TopicPartition],
        *,
        max_records: int,
        max_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> defer.Deferred[list[AcquireResult]]:
        """Acquire across ``partitions`` (``max_records`` in all), waiting up to
        ``max_wait_ms`` for records to arrive when none are there. A ``max_bytes`` of 0
        or less takes nothing: it waits out ``max_wait_ms`` and answers no records, as
        Kafka answers a ShareFetch with MaxBytes 0."""
        per_partition = max(1, max_bytes // max(1, len(partitions)))

        async def read() -> list[AcquireResult]:
            out: list[AcquireResult] = []
            if max_bytes <= 0:
                return [AcquireResult(topic, index) for topic, index in partitions]
            left = max_records
            for topic, index in partitions:
                if left <= 0:
                    out.append(AcquireResult(topic, index))
                    continue
                result = await self.acquire(
                    group,
                    topic,
                    index,
                    member,
                    max_records=left,
                    max_bytes=per_partition,
                )
                left -= sum(r.last - r.first + 1 for r in result.ranges)
                out.append(result)
            return out

        def short_of(results: list[AcquireResult]) -> Shortfall | None:
            if cancelled() or self._stopped or not partitions:
                return None
            if any(r.ranges or r.error is not None for r in results):
                return None
            return Shortfall(0, max(1, min_bytes), {})

        async def park(short: Shortfall, left_ms: int) -> bool:
            positions = [(t, p, 0) for t, p in partitions]
            # Released records wake nobody: look again at least every 100 ms.
            await self._core.wait_for_data(
                positions,
                min_bytes=1,
                max_wait_ms=min(left_ms, 100),
            )
            return not cancelled()

        return long_poll(read, short_of, park, clock=self._clock, max_wait_ms=max_wait_ms)

    # -- acknowledging -------------------------------------------------------------------

    async def acknowledge(
        self,
        group: str,
        topic: str,
        partition: int,
        member: str,
        batches: Sequence[AckBatch],
    ) -> None:
        """Apply and make durable ``member``'s acknowledgements.

        :raises InvalidAcknowledgement: nothing changed.
        :raises KeyError: the share-partition was never used.
        """
        records = self.engine.acknowledge(
            group, topic, partition, member, batches, self.now_ms()
        )
        await self._journal.write(records)

    async def release_member(self, group: str, member: str) -> None:
        await self._journal.write(self.engine.release_member(group, member))

    # -- admin ---------------------------------------------------------------------------

    def describe(self, group: str) -> dict[TopicPartition, PartitionSummary]:
        return self.engine.describe(group)

    async def start_and_lag(self, group: str, topic: str, partition: int) -> tuple[int, int]:
        """The share-partition's start offset and its lag: records from the start to
        the log's end (the LSO under read_committed) not yet acknowledged or archived;
        ``(-1, -1)`` for a partition the group never used."""
        part = self.engine.partition(group, topic, partition)
        if part is None:
            return -1, -1
        offsets = await self._core.offsets(topic, partition)
        committed = self.engine.config(group).isolation_level is IsolationLevel.READ_COMMITTED
        end = offsets.last_stable_offset if committed else offsets.high_watermark
        summary = part.summary()
        done = summary.acknowledged + sum(
            1 for e in part.records.values() if e.state.name == "ARCHIVED"
        )
        return part.start, max(0, end - part.start - done)

    async def set_overrides(self, group: str, overrides: dict[str, str]) -> None:
        await self._journal.write(self.engine.set_overrides(group, overrides))

    async def set_start(self, group: str, topic: str, partition: int, offset: int) -> None:
        await self._journal.write(self.engine.set_start(group, topic, partition, offset))

    async def delete_partition(self, group: str, topic: str, partition: int) -> None:
        await self._journal.write(self.engine.delete_partition(group, topic, partition))

    def forget_topic(self, topic: str) -> None:
        """A topic was deleted: every group's share-partitions of it go, durably (as
        Kafka deletes a deleted topic's share-group state), so a topic created again
        under the name starts afresh by ``share.auto.offset.reset``."""
        records = self.engine.forget_topic(topic)
        if records:
            self._journal.write(records).addErrback(self._write_failed)

    async def delete_group(self, group: str) -> None:
        await self._journal.write(self.engine.delete_group(group))


def _batches_holding(
    data: bytes, bounds: list[tuple[int, int, int]], ranges: Sequence[AcquiredRange]
) -> bytes:
    """The whole batches of ``data`` that hold an acquired offset, in order."""
    out: list[bytes] = []
    pos = 0
    for first, last, end in bounds:
        if any(r.first <= last and first <= r.last for r in ranges):
            out.append(data[pos:end])
        pos = end
    return b"".join(out)
