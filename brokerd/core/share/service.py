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
- :meth:`~ShareService.acknowledge_many`, :meth:`~ShareService.release_member`, offsets
  and group admin;
- :meth:`~ShareService.fetch`: a long poll over several partitions with the core's
  :func:`~brokerd.core.roles.long_poll.long_poll`. It parks until an append lands, records of
  its partitions come back to the group (released, rejected, their lock expired) or are
  acknowledged (which may leave room under the lock limit), or the wait ends.

A request over many partitions changes the engine in one synchronous step and makes the
change durable with one journal write (an acquisition reads every partition's log
first). Journal writes go through the coordinator runtime's ordered writer
(:class:`~brokerd.coordinator_runtime.OrderedJournalWriter`): what is submitted
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
from brokerd.coordinator_runtime import OrderedJournalWriter
from brokerd.core.roles import CoreLongPoll, HoldsReads
from brokerd.core.roles.long_poll import Shortfall, long_poll
from brokerd.core.share.config import DEFAULTS, AutoOffsetReset
from brokerd.core.share.dead_letters import DeadLetterWriter
from brokerd.core.share.engine import ShareEngine, TopicPartition
from brokerd.core.share.partition import AckBatch, AcquiredRange, LogSpan, PartitionSummary
from brokerd.errors import OffsetOutOfRange, TooManyWaiters
from brokerd.storage.record.header import BATCH_HEADER_SIZE, BatchHeader, read_header
from brokerd.storage.stores.share_state import (
    PartitionState,
    ShareStateRecord,
    ShareStateStore,
)
from brokerd.storage.types import Delivery, Isolation, LogRead, ReadSpec

__all__ = ["AcquireResult", "FetchResult", "ShareCore", "ShareService", "spans_of"]

#: How a share fetch reads the log: stored batches by value, committed or not.
COMMITTED_BYTES = ReadSpec(Isolation.READ_COMMITTED, Delivery.BYTES)
UNCOMMITTED_BYTES = ReadSpec(Isolation.READ_UNCOMMITTED, Delivery.BYTES)
#: Most bytes one partition's share fetch reads from the log.
MAX_READ_BYTES = 1 << 20
#: A partition's first read when its record size is not known yet, and the least any
#: read asks for (a read answers at least one whole batch however small it is).
FIRST_READ_BYTES = 64 * 1024
MIN_READ_BYTES = 16 * 1024
#: How often the lock timer looks when no lock is held (it is set to the next deadline
#: otherwise).
IDLE_CHECK_SECONDS = 1.0
#: How much of the log one share read reads (shared out over the partitions of the
#: request): the batches past those the fetch is given are kept (:class:`_Batches`) for
#: the partition's next fetches, so that a partition that several members drain is read
#: from its files (a hop to the read pool and back) once per this many bytes rather than
#: once per fetch.
READ_AHEAD_BYTES = MAX_READ_BYTES
#: How long read-ahead batches are used. The log below the high watermark does not
#: change, but the cleaner may rewrite it: batches read longer ago are read again.
READ_AHEAD_SECONDS = 1.0
#: Most partitions with read-ahead batches kept at once (the oldest is dropped).
READ_AHEAD_PARTITIONS = 32
#: Most times one share fetch reads again at once because another fetch acquired what
#: its read held (then it parks as any fetch that found nothing).
_RETRIES_AT_ONCE = 8


class ShareCore(CoreLongPoll, HoldsReads, Protocol):
    """What the service needs of :class:`brokerd.core.Broker`: its reads and long poll (the
    core's face), and its write pool for the journal's writes. Implemented by
    :class:`~brokerd.core.broker.Broker`; a Protocol because the broker holds this service
    (``brokerd.core`` imports ``brokerd.core.share``), so this package cannot import it
    back."""

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
    batches = _Batches(data, aborted)
    spans: list[LogSpan] = []
    bounds: list[tuple[int, int, int]] = []
    while (header := batches.peek()) is not None:
        span = batches.advance(header)
        spans.append(span)
        bounds.append((span.first, span.last, batches.pos))
    return spans, bounds


