# -*- test-case-name: tests.core.test_broker -*-
"""The broker core's façade: what both protocols call, wired from small parts.

:class:`Broker` is a service whose children stop one at a time in reverse order of
addition (:class:`~brokerd.core.services.SequentialMultiService`): first the worker
pools (:mod:`brokerd.core.pools`) and the log directory's service
(:class:`~brokerd.core.services.LogDirectoryService`), then whatever the application
adds (the group coordinator's service). At stop it refuses new appends, stops its
timers, answers parked long polls, lets queued appends finish, and only then stops its
children: the application's, the log directory (last snapshots, sync, checkpoint,
clean-shutdown marker), the pools.

The parts it wires: :class:`~brokerd.core.topics.TopicRegistry` (``topic_registry``, the
face's topics role: open partitions, auto-create, deletion),
:class:`~brokerd.core.writer.PartitionWriter` per partition (group commit),
:class:`~brokerd.core.producers.ProducerSnapshots` per partition (state snapshots),
:class:`~brokerd.core.waiters.WaiterRegistry` (long polls),
:class:`~brokerd.core.fetcher.Fetcher` (``reads``, the face's reads role),
:class:`~brokerd.core.txn_markers.TxnMarkers` (``transactions``) and
:class:`~brokerd.core.timers.PeriodicTasks`; at stop its
:class:`~brokerd.core.stopping.StopLatch` refuses new work (one check,
:func:`~brokerd.core.stopping.refused_when_stopping`). Every public method runs in the reactor
thread and returns a Deferred (or a plain value when no I/O is involved); errors arrive
as failures carrying :mod:`brokerd.errors` exceptions. What code outside the core calls
of it is its face, :class:`brokerd.core.api.CoreApi` (which checks that it has it all).
It parses no wire format and never touches a transport. The ``--fsync`` modes are
described in ``docs/operations.md`` ("Durability").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from twisted.application import service
from twisted.internet import defer
from twisted.logger import Logger

from brokerd.after_answer import AfterAnswer
from brokerd.core.appends import BatchesAppend, ValuesAppend
from brokerd.core.fetcher import Fetcher
from brokerd.core.interfaces import CoreReactor, Runner
from brokerd.core.policy import FsyncPolicy, flush_rule
from brokerd.core.pools import WorkerPools
from brokerd.core.producers import ProducerSnapshots
from brokerd.core.roles import RecordValidator
from brokerd.core.roles.long_poll import Shortfall, long_poll
from brokerd.core.services import LogDirectoryService, SequentialMultiService
from brokerd.core.stopping import StopLatch, refused_when_stopping
from brokerd.core.timers import (
    CHECKPOINT_SECONDS,
    OFFLINE_CHECK_SECONDS,
    RETENTION_CHECK_SECONDS,
    PeriodicTasks,
)
from brokerd.core.topics import Partition, PartitionKey, TopicRegistry
from brokerd.core.txn_markers import TxnMarkers
from brokerd.core.waiters import MAX_WAITERS, WaiterRegistry
from brokerd.core.write_stats import WriteStats
from brokerd.core.writer import INLINE_APPEND_BYTES, PartitionWriter
from brokerd.errors import BrokerError
from brokerd.names import refuse_internal_topic
from brokerd.observers import NULL_WRITES, WriteObserver
from brokerd.storage.config.topic_config import broker_values
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.prepared_append import prepare_batches
from brokerd.storage.log.produce_checks import MAX_CHECKED_BATCH_BYTES, check_values
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.header import BatchHeader, parse_batches
from brokerd.storage.types import (
    COMMITTED_RECORDS,
    AppendInfo,
    LogRead,
    TopicInfo,
)

if TYPE_CHECKING:
    from brokerd.core.share.service import ShareService

_log = Logger()


class Broker(SequentialMultiService):
    """The core both protocols call.

    :param logdir: an open :class:`brokerd.storage.logdir.log_directory.LogDirectory`.
    :param reactor: time, timers, and ``callFromThread`` for the pools.
    :param run_read: optional runner ``f(*a) -> Deferred`` replacing the read pool (tests).
    :param run_write: optional runner replacing the write pool (tests).
    :param after_answer: where wake-ups wait for the answer being written (default: the
        broker's own).
    """

    #: Where appends, fsyncs and durability latency are counted (set before start).
    writes: WriteObserver = NULL_WRITES

    def __init__(
        self,
        logdir: LogDirectory,
        *,
        reactor: CoreReactor,
        fsync: FsyncPolicy | None = None,
        read_threads: int = 4,
        write_threads: int = 2,
        run_read: Runner | None = None,
        run_write: Runner | None = None,
        max_waiters: int = MAX_WAITERS,
        retention_check_seconds: float = RETENTION_CHECK_SECONDS,
        checkpoint_seconds: float = CHECKPOINT_SECONDS,
        wall_clock: Callable[[], float] = time.time,
        inline_append_bytes: int = INLINE_APPEND_BYTES,
        after_answer: AfterAnswer | None = None,
    ) -> None:
        super().__init__()
        self.logdir = logdir
        #: Unsynced write jobs up to this size run in the reactor thread (0: none).
        self._inline_append_bytes = inline_append_bytes
        #: The wake-ups of inline appends, waiting for the answer being written: the
        #: listeners' connections tell it of each answer (part of the face).
        self.after_answer = after_answer if after_answer is not None else AfterAnswer()
        self._clock = reactor
        self.fsync = fsync or FsyncPolicy("always")
        self._wall_clock = wall_clock
        self._retention_seconds = retention_check_seconds
        self._checkpoint_seconds = checkpoint_seconds
        #: Set at stop: from then on new appends, markers and topic changes are refused.
        self.stop_latch = StopLatch()
        self._record_validator: RecordValidator | None = None
        self._next_producer_id: Callable[[], int] | None = None
        self.pools = WorkerPools(
            reactor,
            read_threads=read_threads,
            write_threads=write_threads,
            run_read=run_read,
            run_write=run_write,
        )
        self._run_read = self.pools.run_read
        self._run_write = self.pools.run_write
        self.waiters = WaiterRegistry(reactor, self._high_watermark, max_waiters=max_waiters)
        #: The face's topics role: the topics, their open partitions, auto-create, deletion.
        self.topic_registry = TopicRegistry(
            logdir,
            run_write=self._run_write,
            make_partition=self._make_partition,
            forget=self.waiters.wake,
            stop_latch=self.stop_latch,
        )
        self.storage = LogDirectoryService(logdir, self.topic_registry, run_write=self._run_write)
        #: The face's transactions role: markers, transactional admission, DescribeProducers.
        self.transactions = TxnMarkers(
            self.topic_registry, run_write=self._run_write, stop_latch=self.stop_latch
        )
        #: The face's reads role: fetches and offset lookups.
        self.reads = Fetcher(self.topic_registry, self._run_read)
        #: The face's share-groups role, when the application adds share groups.
        self.share: ShareService | None = None
        self._timers = PeriodicTasks(reactor)
        # Added first, stopped last: the pools, then the log directory.
        self.pools.setServiceParent(self)
        self.storage.setServiceParent(self)

    def _make_partition(self, topic: str, index: int, log: PartitionLog) -> Partition:
        key = (topic, index)
        writer = PartitionWriter(
            log,
            run_write=self._run_write,
            flush_rule=lambda: flush_rule(
                self.fsync, log.config.flush_messages, log.config.flush_ms
            ),
            wall_clock=self._wall_clock,
            clock=self._clock,
            on_appended=lambda appended: self.waiters.notify(key, appended),
            on_idle=lambda: self.topic_registry.writer_idle(),
            stats=WriteStats(topic, self.writes),
            inline_bytes=self._inline_append_bytes,
            after_answer=self.after_answer,
        )
        return Partition(topic, index, log, writer, ProducerSnapshots(log))

    def _high_watermark(self, key: PartitionKey) -> int | None:
        part = self.topic_registry.get(key)
        return None if part is None else part.log.high_watermark

    # -- lifecycle ---------------------------------------------------------------------

    def set_producer_id_source(self, allocate: Callable[[], int]) -> None:
        """Give the core a blocking allocator of never-reused producer ids."""
        self._next_producer_id = allocate

    def startService(self) -> None:
        super().startService()
        self._timers.every(self._retention_seconds, self._request_retention)
        self._timers.every(self._checkpoint_seconds, self.storage.checkpoint)
        if getattr(self.logdir, "offline", None):
            # Partitions go offline only when the directory is opened: poll while any
            # are (an idle timer otherwise).
            self._timers.every(OFFLINE_CHECK_SECONDS, self._retry_offline)
        if self.fsync.mode == "interval":
            self._timers.every(self.fsync.interval_ms / 1000.0, self._request_flushes)

    def stopService(self) -> defer.Deferred[None]:
        """Refuse new appends, answer parked fetches, finish queued appends, then stop
        the children one by one (last added first): see the module docstring."""
        service.Service.stopService(self)
        self.stop_latch.stop()
        self._timers.stop()
        self.waiters.close()
        return defer.Deferred.fromCoroutine(self._shutdown())

    async def _shutdown(self) -> None:
        await self.topic_registry.drained()
        for part in self.topic_registry:
            part.writer.stop_timer()
        await self.stop_children()

    def _retry_offline(self) -> None:
        # Each partition has its own backoff (logdir_offline.py); this only polls.
        d = self._run_write(self.logdir.retry_offline)
        d.addErrback(lambda f: _log.failure("offline partition retry failed", f))

    def _request_flushes(self) -> None:
        for part in self.topic_registry:
            # A topic with its own flush.ms has its own timer (PartitionWriter).
            if part.log.config.flush_ms is None:
                part.writer.flush_if_dirty()

    def _request_retention(self) -> None:
        for topic, info in self.topic_registry.topics().items():
            for index in range(info.partitions):
                d = self.topic_registry.open(topic, index, create=False)
                d.addCallback(lambda part: part.writer.request_retention())
                d.addErrback(lambda _: None)

    # -- topic administration (the topics themselves are the topic registry's) ----------

    @refused_when_stopping
    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> defer.Deferred[None]:
        """Create a topic with config overrides (Kafka names and value syntax); with
        ``validate_only`` check everything and create nothing. Fails with
        ``InvalidConfig`` naming the key for a config Kafka's rules refuse."""
        d = self._run_write(
            self.logdir.topic_changes.create_topic,
            name,
            partitions,
            configs,
            validate_only=validate_only,
        )
        return d.addCallback(lambda _: None)

    def topic_config_defaults(self) -> dict[str, str]:
        """The broker-wide default of every topic config (from the command line), as
        config strings by topic config name."""
        return {**broker_values(self.logdir.default_config), **self.fsync.flush_defaults()}

    @refused_when_stopping
    def alter_topic_configs(
        self,
        name: str,
        update: Callable[[Mapping[str, str]], Mapping[str, str | None]],
        *,
        validate_only: bool = False,
    ) -> defer.Deferred[TopicInfo]:
        """Replace topic ``name``'s config overrides by ``update(current overrides)``,
        durably, and apply them to its open partitions (see
        ``TopicChanges.alter_topic_configs``)."""
        return self._run_write(
            self.logdir.topic_changes.alter_topic_configs, name, update, validate_only=validate_only
        )

    # -- partitions and log start offsets (CreatePartitions, DeleteRecords, DescribeLogDirs)

    @refused_when_stopping
    def create_partitions(self, topic: str, new_total: int) -> defer.Deferred[TopicInfo]:
        """Grow ``topic`` to ``new_total`` partitions (empty, durable when this fires);
        the new ones open on first use."""
        return self._run_write(self.logdir.partition_changes.create_partitions, topic, new_total)

    @refused_when_stopping
    def delete_records(
        self, topic: str, partition: int, before_offset: int
    ) -> defer.Deferred[int]:
        """Move the partition's log start offset up to ``before_offset`` (-1: the high
        watermark); fires with the log start offset once it is durable."""
        return self.topic_registry.open(topic, partition, create=False).addCallback(
            lambda _part: self._run_write(
                self.logdir.partition_changes.delete_records, topic, partition, before_offset
            )
        )

    # -- produce -----------------------------------------------------------------------

    @refused_when_stopping
    def produce_values(
        self, topic: str, partition: int, values: Sequence[bytes | None]
    ) -> defer.Deferred[AppendInfo]:
        """Append ``values`` as one uncompressed batch (the native protocol's produce)."""
        try:
            refuse_internal_topic(topic, "write to")
        except BrokerError:
            return defer.fail()
        append = ValuesAppend(tuple(values))
        d = self.topic_registry.open(topic, partition, create=True)
        return d.addCallback(self._submit_values, append)

    @refused_when_stopping
    def produce_batches(
        self, topic: str, partition: int, data: bytes, *, acks: int = -1
    ) -> defer.Deferred[AppendInfo]:
        """Append client RecordBatches as they are, after validating them.

        Fires after the durability point of the fsync mode (``acks`` does not weaken it:
        with ``--fsync always`` acks=1 is also answered after the sync). A retried batch
        of an idempotent producer fires with the offsets of the copy already stored.
        """
        try:
            # Clients never write to Kafka's internal topics (as Kafka refuses).
            refuse_internal_topic(topic, "write to")
            # The size limit is the topic's max.message.bytes, checked once the
            # partition is open; the payload itself is bounded by the request frame.
            headers = parse_batches(data, max_batch_bytes=len(data))
        except BrokerError:
            return defer.fail()
        part = self.topic_registry.open_now(topic, partition)
        if part is not None:
            # The usual case: no Deferred to open with and chain the append's onto.
            try:
                return self._enqueue_batches(part, data, headers)
            except Exception:
                return defer.fail()  # as a callback's exception would
        d = self.topic_registry.open(topic, partition, create=True)
        return d.addCallback(self._enqueue_batches, data, headers)

    def _submit_values(self, part: Partition, append: ValuesAppend) -> defer.Deferred[AppendInfo]:
        try:
            check_values(part.log.config, part.topic, part.index)
            validate = self._validation_of(part)
            if validate is not None:
                validate([(None, v) for v in append.values])
        except BrokerError:
            return defer.fail()
        return part.writer.submit(append)

    def set_record_validator(self, validate: RecordValidator | None) -> None:
        """Install (None: remove) the schema check of produces to topics with
        ``confluent.*.schema.validation`` on; only those topics pay for it (each of
        their batches is decoded, decompressed if need be, before it is appended)."""
        self._record_validator = validate

    def _validation_of(
        self, part: Partition
    ) -> Callable[[list[tuple[bytes | None, bytes | None]]], None] | None:
        """The schema check of a produce to ``part``'s topic, or None when its topic
        has no ``confluent.*.schema.validation`` on (or no validator is installed)."""
        config = part.log.config
        validate = self._record_validator
        if validate is None or not (
            config.key_schema_validation or config.value_schema_validation
        ):
            return None
        topic, keys = part.topic, config.key_schema_validation
        values = config.value_schema_validation
        return lambda records: validate(topic, records, keys, values)

    def _validate_records(
        self, part: Partition, data: bytes, headers: list[BatchHeader]
    ) -> None:
        validate = self._validation_of(part)
        if validate is None:
            return
        pos = 0
        for header in headers:
            records = decode_records(
                data[pos : pos + header.size], max_uncompressed=MAX_CHECKED_BATCH_BYTES
            )
            validate([(r.key, r.value) for r in records])
            pos += header.size

    def _enqueue_batches(
        self, part: Partition, data: bytes, headers: list[BatchHeader]
    ) -> defer.Deferred[AppendInfo]:
        # What can be checked here, in the reactor: the topic's configs, and the
        # transaction coordinator's word on a transactional produce. The producer state
        # is checked and updated by the log in the write job (append_prepared), so a
        # retry queued behind its original is answered with the original's offsets.
        try:
            self._validate_records(part, data, headers)
            prepared = prepare_batches(
                part.log.config, data, headers, topic=part.topic, partition=part.index,
                now_ms=int(self._wall_clock() * 1000),
            )
            if prepared.producer_id >= 0 and prepared.transactional:
                self.transactions.admit_transactional(part, prepared.headers)
        except BrokerError:
            return defer.fail()
        return part.writer.submit(BatchesAppend(prepared))

    # -- producer ids ------------------------------------------------------------------

    def init_producer_id(self) -> defer.Deferred[int]:
        if self._next_producer_id is None:
            return defer.fail(BrokerError("producer ids are not available"))
        return self._run_write(self._next_producer_id)

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
        """Park a Kafka Fetch: fire once ``min_bytes`` (counting ``already``) are
        appended past ``positions`` or ``max_wait_ms`` passes, whichever is first; at
        once if a ``seen`` high watermark moved. Cancelling it removes every trace.

        Bytes are stored batch bytes, as Kafka counts ``MinBytes``. The Kafka handlers
        call this as the park step of :func:`brokerd.core.roles.long_poll.long_poll`.
        """
        keys = [(t, p) for t, p, _ in positions]
        return self.waiters.park(keys, min_bytes - already, max_wait_ms, seen=seen)

    def wait_records(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_value_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
    ) -> defer.Deferred[LogRead]:
        """A native long-poll fetch: read; while short of ``min_bytes`` of values and
        within ``max_wait_ms``, park until an append may have brought enough, and read
        again. Every wake-up is re-checked against what a read finds, so the answer has
        ``min_bytes`` of values unless the wait ran out (or the broker is stopping)."""
        key = (topic, partition)

        async def read() -> LogRead:
            answer = self.reads.read(topic, partition, offset, max_value_bytes, COMMITTED_RECORDS)
            return answer if isinstance(answer, LogRead) else await answer

        def short_of(result: LogRead) -> Shortfall | None:
            if self.waiters.closed:
                return None
            have = sum(len(r.value or b"") for r in result.decoded)
            # As Kafka: min_bytes 0 answers at once, even with nothing to send.
            return Shortfall(have, min_bytes, {key: result.high_watermark})

        def park(short: Shortfall, left_ms: int) -> defer.Deferred[bool]:
            return self.waiters.park_for(short, left_ms, values=True)

        return long_poll(read, short_of, park, clock=self._clock, max_wait_ms=max_wait_ms)

