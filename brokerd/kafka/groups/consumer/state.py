"""One consumer-protocol group's state: its members, epochs, target assignment, and the
explicit state machines of the group and of each member.

A group's state is Kafka's (Empty, Assigning, Reconciling, Stable, and Dead once the
coordinator stops or the group is deleted) and follows from its content:
:meth:`ConsumerGroup.refresh_state` computes it and changes it only through
:data:`GROUP_TRANSITIONS`. A member is Stable (it owns its target), UnrevokedPartitions
(it must first give up partitions it still owns) or UnreleasedPartitions (it waits for
partitions another member is still giving up); :data:`MEMBER_TRANSITIONS` holds which
reconciliation outcome moves a member from which state to which. A change outside either
table raises :class:`brokerd.fsm.InvalidTransition`: a coordinator bug, never a client error.

What this module does not do: decide assignments (:mod:`.assignors`, :mod:`.reconcile`),
arm timers or answer requests (:mod:`.coordinator`).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping

import attrs

from brokerd.clock import DelayedCall
from brokerd.fsm import from_next, step
from brokerd.kafka.groups.consumer.assignors import DEFAULT_ASSIGNOR, Assignment
from brokerd.kafka.groups.kip848.members import LEAVE_EPOCH, STATIC_LEAVE_EPOCH
from brokerd.kafka.groups.kip848.states import live_states_table


class ConsumerGroupState(enum.Enum):
    """Named as Kafka names them (ConsumerGroupDescribe and ListGroups show these)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


#: For each state, the states a group may move to (any live one; Dead is final).
GROUP_TRANSITIONS: Mapping[ConsumerGroupState, frozenset[ConsumerGroupState]] = (
    live_states_table(ConsumerGroupState, ConsumerGroupState.DEAD)
)
_GROUP_TABLE = from_next(GROUP_TRANSITIONS)


class MemberState(enum.Enum):
    STABLE = "Stable"
    UNREVOKED_PARTITIONS = "UnrevokedPartitions"
    UNRELEASED_PARTITIONS = "UnreleasedPartitions"


class Reconciliation(enum.Enum):
    """What one reconciliation step found (:func:`.reconcile.next_assignment`)."""

    #: The member owns its target at the target's epoch.
    COMPLETE = "complete"
    #: The member must revoke partitions first (its epoch stays).
    MUST_REVOKE = "must revoke"
    #: The member is at the target epoch but waits for partitions others still own.
    WAITING_FOR_RELEASE = "waiting for release"
    #: The member has not yet acknowledged the revocation asked of it.
    REVOCATION_PENDING = "revocation pending"


_MS = MemberState.STABLE
_MUR = MemberState.UNREVOKED_PARTITIONS
_MUL = MemberState.UNRELEASED_PARTITIONS
_C = Reconciliation.COMPLETE
_MR = Reconciliation.MUST_REVOKE
_W = Reconciliation.WAITING_FOR_RELEASE
_P = Reconciliation.REVOCATION_PENDING

#: (member state, reconciliation outcome) -> the member's next state. A pair absent
#: from the table cannot happen (a revocation is only pending for a member asked to
#: revoke).
MEMBER_TRANSITIONS: Mapping[tuple[MemberState, Reconciliation], MemberState] = {
    (_MS, _C): _MS,
    (_MS, _MR): _MUR,
    (_MS, _W): _MUL,
    (_MUR, _C): _MS,
    (_MUR, _MR): _MUR,
    (_MUR, _W): _MUL,
    (_MUR, _P): _MUR,
    (_MUL, _C): _MS,
    (_MUL, _MR): _MUR,
    (_MUL, _W): _MUL,
}


def member_next_state(state: MemberState, outcome: Reconciliation) -> MemberState:
    return step(MEMBER_TRANSITIONS, state, outcome, "member")


@attrs.frozen
class ClassicProtocol:
    """A member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat): what
    its last JoinGroup said that the group keeps, its session timeout and its protocols
    (name, metadata), its preference first."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0] if self.protocols else ""


@attrs.define(eq=False)
class ConsumerMember:
    """One consumer-protocol member."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 0
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = -1
    #: What the member may use now (told in heartbeat answers).
    assigned: Assignment = attrs.field(factory=dict)
    #: What the member was asked to give up and has not yet confirmed giving up.
    pending_revocation: Assignment = attrs.field(factory=dict)
    session_timer: DelayedCall | None = None
    #: Armed while the member must revoke: it is fenced if it takes longer.
    revocation_timer: DelayedCall | None = None
    #: Set for a member that speaks the classic protocol (a group being migrated).
    classic: ClassicProtocol | None = None

    def owns(self) -> set[tuple[uuid.UUID, int]]:
        """Every partition this member holds (assigned or still to revoke)."""
        return {(t, p) for a in (self.assigned, self.pending_revocation) for t, ps in a.items()
                for p in ps}


@attrs.define(eq=False)
class ConsumerGroup:
    """A consumer-protocol group. ``group_epoch`` moves whenever membership,
    subscriptions or the subscribed topics' metadata change; the target assignment is
    then recomputed and ``assignment_epoch`` catches up."""

    group_id: str
    state: ConsumerGroupState = ConsumerGroupState.EMPTY
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = attrs.field(factory=dict)
    #: instance id -> member id of static members.
    static_members: dict[str, str] = attrs.field(factory=dict)
    #: member id -> its target assignment at ``assignment_epoch``.
    target: dict[str, Assignment] = attrs.field(factory=dict)
    #: The subscribed topics' metadata the target was computed from:
    #: name -> (topic ID, partition count).
    subscribed_metadata: dict[str, tuple[uuid.UUID, int]] = attrs.field(factory=dict)
    #: The assignor the last target was computed with.
    assignor: str = DEFAULT_ASSIGNOR

    def transition_to(self, state: ConsumerGroupState) -> None:
        step(_GROUP_TABLE, self.state, state, f"group {self.group_id!r}")
        self.state = state

    def derived_state(self) -> ConsumerGroupState:
        """Kafka's rule: Empty without members; Assigning while the target lags the group
        epoch; Reconciling while a member is not Stable at the assignment epoch."""
        if self.state is ConsumerGroupState.DEAD:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.state is not MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def refresh_state(self) -> ConsumerGroupState:
        self.transition_to(self.derived_state())
        return self.state

    def owner_of(self, topic_id: uuid.UUID, partition: int) -> str | None:
        """The member holding a partition (assigned or still to revoke), if any."""
        for m in self.members.values():
            if partition in m.assigned.get(topic_id, ()) or partition in (
                m.pending_revocation.get(topic_id, ())
            ):
                return m.member_id
        return None

    def preferred_assignor(self) -> str:
        """The assignor most members ask for (ties: by name); the default if none asks."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor is not None:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return DEFAULT_ASSIGNOR
        return min(votes, key=lambda name: (-votes[name], name))


__all__ = [
    "GROUP_TRANSITIONS",
    "LEAVE_EPOCH",
    "MEMBER_TRANSITIONS",
    "STATIC_LEAVE_EPOCH",
    "ClassicProtocol",
    "ConsumerGroup",
    "ConsumerGroupState",
    "ConsumerMember",
    "MemberState",
    "Reconciliation",
    "member_next_state",
]
