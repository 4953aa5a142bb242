"""Reconciliation of a consumer-protocol member over every (member state, input) pair: the
next assignment, epoch and state, and the cases cover every member state and outcome."""

from __future__ import annotations

import pytest

from brokerd.kafka.groups.consumer.reconcile import next_assignment
from brokerd.kafka.groups.consumer.state import (
    MEMBER_TRANSITIONS,
    ConsumerMember,
    MemberState,
)

from tests.kafka.groups.consumer.test_state import T1


def _member(
    state: MemberState, epoch: int, assigned: set[int], pending: set[int]
) -> ConsumerMember:
    return ConsumerMember(
        "m", state=state, member_epoch=epoch,
        assigned={T1: frozenset(assigned)} if assigned else {},
        pending_revocation={T1: frozenset(pending)} if pending else {},
    )


def _parts(assignment: object) -> set[int]:
    assert isinstance(assignment, dict)
    return set(assignment.get(T1, frozenset()))


_MS, _UR, _UL = (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                 MemberState.UNRELEASED_PARTITIONS)


#: (name, member, target epoch, target, reported owned, partitions others hold) ->
#: (next state, epoch, assigned, pending).
RECONCILE_CASES: list[tuple[str, ConsumerMember, int, set[int], set[int] | None, set[int],
                            tuple[MemberState, int, set[int], set[int]]]] = [
    ("stable, target unchanged", _member(_MS, 3, {0, 1}, set()), 3, {0, 1}, None, set(),
     (_MS, 3, {0, 1}, set())),
    ("stable, new target to grow, free", _member(_MS, 3, {0}, set()), 4, {0, 1}, None, set(),
     (_MS, 4, {0, 1}, set())),
    ("stable, new target to grow, held", _member(_MS, 3, {0}, set()), 4, {0, 1}, None, {1},
     (_UL, 4, {0}, set())),
    ("stable, new target to shrink", _member(_MS, 3, {0, 1}, set()), 4, {0}, None, set(),
     (_UR, 3, {0}, {1})),
    ("stable, new target to shrink, already given up", _member(_MS, 3, {0, 1}, set()), 4,
     {0}, {0}, set(), (_MS, 4, {0}, set())),
    ("unrevoked, not acknowledged", _member(_UR, 3, {0}, {1}), 4, {0}, {0, 1}, set(),
     (_UR, 3, {0}, {1})),
    ("unrevoked, owned not reported", _member(_UR, 3, {0}, {1}), 4, {0}, None, set(),
     (_UR, 3, {0}, {1})),
    ("unrevoked, acknowledged", _member(_UR, 3, {0}, {1}), 4, {0}, {0}, set(),
     (_MS, 4, {0}, set())),
    ("unrevoked, acknowledged, more to take, held", _member(_UR, 3, {0}, {1}), 4, {0, 2},
     {0}, {2}, (_UL, 4, {0}, set())),
    ("unrevoked, acknowledged, target moved on", _member(_UR, 3, {0, 2}, {1}), 5, {0}, {0, 2},
     set(), (_UR, 3, {0}, {2})),
    ("unreleased, still held", _member(_UL, 4, {0}, set()), 4, {0, 1}, {0}, {1},
     (_UL, 4, {0}, set())),
    ("unreleased, released", _member(_UL, 4, {0}, set()), 4, {0, 1}, {0}, set(),
     (_MS, 4, {0, 1}, set())),
    ("unreleased, new target to shrink", _member(_UL, 4, {0, 3}, set()), 5, {0, 1}, {0, 3},
     {1}, (_UR, 4, {0}, {3})),
]


@pytest.mark.parametrize("case", RECONCILE_CASES, ids=[c[0] for c in RECONCILE_CASES])
def test_reconciliation(case: tuple) -> None:  # type: ignore[type-arg]
    _, member, epoch, target, owned, held, (state, want_epoch, assigned, pending) = case
    step = next_assignment(
        member, epoch, {T1: frozenset(target)},
        None if owned is None else {(T1, p) for p in owned},
        lambda t, p: p in held,
    )
    assert (step.state, step.member_epoch) == (state, want_epoch)
    assert _parts(dict(step.assigned)) == assigned
    assert _parts(dict(step.pending_revocation)) == pending


def test_reconciliation_cases_cover_every_member_state_and_outcome() -> None:
    seen: set[tuple[MemberState, MemberState]] = set()
    for _, member, epoch, target, owned, held, _want in RECONCILE_CASES:
        step = next_assignment(member, epoch, {T1: frozenset(target)},
                               None if owned is None else {(T1, p) for p in owned},
                               lambda t, p, held=held: p in held)
        seen.add((member.state, step.state))
    assert {s for s, _ in seen} == set(MemberState)
    assert {(s, n) for (s, _), n in MEMBER_TRANSITIONS.items()} == seen
