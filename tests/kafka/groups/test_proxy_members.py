"""brokerd.kafka.groups.proxy_members: the REST Proxy's member calls translated to the
coordinator's (topic names to IDs and back, commits and fetches by partition)."""

from __future__ import annotations

import uuid
from typing import Any, cast

from twisted.internet import defer

from brokerd.kafka.groups.consumer.coordinator import HeartbeatAnswer, HeartbeatInput
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.groups.proxy_members import ProxyMembers
from brokerd.proxy.group_face import MemberAnswer, MemberHeartbeat

from tests.deferreds import result_of

ORDERS, AUDIT = uuid.uuid4(), uuid.uuid4()
TOPICS = {"orders": (ORDERS, 4), "audit": (AUDIT, 1)}


class _Coordinator:
    def __init__(self, answer: HeartbeatAnswer) -> None:
        self.answer = answer
        self.beats: list[HeartbeatInput] = []
        self.commits: list[tuple[Any, ...]] = []
        self.fetches: list[Any] = []

    def consumer_heartbeat(self, request: HeartbeatInput, topics: Any) -> defer.Deferred[Any]:
        self.beats.append(request)
        return defer.succeed(self.answer)

    def commit_offsets(self, group: str, epoch: int, member: str,
                       entries: list[Any]) -> defer.Deferred[Any]:
        self.commits.append((group, epoch, member, entries))
        return defer.succeed([((t, p), 0) for t, p, *_ in entries])

    def fetch_offsets(self, group: str, partitions: Any) -> list[Any]:
        self.fetches.append((group, partitions))
        return [("orders", 0, 5, -1, "m", 0), ("orders", 1, -1, -1, "", 0),
                ("audit", 0, 7, -1, "", 3)]


def _members(answer: HeartbeatAnswer) -> tuple[ProxyMembers, _Coordinator]:
    coordinator = _Coordinator(answer)
    return ProxyMembers(cast(GroupCoordinator, coordinator), lambda: TOPICS), coordinator


def test_heartbeat_sends_owned_by_id_and_answers_assignment_by_name() -> None:
    answer = HeartbeatAnswer(0, member_id="m1", member_epoch=3, heartbeat_interval_ms=500,
                             assignment={ORDERS: frozenset({0, 2}), uuid.uuid4(): frozenset({1})})
    members, coordinator = _members(answer)
    beat = MemberHeartbeat(group_id="g", member_id="", member_epoch=0, topics=("orders",),
                           owned=frozenset({("orders", 1), ("gone", 0)}))
    got = result_of(members.heartbeat(beat))
    assert got == MemberAnswer(error_code=0, member_id="m1", member_epoch=3,
                               heartbeat_interval_ms=500,
                               assignment=frozenset({("orders", 0), ("orders", 2)}))
    sent = coordinator.beats[0]
    assert sent.owned == {ORDERS: frozenset({1})}
    assert sent.subscribed_topic_names == ("orders",)
    assert sent.may_describe("anything")


def test_heartbeat_without_assignment_or_member_id_keeps_the_beats() -> None:
    members, coordinator = _members(HeartbeatAnswer(25, "unknown member"))
    beat = MemberHeartbeat(group_id="g", member_id="m9", member_epoch=4)
    got = result_of(members.heartbeat(beat))
    assert (got.error_code, got.error_message, got.member_id, got.assignment) == (
        25, "unknown member", "m9", None)
    assert coordinator.beats[0].owned is None


def test_commit_and_committed_translate_partitions() -> None:
    members, coordinator = _members(HeartbeatAnswer(0))
    got = result_of(members.commit("g", "m", 2, {("orders", 1): (9, "x"), ("audit", 0): (3, "")}))
    assert got == {("audit", 0): 0, ("orders", 1): 0}
    assert coordinator.commits == [
        ("g", 2, "m", [("audit", 0, 3, -1, ""), ("orders", 1, 9, -1, "x")])]
    assert members.committed("g", {("orders", 1), ("orders", 0)}) == {("orders", 0): (5, "m")}
    assert coordinator.fetches == [("g", [("orders", 0), ("orders", 1)])]
    members.committed("g", None)
    assert coordinator.fetches[-1] == ("g", None)
