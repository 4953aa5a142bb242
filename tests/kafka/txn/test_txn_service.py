"""brokerd.kafka.txn.txn_service: the coordinator starts with the service, and its log
closes only after the coordinator stopped."""

from __future__ import annotations

from typing import Any, cast

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.txn.txn_service import TxnStateService


class FakeCoordinator:
    def __init__(self, calls: list[str]) -> None:
        self._calls = calls
        self.stopped: Deferred[None] = Deferred()

    def startService(self) -> None:
        self._calls.append("coordinator.start")

    def stopService(self) -> Deferred[None]:
        self._calls.append("coordinator.stop")
        return self.stopped


class FakeLog:
    def __init__(self, calls: list[str]) -> None:
        self._calls = calls

    def close(self) -> None:
        self._calls.append("log.close")


class TxnStateServiceTests(SynchronousTestCase):
    def test_start_then_stop_in_order(self) -> None:
        calls: list[str] = []
        coordinator = FakeCoordinator(calls)
        svc = TxnStateService(cast(Any, coordinator), cast(Any, FakeLog(calls)))
        svc.startService()
        self.assertEqual(calls, ["coordinator.start"])
        done = svc.stopService()
        # An operation in progress keeps the log open.
        self.assertEqual(calls, ["coordinator.start", "coordinator.stop"])
        self.assertNoResult(done)
        coordinator.stopped.callback(None)
        self.assertEqual(calls, ["coordinator.start", "coordinator.stop", "log.close"])
        self.successResultOf(done)
