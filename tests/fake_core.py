"""The one fake broker core of the synchronous tests: partitions as in-memory lists of
batches behind the methods of :class:`brokerd.core.api.CoreApi`, each answering as the
real core does (unknown partitions, offsets out of range, config checks, auto-creation),
with switches to hold or fail produces, parked fetches and marker writes.

Its variations are subclasses here: :class:`HandFiredCore` (every call of the native
protocol answered by a Deferred the test fires) and :class:`BatchLogCore` (one log of
whole stored batches on a clock, with the write pool the share groups' service takes).
mypy checks them against the core's roles at the end of this module."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from twisted.internet import defer, task

from brokerd import errors
from brokerd.after_answer import AfterAnswer
from brokerd.clock import Clock
from brokerd.core.api import (
    AppendWatcher,
    CoreLongPoll,
    CoreTopicChanges,
    CoreTopics,
    CoreTransactions,
    CoreWrites,
    RecordValidator,
    TxnVerifier,
)
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.config.topic_config import broker_values, validate_overrides
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.producer_state import ActiveProducer
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.types import (
    AbortedTxn,
    AppendInfo,
    Delivery,
    Isolation,
    LogDirUsage,
    LogRead,
    PartitionOffsets,
    ReadSpec,
    TopicInfo,
)

#: The native long poll's read: committed records, as bytes here.
COMMITTED_BYTES = ReadSpec(Isolation.READ_COMMITTED, Delivery.BYTES)


class FakeCore:
    """An in-memory stand-in for :class:`brokerd.core.broker.Broker`. Each partition is a
    list of batches; one "record" per batch keeps offsets simple. Transaction markers are
    recorded, not written (:attr:`markers`)."""

    @property
    def reads(self) -> FakeCore:
        """The fake plays the face's reads and transactions roles itself."""
        return self

    @property
    def transactions(self) -> FakeCore:
        return self

    @property
    def storage(self) -> FakeCore:
        """And the data directory's and the append watches' roles."""
        return self

    @property
    def waiters(self) -> FakeCore:
        return self

    @property
    def topic_registry(self) -> FakeCore:
        """And the topics role."""
        return self

    def __init__(self) -> None:
        self.after_answer = AfterAnswer()
        self.auto_create_topics = True
        self._topics: dict[str, TopicInfo] = {}
        self.logs: dict[tuple[str, int], list[bytes]] = {}
        self.log_start: dict[tuple[str, int], int] = {}
        self.hold_produce = False
        self.held: list[defer.Deferred[AppendInfo]] = []
        self.produce_calls: list[tuple[str, int, bytes, int]] = []
        self.produce_error: Exception | None = None
        self.waits: list[tuple[list[tuple[str, int, int]], int, int, int]] = []
        self.wait_deferreds: list[defer.Deferred[None]] = []
        #: Fetch sessions' standing watches, by partition.
        self.watchers: dict[tuple[str, int], set[AppendWatcher]] = {}
        self.cancelled_waits = 0
        self.wait_error: Exception | None = None
        self.fetch_calls: list[tuple[str, int, int, int, bool]] = []
        #: Last stable offset per partition (absent: the high watermark).
        self.lso: dict[tuple[str, int], int] = {}
        #: Aborted transactions per partition: (producer id, first offset, marker offset).
        self.aborted: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        self.list_offsets_calls: list[tuple[str, int, bool]] = []
        self.created: list[tuple[str, int]] = []
        self.deleted: list[str] = []
        self.on_deleted: list[Callable[[str], object]] = []
        self.next_producer_id = 1000
        #: Marker writes: (partitions, producer id, epoch, commit).
        self.markers: list[tuple[tuple[tuple[str, int], ...], int, int, bool]] = []
        #: Set: marker writes fail with it. ``hold_markers``: they wait in
        #: :attr:`held_markers` until :meth:`release_markers`.
        self.marker_error: Exception | None = None
        self.hold_markers = False
        self.held_markers: list[defer.Deferred[None]] = []
        self.verifier: TxnVerifier | None = None
        self.record_validator: RecordValidator | None = None

    # -- topics (CoreTopics, CoreTopicChanges): the topic operations in one block -------

    def add_topic(self, name: str, partitions: int = 1) -> None:
        self._topics[name] = TopicInfo(name, partitions)
        for p in range(partitions):
            self.logs[(name, p)] = []
            self.log_start[(name, p)] = 0

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return next((t for t in self._topics.values() if t.topic_id == topic_id), None)

    def ensure_topic(self, name: str) -> defer.Deferred[TopicInfo]:
        if name not in self._topics:
            if not self.auto_create_topics:
                return defer.fail(errors.UnknownTopicOrPartition(name))
            self.add_topic(name)
        return defer.succeed(self._topics[name])

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> defer.Deferred[None]:
        try:
            overrides = validate_overrides((configs or {}).items())
        except errors.InvalidConfig:
            return defer.fail()
        if name in self._topics:
            return defer.fail(errors.TopicAlreadyExists(f"topic {name!r} exists"))
        if validate_only:
            return defer.succeed(None)
        self.add_topic(name, partitions)
        self._topics[name] = TopicInfo(name, partitions, overrides)
        self.created.append((name, partitions))
        return defer.succeed(None)

    def topic_config_defaults(self) -> dict[str, str]:
        return broker_values(LogConfig())

    def alter_topic_configs(
        self,
        name: str,
        update: Callable[[Mapping[str, str]], Mapping[str, str | None]],
        *,
        validate_only: bool = False,
    ) -> defer.Deferred[TopicInfo]:
        info = self._topics.get(name)
        if info is None:
            return defer.fail(errors.UnknownTopicOrPartition(name))
        try:
            new = TopicInfo(name, info.partitions, validate_overrides(update(info.configs).items()))
        except errors.InvalidConfig:
            return defer.fail()
        if not validate_only:
            self._topics[name] = new
        return defer.succeed(new)

    def delete_topic(self, name: str) -> defer.Deferred[None]:
        self._topics.pop(name)
        self.deleted.append(name)
        for call in self.on_deleted:
            call(name)
        return defer.succeed(None)

    def on_topic_deleted(self, call: Callable[[str], object]) -> None:
        self.on_deleted.append(call)
    def list_topics(self) -> defer.Deferred[list[TopicInfo]]:
        return defer.succeed([self._topics[name] for name in sorted(self._topics)])

    def create_partitions(self, topic: str, new_total: int) -> defer.Deferred[TopicInfo]:
        info = self._topics.get(topic)
        if info is None:
            return defer.fail(errors.UnknownTopicOrPartition(topic))
        if new_total <= info.partitions:
            return defer.fail(errors.InvalidPartitions(f"{topic} has {info.partitions}"))
        for p in range(info.partitions, new_total):
            self.logs[(topic, p)] = []
            self.log_start[(topic, p)] = 0
        self._topics[topic] = TopicInfo(topic, new_total, info.configs, topic_id=info.topic_id)
        return defer.succeed(self._topics[topic])

    def delete_records(self, topic: str, partition: int, before_offset: int) -> defer.Deferred[int]:
        try:
            end = len(self._log(topic, partition))
        except errors.BrokerError:
            return defer.fail()
        target = end if before_offset == -1 else before_offset
        if not 0 <= target <= end:
            return defer.fail(errors.OffsetOutOfRange(target, 0, end))
        start = max(self.log_start[(topic, partition)], target)
        self.log_start[(topic, partition)] = start
        return defer.succeed(start)

    # -- partitions: writes, reads, long polls, transactions ------------------------

    def _log(self, topic: str, partition: int) -> list[bytes]:
        try:
            return self.logs[(topic, partition)]
        except KeyError:
            raise errors.UnknownTopicOrPartition(f"{topic}/{partition}") from None

    def produce_batches(
        self, topic: str, partition: int, data: bytes, *, acks: int = -1
    ) -> defer.Deferred[AppendInfo]:
        self.produce_calls.append((topic, partition, data, acks))
        if self.produce_error is not None:
            return defer.fail(self.produce_error)
        try:
            log = self._log(topic, partition)
        except errors.BrokerError:
            return defer.fail()
        log.append(data)
        info = AppendInfo(len(log) - 1, len(log) - 1, self.log_start[(topic, partition)])
        if self.hold_produce:
            d: defer.Deferred[AppendInfo] = defer.Deferred()
            self.held.append(d)
            d.addCallback(lambda _: info)
            return d
        return defer.succeed(info)

    def _lso(self, topic: str, partition: int) -> int:
        return self.lso.get((topic, partition), len(self.logs[(topic, partition)]))

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec
    ) -> defer.Deferred[LogRead]:
        read_committed = spec.committed
        self.fetch_calls.append((topic, partition, offset, max_bytes, read_committed))
        try:
            log = self._log(topic, partition)
        except errors.BrokerError:
            return defer.fail()
        start = self.log_start[(topic, partition)]
        if not start <= offset <= len(log):
            return defer.fail(errors.OffsetOutOfRange(offset, start, len(log)))
        lso = self._lso(topic, partition)
        readable = log[offset:lso] if read_committed else log[offset:]
        # At least one whole batch, then cut at max_bytes (maybe mid-batch), like Kafka.
        data = b"".join(readable)
        if readable:
            data = data[: max(max_bytes, len(readable[0]))]
        end = offset + len(readable)
        aborted = tuple(
            AbortedTxn(pid, first)
            for pid, first, marker in self.aborted.get((topic, partition), ())
            if read_committed and marker >= offset and first < end
        )
        return defer.succeed(LogRead(data, len(log), start, lso, aborted))

    def offsets(self, topic: str, partition: int) -> defer.Deferred[PartitionOffsets]:
        try:
            log = self._log(topic, partition)
        except errors.BrokerError:
            return defer.fail()
        return defer.succeed(PartitionOffsets(
            self.log_start[(topic, partition)], len(log), self._lso(topic, partition)))

    def watch(self, key: tuple[str, int], watcher: AppendWatcher) -> None:
        self.watchers.setdefault(key, set()).add(watcher)

    def unwatch(self, key: tuple[str, int], watcher: AppendWatcher) -> None:
        self.watchers.get(key, set()).discard(watcher)

    def append(self, key: tuple[str, int], data: bytes) -> None:
        """A batch lands on ``key``: its watchers (fetch sessions) are told."""
        self.logs[key].append(data)
        for watcher in list(self.watchers.get(key, ())):
            watcher.changed(key, len(data))

    def open_log(self, topic: str, partition: int) -> PartitionOffsets | None:
        """The offsets a fetch session looks at (the log's three, not a whole log)."""
        if (topic, partition) not in self.logs:
            return None
        return PartitionOffsets(
            self.log_start[(topic, partition)], len(self.logs[(topic, partition)]),
            self._lso(topic, partition))

    def wait_for_data(
        self,
        positions: Sequence[tuple[str, int, int]],
        *,
        min_bytes: int,
        max_wait_ms: int,
        already: int = 0,
        seen: dict[tuple[str, int], int] | None = None,
    ) -> defer.Deferred[None]:
        self.waits.append((list(positions), min_bytes, max_wait_ms, already))
        if self.wait_error is not None:
            return defer.fail(self.wait_error)

        def cancelled(d: defer.Deferred[None]) -> None:
            self.cancelled_waits += 1

        d: defer.Deferred[None] = defer.Deferred(cancelled)
        self.wait_deferreds.append(d)
        return d

    def list_offsets(
        self, topic: str, partition: int, *, read_committed: bool = False
    ) -> defer.Deferred[tuple[int, int]]:
        self.list_offsets_calls.append((topic, partition, read_committed))
        try:
            log = self._log(topic, partition)
        except errors.BrokerError:
            return defer.fail()
        latest = self._lso(topic, partition) if read_committed else len(log)
        return defer.succeed((self.log_start[(topic, partition)], latest))

    def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> defer.Deferred[tuple[int, int] | None]:
        self._log(topic, partition)
        return defer.succeed((3, 1234) if timestamp_ms <= 1234 else None)

    def max_timestamp_offset(
        self, topic: str, partition: int
    ) -> defer.Deferred[tuple[int, int] | None]:
        log = self._log(topic, partition)
        # The newest record has the largest timestamp here.
        return defer.succeed((len(log) - 1, 9999) if log else None)

    def init_producer_id(self) -> defer.Deferred[int]:
        self.next_producer_id += 1
        return defer.succeed(self.next_producer_id)

    # -- the data directory, the native protocol's calls, transactions --------------

    def open_logs(self) -> Mapping[tuple[str, int], PartitionLog]:
        return {}

    def offline_partitions(self) -> Mapping[tuple[str, int], str]:
        return {}

    def describe_log_dirs(self) -> LogDirUsage:
        sizes = {key: sum(map(len, log)) for key, log in self.logs.items()}
        return LogDirUsage("/fake-core", sizes)

    def produce_values(
        self, topic: str, partition: int, values: Sequence[bytes | None]
    ) -> defer.Deferred[AppendInfo]:
        data = encode_batch(list(values), timestamp_ms=0)
        return self.produce_batches(topic, partition, data)

    def set_record_validator(self, validate: RecordValidator | None) -> None:
        self.record_validator = validate

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
        return self.read(topic, partition, offset, max_value_bytes, COMMITTED_BYTES)

    def write_txn_markers(
        self,
        partitions: Sequence[tuple[str, int]],
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int = 0,
    ) -> defer.Deferred[None]:
        if self.marker_error is not None:
            return defer.fail(self.marker_error)
        self.markers.append((tuple(partitions), producer_id, producer_epoch, commit))
        if self.hold_markers:
            d: defer.Deferred[None] = defer.Deferred()
            self.held_markers.append(d)
            return d
        return defer.succeed(None)

    def release_markers(self) -> None:
        held, self.held_markers = self.held_markers, []
        for d in held:
            d.callback(None)

    def set_txn_verifier(self, verify: TxnVerifier | None) -> None:
        self.verifier = verify

    def describe_producers(
        self, topic: str, partition: int
    ) -> defer.Deferred[list[tuple[ActiveProducer, int]]]:
        try:
            self._log(topic, partition)
        except errors.BrokerError:
            return defer.fail()
        return defer.succeed([])


