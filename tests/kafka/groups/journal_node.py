"""A group coordinator on a real offsets journal that a test restarts: what the
persistence tests of consumer groups and streams groups share."""

from __future__ import annotations

from pathlib import Path

from twisted.internet import defer, task

from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.storage.stores.offsets import OffsetStore


class JournalNode:
    """``offsets.log`` under ``directory`` and a coordinator on it, on a fake clock."""

    def __init__(self, directory: Path) -> None:
        self.path = str(directory / "offsets.log")
        self.start()

    def start(self) -> None:
        self.clock = task.Clock()
        self.store = OffsetStore.open(self.path)
        self.coord = GroupCoordinator(clock=self.clock, offsets=self.store,
                                      run_blocking=defer.maybeDeferred)

    def restart(self) -> None:
        """Stop the coordinator, close the journal, and open both afresh (new clock)."""
        self.coord.stop()
        self.store.close()
        self.start()
