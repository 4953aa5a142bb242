"""The transaction coordinator's in-memory table of transactional ids, kept in step with
the durable transaction log.

- The table's journal writer
  (:class:`~brokerd.coordinator_runtime.OrderedJournalWriter`) writes the records
  of the coordinator's results (a new value of an id, :class:`TxnMetadata`, or
  :class:`Forget`) in the broker's write pool; changes of different ids made while a
  write runs share the next write and its fsync; a failed write fails the changes in
  it and no other.
- :meth:`TxnTable.replay` installs records in memory, and the coordinator runtime calls
  it only once they are durable: a failed write changes nothing, and every answer
  reflects durable state.
- Lookups by transactional id and by producer id (the produce verifier's question).
- A per-id count of operations in progress: the coordinator runs one operation per id
  at a time and answers the others CONCURRENT_TRANSACTIONS, as Kafka does while a state
  change is pending.

What this module does not do: decide transitions (``state.py`` checks them,
``operations.py`` chooses them) or run anything on a timer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from brokerd.coordinator_runtime import OrderedJournalWriter
from brokerd.kafka.txn.state import TxnMetadata, from_stored
from brokerd.storage.stores.txn_log import StoredTxn, TxnLog, encode_state

__all__ = ["Forget", "TxnRecord", "TxnTable", "writable"]


@attrs.frozen
class Forget:
    """The record that drops a transactional id (its tombstone in the log)."""

    transactional_id: str


#: What a transaction coordinator's result writes: an id's new value, or its tombstone.
TxnRecord = TxnMetadata | Forget


def _stored(record: TxnRecord) -> StoredTxn | str:
    return record.transactional_id if isinstance(record, Forget) else record.to_stored()


def writable(records: Iterable[TxnRecord]) -> bool:
    """Whether the log can encode every record. Checked before a result is submitted:
    refused in the write, it would fail other ids' changes with it."""
    try:
        for record in records:
            if isinstance(record, TxnMetadata):
                encode_state(record.to_stored())
    except ValueError:
        return False
    return True


class TxnTable:
    """Every transactional id's current :class:`TxnMetadata`. Reactor thread only.

    :param log: the open transaction log; its content is loaded at construction.
    :param run_blocking: ``run_blocking(f, *args, **kwargs) -> Deferred`` runs a blocking
        call off the reactor (the broker's write pool; tests pass a synchronous fake).
    """

    _log = Logger()

    def __init__(self, *, log: TxnLog, run_blocking: Callable[..., Deferred[Any]]) -> None:
        def write(records: Sequence[TxnRecord]) -> None:
            log.write_records([_stored(r) for r in records])

        #: The transaction log's ordered writer; independent records (no reload): a
        #: failed write fails its own batch, and memory never held its changes.
        self.writer: OrderedJournalWriter[TxnRecord] = OrderedJournalWriter(
            write, run_blocking, None, name="transaction log"
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

    def replay(self, records: Iterable[TxnRecord]) -> None:
        """Install durable records in memory, in their order."""
        for record in records:
            if isinstance(record, Forget):
                old = self._txns.pop(record.transactional_id, None)
                if old is not None and self._by_pid.get(old.producer_id) == old.transactional_id:
                    del self._by_pid[old.producer_id]
            else:
                self._install(record)

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
