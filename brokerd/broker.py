# -*- test-case-name: tests.test_broker -*-
"""The broker core: what both protocols call.

It owns the two thread pools (reads; appends and syncs), the per-partition append queues
that give **group commit**, the idempotent-producer checks, the long-poll waiters, and the
timers for interval fsync, retention and recovery checkpoints. Every public method runs in
the reactor thread and returns a Deferred (or a plain value when no I/O is involved).

It does not parse any wire format and never touches a transport; it calls the blocking
storage layer (:mod:`brokerd.storage`) only from its pools.

Durability (``--fsync``):

``always``
    An append is answered, and becomes visible to readers, only after ``fdatasync``.
    Appends that arrive while a sync runs are written and synced together by the next
    job, so the cost is one sync per group, not per request.
``interval:MS``
    An append is answered and visible once ``os.write`` returned (it survives the broker
    process dying, not a power loss); every MS milliseconds dirty partitions are synced.
``never``
    As ``interval`` without the timer: the kernel writes back when it likes (segment rolls
    and a clean shutdown still sync).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import attrs
from twisted.application import service
from twisted.internet import defer, task
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from brokerd.errors import (
    BrokerError,
    InvalidProducerEpoch,
    OffsetOutOfRange,
    OutOfOrderSequence,
    ShuttingDown,
    TooManyWaiters,
    UnknownTopicOrPartition,
)
from brokerd.storage.batch import BatchHeader, parse_batches
from brokerd.storage.producer_state import read_snapshot, write_snapshot
from brokerd.storage.types import AppendInfo, ReadResult, RecordsResult, TopicInfo

T = TypeVar("T")

#: Total parked long-poll fetches across all connections; beyond it a fetch is refused
#: with TooManyWaiters rather than queued, so memory stays bounded.
MAX_WAITERS = 10_000
#: Longest wait a client may ask for; Kafka clients send 500 ms, brokerctl a few seconds.
MAX_WAIT_MS = 300_000
#: How many recent batches per producer id are remembered to answer retried duplicates;
#: Kafka keeps five because a producer has at most five batches in flight.
PRODUCER_BATCH_MEMORY = 5
#: Default seconds between retention passes and between recovery-point checkpoints.
RETENTION_CHECK_SECONDS = 300.0
CHECKPOINT_SECONDS = 60.0
#: Largest single batch accepted from a Kafka producer (Kafka's max.message.bytes + 12).
DEFAULT_MAX_BATCH_BYTES = 1024 * 1024 + 12
#: Upper bound on records decoded for one native fetch response's compressed batch.
MAX_UNCOMPRESSED_BATCH = 64 * 1024 * 1024

Runner = Callable[..., "defer.Deferred[Any]"]


@attrs.frozen
class FsyncPolicy:
    """The ``--fsync`` setting: ``always``, ``interval:MS`` or ``never``."""

    mode: Literal["always", "interval", "never"]
    interval_ms: int = 0

    @classmethod
    def parse(cls, text: str) -> FsyncPolicy:
        if text == "always":
            return cls("always")
        if text == "never":
            return cls("never")
        if text.startswith("interval:"):
            try:
                ms = int(text.split(":", 1)[1])
            except ValueError:
                ms = 0
            if ms > 0:
                return cls("interval", ms)
        raise ValueError(f"--fsync must be always, never or interval:MS (MS > 0), not {text!r}")

    def __str__(self) -> str:
        return f"interval:{self.interval_ms}" if self.mode == "interval" else self.mode


@attrs.define
class _Append:
    """One queued append: either client batches (Kafka) or plain values (native)."""

    data: bytes | None
    headers: list[BatchHeader] | None
    values: list[bytes] | None
    deferred: defer.Deferred[AppendInfo]
    producer: _ProducerBatch | None = None


@attrs.define
class _ProducerBatch:
    """An idempotent producer's batch: its sequence range and, once written, its offsets."""

    producer_id: int
    epoch: int
    first_seq: int
    last_seq: int
    result: AppendInfo | None = None
    waiting: list[defer.Deferred[AppendInfo]] = attrs.Factory(list)


@attrs.define
class _ProducerState:
    epoch: int
    batches: deque[_ProducerBatch] = attrs.Factory(lambda: deque(maxlen=PRODUCER_BATCH_MEMORY))


