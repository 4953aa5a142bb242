"""TxnStateService: the transaction coordinator and its log (``transactions.log``) as
one service: the coordinator starts with it, and at stop the log is closed only once the
coordinator has no operation in progress.

The wiring adds it under the broker core after the group state, so it stops first: its
completions still hand offsets to the group coordinator and write markers through the
core. It builds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.application import service
from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from brokerd.kafka.txn.coordinator import TransactionCoordinator
    from brokerd.storage.stores.txn_log import TxnLog


class TxnStateService(service.Service):
    """Starts and stops the transaction coordinator; closes its log after the stop."""

    def __init__(self, coordinator: TransactionCoordinator, txn_log: TxnLog) -> None:
        self._coordinator = coordinator
        self._txn_log = txn_log

    def startService(self) -> None:
        super().startService()  # type: ignore[no-untyped-call]
        self._coordinator.startService()

    def stopService(self) -> Deferred[None]:
        super().stopService()  # type: ignore[no-untyped-call]
        return Deferred.fromCoroutine(self._stop())

    async def _stop(self) -> None:
        await self._coordinator.stopService()
        self._txn_log.close()
