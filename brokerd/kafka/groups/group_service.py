"""GroupStateService: the group coordinator, its offsets store and the producer-id
allocator as one service, so that they stop in one order: the coordinator's last journal
writes first (the Stable generations that let groups survive a restart), then the
offsets store, then the producer-id journal.

It belongs under the broker core's service (the wiring puts it there): it stops before
the core closes the log directory and stops its pools, so those last writes still have
the write pool. It builds nothing and starts nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.application import service
from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from brokerd.kafka.groups.coordinator import GroupCoordinator
    from brokerd.storage.stores.offsets import OffsetStore
    from brokerd.storage.stores.producer_ids import ProducerIdAllocator


class GroupStateService(service.Service):
    """Stops the group coordinator, then closes its offsets store and the producer-id
    allocator."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        offsets: OffsetStore,
        producer_ids: ProducerIdAllocator,
    ) -> None:
        self._coordinator = coordinator
        self._offsets = offsets
        self._producer_ids = producer_ids

    def stopService(self) -> Deferred[None]:
        super().stopService()  # type: ignore[no-untyped-call]
        return Deferred.fromCoroutine(self._stop())

    async def _stop(self) -> None:
        await self._coordinator.stop()
        self._offsets.close()
        self._producer_ids.close()