@attrs.define(eq=False)
class _Waiter:
    """A parked long-poll: fires when ``needed`` more bytes arrive on its partitions.

    ``values``: count value bytes (what a native reader counts) instead of stored batch
    bytes (Kafka's ``MinBytes``). ``seen``: per partition, the high watermark the
    caller's read saw; appends below it are already in what the caller counted.
    """

    partitions: frozenset[tuple[str, int]]
    needed: int
    deferred: defer.Deferred[None]
    timer: Any = None
    values: bool = False
    seen: dict[tuple[str, int], int] | None = None


@attrs.define(eq=False)
class _Partition:
    """Reactor-side state of one partition: its append queue and parked fetches."""

    topic: str
    index: int
    log: Any  # PartitionLog; typed loosely so tests may pass a fake
    pending: list[_Append] = attrs.Factory(list)
    busy: bool = False
    flush_requested: bool = False
    retention_requested: bool = False
    dirty: bool = False
    producers: dict[int, _ProducerState] = attrs.Factory(dict)
    #: End of the appends whose results the reactor has seen: a producer-state snapshot
    #: taken now covers exactly the log below it.
    acked_end: int = 0
    #: ``acked_end`` of the last snapshot written; equal means nothing new to write.
    snapshot_end: int = -1


class Broker(service.Service):
    """The core both protocols call. See the module docstring for the durability modes.

    :param logdir: an open :class:`brokerd.storage.logdir.LogDirectory`.
    :param reactor: provides ``callLater`` and ``callFromThread`` (for the pools).
    :param run_read: optional runner ``f(*a) -> Deferred`` replacing the read pool (tests).
    :param run_write: optional runner replacing the write pool (tests).
    """

    _log = Logger()

    def __init__(
        self,
        logdir: Any,
        *,
        reactor: Any,
        fsync: FsyncPolicy | None = None,
        read_threads: int = 4,
        write_threads: int = 2,
        run_read: Runner | None = None,
        run_write: Runner | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_waiters: int = MAX_WAITERS,
        retention_check_seconds: float = RETENTION_CHECK_SECONDS,
        checkpoint_seconds: float = CHECKPOINT_SECONDS,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.logdir = logdir
        self._reactor = reactor
        self._clock: Any = reactor  # IReactorTime; Any because zope methods lack self for mypy
        self.fsync = fsync or FsyncPolicy("always")
        self.max_batch_bytes = max_batch_bytes
        self.max_waiters = max_waiters
        self._wall_clock = wall_clock
        self._retention_seconds = retention_check_seconds
        self._checkpoint_seconds = checkpoint_seconds
        self._pools: list[ThreadPool] = []
        self._run_read = run_read or self._pool_runner("brokerd-read", read_threads)
        self._run_write = run_write or self._pool_runner("brokerd-write", write_threads)
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._creating: dict[tuple[str, int], list[defer.Deferred[_Partition]]] = {}
        self._waiters: dict[tuple[str, int], set[_Waiter]] = {}
        self._waiter_count = 0
        self._loops: list[task.LoopingCall] = []
        self._stopping = False
        self._idle: defer.Deferred[None] | None = None
        self._next_producer_id: Callable[[], int] | None = None
        self._shutdown_hooks: list[Callable[[], object]] = []

    # -- lifecycle ---------------------------------------------------------------------

    def _pool_runner(self, name: str, threads: int) -> Runner:
        pool = ThreadPool(0, max(1, threads), name=name)
        self._pools.append(pool)
        reactor = self._reactor

        def run(f: Callable[..., T], *args: Any, **kwargs: Any) -> defer.Deferred[T]:
            return deferToThreadPool(reactor, pool, f, *args, **kwargs)

        return run

    def run_write(self, f: Callable[..., T], *args: Any, **kwargs: Any) -> defer.Deferred[T]:
        """Run a blocking call in the write pool (the group coordinator's offset commits)."""
        d: defer.Deferred[T] = self._run_write(f, *args, **kwargs)
        return d

    def add_shutdown_hook(self, hook: Callable[[], object]) -> None:
        """Run ``hook`` (it may return a Deferred) during shutdown, after queued appends
        finished and while the thread pools still run, before the logs are closed."""
        self._shutdown_hooks.append(hook)

    def set_producer_id_source(self, allocate: Callable[[], int]) -> None:
        """Give the core a blocking allocator of never-reused producer ids."""
        self._next_producer_id = allocate

    def startService(self) -> None:
        super().startService()
        for pool in self._pools:
            pool.start()
        self._restore_producers()
        self._start_loop(self._request_retention, self._retention_seconds)
        self._start_loop(self._checkpoint, self._checkpoint_seconds)
        if self.fsync.mode == "interval":
            self._start_loop(self._request_flushes, self.fsync.interval_ms / 1000.0)

    def _start_loop(self, f: Callable[[], object], seconds: float) -> None:
        if seconds <= 0:
            return
        loop = task.LoopingCall(f)
        loop.clock = self._clock
        loop.start(seconds, now=False).addErrback(
            lambda fail: self._log.failure("periodic task failed", fail)
        )
        self._loops.append(loop)

    def stopService(self) -> defer.Deferred[None]:
        """Finish queued appends, answer parked fetches, flush and close the logs."""
        super().stopService()
        self._stopping = True
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
        for waiters in list(self._waiters.values()):
            for waiter in list(waiters):
                self._fire_waiter(waiter)
        return defer.ensureDeferred(self._shutdown())

    async def _shutdown(self) -> None:
        while any(p.busy or p.pending for p in self._partitions.values()):
            self._idle = defer.Deferred()
            await self._idle
        for hook in self._shutdown_hooks:
            try:
                await defer.maybeDeferred(hook)
            except Exception:
                self._log.failure("shutdown hook failed")
        try:
            await self._snapshot_producers()
            await self._run_write(self.logdir.close)
        except Exception:
            self._log.failure("closing the log directory failed")
        finally:
            for pool in self._pools:
                pool.stop()

    # -- topics ------------------------------------------------------------------------

    @property
    def auto_create_topics(self) -> bool:
        return bool(self.logdir.auto_create)

    def topics(self) -> dict[str, TopicInfo]:
        result: dict[str, TopicInfo] = self.logdir.topics()
        return result

    def list_topics(self) -> defer.Deferred[list[TopicInfo]]:
        return defer.succeed(sorted(self.topics().values(), key=lambda t: t.name))

    def create_topic(self, name: str, partitions: int) -> defer.Deferred[None]:
        if self._stopping:
            return defer.fail(ShuttingDown("broker is shutting down"))
        d: defer.Deferred[None] = self._run_write(self.logdir.create_topic, name, partitions)
        return d

    def ensure_topic(self, name: str) -> defer.Deferred[TopicInfo]:
        """The topic's info, auto-creating it when the broker allows that."""
        info = self.topics().get(name)
        if info is not None:
            return defer.succeed(info)
        if not self.auto_create_topics:
            return defer.fail(UnknownTopicOrPartition(f"unknown topic {name!r}"))
        d = self._run_write(self.logdir.get, name, 0, create=True)
        d.addCallback(lambda _: self.topics()[name])
        return d

    def delete_topic(self, name: str) -> defer.Deferred[None]:
        for key in [k for k in self._partitions if k[0] == name]:
            part = self._partitions[key]
            if part.busy or part.pending:
                return defer.fail(BrokerError(f"topic {name!r} has appends in flight"))
        for key in [k for k in self._partitions if k[0] == name]:
            del self._partitions[key]
            for waiter in list(self._waiters.get(key, ())):
                self._fire_waiter(waiter)
        d: defer.Deferred[None] = self._run_write(self.logdir.delete_topic, name)
        return d

    def _partition(self, topic: str, index: int, *, create: bool) -> defer.Deferred[_Partition]:
        """The partition's state, opening its log (and auto-creating its topic) if needed."""
        key = (topic, index)
        part = self._partitions.get(key)
        if part is not None:
            return defer.succeed(part)
        try:
            log = self.logdir.get(topic, index, create=False)
        except UnknownTopicOrPartition:
            if not (create and self.auto_create_topics) or topic in self.topics():
                return defer.fail()
            return self._create_then_adopt(topic, index)
        except BrokerError:
            return defer.fail()
        return defer.succeed(self._adopt(topic, index, log))

    def _create_then_adopt(self, topic: str, index: int) -> defer.Deferred[_Partition]:
        """Auto-create a topic in the write pool. Requests that arrive meanwhile wait in
        a list and continue in arrival order, so pipelined appends to a new topic keep
        their order (and an idempotent producer's sequence stays in order)."""
        key = (topic, index)
        waiting = self._creating.get(key)
        d: defer.Deferred[_Partition] = defer.Deferred()
        if waiting is not None:
            waiting.append(d)
            return d
        waiting = self._creating[key] = [d]

        def done(outcome: object) -> None:
            del self._creating[key]
            for w in waiting:
                if isinstance(outcome, Failure):
                    w.errback(outcome)
                else:
                    w.callback(self._adopt(topic, index, outcome))

        self._run_write(self.logdir.get, topic, index, create=True).addBoth(done)
        return d

    def _adopt(self, topic: str, index: int, log: Any) -> _Partition:
        key = (topic, index)
        part = self._partitions.get(key)
        if part is None:
            part = self._partitions[key] = _Partition(topic, index, log)
            part.acked_end = log.log_end_offset
        return part

    # -- idempotent producers' state across restarts ------------------------------------

    def _restore_producers(self) -> None:
        """Rebuild every partition's producer state before serving (blocking, at start):
        the snapshot, then the batch headers appended after it. Without a snapshot only
        the active segment is replayed, so history older than that is forgotten (a
        producer unknown to the broker is accepted from any sequence)."""
        for (topic, index), log in self.logdir.logs().items():
            part = self._adopt(topic, index, log)
            try:
                self._replay_producers(part)
            except BrokerError as e:
                self._log.warn(
                    "{topic}-{index}: producer state not restored: {error}",
                    topic=topic,
                    index=index,
                    error=e,
                )

    def _replay_producers(self, part: _Partition) -> None:
        log = part.log
        start = log.segment_bases[-1]
        snapshot = read_snapshot(log.path)
        if snapshot is not None:
            end, producers = snapshot
            for pid, entry in producers.items():
                state = part.producers[pid] = _ProducerState(entry["epoch"])
                for first_seq, last_seq, base, last in entry["batches"]:
                    # A crash may have cut the log below what the snapshot saw.
                    if log.log_start_offset <= base and last < log.log_end_offset:
                        batch = _ProducerBatch(pid, entry["epoch"], first_seq, last_seq)
                        batch.result = AppendInfo(base, last, log.log_start_offset)
                        state.batches.append(batch)
            start = min(end, log.log_end_offset)
        for header in log.batch_headers(start):
            if header.producer_id < 0:
                continue
            known = part.producers.get(header.producer_id)
            last_seq = header.base_sequence + header.last_offset_delta
            if known is not None and any(
                b.first_seq == header.base_sequence and b.last_seq == last_seq
                for b in known.batches
            ):
                continue
            batch = self._remember_batch(part, [header])
            batch.result = AppendInfo(header.base_offset, header.last_offset, log.log_start_offset)

    def _snapshot_producers(self) -> defer.Deferred[None]:
        """Write every partition's producer state (taken now, in the reactor) to disk."""
        jobs: list[tuple[_Partition, int, dict[int, Any]]] = []
        for part in self._partitions.values():
            # State changes only with appends, so an unmoved end means an unchanged state.
            if not part.producers or part.acked_end == part.snapshot_end:
                continue
            producers = {
                pid: {
                    "epoch": state.epoch,
                    "batches": [
                        [b.first_seq, b.last_seq, b.result.base_offset, b.result.last_offset]
                        for b in state.batches
                        if b.result is not None
                    ],
                }
                for pid, state in part.producers.items()
            }
            jobs.append((part, part.acked_end, producers))

        def write_all() -> list[str | None]:
            problems: list[str | None] = []
            for part, end, producers in jobs:
                try:
                    write_snapshot(part.log.path, end, producers)
                    problems.append(None)
                except OSError as e:
                    problems.append(f"{part.log.path}: {e}")
            return problems

        def report(problems: list[str | None]) -> None:
            for (part, end, _), problem in zip(jobs, problems, strict=True):
                if problem is None:
                    part.snapshot_end = end
                else:
                    # Not fatal: a missing snapshot only means a longer replay next start.
                    self._log.warn("producer-state snapshot not written: {p}", p=problem)

        d: defer.Deferred[None] = self._run_write(write_all).addCallback(report)
        return d

    # -- produce -----------------------------------------------------------------------

    def produce_values(
        self, topic: str, partition: int, values: Sequence[bytes]
    ) -> defer.Deferred[AppendInfo]:
        """Append ``values`` as one uncompressed batch (the native protocol's produce)."""
        if self._stopping:
            return defer.fail(ShuttingDown("broker is shutting down"))
        d = self._partition(topic, partition, create=True)
        return d.addCallback(
            lambda part: self._enqueue(part, _Append(None, None, list(values), defer.Deferred()))
        )

    def produce_batches(
        self, topic: str, partition: int, data: bytes, *, acks: int = -1
    ) -> defer.Deferred[AppendInfo]:
        """Append client RecordBatches as they are, after validating them.

        Fires after the durability point of the fsync mode (``acks`` does not weaken it:
        with ``--fsync always`` acks=1 is also answered after the sync). A retried batch
        of an idempotent producer fires with the offsets of the copy already stored.
        """
        if self._stopping:
            return defer.fail(ShuttingDown("broker is shutting down"))
        try:
            headers = parse_batches(data, max_batch_bytes=self.max_batch_bytes)
        except BrokerError:
            return defer.fail()
        d = self._partition(topic, partition, create=True)
        return d.addCallback(self._enqueue_batches, data, headers)

    def _enqueue_batches(
        self, part: _Partition, data: bytes, headers: list[BatchHeader]
    ) -> defer.Deferred[AppendInfo]:
        first = headers[0]
        append = _Append(data, headers, None, defer.Deferred())
        if first.producer_id >= 0:
            try:
                duplicate = self._check_sequence(part, headers)
            except BrokerError:
                return defer.fail()
            if duplicate is not None:
                return self._answer_duplicate(duplicate)
            append.producer = self._remember_batch(part, headers)
        return self._enqueue(part, append)

    def _check_sequence(
        self, part: _Partition, headers: list[BatchHeader]
    ) -> _ProducerBatch | None:
        """Kafka's idempotence rules for one produce; returns the stored twin of a retry."""
        first, last = headers[0], headers[-1]
        pid, epoch = first.producer_id, first.producer_epoch
        first_seq = first.base_sequence
        last_seq = last.base_sequence + last.last_offset_delta
        state = part.producers.get(pid)
        if state is None:
            # Unknown producer (new, or its state was lost in a restart): accept from
            # any sequence, as Kafka does once a producer's history has been deleted.
            return None
        if epoch < state.epoch:
            raise InvalidProducerEpoch(f"producer {pid} epoch {epoch} < {state.epoch}")
        if epoch > state.epoch:
            if first_seq != 0:
                raise OutOfOrderSequence(
                    f"producer {pid} new epoch {epoch} must start at sequence 0"
                )
            return None
        for batch in state.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        expected = state.batches[-1].last_seq + 1 if state.batches else 0
        if first_seq != expected:
            raise OutOfOrderSequence(
                f"producer {pid}: expected sequence {expected}, got {first_seq}"
            )
        return None

    def _remember_batch(self, part: _Partition, headers: list[BatchHeader]) -> _ProducerBatch:
        first, last = headers[0], headers[-1]
        state = part.producers.get(first.producer_id)
        if state is None or first.producer_epoch > state.epoch:
            state = part.producers[first.producer_id] = _ProducerState(first.producer_epoch)
        batch = _ProducerBatch(
            first.producer_id,
            first.producer_epoch,
            first.base_sequence,
            last.base_sequence + last.last_offset_delta,
        )
        state.batches.append(batch)
        return batch

    def _answer_duplicate(self, batch: _ProducerBatch) -> defer.Deferred[AppendInfo]:
        if batch.result is not None:
            return defer.succeed(batch.result)
        d: defer.Deferred[AppendInfo] = defer.Deferred()
        batch.waiting.append(d)
        return d

    def _enqueue(self, part: _Partition, append: _Append) -> defer.Deferred[AppendInfo]:
        part.pending.append(append)
        self._kick(part)
        return append.deferred

    def _kick(self, part: _Partition) -> None:
        """Start the partition's next write job unless one is running (group commit)."""
        if part.busy:
            return
        if not (part.pending or part.flush_requested or part.retention_requested):
            if self._idle is not None and not any(
                p.busy or p.pending for p in self._partitions.values()
            ):
                idle, self._idle = self._idle, None
                idle.callback(None)
            return
        appends, part.pending = part.pending, []
        sync = part.flush_requested or (self.fsync.mode == "always" and bool(appends))
        retention = part.retention_requested
        part.flush_requested = part.retention_requested = False
        part.busy = True
        d = self._run_write(_write_job, part.log, appends, sync, retention, self._wall_clock)
        d.addBoth(self._job_done, part, appends, sync)

    def _job_done(
        self, outcome: object, part: _Partition, appends: list[_Append], synced: bool
    ) -> None:
        part.busy = False
        if isinstance(outcome, Failure):
            results: list[AppendInfo | Failure] = [outcome] * len(appends)
        else:
            results = outcome  # type: ignore[assignment]
            if len(results) > len(appends):
                retention_failure = results.pop()
                assert isinstance(retention_failure, Failure)
                self._log.failure("retention failed", retention_failure)
        if synced:
            part.dirty = False
        appended: list[tuple[_Append, AppendInfo]] = []
        for append, result in zip(appends, results, strict=True):
            if isinstance(result, AppendInfo):
                appended.append((append, result))
                part.acked_end = max(part.acked_end, result.last_offset + 1)
                if append.producer is not None:
                    append.producer.result = result
                    for d in append.producer.waiting:
                        d.callback(result)
                    append.producer.waiting.clear()
                append.deferred.callback(result)
            else:
                if append.producer is not None:
                    self._forget_batch(part, append.producer, result)
                append.deferred.errback(result)
        if appended and not synced:
            part.dirty = True
        if appended:
            self._notify(part, appended)
        self._kick(part)

    def _forget_batch(self, part: _Partition, batch: _ProducerBatch, failure: Failure) -> None:
        state = part.producers.get(batch.producer_id)
        if state is not None and batch in state.batches:
            state.batches.remove(batch)
        for d in batch.waiting:
            d.errback(failure)
        batch.waiting.clear()

    def _request_flushes(self) -> None:
        for part in list(self._partitions.values()):
            if part.dirty:
                part.flush_requested = True
                part.dirty = False
                self._kick(part)

    def _request_retention(self) -> None:
        for topic, info in self.topics().items():
            for index in range(info.partitions):
                d = self._partition(topic, index, create=False)
                d.addCallback(self._ask_retention)
                d.addErrback(lambda _: None)

    def _ask_retention(self, part: _Partition) -> None:
        part.retention_requested = True
        self._kick(part)

    def _checkpoint(self) -> defer.Deferred[None]:
        d: defer.Deferred[None] = self._run_write(self.logdir.checkpoint)
        d.addCallback(lambda _: self._snapshot_producers())
        d.addErrback(lambda f: self._log.failure("recovery checkpoint failed", f))
        return d

    # -- reads -------------------------------------------------------------------------

    def _readable(self, topic: str, partition: int) -> defer.Deferred[_Partition]:
        return self._partition(topic, partition, create=False)

    def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int
    ) -> defer.Deferred[ReadResult]:
        """Raw log bytes from the batch holding ``offset`` (Kafka Fetch)."""

        def read(part: _Partition) -> ReadResult | defer.Deferred[ReadResult]:
            log = part.log
            hw, start = log.high_watermark, log.log_start_offset
            if offset == hw:
                # The common long-poll case: nothing new, no thread hop needed.
                return ReadResult(b"", hw, start)
            if offset > hw or offset < start:
                raise OffsetOutOfRange(offset, start, hw)
            d: defer.Deferred[ReadResult] = self._run_read(log.read, offset, max_bytes)
            return d

        return self._readable(topic, partition).addCallback(read)

    def fetch_records(
        self, topic: str, partition: int, offset: int, max_value_bytes: int
    ) -> defer.Deferred[RecordsResult]:
        """Decoded records from ``offset`` (the native fetch)."""

        def read(part: _Partition) -> RecordsResult | defer.Deferred[RecordsResult]:
            log = part.log
            hw, start = log.high_watermark, log.log_start_offset
            if offset == hw:
                return RecordsResult((), hw, start)
            if offset > hw or offset < start:
                raise OffsetOutOfRange(offset, start, hw)
            d: defer.Deferred[RecordsResult] = self._run_read(
                log.read_records, offset, max_value_bytes
            )
            return d

        return self._readable(topic, partition).addCallback(read)

    def list_offsets(self, topic: str, partition: int) -> defer.Deferred[tuple[int, int]]:
        """``(log_start_offset, high_watermark)`` of a partition."""
        return self._readable(topic, partition).addCallback(
            lambda part: (part.log.log_start_offset, part.log.high_watermark)
        )

    def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> defer.Deferred[tuple[int, int] | None]:
        return self._readable(topic, partition).addCallback(
            lambda part: self._run_read(part.log.offset_for_timestamp, timestamp_ms)
        )

    def init_producer_id(self) -> defer.Deferred[int]:
        if self._next_producer_id is None:
            return defer.fail(BrokerError("producer ids are not available"))
        d: defer.Deferred[int] = self._run_write(self._next_producer_id)
        return d

    # -- long poll ---------------------------------------------------------------------

    def wait_for_data(
        self,
        positions: Sequence[tuple[str, int, int]],
        *,
        min_bytes: int,
        max_wait_ms: int,
        already: int = 0,
        seen: dict[tuple[str, int], int] | None = None,
    ) -> defer.Deferred[None]:
        """Fire once ``min_bytes`` (counting ``already``) are appended past ``positions``
        or ``max_wait_ms`` passes, whichever is first. Cancelling it removes every trace.

        ``seen`` holds the high watermarks the caller's read saw: if one has moved since,
        an append landed between that read and now, so this fires at once for the caller
        to read again (otherwise that append would never be counted).

        Bytes are stored batch bytes, as Kafka counts ``MinBytes`` (the Kafka Fetch).
        """
        keys = frozenset((t, p) for t, p, _ in positions)
        return self._park(keys, min_bytes - already, max_wait_ms, seen=seen)

    def _park(
        self,
        keys: frozenset[tuple[str, int]],
        needed: int,
        max_wait_ms: int,
        *,
        values: bool = False,
        seen: dict[tuple[str, int], int] | None = None,
    ) -> defer.Deferred[None]:
        if needed <= 0 or max_wait_ms <= 0 or not keys or self._stopping:
            return defer.succeed(None)
        if seen is not None:
            for key, high in seen.items():
                part = self._partitions.get(key)
                if part is not None and part.log.high_watermark != high:
                    # An append became readable after the caller's read and before now;
                    # its notification may already have gone by (lost wake-up), so let
                    # the caller read again instead of waiting for bytes already there.
                    return defer.succeed(None)
        if self._waiter_count >= self.max_waiters:
            return defer.fail(TooManyWaiters(f"{self._waiter_count} fetches already wait"))
        waiter = _Waiter(
            keys,
            needed,
            defer.Deferred(lambda _: self._drop_waiter(waiter)),
            values=values,
            seen=seen,
        )
        waiter.timer = self._clock.callLater(
            min(max_wait_ms, MAX_WAIT_MS) / 1000.0, self._fire_waiter, waiter
        )
        for key in keys:
            self._waiters.setdefault(key, set()).add(waiter)
        self._waiter_count += 1
        return waiter.deferred

    def wait_records(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_value_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
    ) -> defer.Deferred[RecordsResult]:
        """A native long-poll fetch: read; while short of ``min_bytes`` of values and
        within ``max_wait_ms``, park until an append may have brought enough, and read
        again. Every wake-up is re-checked against what a read finds, so the answer has
        ``min_bytes`` of values unless the wait ran out (or the broker is stopping)."""
        key = (topic, partition)
        deadline = self._clock.seconds() + min(max_wait_ms, MAX_WAIT_MS) / 1000.0

        async def run() -> RecordsResult:
            first = True
            while True:
                result = await self.fetch_records(topic, partition, offset, max_value_bytes)
                have = sum(len(r.value or b"") for r in result.records)
                # Rounded down: a timer that fired at the deadline leaves nothing to wait.
                left_ms = int((deadline - self._clock.seconds()) * 1000)
                # As Kafka: min_bytes 0 answers at once, even with nothing to send.
                if have >= min_bytes or left_ms <= 0 or self._stopping:
                    return result
                try:
                    await self._park(
                        frozenset([key]),
                        min_bytes - have,
                        left_ms,
                        values=True,
                        seen={key: result.high_watermark},
                    )
                except TooManyWaiters:
                    if first:
                        raise
                    return result  # it did wait; answer with what there is
                if self._stopping:
                    # Shutdown answers parked fetches; the log may be closing, so do
                    # not read again: what was there is a valid (timed-out) answer.
                    return result
                first = False

        return defer.Deferred.fromCoroutine(run())

    def _notify(self, part: _Partition, appended: list[tuple[_Append, AppendInfo]]) -> None:
        key = (part.topic, part.index)
        waiters = self._waiters.get(key)
        if not waiters:
            return  # the usual case: sizes are only worked out for someone waiting
        # Each append's size in each measure, worked out once however many wait.
        sizes: dict[bool, list[int]] = {}
        for waiter in list(waiters):
            measured = sizes.get(waiter.values)
            if measured is None:
                measured = sizes[waiter.values] = [
                    _wake_bytes(append, values=waiter.values) for append, _ in appended
                ]
            low = waiter.seen.get(key) if waiter.seen is not None else None
            waiter.needed -= sum(
                size
                for size, (_, info) in zip(measured, appended, strict=True)
                if low is None or info.base_offset >= low
            )
            if waiter.needed <= 0:
                self._fire_waiter(waiter)

    def _drop_waiter(self, waiter: _Waiter) -> None:
        if waiter.timer is not None and waiter.timer.active():
            waiter.timer.cancel()
        waiter.timer = None
        removed = False
        for key in waiter.partitions:
            bucket = self._waiters.get(key)
            if bucket is not None and waiter in bucket:
                bucket.discard(waiter)
                removed = True
                if not bucket:
                    del self._waiters[key]
        if removed:
            self._waiter_count -= 1

    def _fire_waiter(self, waiter: _Waiter) -> None:
        self._drop_waiter(waiter)
        if not waiter.deferred.called:
            waiter.deferred.callback(None)

    @property
    def waiter_count(self) -> int:
        return self._waiter_count


