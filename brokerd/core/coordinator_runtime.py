# -*- test-case-name: tests.core.test_coordinator_runtime -*-
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

Its users: the share groups' records engine (:mod:`brokerd.core.share.service`, with
``reload``), the group coordinator's offsets journal
(:class:`~brokerd.kafka.groups.store.CommitQueue`) and the transaction table
(:class:`~brokerd.kafka.txn.table.TxnTable`), both without. What it does not do:
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

__all__ = ["CoordinatorResult", "OrderedJournalWriter"]

Record = TypeVar("Record")
Answer = TypeVar("Answer")


@attrs.frozen
class CoordinatorResult(Generic[Record, Answer]):
    """What one coordinator operation did: ``records`` to make durable, then ``answer``
    to give (released only after the records are synced)."""

    records: tuple[Record, ...]
    answer: Answer


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
        self.writes += 1

        def done(result: object) -> None:
            if isinstance(result, Failure):
                stored, failed, reason = [], batch, result
            else:
                stored, failed = batch, []
                reason = Failure(StorageError(f"the {self._name} was reopened from disk: retry"))
            if self._reload is None:
                pass  # independent records: only the failed batch fails
            elif failed or self._reopens() != self._loaded_at:
                failed = failed + self._pending
                self._pending = []
                self._loaded_at = self._reopens()
                self._reload()
            for _, d in stored:
                d.callback(None)
            for _, d in failed:
                d.errback(reason)
            self._next()

        self._run_write(self._write, records).addBoth(done)
