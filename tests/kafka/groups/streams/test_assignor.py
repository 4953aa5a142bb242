"""The streams assignor: balanced and sticky, standbys on other processes."""

from __future__ import annotations

from brokerd.kafka.groups.streams.assignor import AssignorMember, assign
from brokerd.kafka.groups.streams.state import (
    Tasks,
)


def members(*ids: str, previous: dict[str, Tasks] | None = None) -> dict[str, AssignorMember]:
    previous = previous or {}
    return {m: AssignorMember(f"p-{m}", previous.get(m, Tasks())) for m in ids}


def test_assignor_balances_and_sticks() -> None:
    one = assign(members("a"), {"0": 4})
    assert one["a"].active == {("0", p) for p in range(4)}
    two = assign(members("a", "b", previous=one), {"0": 4})
    assert len(two["a"].active) == len(two["b"].active) == 2
    # Sticky: "a" keeps two of the tasks it had; only two move.
    assert two["a"].active <= one["a"].active
    assert not two["a"].active & two["b"].active


def test_standbys_go_to_other_processes() -> None:
    out = assign(members("a", "b", "c"), {"0": 3}, num_standby=1)
    for m, tasks in out.items():
        assert len(tasks.active) == 1 and len(tasks.standby) == 1
        assert not tasks.active & tasks.standby, m
    standbys = [t for tasks in out.values() for t in tasks.standby]
    assert sorted(standbys) == [("0", 0), ("0", 1), ("0", 2)]
    # Two members of one process: no standby on the active owner's process.
    same = {"a": AssignorMember("p", Tasks()), "b": AssignorMember("p", Tasks())}
    assert all(not t.standby for t in assign(same, {"0": 2}, num_standby=1).values())
