"""brokerd.kafka.groups.share.state_service: share groups' listing, existence and
deletion over coordinator and records, and the service's stop order."""

from __future__ import annotations

from typing import Any, cast

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.share.coordinator import ShareGroup, ShareGroupCoordinator
from brokerd.kafka.groups.share.state_service import ShareGroups, ShareStateService

from tests.deferreds import result_of


class _Engine:
    def __init__(self, groups: list[str]) -> None:
        self._groups = groups

    def groups(self) -> list[str]:
        return list(self._groups)

    def has_group(self, group: str) -> bool:
        return group in self._groups


class _Service:
    def __init__(self, groups: list[str], calls: list[str]) -> None:
        self.engine = _Engine(groups)
        self.calls = calls

    async def delete_group(self, group: str) -> None:
        self.calls.append(f"delete {group}")
        self.engine._groups.remove(group)

    def start(self) -> None:
        self.calls.append("service start")

    def stop(self) -> None:
        self.calls.append("service stop")


class _Coordinator:
    def __init__(self, groups: dict[str, ShareGroup], calls: list[str]) -> None:
        self.groups = groups
        self.calls = calls

    def delete_group(self, group_id: str) -> bool:
        return not self.groups.get(group_id, ShareGroup(group_id)).members

    def stop(self) -> None:
        self.calls.append("coordinator stop")


class _Store:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def close(self) -> None:
        self.calls.append("store close")


def _shares(calls: list[str]) -> ShareGroups:
    busy = ShareGroup("busy", members={"m": cast(Any, object())})
    coordinator = _Coordinator({"busy": busy, "idle": ShareGroup("idle")}, calls)
    service = _Service(["idle", "kept"], calls)
    return ShareGroups(cast(ShareGroupCoordinator, coordinator), cast(Any, service))


def test_listing_joins_members_and_records_state() -> None:
    shares = _shares([])
    assert shares.listing() == [("busy", "Stable"), ("idle", "Empty"), ("kept", "Empty")]
    assert shares.exists("kept") and shares.exists("busy")
    assert not shares.exists("other")


def test_delete_refuses_members_forgets_others_and_ignores_unknown() -> None:
    calls: list[str] = []
    shares = _shares(calls)
    assert result_of(shares.delete("other")) is None
    assert result_of(shares.delete("busy")) == int(ErrorCode.NON_EMPTY_GROUP)
    assert result_of(shares.delete("kept")) == 0
    assert calls == ["delete kept"]
    assert not shares.exists("kept")


def test_service_starts_records_and_stops_coordinator_records_store_in_order() -> None:
    calls: list[str] = []
    service = ShareStateService(_shares(calls), cast(Any, _Store(calls)))
    service.startService()
    assert calls == ["service start"]
    service.stopService()
    assert calls[1:] == ["coordinator stop", "service stop", "store close"]
    assert not service.running
