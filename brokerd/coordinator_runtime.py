# -*- test-case-name: tests.test_coordinator_runtime -*-
"""The coordinator runtime: a coordinator's answers leave only once its journal holds
the change they report.

A coordinator is a state machine that changes its memory synchronously and says what
changed as journal records: an operation returns a :class:`CoordinatorResult`, the
records to append and the answer to give. :class:`OrderedJournalWriter` (one per journal)
appends the records in the order the results were submitted, which is the order the
state machine made the changes, and releases each answer once the append holding its
records is synced. Whatever is submitted while a write runs forms the next write, one
sync for the lot (group commit); so is everything submitted in one call of
:meth:`OrderedJournalWriter.submit_many`, which is how one request over many partitions
costs one sync.

Memory must not run ahead of the journal for good: when a write fails, or a write finds
the journal was reopened from disk since memory was last loaded from it, ``reload``
loads the state machine from the journal's view, and every result still pending (its
records were made on the state just discarded) fails with the batch. Their callers
answer an error; nothing they changed stays applied. A coordinator whose records are
independent of each other (the group coordinator's commits: a lost one is answered
with an error and the client commits again) passes no ``reload``: a failed write fails
its own batch only.

Before a write takes them, submitted records may be withdrawn
(:meth:`OrderedJournalWriter.withdraw`): a record superseded by a newer one of the
same key, or requests refused at shutdown.

A coordinator that holds requests to answer them later (a JoinGroup parked until the
rebalance completes) never touches a Deferred: it parks a :class:`ParkedRequest` token,
and a later operation's result names the answers it gives those tokens
(:class:`Release`). :class:`CoordinatorRuntime` is the one place that turns results into
effects: it hands the caller a Deferred for a parked request, submits the result's
records with :meth:`OrderedJournalWriter.submit_in_order`, and once they are durable
gives the answers, the released ones first, in submission order. A result without
records still waits for every earlier submission, as Kafka's runtime makes a read wait
for the last written offset: its answers may report state that those records carry.
Timers are follow-ups: the coordinator schedules its own callbacks and hands their
results to :meth:`CoordinatorRuntime.run`.

Its users: the share groups' records engine (:mod:`brokerd.core.share.service`, with
``reload``), the group coordinator's offsets journal
(:class:`~brokerd.kafka.groups.store.CommitQueue`, whose writer the classic, consumer
and streams groups' :class:`CoordinatorRuntime` also writes through) and the transaction
coordinator (:mod:`brokerd.kafka.txn.coordinator`), both without ``reload``. The
transaction coordinator's memory follows its log instead of leading it: its runtime's
``on_durable`` hook installs a result's records once they are durable (so a failed
write changes nothing) and starts the result's ``follow_ups`` (the markers of a decided
transaction, whose own result then releases the parked EndTxn). What it does not do:
decide anything (the coordinators do), or block the reactor (the write runs in the
broker's write pool, ``run_write``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import attrs
from twisted.internet import defer
from twisted.python.failure import Failure

from brokerd.errors import StorageError

__all__ = [
    "CoordinatorResult",
    "CoordinatorRuntime",
    "OrderedJournalWriter",
    "ParkedRequest",
    "Release",
    "ResultBuilder",
]

Record = TypeVar("Record")
Answer = TypeVar("Answer")


@attrs.frozen(eq=False)
class ParkedRequest:
    """A request a coordinator holds to answer later; compared by identity. ``holder``
    is the coordinator's key of what holds it (a group id), for finding it again when
    its caller gives up."""

    holder: str = ""


@attrs.frozen
class Release:
    """The answer a result gives a request parked earlier: ``answer`` once the result's
    records are durable, ``if_failed`` when their write failed."""

    to: ParkedRequest
    answer: object
    if_failed: object


@attrs.frozen
class CoordinatorResult(Generic[Record, Answer]):
    """What one coordinator operation did: ``records`` to make durable, then ``answer``
    to give (released only after the records are synced).

    ``answer`` may be a :class:`ParkedRequest`: the caller's request is held, and a
    later result's :class:`Release` answers it. ``released`` answers requests parked
    before. ``if_failed`` is the answer when the records' write failed (None: the
    caller's Deferred fails with the write's error; a parked request stays parked).
    ``follow_ups`` are the coordinator's own values for work that starts once the
    records are durable (the transaction coordinator's markers to write); the runtime
    hands them to its ``on_durable`` hook and does nothing else with them."""

    records: tuple[Record, ...]
    answer: Answer
    released: tuple[Release, ...] = ()
    if_failed: Answer | None = None
    follow_ups: tuple[object, ...] = ()


class ResultBuilder(Generic[Record]):
    """Collects one operation's records and releases while the state machine works,
    for helpers that several operations share."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.released: list[Release] = []

    def record(self, record: Record) -> None:
        self.records.append(record)

    def release(self, to: ParkedRequest, answer: object, if_failed: object) -> None:
        self.released.append(Release(to, answer, if_failed))

    def result(
        self, answer: Answer, if_failed: Answer | None = None
    ) -> CoordinatorResult[Record, Answer]:
        return CoordinatorResult(
            tuple(self.records), answer, tuple(self.released), if_failed
        )


ResultHook = Callable[[CoordinatorResult[Record, Any]], None]


class OrderedJournalWriter(Generic[Record]):
    """One journal's ordered group-commit writer (see the module docstring).

    :param write: appends a list of records with one write and one sync (blocking; run
        in ``run_write``); raises when nothing was stored.
    :param run_write: runs a blocking call in the write pool, answering a Deferred.
    :param reload: loads the coordinator's memory from the journal's view; None when a
        failed write should fail its own batch only.
    :param reopens: how many times the journal was reopened from disk so far.
    :param name: the journal's name, for the error its pending callers get.
    """

    def __init__(
        self,
        write: Callable[[list[Record]], None],
        run_write: Callable[..., defer.Deferred[Any]],
        reload: Callable[[], None] | None,
        *,
        reopens: Callable[[], int] = lambda: 0,
        name: str = "journal",
    ) -> None:
        self._write = write
        self._run_write = run_write
        self._reload = reload
        self._reopens = reopens
        self._name = name
        self._loaded_at = reopens()
        self._pending: list[tuple[Sequence[Record], defer.Deferred[None]]] = []
        self._running = False
        self._drained: list[defer.Deferred[None]] = []
        #: While a write's callbacks run: the completions of later writes wait in
        #: ``_late``, so callbacks fire in the order the records were submitted.
        self._firing = False
        self._late: list[Callable[[], None]] = []
        #: Writes started (each one sync), for tests and metrics.
        self.writes = 0

    def submit(self, records: Sequence[Record]) -> defer.Deferred[None]:
        """Fires once ``records`` are durable (at once when there are none); fails with
        the write's error, memory then reloaded from the journal."""
        return self.submit_many([records])[0]

    def submit_many(self, batches: Sequence[Sequence[Record]]) -> list[defer.Deferred[None]]:
        """Submit several results' records together: they land in the same write."""
        out: list[defer.Deferred[None]] = []
        for records in batches:
            d: defer.Deferred[None] = defer.Deferred()
            if records:
                self._pending.append((records, d))
            else:
                d.callback(None)
            out.append(d)
        if self._pending and not self._running:
            self._next()
        return out

    def submit_in_order(self, records: Sequence[Record]) -> defer.Deferred[None]:
        """As :meth:`submit`, but with no records it still fires only after every
        earlier submission is written (at once only when nothing is pending or being
        written). Without ``reload``, records are independent of each other, so such an
        empty submission succeeds even when the write it waited for failed."""
        if records or not (self._running or self._pending):
            return self.submit(records)
        d: defer.Deferred[None] = defer.Deferred()
        self._pending.append((records, d))
        return d

    def apply(self, result: CoordinatorResult[Record, Answer]) -> defer.Deferred[Answer]:
        """``result``'s answer, released once its records are durable."""
        answer = result.answer
        return self.submit(result.records).addCallback(lambda _: answer)

    def withdraw(self, d: defer.Deferred[None]) -> bool:
        """Take a submission no write has taken yet back out (its Deferred is left
        unfired, for the caller to answer); False when it is being written or done."""
        for i, (_, pending) in enumerate(self._pending):
            if pending is d:
                del self._pending[i]
                return True
        return False

    def drained(self) -> defer.Deferred[None]:
        """Fires once nothing is pending and no write runs."""
        d: defer.Deferred[None] = defer.Deferred()
        if self.idle:
            d.callback(None)
        else:
            self._drained.append(d)
        return d

    @property
    def idle(self) -> bool:
        return not self._running and not self._pending

    def _next(self) -> None:
        if not self._pending:
            self._running = False
            drained, self._drained = self._drained, []
            for d in drained:
                d.callback(None)
            return
        self._running = True
        batch, self._pending = self._pending, []
        records = [r for recs, _ in batch for r in recs]
        if not records:  # only in-order waiters: everything before them is written
            for _, d in batch:
                d.callback(None)
            self._next()
            return
        self.writes += 1

        def done(result: object) -> None:
            if self._firing:
                # A write that finished while the previous one's callbacks run (a
                # runner that writes at once): its callbacks follow, in order.
                self._late.append(lambda: done(result))
                return
            if isinstance(result, Failure):
                stored, failed, reason = [], batch, result
            else:
                stored, failed = batch, []
                reason = Failure(StorageError(f"the {self._name} was reopened from disk: retry"))
            if self._reload is None:
                # Independent records: only the failed batch fails, and of it only
                # the submissions that had records in it.
                stored = stored + [(recs, d) for recs, d in failed if not recs]
                failed = [(recs, d) for recs, d in failed if recs]
            elif failed or self._reopens() != self._loaded_at:
                failed = failed + self._pending
                self._pending = []
                self._loaded_at = self._reopens()
                self._reload()
            self._firing = True
            try:
                # The next write starts before this one's answers go out: running
                # them may take a while (a share fetch's answer is encoded and sent
                # from its callback), and the records waiting wait for nothing else.
                # (Only a write: in-order waiters alone would be answered at once,
                # ahead of this write's answers.)
                started = not failed and any(recs for recs, _ in self._pending)
                if started:
                    self._next()
                for _, d in stored:
                    d.callback(None)
                for _, d in failed:
                    d.errback(reason)
            finally:
                self._firing = False
            if not started:
                self._next()
            while self._late and not self._firing:
                self._late.pop(0)()

        self._run_write(self._write, records).addBoth(done)


class CoordinatorRuntime(Generic[Record]):
    """Applies a coordinator's results through one journal's ordered writer (see the
    module docstring). Reactor thread only.

    :param writer: the journal's ordered writer (shared with other users of the journal,
        so everything reaches it in one order).
    :param on_cancel: called when the caller of a parked request gives up (its Deferred
        is cancelled: the client went away); returns the coordinator's result of that.
    :param on_durable: called with each result once its records are durable, before
        its answers leave: a coordinator that installs its change only once it is
        durable (the transaction table) does it here, and starts the result's
        ``follow_ups``.
    """

    def __init__(
        self,
        writer: OrderedJournalWriter[Record],
        on_cancel: Callable[[ParkedRequest], CoordinatorResult[Record, None]],
        on_durable: ResultHook[Record] | None = None,
    ) -> None:
        self._writer = writer
        self._on_cancel = on_cancel
        self._on_durable = on_durable
        self._parked: dict[ParkedRequest, defer.Deferred[Any]] = {}

    def run(self, result: CoordinatorResult[Record, Answer]) -> defer.Deferred[Any]:
        """Make ``result``'s records durable, then give its answers; the caller's
        Deferred (held while ``result.answer`` is a :class:`ParkedRequest`)."""
        answer = result.answer
        own: defer.Deferred[Any]
        if isinstance(answer, ParkedRequest):
            own = defer.Deferred(lambda d: self._cancelled(answer, d))
            self._parked[answer] = own
        else:
            own = defer.Deferred()
        written = self._writer.submit_in_order(result.records)

        def durable(_: object) -> None:
            if self._on_durable is not None:
                self._on_durable(result)
            for r in result.released:
                self._give(r.to, r.answer)
            if not isinstance(answer, ParkedRequest):
                own.callback(answer)

        def failed(reason: Failure) -> None:
            for r in result.released:
                self._give(r.to, r.if_failed)
            if isinstance(answer, ParkedRequest):
                if result.if_failed is not None:
                    # Nothing that would answer it later starts: answer it now.
                    self._give(answer, result.if_failed)
            elif result.if_failed is not None:
                own.callback(result.if_failed)
            else:
                own.errback(reason)

        written.addCallbacks(durable, failed)
        return own

    @property
    def parked(self) -> int:
        """Requests held, for tests and metrics."""
        return len(self._parked)

    def _give(self, to: ParkedRequest, answer: object) -> None:
        d = self._parked.pop(to, None)
        if d is not None and not d.called:
            d.callback(answer)

    def _cancelled(self, parked: ParkedRequest, d: defer.Deferred[Any]) -> None:
        if self._parked.get(parked) is d:
            del self._parked[parked]
            self.run(self._on_cancel(parked))
