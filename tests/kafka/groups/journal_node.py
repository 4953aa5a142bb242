"""A group coordinator on a real offsets journal that a test restarts: what the
persistence tests of consumer groups and streams groups share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet import defer, task
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.storage.stores.offsets import OffsetStore


def run_inline(f: Any, *args: Any) -> Deferred[Any]:
    """The coordinator's blocking work run at once (a fake clock drives the test)."""
    try:
        return defer.succeed(f(*args))
    except Exception:
        return defer.fail(Failure())


class JournalNode:
    """``offsets.log`` under ``directory`` and a coordinator on it, on a fake clock."""

    def __init__(self, directory: Path) -> None:
        self.path = str(directory / "offsets.log")
        self.start()

    def start(self) -> None:
        self.clock = task.Clock()
        self.store = OffsetStore.open(self.path)
        self.coord = GroupCoordinator(clock=self.clock, offsets=self.store,
                                      run_blocking=run_inline)

    def restart(self) -> None:
        """Stop the coordinator, close the journal, and open both afresh (new clock)."""
        self.coord.stop()
        self.store.close()
        self.start()
