"""brokerd.kafka.groups.streams.reconcile: one member's step towards its target."""

from __future__ import annotations

from brokerd.kafka.groups.streams.reconcile import next_assignment
from brokerd.kafka.groups.streams.state import (
    NO_TASKS,
    MemberState,
    StreamsMember,
    Tasks,
)

A0, A1, A2 = ("s", 0), ("s", 1), ("s", 2)


def _nobody(task: tuple[str, int]) -> bool:
    return False


def test_stable_member_at_target_epoch_keeps_its_tasks() -> None:
    member = StreamsMember("m", member_epoch=3, assigned=Tasks(frozenset({A0})))
    step = next_assignment(member, 3, Tasks(frozenset({A1})), None, _nobody)
    assert step.state is MemberState.STABLE
    assert (step.member_epoch, step.assigned, step.revoking) == (3, member.assigned, NO_TASKS)


def test_a_task_to_give_up_is_revoked_first_at_the_old_epoch() -> None:
    member = StreamsMember("m", member_epoch=1, assigned=Tasks(frozenset({A0, A1})))
    step = next_assignment(member, 2, Tasks(frozenset({A1, A2})), None, _nobody)
    assert step.state is MemberState.UNREVOKED_TASKS
    assert step.member_epoch == 1
    assert step.assigned == Tasks(frozenset({A1}))
    assert step.revoking == Tasks(frozenset({A0}))


def test_revoking_member_waits_until_the_heartbeat_no_longer_lists_it() -> None:
    member = StreamsMember(
        "m", state=MemberState.UNREVOKED_TASKS, member_epoch=1,
        assigned=Tasks(frozenset({A1})), revoking=Tasks(frozenset({A0})))
    target = Tasks(frozenset({A1, A2}))
    waiting = next_assignment(member, 2, target, Tasks(frozenset({A0, A1})), _nobody)
    assert waiting.state is MemberState.UNREVOKED_TASKS
    assert waiting.member_epoch == 1
    done = next_assignment(member, 2, target, Tasks(frozenset({A1})), _nobody)
    assert done.state is MemberState.STABLE
    assert (done.member_epoch, done.assigned, done.revoking) == (2, target, NO_TASKS)


def test_a_task_another_member_holds_is_not_handed_over_yet() -> None:
    member = StreamsMember("m", member_epoch=1)
    target = Tasks(frozenset({A0, A1}), standby=frozenset({A2}))
    step = next_assignment(member, 2, target, None, lambda t: t == A1)
    assert step.state is MemberState.UNRELEASED_TASKS
    assert step.member_epoch == 2
    assert step.assigned == Tasks(frozenset({A0}), standby=frozenset({A2}))
