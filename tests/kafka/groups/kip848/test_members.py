"""brokerd.kafka.groups.kip848.members: the member rules consumer and streams groups
share, on a streams group (the rules take any group with the fields they read) and a
fake clock."""

from __future__ import annotations

import pytest
from twisted.internet import task

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.kip848.members import (
    STATIC_LEAVE_EPOCH,
    HeartbeatRefused,
    MemberTimers,
    check_epoch,
    commit_error,
    delete_empty,
    fetch_error,
    known_member,
    leaves_for_now,
    put_member,
    rejoining,
    remove_member,
    take_fields,
    txn_commit_error,
)
from brokerd.kafka.groups.streams.state import (
    StreamsGroup,
    StreamsGroupState,
    StreamsMember,
    Tasks,
)


def _group() -> StreamsGroup:
    group = StreamsGroup("g", group_epoch=5, assignment_epoch=5)
    put_member(group, StreamsMember("m1", member_epoch=5))
    put_member(group, StreamsMember("s1", instance_id="i1", member_epoch=5))
    group.target["s1"] = Tasks(frozenset({("a", 0)}))
    return group


def _refused(call: object) -> ErrorCode:
    with pytest.raises(HeartbeatRefused) as refused:
        call()  # type: ignore[operator]
    return refused.value.code


def test_known_member_checks_member_and_instance_ids() -> None:
    group = _group()
    assert known_member(group, "m1", None).member_id == "m1"
    assert known_member(group, "s1", "i1").member_id == "s1"
    assert _refused(lambda: known_member(group, "zz", None)) is ErrorCode.UNKNOWN_MEMBER_ID
    assert _refused(lambda: known_member(group, "s1", "i9")) is ErrorCode.UNKNOWN_MEMBER_ID
    assert _refused(lambda: known_member(group, "m1", "i1")) is ErrorCode.FENCED_INSTANCE_ID


def test_check_epoch_passes_current_or_previous_when_owning_no_more() -> None:
    check_epoch(5, 5, 4, lambda: False, group_kind="streams group", holdings="tasks")
    check_epoch(4, 5, 4, lambda: True, group_kind="streams group", holdings="tasks")
    with pytest.raises(HeartbeatRefused, match="smaller member epoch") as smaller:
        check_epoch(4, 5, 4, lambda: False, group_kind="streams group", holdings="tasks")
    assert smaller.value.code is ErrorCode.FENCED_MEMBER_EPOCH
    with pytest.raises(HeartbeatRefused, match=r"greater member epoch .*all its partitions"):
        check_epoch(6, 5, 4, lambda: True, group_kind="consumer group", holdings="partitions")


def test_a_static_member_back_under_a_new_id_takes_its_place() -> None:
    group = _group()
    timers = MemberTimers(task.Clock(), lambda *_: None, holdings="tasks")
    assert _refused(lambda: rejoining(group, "s2", "i1", timers, start_over=lambda m: None,
                                      max_size=10, group_kind="streams group")
                    ) is ErrorCode.UNRELEASED_INSTANCE_ID
    assert leaves_for_now(group.members["s1"], STATIC_LEAVE_EPOCH)
    assert not leaves_for_now(group.members["m1"], -1)
    back = rejoining(group, "s2", "i1", timers, start_over=lambda m: None, max_size=10,
                     group_kind="streams group")
    assert back is not None and back.member_id == "s2" and back.member_epoch == 5
    assert "s1" not in group.members and group.members["s2"] is back
    assert group.target == {"s2": Tasks(frozenset({("a", 0)}))}
    assert group.group_epoch == 5


def test_rejoining_known_new_and_full() -> None:
    group = _group()
    timers = MemberTimers(task.Clock(), lambda *_: None, holdings="tasks")
    cleared: list[str] = []
    known = rejoining(group, "m1", None, timers, start_over=lambda m: cleared.append(m.member_id),
                      max_size=10, group_kind="streams group")
    assert known is group.members["m1"] and known.member_epoch == 0 and cleared == ["m1"]
    assert rejoining(group, "new", None, timers, start_over=lambda m: None, max_size=3,
                     group_kind="streams group") is None
    with pytest.raises(HeartbeatRefused, match="maximum capacity of 2 members") as full:
        rejoining(group, "new", None, timers, start_over=lambda m: None, max_size=2,
                  group_kind="streams group")
    assert full.value.code is ErrorCode.GROUP_MAX_SIZE_REACHED


def test_timers_expire_members_and_removal_stops_them() -> None:
    clock = task.Clock()
    expired: list[tuple[str, str, str]] = []
    timers = MemberTimers(clock, lambda *a: expired.append(a), holdings="tasks")
    group = _group()
    member = group.members["s1"]
    member.rebalance_timeout_ms = 2000
    timers.arm_session("g", member, 1000)
    timers.arm_revocation("g", member)
    clock.advance(1)
    assert expired == [("g", "s1", "session timed out")]
    clock.advance(1)
    assert expired[1] == ("g", "s1", "did not revoke its tasks within its rebalance timeout")
    timers.arm_session("g", member, 1000)
    remove_member(group, member)
    clock.advance(5)
    assert len(expired) == 2
    assert "s1" not in group.members and "i1" not in group.static_members
    assert "s1" not in group.target and group.group_epoch == 6


def test_offset_checks_and_delete() -> None:
    group = _group()
    mismatch = ErrorCode.STALE_MEMBER_EPOCH
    assert commit_error(None, "m1", 5, mismatch) is None
    assert commit_error(group, "m1", 5, mismatch) is ErrorCode.NONE
    assert commit_error(group, "m1", 4, mismatch) is mismatch
    assert commit_error(group, "zz", 5, mismatch) is ErrorCode.UNKNOWN_MEMBER_ID
    assert commit_error(group, "", -1, mismatch) is ErrorCode.UNKNOWN_MEMBER_ID
    assert txn_commit_error(group, "", -1) is ErrorCode.NONE
    assert txn_commit_error(group, "m1", 3) is ErrorCode.ILLEGAL_GENERATION
    assert fetch_error(group, None, 3) is ErrorCode.NONE
    assert fetch_error(group, "m1", 3) is ErrorCode.STALE_MEMBER_EPOCH
    groups = {"g": group, "e": StreamsGroup("e")}
    assert delete_empty(groups, "x", StreamsGroupState.DEAD) is ErrorCode.GROUP_ID_NOT_FOUND
    assert delete_empty(groups, "g", StreamsGroupState.DEAD) is ErrorCode.NON_EMPTY_GROUP
    empty = delete_empty(groups, "e", StreamsGroupState.DEAD)
    assert isinstance(empty, StreamsGroup) and empty.state is StreamsGroupState.DEAD
    assert list(groups) == ["g"]
    assert commit_error(StreamsGroup("x"), "", -1, mismatch) is ErrorCode.NONE


def test_take_fields_keeps_what_the_heartbeat_leaves_out() -> None:
    member = StreamsMember("m", rebalance_timeout_ms=100, client_id="c", client_host="h")

    class Beat:
        rebalance_timeout_ms = -1
        instance_id = None
        client_id = ""
        client_host = "/10.0.0.2"

    take_fields(member, Beat())
    assert (member.rebalance_timeout_ms, member.instance_id, member.client_id,
            member.client_host) == (100, None, "c", "/10.0.0.2")
