"""The transaction coordinator's in-memory table of transactional ids, kept in step with
the durable transaction log.

- :meth:`TxnTable.persist` writes a new value of one id to the log (in a worker thread
  through the injected ``run_blocking``) and installs it in memory only once the write
  is durable, so a failed write changes nothing and every answer reflects durable state.
  Writes go through the coordinator runtime's ordered writer
  (:class:`~brokerd.core.coordinator_runtime.OrderedJournalWriter`): changes of
  different ids made while a write runs share the next write and its fsync; a failed
  write fails the changes in it and no other.
- Lookups by transactional id and by producer id (the produce verifier's question).
- A per-id count of operations in progress: the coordinator runs one operation per id
  at a time and answers the others CONCURRENT_TRANSACTIONS, as Kafka does while a state
  change is pending.

What this module does not do: decide transitions (``txn_state.py`` checks them,
``transactions.py`` chooses them) or run anything on a timer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from brokerd.core.coordinator_runtime import CoordinatorResult, OrderedJournalWriter
from brokerd.kafka.txn.state import TxnMetadata, from_stored
from brokerd.storage.stores.txn_log import StoredTxn, TxnLog, encode_state

__all__ = ["TxnTable"]


class TxnTable:
    """Every transactional id's current :class:`TxnMetadata`. Reactor thread only.

    :param log: the open transaction log; its content is loaded at construction.
    :param run_blocking: ``run_blocking(f, *args, **kwargs) -> Deferred`` runs a blocking
        call off the reactor (the broker's write pool; tests pass a synchronous fake).
    """

    _log = Logger()

    def __init__(self, *, log: TxnLog, run_blocking: Callable[..., Deferred[Any]]) -> None:
        self._journal: OrderedJournalWriter[StoredTxn | str] = OrderedJournalWriter(
            log.write_records, run_blocking, None, name="transaction log"
        )
        self._txns: dict[str, TxnMetadata] = {}
        self._by_pid: dict[int, str] = {}
        self._busy: Counter[str] = Counter()
        for tid, stored in sorted(log.transactions().items()):
            try:
                self._install(from_stored(stored))
            except ValueError as exc:  # only a hand-edited file can hold such a record
                self._log.error("transaction log: ignoring {tid!r}: {exc}", tid=tid, exc=exc)

    # -- lookups ------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def by_producer_id(self, producer_id: int) -> TxnMetadata | None:
        tid = self._by_pid.get(producer_id)
        return None if tid is None else self._txns.get(tid)

    def values(self) -> list[TxnMetadata]:
        """Every id's metadata, sorted by transactional id."""
        return [self._txns[tid] for tid in sorted(self._txns)]

    def __len__(self) -> int:
        return len(self._txns)

    # -- one operation per id -----------------------------------------------------------

    def busy(self, transactional_id: str) -> bool:
        return self._busy[transactional_id] > 0

    def hold(self, transactional_id: str) -> None:
        self._busy[transactional_id] += 1

    def release(self, transactional_id: str) -> None:
        self._busy[transactional_id] -= 1
        if self._busy[transactional_id] <= 0:
            del self._busy[transactional_id]

    # -- durable changes ----------------------------------------------------------------

    def persist(self, meta: TxnMetadata) -> Deferred[TxnMetadata]:
        """Write ``meta`` to the log, then install it; fires with it (errback: the write
        failed and memory still holds the previous value)."""
        stored = meta.to_stored()
        try:
            # Refused here, not in the write: it would fail other ids' changes with it.
            encode_state(stored)
        except ValueError:
            return defer.fail()
        # The change is the result of the coordinator's decision: one record, and the
        # new value as the answer, installed once the record is durable.
        d = self._journal.apply(CoordinatorResult((stored,), meta))

        def installed(durable: TxnMetadata) -> TxnMetadata:
            self._install(durable)
            return durable

        return d.addCallback(installed)

    def forget(self, transactional_id: str) -> Deferred[None]:
        """Write the id's tombstone, then drop it from memory."""
        d = self._journal.apply(CoordinatorResult((transactional_id,), None))

        def dropped(_: None) -> None:
            old = self._txns.pop(transactional_id, None)
            if old is not None and self._by_pid.get(old.producer_id) == transactional_id:
                del self._by_pid[old.producer_id]

        return d.addCallback(dropped)

    def _install(self, meta: TxnMetadata) -> None:
        old = self._txns.get(meta.transactional_id)
        if (
            old is not None
            and old.producer_id != meta.producer_id
            and self._by_pid.get(old.producer_id) == meta.transactional_id
        ):
            del self._by_pid[old.producer_id]
        self._txns[meta.transactional_id] = meta
        self._by_pid[meta.producer_id] = meta.transactional_id