#: Bytes of a RecordBatch v2 header (the batch's fixed overhead).
_BATCH_HEADER_BYTES = 61
#: Wake-up amount for an append whose value bytes are unknown without decompressing:
#: more than anyone waits for, so the waiter wakes and its reader measures.
_UNKNOWN_BYTES = 1 << 62


def _zigzag_varint_len(n: int) -> int:
    z = (n << 1) ^ (n >> 63)
    length = 1
    while z >= 0x80:
        z >>= 7
        length += 1
    return length


def stored_size(values: Sequence[bytes | None]) -> int:
    """Bytes the batch a native produce of ``values`` occupies in the log (what a Kafka
    reader's ``MinBytes`` counts): the header, then per record its length varint and
    attributes, timestamp delta 0, offset delta, null key, value, zero headers (the
    layout ``storage.batch.encode_batch`` writes; tests hold the two together)."""
    total = _BATCH_HEADER_BYTES
    for i, value in enumerate(values):
        value_part = 1 if value is None else _zigzag_varint_len(len(value)) + len(value)
        body = 2 + _zigzag_varint_len(i) + 1 + value_part + 1
        total += _zigzag_varint_len(body) + body
    return total


def _wake_bytes(append: _Append, *, values: bool) -> int:
    """What an append adds toward a waiter's ``min_bytes``: exact, or else more (a
    native reader re-checks after waking; it must never sleep through enough data)."""
    if append.values is not None:
        if values:
            return sum(len(v) for v in append.values if v is not None)
        return stored_size(append.values)
    assert append.data is not None
    if values and any(h.compression for h in append.headers or ()):
        return _UNKNOWN_BYTES
    # Stored bytes exactly; for a native reader an upper bound of the value bytes.
    return len(append.data)


def _write_job(
    log: Any,
    appends: list[_Append],
    sync: bool,
    retention: bool,
    wall_clock: Callable[[], float],
) -> list[AppendInfo | Failure]:
    """Runs in the write pool: append each request, sync once, publish. One per partition."""
    results: list[AppendInfo | Failure] = []
    for append in appends:
        try:
            if append.values is not None:
                info = log.append_values(append.values, timestamp_ms=int(wall_clock() * 1000))
            else:
                info = log.append(append.data, append.headers)
            results.append(info)
        except Exception:
            results.append(_current_failure())
    if sync:
        try:
            log.flush()
        except Exception:
            failure = _current_failure()
            results = [failure if isinstance(r, AppendInfo) else r for r in results]
            return results
    log.publish()
    if retention:
        try:
            log.enforce_retention(wall_clock())
        except Exception:
            # Retention is retried at the next pass; the appends above still stand, so
            # the error is logged (by the reactor thread) instead of failing them.
            results.append(_current_failure())
    return results


def _current_failure() -> Failure:
    """The exception being handled, as a Failure (Failure() is untyped in Twisted)."""
    return Failure()
