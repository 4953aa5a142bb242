"""brokerd.kafka.groups.streams.state: task sets, and the group state derived from its
content through the transition table."""

from __future__ import annotations

import pytest

from brokerd.fsm import InvalidTransition
from brokerd.kafka.groups.streams.state import (
    MemberState,
    StreamsGroup,
    StreamsGroupState,
    StreamsMember,
    Tasks,
    task_map,
    task_set,
)
from brokerd.kafka.groups.streams.topology import (
    ConfiguredTopology,
    Problem,
    TopologyStatus,
)


def test_task_set_and_task_map_are_inverse() -> None:
    tasks = {"b": frozenset({1}), "a": frozenset({0, 2})}
    flat = task_set(tasks)
    assert flat == {("a", 0), ("a", 2), ("b", 1)}
    back = task_map(flat)
    assert back == tasks
    assert list(back) == ["a", "b"]


def test_tasks_set_algebra() -> None:
    x = Tasks(frozenset({("s", 0), ("s", 1)}), standby=frozenset({("t", 0)}))
    y = Tasks(frozenset({("s", 1)}), warmup=frozenset({("t", 0)}))
    assert x.meet(y) == Tasks(frozenset({("s", 1)}))
    assert x.minus(y) == Tasks(frozenset({("s", 0)}), standby=frozenset({("t", 0)}))
    assert x.union(y).all() == {("s", 0), ("s", 1), ("t", 0)}
    assert not Tasks() and bool(y)


def _group() -> StreamsGroup:
    group = StreamsGroup("g", group_epoch=2, assignment_epoch=2,
                         configured=ConfiguredTopology({"s": 2}))
    group.members["m"] = StreamsMember("m", member_epoch=2)
    return group


def test_derived_state_follows_the_content() -> None:
    assert StreamsGroup("g").derived_state() is StreamsGroupState.EMPTY
    group = _group()
    assert group.derived_state() is StreamsGroupState.STABLE
    group.members["m"].state = MemberState.UNREVOKED_TASKS
    assert group.derived_state() is StreamsGroupState.RECONCILING
    group.group_epoch = 3
    assert group.derived_state() is StreamsGroupState.ASSIGNING
    group.configured = ConfiguredTopology(
        {}, problems=(Problem(TopologyStatus.MISSING_SOURCE_TOPICS, "t"),))
    assert group.derived_state() is StreamsGroupState.NOT_READY
    group.configured = None
    assert group.derived_state() is StreamsGroupState.NOT_READY


def test_owners_and_holders_count_revoking_tasks() -> None:
    group = _group()
    group.members["m"].assigned = Tasks(frozenset({("s", 0)}))
    group.members["n"] = StreamsMember("n", revoking=Tasks(frozenset({("s", 1)})))
    assert group.active_owner(("s", 0)) == "m"
    assert group.active_owner(("s", 1)) == "n"
    assert group.active_owner(("s", 2)) is None
    assert sorted(group.holders()) == [("m", ("s", 0)), ("n", ("s", 1))]


def test_refresh_state_moves_and_dead_is_final() -> None:
    group = _group()
    group.refresh_state()
    assert group.state is StreamsGroupState.STABLE
    group.transition_to(StreamsGroupState.DEAD)
    assert group.derived_state() is StreamsGroupState.DEAD
    with pytest.raises(InvalidTransition, match="streams group g"):
        group.transition_to(StreamsGroupState.EMPTY)
