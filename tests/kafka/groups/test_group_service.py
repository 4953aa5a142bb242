"""brokerd.kafka.groups.group_service: the group state stops in its one order."""

from __future__ import annotations

from typing import Any, cast

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.groups.group_service import GroupStateService


class Recorder:
    """Stands in for the coordinator and the two stores: records what is called when."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.coordinator_stopped: Deferred[None] = Deferred()

    def stop(self) -> Deferred[None]:
        self.calls.append("coordinator.stop")
        return self.coordinator_stopped


class Closable:
    def __init__(self, name: str, calls: list[str]) -> None:
        self._name = name
        self._calls = calls

    def close(self) -> None:
        self._calls.append(f"{self._name}.close")


class GroupStateServiceTests(SynchronousTestCase):
    def test_stores_close_after_the_coordinator_stopped(self) -> None:
        rec = Recorder()
        svc = GroupStateService(
            cast(Any, rec), cast(Any, Closable("offsets", rec.calls)),
            cast(Any, Closable("producer_ids", rec.calls)),
        )
        svc.startService()
        done = svc.stopService()
        # The coordinator's last journal writes are still running: nothing closed yet.
        self.assertEqual(rec.calls, ["coordinator.stop"])
        self.assertNoResult(done)
        rec.coordinator_stopped.callback(None)
        self.assertEqual(
            rec.calls, ["coordinator.stop", "offsets.close", "producer_ids.close"]
        )
        self.successResultOf(done)
        self.assertFalse(svc.running)