class _Batches:
    """Stored batches read from the log (``data``, with the aborted transactions
    ``(producer id, first offset)`` the read reported), parsed one header at a time as
    fetches take them: control batches and batches of aborted transactions are spans to
    skip. What a share read keeps of a read-ahead (:data:`READ_AHEAD_BYTES`)."""

    def __init__(
        self, data: bytes, aborted: Iterable[tuple[int, int]], *, committed: bool = True,
        at: float = 0.0,
    ) -> None:
        self.data = data
        #: Where the first batch a fetch may still want begins (those below the
        #: offsets fetches asked for are passed).
        self.pos = 0
        self.committed = committed
        #: When the log was read (the clock's seconds).
        self.at = at
        self._pending = sorted(aborted, key=lambda a: a[1])
        self._active: set[int] = set()

    def peek(self) -> BatchHeader | None:
        """The header of the next whole batch, None when no whole batch is left."""
        pos, data = self.pos, self.data
        if pos + BATCH_HEADER_SIZE > len(data):
            return None
        header = read_header(data, pos)
        if pos + header.size > len(data):
            return None
        return header

    def advance(self, header: BatchHeader) -> LogSpan:
        """Take the batch :meth:`peek` answered: its span."""
        self.pos += header.size
        pending, active = self._pending, self._active
        while pending and pending[0][1] <= header.last_offset:
            active.add(pending.pop(0)[0])
        skip = header.is_control
        if header.is_control:
            active.discard(header.producer_id)
        elif header.is_transactional and header.producer_id in active:
            skip = True
        return LogSpan(header.base_offset, header.last_offset, skip)

    def take(
        self, offset: int, max_bytes: int, end: int, *, exact: bool
    ) -> tuple[bytes, list[LogSpan], list[tuple[int, int, int]]] | None:
        """The batches from the one holding ``offset`` (passing those below it), whole
        ones while they fit ``max_bytes`` (at least one), all below ``end``: their bytes,
        spans and bounds. With ``exact`` None when the next batch starts past ``offset``
        (what lies between was not read here) or reaches ``end``; without, the first
        batch is taken wherever it starts, as a log read answers."""
        while (header := self.peek()) is not None and header.last_offset < offset:
            self.advance(header)
        if header is None or (exact and (
            header.base_offset > offset or header.last_offset >= end
        )):
            return None
        # The batches given stay here (a fetch may acquire only part of them, and the
        # next one then reads from inside them again): parsed on a copy of the state.
        begin, pending, active = self.pos, self._pending, self._active
        self._pending, self._active = list(pending), set(active)
        spans: list[LogSpan] = []
        bounds: list[tuple[int, int, int]] = []
        while header is not None and header.last_offset < end and (
            not spans or self.pos + header.size - begin <= max_bytes
        ):
            span = self.advance(header)
            spans.append(span)
            bounds.append((span.first, span.last, self.pos - begin))
            header = self.peek()
        data = self.data[begin:self.pos]
        self.pos, self._pending, self._active = begin, pending, active
        return data, spans, bounds


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
        dead_letters: DeadLetterWriter | None = None,
    ) -> None:
        self._core = core
        self.dead_letters = dead_letters
        self._store = store
        self._clock = clock
        self.engine = ShareEngine(defaults)
        self.engine.restore(store.partitions(), store.group_configs())
        self._journal: OrderedJournalWriter[ShareStateRecord] = OrderedJournalWriter(
            store.write, core.run_write, self._reload,
            reopens=lambda: store.reopens, name=store.journal.name,
        )
        self._timer: DelayedCall | None = None
        self._stopped = False
        #: Parked share fetches by share-partition: fired when records there may have
        #: become available to acquire (released, rejected, expired, or the window moved).
        self._wakers: dict[tuple[str, str, int], set[defer.Deferred[None]]] = {}
        #: Bytes per record each partition's last share read saw (its read sizes).
        self._record_bytes: dict[TopicPartition, float] = {}
        #: Each partition's read-ahead: batches read and not yet handed to a fetch.
        self._ahead: dict[TopicPartition, _Batches] = {}

    def now_ms(self) -> float:
        return self._clock.seconds() * 1000.0

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self._stopped = False
        self._schedule()
        # ARCHIVING records the journal held at start-up: their dead-letter records may
        # not have been written before the broker stopped (at least once).
        self._send_dead_letters(defer.succeed(None))

    # -- journal writes and dead letters -------------------------------------------------

    def _submit(self, records: list[ShareStateRecord]) -> defer.Deferred[None]:
        """Submit ``records`` to the journal; once they are durable, write the dead
        letters this change noted (their ARCHIVING state is then on disk first, so a
        crash repeats a dead-letter record rather than losing it)."""
        written = self._journal.submit(records)
        self._send_dead_letters(written)
        return written

    def _send_dead_letters(self, durable: defer.Deferred[None]) -> None:
        pending = self.engine.take_dead_letters()
        if not pending:
            return

        async def send(_: object) -> None:
            for letters in pending:
                written = False
                if self.dead_letters is not None:
                    written = await self.dead_letters.write(letters)
                records = [
                    record
                    for letter in letters.letters
                    for record in self.engine.dead_lettered(
                        letters.group, letters.topic, letters.partition,
                        letter.first, letter.last, written=written,
                    )
                ]
                if records:
                    self._journal.submit(records).addErrback(self._write_failed)
                    self._wake(records)

        def go(result: object) -> defer.Deferred[None]:
            return defer.Deferred.fromCoroutine(send(result))

        # On a fork: the caller's answer waits for the journal only, not for the dead
        # letters. A failed journal write reloaded the engine (the ARCHIVING it noted is
        # undone), so nothing is sent then.
        fork: defer.Deferred[None] = defer.Deferred()

        def forward(result: object) -> object:
            if isinstance(result, Failure):
                fork.errback(result)
            else:
                fork.callback(None)
            return result

        durable.addBoth(forward)
        fork.addCallback(go).addErrback(self._dead_letter_failed)

    def _dead_letter_failed(self, failure: Failure) -> None:
        self._log.warn("share dead letters: {error}", error=failure.getErrorMessage())

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
            self._submit(records).addErrback(self._write_failed)
            self._wake(records)
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
        (got,), _ = await self._acquire_all(
            group, member, [(topic, partition)], max_records, min(max_bytes, MAX_READ_BYTES)
        )
        return got

    async def _acquire_all(
        self,
        group: str,
        member: str,
        partitions: Sequence[TopicPartition],
        max_records: int,
        max_bytes: int,
        acknowledgements: Sequence[tuple[str, int, Sequence[AckBatch]]] = (),
        *,
        whole_batches: bool = False,
        overtaken: list[TopicPartition] | None = None,
    ) -> tuple[list[AcquireResult], tuple[BaseException | None, ...]]:
        """One acquisition over ``partitions``: read each partition's log (the only
        waiting), then in one synchronous step apply ``acknowledgements`` and acquire
        from every partition, and make it all durable with one journal write. Memory
        changes in that step only, so the journal's order is the engine's even with
        other fetches running meanwhile; a read that another fetch overtook acquires
        what is still available in it (the partitions where that was nothing while
        locks were free are added to ``overtaken``: a read now would find more). Answers
        the acquisitions and the outcome of each acknowledgement (as
        :meth:`acknowledge_many`)."""
        reads: list[_Read | AcquireResult] = []
        acking = {(topic, index) for topic, index, _ in acknowledgements}
        # The read-ahead is shared out over the request's partitions: a session of
        # many partitions does not read a MiB of each.
        ahead = READ_AHEAD_BYTES // max(1, len(partitions))
        for topic, index in partitions:
            try:
                reads.append(await self._read(
                    group, topic, index, max_records, max_bytes,
                    acking=(topic, index) in acking, ahead_bytes=ahead,
                ))
            except Exception as exc:  # answered per partition
                reads.append(AcquireResult(topic, index, error=exc))
        out: list[AcquireResult] = []
        acquired: list[tuple[int, _Read, list[AcquiredRange]]] = []
        acked, acknowledged = self._apply_acknowledgements(group, member, acknowledgements)
        records = list(acknowledged)
        left = max_records
        now = self.now_ms()
        for read in reads:
            if isinstance(read, AcquireResult):
                out.append(read)
                continue
            if left <= 0 or not read.spans:
                out.append(AcquireResult(read.topic, read.partition))
                continue
            try:
                ranges, changed = self.engine.acquire(
                    group, read.topic, read.partition, member, read.spans, left, now,
                    whole_batches=whole_batches,
                )
            except Exception as exc:  # the share-partition went (a reload, a deletion)
                out.append(AcquireResult(read.topic, read.partition, error=exc))
                continue
            left -= sum(r.last - r.first + 1 for r in ranges)
            if not ranges and overtaken is not None and left > 0:
                part = self.engine.partition(group, read.topic, read.partition)
                if part is not None and part.has_room() and any(
                    not span.skip for span in read.spans
                ):
                    overtaken.append((read.topic, read.partition))
            records += changed
            acquired.append((len(out), read, ranges))
            out.append(AcquireResult(read.topic, read.partition))
        written = self._submit(records)
        self._wake(acknowledged)
        try:
            # Not durable: the write's failure reloaded the engine from the journal, so
            # the records are back with the group, and the error is answered instead.
            await written
        except Exception as exc:
            for at, read, _ in acquired:
                out[at] = AcquireResult(read.topic, read.partition, error=exc)
            return out, _failed(acked, exc)
        finally:
            if len(records) > len(acknowledged):
                self._schedule()
        for at, read, ranges in acquired:
            out[at] = AcquireResult(
                read.topic, read.partition, tuple(ranges),
                _batches_holding(read.data, read.bounds, ranges),
            )
        return out, _outcomes(acked)

    async def _read(
        self, group: str, topic: str, partition: int, max_records: int, max_bytes: int,
        *, acking: bool = False, ahead_bytes: int = READ_AHEAD_BYTES,
    ) -> _Read:
        """The share-partition (initialised or moved past the log's start, durably in
        order with any later change) and the log's batches from its fetch offset: about
        what ``max_records`` records take, by the record size the last reads of the
        partition saw (a read answers at least one whole batch), at most ``max_bytes``.
        Nothing is read while the partition's record locks are all taken, unless the
        request also acknowledges records of it (``acking``: they are applied after the
        read, and may make room): the acquisition would take nothing."""
        offsets = await self._core.reads.offsets(topic, partition)
        config = self.engine.config(group)
        committed = config.isolation_level is Isolation.READ_COMMITTED
        end = offsets.last_stable_offset if committed else offsets.high_watermark
        found = None
        if config.auto_offset_reset is AutoOffsetReset.BY_DURATION and self.engine.needs_reset(
            group, topic, partition, log_end=end
        ):
            since = int(self.now_ms()) - config.reset_duration_ms
            first = await self._core.reads.offset_for_timestamp(topic, partition, since)
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
            await self._journal.submit(records)
        if max_bytes <= 0 or not (acking or part.has_room()):
            return _Read(topic, partition)
        offset = part.fetch_offset()
        if offset >= end:
            return _Read(topic, partition)
        key = (topic, partition)
        size = self._read_size(key, max_records, max_bytes)
        now = self._clock.seconds()
        ahead = self._ahead.pop(key, None)
        got = None
        if ahead is not None and ahead.committed == committed and (
            now - ahead.at <= READ_AHEAD_SECONDS
        ):
            got = ahead.take(offset, size, end, exact=True)
            if got is not None:
                self._ahead[key] = ahead
        if got is None:
            try:
                answer = self._core.reads.read(
                    topic, partition, offset, max(size, min(ahead_bytes, MAX_READ_BYTES)),
                    COMMITTED_BYTES if committed else UNCOMMITTED_BYTES,
                )
                read = answer if isinstance(answer, LogRead) else await answer
            except OffsetOutOfRange:
                return _Read(topic, partition)
            assert isinstance(read.records, bytes), "a read by value answers bytes"
            ahead = _Batches(
                read.records, ((a.producer_id, a.first_offset) for a in read.aborted),
                committed=committed, at=self._clock.seconds(),
            )
            got = ahead.take(offset, size, end, exact=False)
            if got is None:
                return _Read(topic, partition)
            # Kept: the next fetches read on from here (or from inside the batches
            # given, when this fetch acquires part of them). A read-ahead another fetch
            # kept meanwhile is replaced: this one is the newer.
            self._ahead.pop(key, None)
            if read.records:
                self._ahead[key] = ahead
                while len(self._ahead) > READ_AHEAD_PARTITIONS:
                    del self._ahead[next(iter(self._ahead))]
        data, spans, bounds = got
        if spans:
            count = spans[-1].last - spans[0].first + 1
            self._record_bytes[key] = max(1.0, len(data) / max(1, count))
        return _Read(topic, partition, data, spans, bounds)

    def _read_size(self, key: TopicPartition, max_records: int, max_bytes: int) -> int:
        """Bytes to read for ``max_records`` records of partition ``key``. Reading
        MAX_READ_BYTES for a hundred small records would spend most of a fetch on bytes
        nobody is given; twice the estimate leaves room for records others hold."""
        cap = min(max_bytes, MAX_READ_BYTES)
        per_record = self._record_bytes.get(key)
        if per_record is None:
            return min(cap, FIRST_READ_BYTES)
        return max(1, min(cap, max(MIN_READ_BYTES, int(2 * max_records * per_record))))

    def fetch(
        self,
        group: str,
        member: str,
        acknowledgements: Sequence[tuple[str, int, Sequence[AckBatch]]],
        partitions: Sequence[TopicPartition],
        *,
        max_records: int,
        max_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
        cancelled: Callable[[], bool] = lambda: False,
        whole_batches: bool = False,
    ) -> defer.Deferred[FetchResult]:
        """A share fetch: apply ``member``'s acknowledgements (as
        :meth:`acknowledge_many`; none for an acquisition alone), then acquire across
        ``partitions`` (``max_records`` in all), waiting up to ``max_wait_ms`` for records to
        arrive or come back when none are there; the acknowledgements and the first
        acquisition share one journal write. A ``max_bytes`` of 0 or less takes nothing:
        it waits out ``max_wait_ms`` and answers no records, as Kafka answers a ShareFetch
        with MaxBytes 0. The broker's waiter limit refusing the wait is answered as
        ``refused`` (nothing acquired), not raised. With
        ``whole_batches`` (Kafka's batch-optimized acquire mode) ``max_records`` is the
        point after which no new batch is begun, so the last batch may pass it."""
        per_partition = max(1, max_bytes // max(1, len(partitions)))
        carry = acknowledgements
        acked: list[tuple[BaseException | None, ...]] = []
        #: Partitions whose last read another fetch overtook (it acquired what this one
        #: read first) while locks were still free: read again at once, not park (each
        #: such retry follows another fetch's progress; at most _RETRIES_AT_ONCE).
        overtaken: list[TopicPartition] = []
        retries = 0

        async def read() -> list[AcquireResult]:
            nonlocal carry
            first, carry = carry, ()
            if max_bytes <= 0 or not partitions:
                results = [AcquireResult(topic, index) for topic, index in partitions]
                if first:
                    acked.append(await self.acknowledge_many(group, member, first))
                return results
            overtaken.clear()
            results, outcomes = await self._acquire_all(
                group, member, partitions, max_records, min(per_partition, MAX_READ_BYTES),
                first, whole_batches=whole_batches, overtaken=overtaken,
            )
            if first:
                acked.append(outcomes)
            return results

        def short_of(results: list[AcquireResult]) -> Shortfall | None:
            if cancelled() or self._stopped or not partitions:
                return None
            if any(r.ranges or r.error is not None for r in results):
                return None
            return Shortfall(0, max(1, min_bytes), {})

        async def park(short: Shortfall, left_ms: int) -> bool:
            nonlocal retries
            if overtaken and retries < _RETRIES_AT_ONCE:
                retries += 1
            else:
                await self._park(group, partitions, left_ms)
            return not cancelled()

        def done(results: list[AcquireResult]) -> FetchResult:
            return FetchResult(acked[0] if acked else (), results)

        def refused(failure: Failure) -> FetchResult:
            # The waiter limit refused the first park: the first read, acknowledgements
            # included, is done, and acquired nothing.
            failure.trap(TooManyWaiters)
            exc = failure.value
            assert isinstance(exc, TooManyWaiters)
            return FetchResult(acked[0] if acked else (), [], refused=exc)

        polled = long_poll(read, short_of, park, clock=self._clock, max_wait_ms=max_wait_ms)
        return polled.addCallbacks(done, refused)

    async def _park(
        self, group: str, partitions: Sequence[TopicPartition], left_ms: int
    ) -> None:
        """Until an append lands on one of ``partitions``, records there come back to
        the group (:meth:`_wake`), or ``left_ms`` passes."""
        appended = self._core.wait_for_data(
            [(t, p, 0) for t, p in partitions], min_bytes=1, max_wait_ms=left_ms
        )
        if appended.called:
            await appended  # at once: shutdown, or refused (TooManyWaiters)
            return
        woken: defer.Deferred[None] = defer.Deferred()
        keys = [(group, t, p) for t, p in partitions]
        for key in keys:
            self._wakers.setdefault(key, set()).add(woken)
        try:
            await defer.race([appended, woken])
        finally:
            for key in keys:
                waiting = self._wakers.get(key)
                if waiting is not None:
                    waiting.discard(woken)
                    if not waiting:
                        del self._wakers[key]

    def _wake(self, records: Iterable[ShareStateRecord]) -> None:
        """Wake the fetches parked on the share-partitions ``records`` changed: released,
        rejected, expired or acknowledged records may be acquirable now (or leave room
        under the lock limit). Also when the acknowledging fetch took that room again in
        the same step: a woken fetch that finds every lock taken reads no log
        (:meth:`_read`) and parks again at once, and one that lost its room to another
        member is back in the race at the next acknowledgement, not after its MaxWait."""
        fired: list[defer.Deferred[None]] = []
        for record in records:
            if isinstance(record, PartitionState):
                fired += self._wakers.pop((record.group, record.topic, record.partition), ())
        for d in fired:
            if not d.called:
                d.callback(None)

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
        (error,) = (await self.acknowledge_many(group, member, [(topic, partition, batches)]))
        if error is not None:
            raise error

    async def acknowledge_many(
        self,
        group: str,
        member: str,
        acknowledgements: Sequence[tuple[str, int, Sequence[AckBatch]]],
    ) -> tuple[BaseException | None, ...]:
        """Apply ``member``'s acknowledgements of several partitions, each partition's
        all or none, and make them durable with one journal write: per partition, None
        once durable, or what refused it (:class:`InvalidAcknowledgement`, KeyError for
        a share-partition never used, the write's error)."""
        acked, records = self._apply_acknowledgements(group, member, acknowledgements)
        written = self._submit(records)
        self._wake(records)
        try:
            await written
        except Exception as exc:
            return _failed(acked, exc)
        return _outcomes(acked)

    def _apply_acknowledgements(
        self,
        group: str,
        member: str,
        acknowledgements: Sequence[tuple[str, int, Sequence[AckBatch]]],
    ) -> tuple[list[BaseException], list[ShareStateRecord]]:
        """Apply them to the engine: per partition :data:`_APPLIED` or what refused it,
        and the records to write (the caller submits them, then :meth:`_wake` s the
        fetches parked on their partitions: after, so the journal's order stays the
        engine's)."""
        out: list[BaseException] = []
        records: list[ShareStateRecord] = []
        now = self.now_ms()
        for topic, partition, batches in acknowledgements:
            try:
                changed = self.engine.acknowledge(group, topic, partition, member, batches, now)
            except Exception as exc:
                out.append(exc)
                continue
            records += changed
            out.append(_APPLIED)
        return out, records

    async def release_member(self, group: str, member: str) -> None:
        records = self.engine.release_member(group, member)
        written = self._submit(records)
        self._wake(records)
        await written

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
        offsets = await self._core.reads.offsets(topic, partition)
        committed = self.engine.config(group).isolation_level is Isolation.READ_COMMITTED
        end = offsets.last_stable_offset if committed else offsets.high_watermark
        return part.start, max(0, end - part.start - part.done_count())

    async def set_overrides(self, group: str, overrides: dict[str, str]) -> None:
        await self._journal.submit(self.engine.set_overrides(group, overrides))

    async def set_start(self, group: str, topic: str, partition: int, offset: int) -> None:
        await self._journal.submit(self.engine.set_start(group, topic, partition, offset))

    async def delete_partition(self, group: str, topic: str, partition: int) -> None:
        await self._journal.submit(self.engine.delete_partition(group, topic, partition))

    def forget_topic(self, topic: str) -> None:
        """A topic was deleted: every group's share-partitions of it go, durably (as
        Kafka deletes a deleted topic's share-group state), so a topic created again
        under the name starts afresh by ``share.auto.offset.reset``."""
        for key in [k for k in self._ahead if k[0] == topic]:
            del self._ahead[key]
        records = self.engine.forget_topic(topic)
        if records:
            self._journal.submit(records).addErrback(self._write_failed)

    async def delete_group(self, group: str) -> None:
        await self._journal.submit(self.engine.delete_group(group))


class _Applied(Exception):
    """Marks an acknowledgement applied to memory, its write still to come."""


_APPLIED = _Applied()


def _failed(
    acked: Sequence[BaseException], error: BaseException
) -> tuple[BaseException | None, ...]:
    """The acknowledgements' outcomes when their write failed: the applied ones failed
    with it."""
    return tuple(error if e is _APPLIED else e for e in acked)


def _outcomes(acked: Sequence[BaseException]) -> tuple[BaseException | None, ...]:
    """The acknowledgements' outcomes once their write is durable."""
    return tuple(None if e is _APPLIED else e for e in acked)


@attrs.frozen
class FetchResult:
    """A share fetch's outcome: per acknowledged partition (in the order given) None
    once durable or what refused it, then the acquisitions."""

    acknowledged: tuple[BaseException | None, ...]
    results: list[AcquireResult]
    #: Set when the broker's waiter limit refused the wait (nothing was acquired).
    refused: TooManyWaiters | None = None


@attrs.frozen
class _Read:
    """One partition's log read for an acquisition: the batches and their spans."""

    topic: str
    partition: int
    data: bytes = b""
    spans: list[LogSpan] = attrs.field(factory=list)
    bounds: list[tuple[int, int, int]] = attrs.field(factory=list)


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
