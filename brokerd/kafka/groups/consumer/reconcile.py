# -*- test-case-name: tests.kafka.groups.consumer.test_reconcile -*-
"""How one member moves from the partitions it owns to its target assignment, as
Kafka's consumer group coordinator reconciles members.

A partition changes owner in two steps: the member losing it is first told its
assignment without it (its epoch unchanged) and must confirm, in a later heartbeat
listing what it owns, that it gave it up; only then is the partition handed to its new
owner. Members keep the partitions both assignments share throughout, so a change in
membership stops nobody. A member that has nothing to revoke moves to the target's epoch
at once and gets the target's partitions that nobody holds any more; the others follow
when their previous owners release them (UnreleasedPartitions until then). A member
whose heartbeat lists what it owns without the partitions to revoke has given them up
already and goes on at once. A deleted topic's partitions are revoked like any others
(the target has none of them), as Kafka's ``CurrentAssignmentBuilder`` does: the member
keeps its epoch until a heartbeat shows it no longer owns them.

Pure: one function of the member's state, the target and a lookup of who holds what.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

import attrs

from brokerd.kafka.groups.consumer.assignors import Assignment
from brokerd.kafka.groups.consumer.state import (
    ConsumerMember,
    MemberState,
    Reconciliation,
    member_next_state,
)

Partitions = set[tuple[uuid.UUID, int]]


def flatten(assignment: Assignment) -> Partitions:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def grouped(partitions: Partitions) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, set[int]] = {}
    for t, p in partitions:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


@attrs.frozen
class Step:
    """A member's state after one reconciliation step."""

    outcome: Reconciliation
    state: MemberState
    member_epoch: int
    assigned: Mapping[uuid.UUID, frozenset[int]]
    pending_revocation: Mapping[uuid.UUID, frozenset[int]]


def next_assignment(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    reported_owned: Partitions | None,
    held_by_other: Callable[[uuid.UUID, int], bool],
) -> Step:
    """One reconciliation step of ``member`` towards ``target`` (at ``target_epoch``).

    :param reported_owned: the partitions the heartbeat says the member owns; None when
        the heartbeat left them out (unchanged since the last one).
    :param held_by_other: whether another member still holds a partition (assigned to it
        or waiting for its revocation).
    """
    state = member.state
    current = flatten(member.assigned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        pending = flatten(member.pending_revocation)
        if pending and (reported_owned is None or pending & reported_owned):
            return _step(member, Reconciliation.REVOCATION_PENDING, member.member_epoch,
                         current, pending)
    elif state is MemberState.STABLE and member.member_epoch == target_epoch:
        return _step(member, Reconciliation.COMPLETE, target_epoch, current, set())
    wanted = flatten(target)
    revoke = current - wanted
    # As Kafka: a member whose heartbeat lists what it owns, none of it to revoke, has
    # already let those partitions go and goes on at once.
    if revoke and (reported_owned is None or revoke & reported_owned):
        return _step(member, Reconciliation.MUST_REVOKE, member.member_epoch,
                     current & wanted, revoke)
    kept = current & wanted
    missing = wanted - kept
    free = {tp for tp in missing if not held_by_other(*tp)}
    outcome = Reconciliation.WAITING_FOR_RELEASE if missing - free else Reconciliation.COMPLETE
    return _step(member, outcome, target_epoch, kept | free, set())


def _step(
    member: ConsumerMember,
    outcome: Reconciliation,
    epoch: int,
    assigned: Partitions,
    pending: Partitions,
) -> Step:
    return Step(outcome, member_next_state(member.state, outcome), epoch, grouped(assigned),
                grouped(pending))


__all__ = ["Step", "flatten", "grouped", "next_assignment"]
