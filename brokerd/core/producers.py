# -*- test-case-name: tests.test_broker -*-
"""Idempotent producers on the reactor side: admission, retries in flight, snapshots.

The rules and the state are pure and live in :mod:`brokerd.storage.log.producer_state`. A
:class:`ProducerGuard` adds what needs the reactor, for one partition: a retry that
arrives while its original is still being written waits for the original's offsets
instead of being appended again, and fails if the original fails. :func:`write_snapshots`
writes many partitions' tables to disk in one write-pool job, skipping those with no
append since their last snapshot.

It never appends and never reads the log; the core passes it the headers of a produce
and the outcome of the append.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.core.interfaces import Runner
from brokerd.errors import BrokerError
from brokerd.storage.log.producer_state import (
    ProducerBatch,
    ProducerStateTable,
    SnapshotEntry,
    write_snapshot,
)
from brokerd.storage.record.header import BatchHeader
from brokerd.storage.types import AppendInfo

_log = Logger()


class ProducerGuard:
    """One partition's producer table plus the retries waiting on an in-flight batch.

    :param path: the partition's directory, where its snapshot is written.
    :param txn_state: the log's ``(log end, ongoing transactions)``, blocking (called in
        the write pool when a snapshot is written; see ``PartitionLog.txn_snapshot``).
    """

    def __init__(
        self,
        path: str,
        table: ProducerStateTable | None = None,
        *,
        txn_state: Callable[[], tuple[int, dict[int, int]]] | None = None,
    ) -> None:
        self.path = path
        self.txn_state = txn_state
        self.table = table if table is not None else ProducerStateTable()
        self._waiting: dict[ProducerBatch, list[defer.Deferred[AppendInfo]]] = {}
        #: ``acked_end`` of the last snapshot written; equal means nothing new to write.
        self.snapshot_end = -1

    def admit(
        self, headers: Sequence[BatchHeader]
    ) -> ProducerBatch | defer.Deferred[AppendInfo]:
        """Check a produce: the batch to append (now remembered), or the answer of the
        stored twin of a retry. Raises what :meth:`ProducerStateTable.check` raises."""
        duplicate = self.table.check(headers)
        if duplicate is None:
            return self.table.remember(headers)
        if duplicate.result is not None:
            return defer.succeed(duplicate.result)
        d: defer.Deferred[AppendInfo] = defer.Deferred()
        self._waiting.setdefault(duplicate, []).append(d)
        return d

    def track(
        self, batch: ProducerBatch, appended: defer.Deferred[AppendInfo]
    ) -> defer.Deferred[AppendInfo]:
        """Settle ``batch`` and its waiting retries when its append fires (before the
        append's own callers hear of it)."""

        def written(info: AppendInfo) -> AppendInfo:
            batch.result = info
            for d in self._waiting.pop(batch, ()):
                d.callback(info)
            return info

        def failed(failure: Failure) -> Failure:
            self.table.forget(batch)
            for d in self._waiting.pop(batch, ()):
                d.errback(failure)
            return failure

        return appended.addCallbacks(written, failed)

    def snapshot_due(self, acked_end: int) -> bool:
        # State changes only with appends, so an unmoved end means an unchanged state.
        return bool(self.table) and acked_end != self.snapshot_end


def write_snapshots(
    due: Sequence[tuple[ProducerGuard, int]], run_write: Runner
) -> defer.Deferred[None]:
    """Write each guard's table (taken now, in the reactor) as the state of the log
    below its end offset, in one write-pool job. A failure is logged, not raised: a
    missing snapshot only means a longer replay at the next start."""
    jobs: list[tuple[ProducerGuard, int, dict[int, SnapshotEntry]]] = [
        (guard, end, guard.table.snapshot()) for guard, end in due
    ]

    def write_all() -> list[str | None]:
        problems: list[str | None] = []
        for guard, end, producers in jobs:
            try:
                # Taken here, under the log's write lock: the ongoing transactions of the
                # log below the end offset it is paired with.
                txns = guard.txn_state() if guard.txn_state is not None else None
                write_snapshot(guard.path, end, producers, txns)
                problems.append(None)
            except (OSError, BrokerError) as e:
                problems.append(f"{guard.path}: {e}")
        return problems

    def report(problems: list[str | None]) -> None:
        for (guard, end, _), problem in zip(jobs, problems, strict=True):
            if problem is None:
                guard.snapshot_end = end
            else:
                _log.warn("producer-state snapshot not written: {p}", p=problem)

    return run_write(write_all).addCallback(report)