@attrs.define
class Call:
    """One call the native protocol made on a :class:`HandFiredCore`."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    deferred: defer.Deferred[Any]
    cancelled: bool = False


class HandFiredCore(FakeCore):
    """The fake core whose answers the test fires by hand: each call the native protocol
    makes (produce, reads, long polls, topic creation and listings) returns a new unfired,
    cancellable Deferred recorded in :attr:`calls`, or an already-fired one from
    :attr:`auto`."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []
        #: method name -> result to answer synchronously (an Exception fails the call)
        self.auto: dict[str, Any] = {}
        #: False: hand out plain Deferreds (no canceller), as a careless core might
        self.cancellable = True

    def _call(self, method: str, *args: Any, **kwargs: Any) -> defer.Deferred[Any]:
        if method in self.auto:
            result = self.auto[method]
            d: defer.Deferred[Any] = (
                defer.fail(result) if isinstance(result, BaseException) else defer.succeed(result)
            )
            self.calls.append(Call(method, args, kwargs, d))
            return d

        def cancel(_: defer.Deferred[Any]) -> None:
            call.cancelled = True

        d = defer.Deferred(cancel if self.cancellable else None)
        call = Call(method, args, kwargs, d)
        self.calls.append(call)
        return d

    def produce_values(
        self, topic: str, partition: int, values: Sequence[bytes | None]
    ) -> defer.Deferred[AppendInfo]:
        return self._call("produce_values", topic, partition, values)

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec
    ) -> defer.Deferred[LogRead]:
        return self._call("read", topic, partition, offset, max_bytes, spec)

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
        return self._call(
            "wait_records",
            topic,
            partition,
            offset,
            max_value_bytes=max_value_bytes,
            min_bytes=min_bytes,
            max_wait_ms=max_wait_ms,
        )

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> defer.Deferred[None]:
        return self._call("create_topic", name, partitions)

    def list_offsets(
        self, topic: str, partition: int, *, read_committed: bool = False
    ) -> defer.Deferred[tuple[int, int]]:
        return self._call("list_offsets", topic, partition)

    def list_topics(self) -> defer.Deferred[list[TopicInfo]]:
        return self._call("list_topics")


