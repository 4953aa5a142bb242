"""Share groups as the Kafka listener holds them, and their state as a child service of
the broker core.

:class:`ShareGroups` pairs the share group coordinator (members, sessions) with the
records engine, and answers ListGroups' and DeleteGroups' view of share groups.

:class:`ShareStateService` starts the records engine's timers with the broker and, at
stop, stops the share group coordinator (its session timers), then the records engine,
then closes ``share-state.log``; it stops before the core stops its pools, and every
change it answered is already durable. What it does not do: build any of them (the
service wiring does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
from twisted.application import service

from brokerd.core.share.service import ShareService
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.share.coordinator import ShareGroupCoordinator

if TYPE_CHECKING:
    from brokerd.storage.stores.share_state import ShareStateStore

__all__ = ["ShareGroups", "ShareStateService"]


@attrs.frozen
class ShareGroups:
    """What the handlers use: the coordinator (members, sessions) and the records."""

    coordinator: ShareGroupCoordinator
    service: ShareService

    def listing(self) -> list[tuple[str, str]]:
        """Every share group (with members, or with records state) and its state."""
        groups = self.coordinator.groups
        names = set(groups) | set(self.service.engine.groups())
        return [(g, groups[g].state if g in groups else "Empty") for g in sorted(names)]

    def exists(self, group_id: str) -> bool:
        """Whether a share group has this id (members, or records state kept)."""
        return group_id in self.coordinator.groups or self.service.engine.has_group(group_id)

    async def delete(self, group_id: str) -> int | None:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members, else its
        state is forgotten (durably); None when no share group has that id."""
        if not self.exists(group_id):
            return None
        if not self.coordinator.delete_group(group_id):
            return int(ErrorCode.NON_EMPTY_GROUP)
        await self.service.delete_group(group_id)
        return 0


class ShareStateService(service.Service):
    """Share groups' coordinator and records engine, in the broker core's service tree."""

    def __init__(self, shares: ShareGroups, store: ShareStateStore) -> None:
        self._shares = shares
        self._store = store

    def startService(self) -> None:
        super().startService()  # type: ignore[no-untyped-call]
        self._shares.service.start()

    def stopService(self) -> None:
        super().stopService()  # type: ignore[no-untyped-call]
        self._shares.coordinator.stop()
        self._shares.service.stop()
        self._store.close()
