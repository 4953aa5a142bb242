"""How one streams group member moves from the tasks it owns to its target, as Kafka's
streams coordinator reconciles members.

An active task changes owner in two steps: the member losing it is first told its
assignment without it (its epoch unchanged) and must confirm, in a later heartbeat
listing what it owns, that it gave it up; only then is the task handed to its new owner
(two members never process one task at once). Standby and warm-up tasks that leave a
member are revoked the same way; gaining one waits for nobody (a standby is never on the
member that has the task active). Members keep the tasks both assignments share. A
member with nothing to revoke moves to the target's epoch at once, with the active tasks
nobody holds any more; it is UnreleasedTasks until the others are released.

Pure: one function of the member's state, the target and who holds which active task.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from brokerd.kafka.groups.streams.state import (
    NO_TASKS,
    MemberState,
    StreamsMember,
    Task,
    Tasks,
)


@attrs.frozen
class Step:
    state: MemberState
    member_epoch: int
    assigned: Tasks
    revoking: Tasks


def next_assignment(
    member: StreamsMember,
    target_epoch: int,
    target: Tasks,
    reported: Tasks | None,
    held_by_other: Callable[[Task], bool],
) -> Step:
    """One reconciliation step of ``member`` towards ``target``.

    :param reported: the tasks the heartbeat says the member owns; None when it left
        them out (unchanged).
    :param held_by_other: whether another member holds an active task (or is still
        revoking it).
    """
    current = member.assigned
    if member.state is MemberState.UNREVOKED_TASKS and member.revoking:
        still = member.revoking.all() if reported is None else (
            member.revoking.all() & reported.all())
        if still:
            return Step(member.state, member.member_epoch, current, member.revoking)
    elif member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return Step(MemberState.STABLE, target_epoch, current, NO_TASKS)
    kept = current.meet(target)
    revoke = current.minus(target)
    if revoke and (reported is None or revoke.all() & reported.all()):
        return Step(MemberState.UNREVOKED_TASKS, member.member_epoch, kept, revoke)
    missing_active = target.active - kept.active
    free_active = frozenset(t for t in missing_active if not held_by_other(t))
    assigned = Tasks(kept.active | free_active, target.standby, target.warmup)
    state = (MemberState.UNRELEASED_TASKS if missing_active - free_active
             else MemberState.STABLE)
    return Step(state, target_epoch, assigned, NO_TASKS)


__all__ = ["Step", "next_assignment"]