class BatchLogCore(FakeCore):
    """The fake core of the share groups' service: one log of whole stored batches
    (:meth:`add`), whose reads answer every batch from the one holding the offset, long
    polls that end on the clock, and the write pool (:meth:`run_write`), whose writes
    can be held for the test to run."""

    def __init__(self, clock: task.Clock) -> None:
        super().__init__()
        self.clock: Clock = clock
        self.batches: list[tuple[int, int, bytes]] = []
        #: Each batch's timestamp (ms), for lookups by time.
        self.times: list[int] = []
        #: The aborted transactions every read answers.
        self.aborted_txns: tuple[AbortedTxn, ...] = ()
        #: The last stable offset, when a transaction is open (else the log's end).
        self.stable_offset: int | None = None
        #: When a list, writes wait here (the Deferred, the write) for the test to run.
        self.held_writes: list[tuple[defer.Deferred[Any], Callable[[], Any]]] | None = None

    def add(self, base: int, data: bytes, count: int, timestamp_ms: int = 0) -> None:
        self.batches.append((base, base + count - 1, data))
        self.times.append(timestamp_ms)

    @property
    def end(self) -> int:
        return self.batches[-1][1] + 1 if self.batches else 0

    def offsets(self, topic: str, partition: int) -> defer.Deferred[PartitionOffsets]:
        lso = self.end if self.stable_offset is None else self.stable_offset
        return defer.succeed(PartitionOffsets(0, self.end, lso))

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec
    ) -> defer.Deferred[LogRead]:
        committed = self.stable_offset is not None and spec == COMMITTED_BYTES
        upto = self.stable_offset if committed and self.stable_offset is not None else self.end
        data = b"".join(d for base, last, d in self.batches if last >= offset and base < upto)
        return defer.succeed(LogRead(data, self.end, 0, self.end, self.aborted_txns))

    def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> defer.Deferred[tuple[int, int] | None]:
        for (base, _, _), at in zip(self.batches, self.times, strict=True):
            if at >= timestamp_ms:
                return defer.succeed((base, at))
        return defer.succeed(None)

    def run_write(self, f: Callable[..., Any], /, *args: Any, **kwargs: Any) -> defer.Deferred[Any]:
        if self.held_writes is not None:
            d: defer.Deferred[Any] = defer.Deferred()
            self.held_writes.append((d, lambda: f(*args, **kwargs)))
            return d
        return defer.maybeDeferred(f, *args, **kwargs)

    def wait_for_data(
        self,
        positions: Sequence[tuple[str, int, int]],
        *,
        min_bytes: int,
        max_wait_ms: int,
        already: int = 0,
        seen: dict[tuple[str, int], int] | None = None,
    ) -> defer.Deferred[None]:
        def cancel(_: defer.Deferred[None]) -> None:
            timer.cancel()

        d: defer.Deferred[None] = defer.Deferred(cancel)
        timer = self.clock.callLater(max_wait_ms / 1000.0, d.callback, None)
        return d


# Every role of the core's face but CoreReads (whose ``open_log`` hands out a whole
# partition log; the fake hands out its offsets, all a fetch session reads of it).
_TOPICS: CoreTopics = FakeCore()
_ADMIN: CoreTopicChanges = FakeCore()
_WRITES: CoreWrites = FakeCore()
_LONG_POLL: CoreLongPoll = FakeCore()
_TRANSACTIONS: CoreTransactions = FakeCore()
_HAND_FIRED: CoreLongPoll = HandFiredCore()
# The share service's core (ShareCore) is the long poll, the reads role (as above) and
# the write pool.
_SHARE_LONG_POLL: CoreLongPoll = BatchLogCore(task.Clock())
_SHARE_WRITES: Callable[..., defer.Deferred[Any]] = BatchLogCore(task.Clock()).run_write
