# -*- test-case-name: tests.kafka.groups.streams.test_assignor -*-
"""The streams group's task assignor: sticky active tasks, balanced, with standby
replicas on other processes (Kafka's ``sticky`` streams assignor, without rack
awareness or lag-based warm-ups).

Active tasks first: each member keeps the active tasks it had while it stays within its
share (the task count divided by the member count, rounded up); the tasks left go one
by one to the member with the fewest (ties by member id), so one member joining moves
only what it takes. Then each active task gets ``num_standby`` standbys, each on a member
of another process than the task's active owner and any standby already placed (a
process holds a task's state once): a member that had the task before is preferred (it
has the state), then the one with the fewest standbys, ties taken in turn from the
active owner on. A standby that has nowhere to go is not assigned,
as in Kafka. Deterministic: the same input gives the same assignment.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from brokerd.kafka.groups.streams.state import Task, Tasks


@attrs.frozen
class AssignorMember:
    process_id: str
    #: What the member holds now (its stickiness).
    previous: Tasks


def assign(
    members: Mapping[str, AssignorMember],
    task_counts: Mapping[str, int],
    num_standby: int = 0,
) -> dict[str, Tasks]:
    """The target assignment of every task of ``task_counts`` over ``members``."""
    if not members:
        return {}
    order = sorted(members)
    tasks: list[Task] = [(s, p) for s, n in sorted(task_counts.items()) for p in range(n)]
    quota = -(-len(tasks) // len(order))
    active: dict[str, set[Task]] = {m: set() for m in order}
    owner: dict[Task, str] = {}
    existing = set(tasks)
    for m in order:
        for t in sorted(members[m].previous.active):
            if t in existing and t not in owner and len(active[m]) < quota:
                active[m].add(t)
                owner[t] = m
    for t in tasks:
        if t not in owner:
            m = min(order, key=lambda x: (len(active[x]), x))
            active[m].add(t)
            owner[t] = m
    standby: dict[str, set[Task]] = {m: set() for m in order}
    if num_standby > 0:
        for t in tasks:
            processes = {members[owner[t]].process_id}
            for _ in range(num_standby):
                candidates = [
                    m for m in order
                    if members[m].process_id not in processes and t not in standby[m]
                ]
                if not candidates:
                    break
                start = order.index(owner[t])
                m = min(candidates, key=lambda x: (
                    t not in members[x].previous.all(),
                    len(standby[x]),
                    # Ties go round from the active owner, so equal members share.
                    (order.index(x) - start) % len(order),
                ))
                standby[m].add(t)
                processes.add(members[m].process_id)
    return {m: Tasks(frozenset(active[m]), frozenset(standby[m])) for m in order}


__all__ = ["AssignorMember", "assign"]
