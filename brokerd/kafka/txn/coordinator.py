"""Kafka's transaction coordinator (KIP-98/KIP-447) for one broker that coordinates every
transactional id: the service behind InitProducerId (with a transactional id),
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, DescribeTransactions and
ListTransactions. ``docs/transactions.md`` describes the behaviour clients see.

Every state change is written to the transaction log (``brokerd.storage.stores.txn_log``,
fsync'd, in the broker's write pool) before the request that caused it is answered.
EndTxn logs the decision (PrepareCommit/PrepareAbort), then has
:class:`~brokerd.kafka.txn.completion.TxnCompleter` write the markers, hand the offsets
over (on commit) and log CompleteCommit/CompleteAbort, and only then answers, so a
read_committed consumer sees a transaction as soon as its commit returns. If a step
fails the answer is CONCURRENT_TRANSACTIONS (the client retries EndTxn) and the
completion is retried on the coordinator's timer; a decided transaction found in the
log at start-up is completed the same way.

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
from brokerd.core.api import CoreTransactions
from brokerd.errors import StorageError
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.state import cancel_call
from brokerd.kafka.groups.store import offset_entry_error
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
from brokerd.kafka.txn.state import (
    NO_EPOCH,
    PREPARED,
    TxnMetadata,
    TxnState,
    bump_epoch,
    epoch_exhausted,
)
from brokerd.kafka.txn.table import TxnTable
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
        the reactor (``Broker.run_write``).
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
        self._completer = TxnCompleter(
            table=self._table, core=core, groups=groups, now_ms=self._now_ms
        )
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
                self._spawn(tid, self._complete(meta))
            elif meta.state is TxnState.ONGOING and now >= meta.start_time_ms + meta.timeout_ms:
                self._log.info(
                    "transaction {tid!r} timed out after {ms} ms: aborting it",
                    tid=tid,
                    ms=meta.timeout_ms,
                )
                self._spawn(tid, self._fence_and_abort(meta))
            elif (
                meta.state is not TxnState.ONGOING
                and now >= meta.last_update_ms + self._expiration_ms
            ):
                self._spawn(tid, self._expire(meta))

    # -- running operations -------------------------------------------------------------

    def _spawn(self, tid: str, work: Coroutine[Any, Any, T]) -> Deferred[T]:
        """Run ``work`` as the one operation on ``tid``; tracked for shutdown."""
        self._table.hold(tid)
        d = Deferred.fromCoroutine(work)
        self._in_flight.add(d)

        def done(result: object) -> object:
            self._in_flight.discard(d)
            self._table.release(tid)
            return result

        d.addBoth(done)
        return d

    async def _persist(self, meta: TxnMetadata) -> bool:
        try:
            await self._table.persist(meta)
        except StorageError:
            # The log reported it, at a bounded rate (a full disk fails every write).
            return False
        except Exception as exc:
            self._log.error(
                "transaction log write for {tid!r} failed: {exc}",
                tid=meta.transactional_id,
                exc=exc,
            )
            return False
        return True

    async def _complete(self, meta: TxnMetadata) -> bool:
        return bool(await self._completer.complete(meta))

    async def _fence_and_abort(self, meta: TxnMetadata) -> bool:
        """Abort ``meta`` (Ongoing) with its epoch bumped: the producer is fenced."""
        now = self._now_ms()
        aborting = meta.fence(now).prepare_fenced_abort(now)
        if not await self._persist(aborting):
            return False
        return await self._complete(aborting)

    async def _expire(self, meta: TxnMetadata) -> None:
        meta.transition(TxnState.DEAD, self._now_ms())  # checks that the table allows it
        try:
            await self._table.forget(meta.transactional_id)
        except StorageError:
            pass  # reported by the log; the next housekeeping pass tries again
        except Exception as exc:
            self._log.error("expiring {tid!r} failed: {exc}", tid=meta.transactional_id, exc=exc)
        else:
            self._log.info("transactional id {tid!r} expired", tid=meta.transactional_id)

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
        work = self._init(transactional_id, transaction_timeout_ms, expected, producer_epoch)
        return self._spawn(transactional_id, work)

    async def _init(
        self, tid: str, timeout_ms: int, expected_pid: int | None, expected_epoch: int
    ) -> InitProducerIdResult:
        meta = self._table.get(tid)
        now = self._now_ms()
        if meta is None:
            new_pid = await self._new_producer_id()
            if new_pid is None:
                return InitProducerIdResult(_C.COORDINATOR_NOT_AVAILABLE)
            meta = TxnMetadata(tid, new_pid, NO_EPOCH, timeout_ms, last_update_ms=now)
        if expected_pid is not None and not (
            meta.producer_epoch == NO_EPOCH
            or expected_pid == meta.producer_id
            or (expected_pid == meta.last_producer_id and epoch_exhausted(expected_epoch))
        ):
            return InitProducerIdResult(_C.PRODUCER_FENCED)
        if meta.state in PREPARED:
            return InitProducerIdResult(_C.CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.ONGOING:
            # Abort what the previous holder left open, with its epoch bumped; the client
            # retries and then gets the epoch after that one.
            self._log.info("transaction {tid!r}: new producer, aborting the open one", tid=tid)
            await self._fence_and_abort(meta)
            return InitProducerIdResult(_C.CONCURRENT_TRANSACTIONS)
        expected = None if expected_pid is None else expected_epoch
        if epoch_exhausted(meta.producer_epoch) and expected in (None, meta.producer_epoch):
            rotated = await self._new_producer_id()
            if rotated is None:
                return InitProducerIdResult(_C.COORDINATOR_NOT_AVAILABLE)
            last_epoch = NO_EPOCH if expected is None else meta.producer_epoch
            new = meta.reinit(now, timeout_ms, rotated, 0, meta.producer_id, last_epoch)
        else:
            bumped = bump_epoch(meta.producer_epoch, meta.last_producer_epoch, expected)
            if isinstance(bumped, ErrorCode):
                return InitProducerIdResult(bumped)
            epoch, last_epoch = bumped
            new = meta.reinit(
                now, timeout_ms, meta.producer_id, epoch, meta.last_producer_id, last_epoch
            )
        if not await self._persist(new):
            return InitProducerIdResult(_C.COORDINATOR_NOT_AVAILABLE)
        return InitProducerIdResult(_C.NONE, new.producer_id, new.producer_epoch)

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

        async def add() -> dict[TopicPartition, ErrorCode]:
            ok = await self._persist(meta.add_partitions(partitions, self._now_ms()))
            return dict.fromkeys(partitions, _C.NONE if ok else _C.COORDINATOR_NOT_AVAILABLE)

        return self._spawn(transactional_id, add())

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

        async def add() -> ErrorCode:
            ok = await self._persist(meta.add_group(group_id, self._now_ms()))
            return _C.NONE if ok else _C.COORDINATOR_NOT_AVAILABLE

        return self._spawn(transactional_id, add())

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

        async def remember() -> dict[TopicPartition, ErrorCode]:
            now = self._now_ms()
            base = meta
            if base.state is not TxnState.ONGOING or group_id not in base.offsets:
                base = base.add_group(group_id, now)
            if not await self._persist(base.with_offsets(group_id, accepted, now)):
                results.update(dict.fromkeys(accepted, _C.COORDINATOR_NOT_AVAILABLE))
            return results

        return self._spawn(transactional_id, remember())

    # -- EndTxn -------------------------------------------------------------------------

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Deferred[ErrorCode]:
        code = self._unavailable() or transactional_id_error(transactional_id)
        if code:
            return defer.succeed(code)
        meta = self._table.get(transactional_id)
        busy = self._table.busy(transactional_id)
        answer = end_txn_error(meta, producer_id, producer_epoch, commit, busy)
        if answer is not None:
            return defer.succeed(answer)
        assert meta is not None

        async def end() -> ErrorCode:
            prepared = meta.prepare(commit, self._now_ms())
            if not await self._persist(prepared):
                return _C.COORDINATOR_NOT_AVAILABLE
            if not await self._complete(prepared):
                # Decided and durable, not yet complete: retried on the timer; the
                # client's retry of EndTxn is answered once it is done.
                return _C.CONCURRENT_TRANSACTIONS
            return _C.NONE

        return self._spawn(transactional_id, end())

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
            return self._spawn(transactional_id, self._answer_ended(meta))

        async def end() -> EndTxnResult:
            prepared = meta.prepare_bumped(commit, self._now_ms())
            if not await self._persist(prepared):
                return EndTxnResult(_C.COORDINATOR_NOT_AVAILABLE)
            if not await self._complete(prepared):
                # Decided and durable: completed on the timer; the client's retry (with
                # the epoch it sent) is answered once it is done.
                return EndTxnResult(_C.CONCURRENT_TRANSACTIONS)
            done = self._table.get(transactional_id)
            assert done is not None
            return await self._answer_ended(done)

        return self._spawn(transactional_id, end())

    async def _answer_ended(self, meta: TxnMetadata) -> EndTxnResult:
        """The answer to an EndTxn v5 whose transaction is complete: the current id and
        epoch, after moving an exhausted epoch to a fresh producer id."""
        if epoch_exhausted(meta.producer_epoch):
            new_pid = await self._new_producer_id()
            if new_pid is None:
                return EndTxnResult(_C.COORDINATOR_NOT_AVAILABLE)
            rotated = meta.rotated(new_pid, self._now_ms())
            if not await self._persist(rotated):
                return EndTxnResult(_C.COORDINATOR_NOT_AVAILABLE)
            meta = rotated
        return EndTxnResult(_C.NONE, meta.producer_id, meta.producer_epoch)

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
