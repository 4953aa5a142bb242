"""One streams group's state (KIP-1071): its topology, members, epochs, target
assignment of tasks, and the explicit state machines of the group and of each member.

A task is a subtopology and a partition number. A member holds active tasks (it
processes them), standby tasks (it keeps a replica of their state) and warm-up tasks
(standbys catching up before taking over; this coordinator assigns none, as Kafka's
sticky assignor without rack or lag information). :class:`Tasks` is the three sets.

A group's state is Kafka's: Empty, NotReady (its topology cannot run yet: missing or
misconfigured topics), Assigning, Reconciling, Stable, and Dead once deleted or the
coordinator stops; it follows from the group's content (:meth:`StreamsGroup.derived_state`)
and changes only through :data:`GROUP_TRANSITIONS`. A member is Stable, UnrevokedTasks (it
must first give up tasks it still owns) or UnreleasedTasks (it waits for tasks another
member is giving up). What this module does not do: decide assignments (:mod:`.assignor`,
:mod:`.reconcile`), arm timers or answer requests (:mod:`.coordinator`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping

import attrs

from brokerd.clock import DelayedCall
from brokerd.fsm import from_next, step
from brokerd.kafka.groups.kip848.members import LEAVE_EPOCH, STATIC_LEAVE_EPOCH
from brokerd.kafka.groups.kip848.states import live_states_table
from brokerd.kafka.groups.streams.topology import ConfiguredTopology, Topology

#: Subtopology id -> task (partition) numbers.
TaskMap = Mapping[str, frozenset[int]]
Task = tuple[str, int]


def task_set(tasks: TaskMap) -> frozenset[Task]:
    return frozenset((s, p) for s, ps in tasks.items() for p in ps)


def task_map(tasks: Iterable[Task]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in sorted(out.items())}


@attrs.frozen
class Tasks:
    """A member's tasks of each kind, as sets of ``(subtopology, partition)``."""

    active: frozenset[Task] = frozenset()
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()

    def all(self) -> frozenset[Task]:
        return self.active | self.standby | self.warmup

    def __bool__(self) -> bool:
        return bool(self.active or self.standby or self.warmup)

    def minus(self, other: Tasks) -> Tasks:
        return Tasks(self.active - other.active, self.standby - other.standby,
                     self.warmup - other.warmup)

    def meet(self, other: Tasks) -> Tasks:
        return Tasks(self.active & other.active, self.standby & other.standby,
                     self.warmup & other.warmup)

    def union(self, other: Tasks) -> Tasks:
        return Tasks(self.active | other.active, self.standby | other.standby,
                     self.warmup | other.warmup)


NO_TASKS = Tasks()


class StreamsGroupState(enum.Enum):
    """Named as Kafka names them (StreamsGroupDescribe and ListGroups show these)."""

    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


#: Any live state may reach any other (one heartbeat may add a member, configure the
#: topology and reconcile at once); Dead is final.
GROUP_TRANSITIONS: Mapping[StreamsGroupState, frozenset[StreamsGroupState]] = (
    live_states_table(StreamsGroupState, StreamsGroupState.DEAD)
)
_GROUP_TABLE = from_next(GROUP_TRANSITIONS)


class MemberState(enum.Enum):
    STABLE = "Stable"
    UNREVOKED_TASKS = "UnrevokedTasks"
    UNRELEASED_TASKS = "UnreleasedTasks"


@attrs.define
class StreamsMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Tasks = NO_TASKS
    #: Tasks it was asked to give up and has not confirmed yet.
    revoking: Tasks = NO_TASKS
    session_timer: DelayedCall | None = attrs.field(default=None, eq=False)
    revocation_timer: DelayedCall | None = attrs.field(default=None, eq=False)


@attrs.define
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: Topology | None = None
    #: The topology against the topics, as last configured (None: not yet).
    configured: ConfiguredTopology | None = None
    members: dict[str, StreamsMember] = attrs.field(factory=dict)
    #: Instance id -> member id of the static members.
    static_members: dict[str, str] = attrs.field(factory=dict)
    target: dict[str, Tasks] = attrs.field(factory=dict)
    #: Partition counts of the topics the configured topology was computed from.
    metadata: dict[str, int] = attrs.field(factory=dict)
    state: StreamsGroupState = StreamsGroupState.EMPTY

    def active_owner(self, task: Task) -> str | None:
        """The member holding ``task`` active, or still revoking it, if any."""
        for m in self.members.values():
            if task in m.assigned.active or task in m.revoking.active:
                return m.member_id
        return None

    def holders(self) -> Iterator[tuple[str, Task]]:
        for m in self.members.values():
            for t in m.assigned.all() | m.revoking.all():
                yield m.member_id, t

    def derived_state(self) -> StreamsGroupState:
        if self.state is StreamsGroupState.DEAD:
            return StreamsGroupState.DEAD
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.configured is None or not self.configured.ready:
            return StreamsGroupState.NOT_READY
        if self.assignment_epoch < self.group_epoch:
            return StreamsGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def transition_to(self, new: StreamsGroupState) -> None:
        step(_GROUP_TABLE, self.state, new, f"streams group {self.group_id}")
        self.state = new

    def refresh_state(self) -> None:
        self.transition_to(self.derived_state())


__all__ = [
    "GROUP_TRANSITIONS",
    "LEAVE_EPOCH",
    "NO_TASKS",
    "STATIC_LEAVE_EPOCH",
    "MemberState",
    "StreamsGroup",
    "StreamsGroupState",
    "StreamsMember",
    "Task",
    "TaskMap",
    "Tasks",
    "task_map",
    "task_set",
]
