"""Kafka's transaction coordinator (KIP-98/KIP-447) for one broker that coordinates every
transactional id: the service behind InitProducerId (with a transactional id),
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, DescribeTransactions and
ListTransactions. ``docs/transactions.md`` describes the behaviour clients see.

Each operation checks the request (``checks.py``), then decides on the id's value
(:mod:`~brokerd.kafka.txn.operations`, pure) and hands the resulting
:class:`~brokerd.coordinator_runtime.CoordinatorResult` to the coordinator runtime,
the one place results take effect: their records are written to the transaction log
(``brokerd.storage.stores.txn_log``, fsync'd in the broker's write pool, several ids'
changes sharing one sync), installed in the table once durable, and only then answered;
a failed write answers COORDINATOR_NOT_AVAILABLE (retriable) and changes nothing.
EndTxn's decision (PrepareCommit/PrepareAbort) parks the caller; its follow-up has
:class:`~brokerd.kafka.txn.completion.TxnCompleter` write the markers and hand the
offsets over (on commit), then the completion's result logs CompleteCommit/CompleteAbort
and releases the answer, so a read_committed consumer sees a transaction as soon as its
commit returns. If a step fails the answer is CONCURRENT_TRANSACTIONS (the client
retries EndTxn) and the completion is retried on the coordinator's timer; a decided
transaction found in the log at start-up is completed the same way.

One operation per transactional id runs at a time; a request for an id with an
operation in progress gets CONCURRENT_TRANSACTIONS (retriable), as in Kafka.

The timer (every :data:`TXN_ABORT_CHECK_SECONDS`) also aborts every Ongoing transaction
older than its timeout, bumping the producer epoch so that the producer that left it
open is fenced, and forgets ids idle for :data:`TRANSACTIONAL_ID_EXPIRATION_MS` (Kafka's
``transactional.id.expiration.ms``).

:meth:`TransactionCoordinator.verify` is the check the core runs before admitting a
transactional produce. What this module does not do: decode requests, map errors to
old request versions (``txn_handlers.py``), or write markers itself (the core does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from twisted.application import service
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from brokerd.clock import Clock, DelayedCall
from brokerd.coordinator_runtime import CoordinatorResult, CoordinatorRuntime, ParkedRequest
from brokerd.core.api import CoreTransactions
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.state import cancel_call
from brokerd.kafka.groups.store import offset_entry_error
from brokerd.kafka.txn import operations as ops
from brokerd.kafka.txn.checks import (
    BUMPED_END_RETRY,
    MAX_PARTITIONS_PER_TXN,
    bumped_end_txn_error,
    check_producer,
    end_txn_error,
    group_id_error,
    partition_error,
    too_many_offsets,
    transactional_id_error,
)
from brokerd.kafka.txn.completion import TxnCompleter
from brokerd.kafka.txn.state import PREPARED, TxnMetadata, TxnState, epoch_exhausted
from brokerd.kafka.txn.table import TxnRecord, TxnTable, writable
from brokerd.kafka.txn.types import (
    EndTxnResult,
    InitProducerIdResult,
    TopicPartition,
    TxnDescription,
    TxnListing,
    TxnOffset,
)
from brokerd.kafka.txn.views import (
    describe_transactions,
    list_transactions,
    pending_offsets,
    verify_partitions,
    verify_produce,
)
from brokerd.storage.stores.txn_log import TxnLog

if TYPE_CHECKING:
    from brokerd.kafka.groups.coordinator import GroupCoordinator

__all__ = [
    "DEFAULT_MAX_TIMEOUT_MS",
    "TRANSACTIONAL_ID_EXPIRATION_MS",
    "TXN_ABORT_CHECK_SECONDS",
    "TransactionCoordinator",
]

#: How often timed-out transactions are aborted and failed completions retried.
TXN_ABORT_CHECK_SECONDS = 1.0
#: Kafka's ``transaction.max.timeout.ms``: a longer InitProducerId timeout is refused.
DEFAULT_MAX_TIMEOUT_MS = 900_000
#: Kafka's ``transactional.id.expiration.ms``: an id with no transaction running and no
#: request for this long is forgotten.
TRANSACTIONAL_ID_EXPIRATION_MS = 7 * 24 * 3600 * 1000

T = TypeVar("T")
_C = ErrorCode


class TransactionCoordinator(service.Service):
    """Every transactional id of this broker (what the transactional Kafka APIs call).
    Reactor thread only. Install :meth:`verify` in the core with ``set_txn_verifier``
    (the constructor does it).

    :param clock: the reactor's timers (``task.Clock`` in tests).
    :param log: the open transaction log (loaded at construction; closed by the owner
        after :meth:`stopService` has fired).
    :param run_blocking: ``run_blocking(f, *args) -> Deferred`` runs a blocking call off
        the reactor (``Broker.pools.run_write``).
    :param allocate_producer_id: blocking allocator of never-reused producer ids
        (``ProducerIdAllocator.next_id``), run through ``run_blocking``.
    :param core: writes markers and runs the produce verifier.
    :param groups: stores committed offsets and checks TxnOffsetCommit's member.
    :param wall_clock: seconds since the epoch (start times survive restarts).
    """

    _log = Logger()

    def __init__(
        self,
        *,
        clock: Clock,
        log: TxnLog,
        run_blocking: Callable[..., Deferred[Any]],
        allocate_producer_id: Callable[[], int],
        core: CoreTransactions,
        groups: GroupCoordinator,
        wall_clock: Callable[[], float] = time.time,
        max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS,
        abort_check_seconds: float = TXN_ABORT_CHECK_SECONDS,
        id_expiration_ms: int = TRANSACTIONAL_ID_EXPIRATION_MS,
    ) -> None:
        self._clock = clock
        self._run_blocking = run_blocking
        self._allocate = allocate_producer_id
        self._groups = groups
        self._wall_clock = wall_clock
        self._max_timeout_ms = max_timeout_ms
        self._check_seconds = abort_check_seconds
        self._expiration_ms = id_expiration_ms
        self._table = TxnTable(log=log, run_blocking=run_blocking)
        # Every change goes through the one runtime: records durable, installed, then
        # the answers and follow-ups.
        self._runtime: CoordinatorRuntime[TxnRecord] = CoordinatorRuntime(
            self._table.writer, self._cancelled, self._durable
        )
        self._completer = TxnCompleter(core=core, groups=groups, now_ms=self._now_ms)
        self._stopped = False
        self._timer: DelayedCall | None = None
        self._in_flight: set[Deferred[Any]] = set()
        core.set_txn_verifier(self.verify)

    def _now_ms(self) -> int:
        return int(self._wall_clock() * 1000)

    # -- service ------------------------------------------------------------------------

    def startService(self) -> None:
        """Complete every transaction the log holds as decided, start the timeout clock
        of every ongoing one (from its logged start time) and start the timer."""
        service.Service.startService(self)  # type: ignore[no-untyped-call]
        self._stopped = False
        self._tick()

    def stopService(self) -> Deferred[None]:
        """Stop the timer and refuse new requests (COORDINATOR_NOT_AVAILABLE); fires once
        every operation in progress has finished (each answers with its real outcome),
        so the log may then be closed. A completion cut short by the core shutting down
        leaves its Prepare* record, completed at the next start."""
        service.Service.stopService(self)  # type: ignore[no-untyped-call]
        self._stopped = True
        cancel_call(self._timer)
        self._timer = None
        pending = list(self._in_flight)
        d = defer.DeferredList(pending, consumeErrors=True)
        return d.addCallback(lambda _: None)

    def _tick(self) -> None:
        self._timer = None
        if self._stopped:
            return
        try:
            self._housekeeping()
        finally:
            self._timer = self._clock.callLater(self._check_seconds, self._tick)

    def _housekeeping(self) -> None:
        now = self._now_ms()
        for meta in self._table.values():
            tid = meta.transactional_id
            if self._table.busy(tid):
                continue
            if meta.state in PREPARED:
                self._complete(ops.Complete(meta))
            elif meta.state is TxnState.ONGOING and now >= meta.start_time_ms + meta.timeout_ms:
                self._log.info(
                    "transaction {tid!r} timed out after {ms} ms: aborting it",
                    tid=tid,
                    ms=meta.timeout_ms,
                )
                self._apply(tid, ops.fence_and_abort(meta, now))
            elif (
                meta.state is not TxnState.ONGOING
                and now >= meta.last_update_ms + self._expiration_ms
            ):
                self._apply(tid, ops.expire(meta, now)).addCallback(
                    self._expired, tid
                )

    def _expired(self, forgotten: bool, tid: str) -> None:
        if forgotten:
            self._log.info("transactional id {tid!r} expired", tid=tid)

    # -- running operations -------------------------------------------------------------

    def _track(self, tid: str, d: Deferred[T]) -> Deferred[T]:
        """Hold ``tid`` until ``d`` fires: the one operation on it; tracked for
        shutdown."""
        self._table.hold(tid)
        self._in_flight.add(d)

        def done(result: object) -> object:
            self._in_flight.discard(d)
            self._table.release(tid)
            return result

        d.addBoth(done)
        return d

    def _apply(self, tid: str, result: CoordinatorResult[TxnRecord, Any]) -> Deferred[Any]:
        """Run one decision through the runtime: its records durable (then installed),
        then its answer; the id held until it is answered."""
        if not writable(result.records):
            self._log.error("transaction {tid!r}: a value the log cannot hold", tid=tid)
            return defer.succeed(result.if_failed)
        return self._track(tid, self._runtime.run(result))

    def _spawn(self, tid: str, work: Coroutine[Any, Any, T]) -> Deferred[T]:
        """Run ``work`` (a decision that needs a producer id first) as the one
        operation on ``tid``."""
        return self._track(tid, Deferred.fromCoroutine(work))

    def _durable(self, result: CoordinatorResult[TxnRecord, Any]) -> None:
        """The runtime's hook: ``result``'s records are durable. Install them, then start
        its follow-ups (completions of the Prepare* values it wrote)."""
        self._table.replay(result.records)
        for follow in result.follow_ups:
            if isinstance(follow, ops.Complete):
                self._complete(follow)

    def _complete(self, follow: ops.Complete) -> None:
        tid = follow.prepared.transactional_id
        self._track(tid, Deferred.fromCoroutine(self._completion(follow)))

    async def _completion(self, follow: ops.Complete) -> None:
        """The second phase of a decided transaction: markers and offsets, then the
        Complete* record and the parked caller's answer through the runtime."""
        if not await self._completer.markers_and_offsets(follow.prepared):
            await self._runtime.run(ops.not_completed(follow))
            return
        fresh = None
        if follow.answer is ops.EndAnswer.BUMPED and epoch_exhausted(
            follow.prepared.producer_epoch
        ):
            fresh = await self._new_producer_id()
        if await self._runtime.run(ops.completed(follow, self._now_ms(), fresh)):
            self._completer.done(follow.prepared)

    def _cancelled(self, parked: ParkedRequest) -> CoordinatorResult[TxnRecord, None]:
        # The caller went away; its transaction completes all the same.
        return CoordinatorResult((), None)

    # -- InitProducerId -----------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> Deferred[InitProducerIdResult]:
        code = self._unavailable() or transactional_id_error(transactional_id)
        if not code and not 0 < transaction_timeout_ms <= self._max_timeout_ms:
            code = _C.INVALID_TRANSACTION_TIMEOUT
        if not code and self._table.busy(transactional_id):
            code = _C.CONCURRENT_TRANSACTIONS
        if code:
            return defer.succeed(InitProducerIdResult(code))
        expected = None if producer_id == -1 and producer_epoch == -1 else producer_id
        args = (transactional_id, transaction_timeout_ms, expected, producer_epoch)
        if not ops.needs_producer_id(self._table.get(transactional_id)):
            return self._apply(transactional_id, self._decide_init(*args, None))
        return self._spawn(transactional_id, self._init_with_new_id(*args))

    def _decide_init(
        self, tid: str, timeout_ms: int, expected_pid: int | None, expected_epoch: int,
        fresh_pid: int | None,
    ) -> CoordinatorResult[TxnRecord, Any]:
        meta = self._table.get(tid)
        return ops.init_producer_id(
            meta, tid, timeout_ms, expected_pid, expected_epoch, self._now_ms(), fresh_pid
        )

    async def _init_with_new_id(
        self, tid: str, timeout_ms: int, expected_pid: int | None, expected_epoch: int
    ) -> InitProducerIdResult:
        fresh = await self._new_producer_id()
        result = self._decide_init(tid, timeout_ms, expected_pid, expected_epoch, fresh)
        # Still the one operation on tid (held by the caller): decided on its value now.
        answer: InitProducerIdResult = await self._apply_held(result)
        return answer

    def _apply_held(self, result: CoordinatorResult[TxnRecord, Any]) -> Deferred[Any]:
        if not writable(result.records):
            return defer.succeed(result.if_failed)
        return self._runtime.run(result)

    async def _new_producer_id(self) -> int | None:
        try:
            return int(await self._run_blocking(self._allocate))
        except Exception as exc:
            self._log.error("allocating a producer id failed: {exc}", exc=exc)
            return None

    # -- AddPartitionsToTxn, AddOffsetsToTxn --------------------------------------------

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> Deferred[dict[TopicPartition, ErrorCode]]:
        meta = self._table.get(transactional_id)
        code = self._running_check(transactional_id, meta, producer_id, producer_epoch)
        if code:
            return defer.succeed(dict.fromkeys(partitions, code))
        assert meta is not None
        errors = {p: partition_error(p) for p in partitions}
        if any(errors.values()):
            return defer.succeed(errors)
        if meta.state is TxnState.ONGOING and meta.partitions.issuperset(partitions):
            return defer.succeed(errors)  # nothing new: all NONE, nothing to write
        if len(meta.partitions | set(partitions)) > MAX_PARTITIONS_PER_TXN:
            return defer.succeed(dict.fromkeys(partitions, _C.INVALID_REQUEST))
        return self._apply(
            transactional_id, ops.add_partitions(meta, partitions, self._now_ms())
        )

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> Deferred[ErrorCode]:
        meta = self._table.get(transactional_id)
        code = self._running_check(transactional_id, meta, producer_id, producer_epoch)
        code = code or group_id_error(group_id)
        if code:
            return defer.succeed(code)
        assert meta is not None
        if meta.state is TxnState.ONGOING and group_id in meta.offsets:
            return defer.succeed(_C.NONE)
        return self._apply(transactional_id, ops.add_offsets(meta, group_id, self._now_ms()))

    # -- TxnOffsetCommit ----------------------------------------------------------------

    def txn_offset_commit(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, TxnOffset],
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        add_group: bool = False,
    ) -> Deferred[dict[TopicPartition, ErrorCode]]:
        """TxnOffsetCommit; with ``add_group`` (v5, KIP-890 part 2) the group is added to
        the transaction (starting one if none is ongoing) as AddOffsetsToTxn would."""
        meta = self._table.get(transactional_id)
        code = self._running_check(transactional_id, meta, producer_id, producer_epoch)
        code = code or group_id_error(group_id)
        if not code:
            assert meta is not None
            joined = meta.state is TxnState.ONGOING and group_id in meta.offsets
            if not joined and not add_group:
                code = _C.INVALID_TXN_STATE  # AddOffsetsToTxn did not name this group
        if not code:
            code = self._groups.check_txn_member(
                group_id, generation_id, member_id, group_instance_id
            )
        if code:
            return defer.succeed(dict.fromkeys(offsets, code))
        assert meta is not None
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, TxnOffset] = {}
        for (topic, partition), value in offsets.items():
            entry = (topic, partition, value.offset, value.leader_epoch, value.metadata)
            results[(topic, partition)] = offset_entry_error(entry)
            if not results[(topic, partition)]:
                accepted[(topic, partition)] = value
        if not accepted:
            return defer.succeed(results)
        if too_many_offsets(meta.offsets, group_id, accepted):
            return defer.succeed(dict.fromkeys(offsets, _C.INVALID_REQUEST))
        return self._apply(
            transactional_id,
            ops.txn_offset_commit(meta, group_id, accepted, results, self._now_ms()),
        )

    # -- EndTxn -------------------------------------------------------------------------

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Deferred[ErrorCode]:
        """EndTxn: the decision logged, then (its follow-up) markers, offsets and the
        Complete* record; answered once complete (CONCURRENT_TRANSACTIONS, retriable,
        if a step failed: the timer completes it)."""
        code = self._unavailable() or transactional_id_error(transactional_id)
        if code:
            return defer.succeed(code)
        meta = self._table.get(transactional_id)
        busy = self._table.busy(transactional_id)
        answer = end_txn_error(meta, producer_id, producer_epoch, commit, busy)
        if answer is not None:
            return defer.succeed(answer)
        assert meta is not None
        return self._apply(transactional_id, ops.end_txn(meta, commit, self._now_ms()))

    def end_txn_bumping(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Deferred[EndTxnResult]:
        """EndTxn v5 (KIP-890 part 2): as :meth:`end_txn`, with the producer epoch bumped
        by the decision (the markers carry the new epoch, fencing the old one), an abort
        accepted with no transaction ongoing, and the answer carrying the id and epoch
        the producer's next transaction uses. An epoch that the bump exhausts moves the
        id to a fresh producer id at epoch 0 once the transaction is complete."""
        code = self._unavailable() or transactional_id_error(transactional_id)
        if code:
            return defer.succeed(EndTxnResult(code))
        meta = self._table.get(transactional_id)
        busy = self._table.busy(transactional_id)
        answer = bumped_end_txn_error(meta, producer_id, producer_epoch, commit, busy)
        if isinstance(answer, ErrorCode):
            return defer.succeed(EndTxnResult(answer))
        assert meta is not None
        if answer == BUMPED_END_RETRY:
            if not epoch_exhausted(meta.producer_epoch):
                return defer.succeed(
                    EndTxnResult(_C.NONE, meta.producer_id, meta.producer_epoch)
                )
            # The rotation after the first attempt did not happen (failed, or a restart
            # came between): do it now.
            return self._spawn(transactional_id, self._rotate_ended(transactional_id))
        return self._apply(
            transactional_id, ops.end_txn_bumping(meta, commit, self._now_ms())
        )

    async def _rotate_ended(self, tid: str) -> EndTxnResult:
        fresh = await self._new_producer_id()
        meta = self._table.get(tid)
        assert meta is not None
        answer: EndTxnResult = await self._apply_held(
            ops.rotate_ended(meta, self._now_ms(), fresh)
        )
        return answer

    # -- checks shared by the requests --------------------------------------------------

    def _unavailable(self) -> ErrorCode:
        return _C.COORDINATOR_NOT_AVAILABLE if self._stopped else _C.NONE

    def _running_check(
        self, tid: str, meta: TxnMetadata | None, producer_id: int, producer_epoch: int
    ) -> ErrorCode:
        return (
            self._unavailable()
            or transactional_id_error(tid)
            or check_producer(meta, producer_id, producer_epoch, self._table.busy(tid))
        )

    # -- the produce verifier, DescribeTransactions, ListTransactions (from memory) ------

    def verify(self, topic: str, partition: int, producer_id: int, producer_epoch: int) -> None:
        """The core's check before admitting a transactional produce
        (:func:`~brokerd.kafka.txn.views.verify_produce`)."""
        verify_produce(self._table, topic, partition, producer_id, producer_epoch)

    def describe(self, transactional_ids: Sequence[str]) -> list[TxnDescription]:
        return describe_transactions(self._table, transactional_ids, self._unavailable())

    def pending_offsets(self, group_id: str) -> frozenset[TopicPartition]:
        """(:func:`~brokerd.kafka.txn.views.pending_offsets`)"""
        return pending_offsets(self._table, group_id)

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """(:func:`~brokerd.kafka.txn.views.verify_partitions`); COORDINATOR_NOT_AVAILABLE
        once stopped."""
        if self._stopped:
            return dict.fromkeys(partitions, _C.COORDINATOR_NOT_AVAILABLE)
        busy = self._table.busy(transactional_id)
        return verify_partitions(
            self._table, transactional_id, producer_id, producer_epoch, partitions, busy
        )

    def list_transactions(
        self,
        state_filters: Sequence[str],
        producer_id_filters: Sequence[int],
        *,
        duration_filter_ms: int = -1,
    ) -> list[TxnListing]:
        """Every id matching every filter
        (:func:`~brokerd.kafka.txn.views.list_transactions`); nothing once stopped."""
        if self._stopped:
            return []
        return list_transactions(
            self._table,
            state_filters,
            producer_id_filters,
            now_ms=self._now_ms(),
            duration_filter_ms=duration_filter_ms,
        )
