"""Bringing offline journal stores back: the consumer-offsets journal, the transaction log
and the producer-id block go offline after a failed fsync
(``brokerd/storage/journal/faults.py``); this service polls them and has each one reopen
itself from disk, in the write pool, once its backoff says a retry is due.

What it does: :class:`StoreRecovery` calls ``retry_reopen`` of every offline store every
:data:`~brokerd.core.timers.OFFLINE_CHECK_SECONDS` (the same poll as offline
partitions; each store keeps its own backoff), one attempt per store at a time, and lists
the offline stores for ``/readyz`` (:meth:`StoreRecovery.problems`). What it does not do:
decide when a store goes offline or how it reopens (the store does both), or close the
stores (their owners do).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from twisted.application import service
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.clock import Clock
from brokerd.core.timers import OFFLINE_CHECK_SECONDS, PeriodicTasks
from brokerd.storage.journal.engine import JournalStore

__all__ = ["StoreRecovery"]


class StoreRecovery(service.Service):
    """Polls offline stores and reopens them in the write pool (reactor thread).

    :param stores: the stores to watch.
    :param clock: the reactor or a ``task.Clock`` (the poll's timer).
    :param run_blocking: ``run_blocking(f) -> Deferred`` runs ``f`` in the write pool.
    """

    _log = Logger()

    def __init__(
        self,
        stores: Sequence[JournalStore],
        *,
        clock: Clock,
        run_blocking: Callable[..., Deferred[Any]],
        poll_seconds: float = OFFLINE_CHECK_SECONDS,
    ) -> None:
        self._stores = tuple(stores)
        self._timers = PeriodicTasks(clock)
        self._run_blocking = run_blocking
        self._poll_seconds = poll_seconds
        self._reopening: set[int] = set()

    @property
    def stores(self) -> tuple[JournalStore, ...]:
        return self._stores

    def startService(self) -> None:
        super().startService()
        self._timers.every(self._poll_seconds, self.poll)

    def stopService(self) -> None:
        super().stopService()
        self._timers.stop()

    def poll(self) -> None:
        """Start a reopen attempt for every offline store without one running."""
        for index, store in enumerate(self._stores):
            if store.journal.offline_reason is None or index in self._reopening:
                continue
            self._reopening.add(index)
            d = self._run_blocking(store.retry_reopen)
            d.addErrback(self._unexpected, store)
            d.addBoth(self._finished, index)

    def _finished(self, _: object, index: int) -> None:
        self._reopening.discard(index)

    def _unexpected(self, failure: Failure, store: JournalStore) -> None:
        # The store logs its own expected failures; anything reaching here is a bug.
        self._log.failure("reopening the {name} failed", failure, name=store.journal.name)

    def problems(self) -> list[str]:
        """``/readyz`` lines: one per offline store."""
        return [
            f"{store.journal.name} offline (reopening from disk): {reason}"
            for store in self._stores
            if (reason := store.journal.offline_reason) is not None
        ]
