"""What the operator surface reads of the transaction coordinator, as typed Protocols:
the coordinator (``brokerd.kafka.txn``) satisfies them, and the service wiring
(``brokerd/app/wiring.py``) hands it to the metrics' transaction collector and to the
readiness check of the start-up completion, so nothing there imports the Kafka listener.

What this module does not do: implement any of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class ListedTxnView(Protocol):
    """One transactional id as ListTransactions lists it (a
    :class:`~brokerd.kafka.txn.types.TxnListing`)."""

    @property
    def transactional_id(self) -> str: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def state(self) -> str: ...


class TxnListingFace(Protocol):
    """The coordinator's listing of transactional ids (from memory). Implemented by
    :class:`~brokerd.kafka.txn.coordinator.TransactionCoordinator` (the operator package
    does not import the Kafka listener)."""

    def list_transactions(
        self, state_filters: Sequence[str], producer_id_filters: Sequence[int]
    ) -> Sequence[ListedTxnView]:
        """Those whose latest transaction is in one of ``state_filters`` and whose
        producer id is one of ``producer_id_filters`` (empty filters match all)."""
        ...


__all__ = ["ListedTxnView", "TxnListingFace"]
