"""One consumer group's state: its members, its generation and its explicit state machine.

A group is in one of Kafka's states (Empty, PreparingRebalance, CompletingRebalance, Stable,
Dead). :meth:`GroupMetadata.transition_to` is the only way to change it, and it checks the
transition against :data:`VALID_PREVIOUS_STATES`; an invalid transition raises
:class:`brokerd.fsm.InvalidTransition`, which is a bug in the coordinator, never a client error.

The group owns its phase timers and the transition cancels them, so a timer that fires
always finds the group in the phase that armed it:

- the *rebalance timer* (initial-rebalance delay, then the rebalance timeout) lives only
  in PreparingRebalance;
- the *sync timer* (members given a generation must send SyncGroup within the rebalance
  timeout) lives in CompletingRebalance and the Stable state that follows it;
- each member's *session timer* belongs to the member and is cancelled when it is removed;
- each member id handed out with MEMBER_ID_REQUIRED has an expiry timer held in
  ``pending`` until the id is used, left or expires.

What this module does not do: arm timers or answer requests (the coordinator and
:mod:`brokerd.kafka.groups.rebalance` do that), validate client input, or touch storage.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping

import attrs

from brokerd.clock import DelayedCall
from brokerd.coordinator_runtime import ParkedRequest
from brokerd.fsm import from_previous, step
from brokerd.kafka.errors import ErrorCode


def cancel_call(call: DelayedCall | None) -> None:
    """Cancel ``call`` if it is still pending (a fired or cancelled call is left alone)."""
    if call is not None and call.active():
        call.cancel()


class GroupState(enum.Enum):
    """A group's state, named as Kafka names it (DescribeGroups shows these strings)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_E = GroupState.EMPTY
_PR = GroupState.PREPARING_REBALANCE
_CR = GroupState.COMPLETING_REBALANCE
_S = GroupState.STABLE
_D = GroupState.DEAD

#: For each state, the states a group may enter it from. As Kafka's, except that a group
#: whose last member leaves or times out goes to Empty from CompletingRebalance or Stable
#: directly (Kafka passes through PreparingRebalance first; with nobody left to re-join the
#: result is the same Empty group).
VALID_PREVIOUS_STATES: Mapping[GroupState, frozenset[GroupState]] = {
    _E: frozenset({_PR, _CR, _S}),
    _PR: frozenset({_E, _CR, _S}),
    _CR: frozenset({_PR}),
    _S: frozenset({_CR}),
    _D: frozenset({_E, _PR, _CR, _S, _D}),
}


_TABLE = from_previous(VALID_PREVIOUS_STATES)


@attrs.frozen
class JoinResult:
    """The JoinGroup response fields. ``members`` is non-empty only for the leader:
    ``(member_id, group_instance_id, metadata of the chosen protocol)``.
    ``protocol_type`` is the group's (None in an error answer); ``skip_assignment`` tells
    a leader that already holds this generation's assignment not to compute one
    (JoinGroup v9+)."""

    error_code: int
    generation_id: int
    protocol_name: str
    leader_id: str
    member_id: str
    members: list[tuple[str, str | None, bytes]] = attrs.field(factory=list)
    protocol_type: str | None = None
    skip_assignment: bool = False


@attrs.frozen
class SyncResult:
    """The SyncGroup response fields: this member's assignment (opaque bytes) and, in a
    successful answer, the group's protocol type and name (SyncGroup v5+)."""

    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


def join_error(code: int, member_id: str) -> JoinResult:
    """A JoinGroup answer carrying only an error (and the member id it concerns)."""
    return JoinResult(code, -1, "", "", member_id, [])


@attrs.define(eq=False)
class Member:
    """One member of a group, with its parked requests and its session timer."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    #: Has (re)joined in the current PreparingRebalance round.
    joined: bool = False
    #: Its JoinGroup / SyncGroup held until the rebalance answers it.
    join_waiter: ParkedRequest | None = None
    sync_waiter: ParkedRequest | None = None
    session_timer: DelayedCall | None = None
    assignment: bytes = b""

    @property
    def parked(self) -> bool:
        """A JoinGroup or SyncGroup of this member is being held (it cannot heartbeat)."""
        return self.join_waiter is not None or self.sync_waiter is not None

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def cancel_session(self) -> None:
        cancel_call(self.session_timer)
        self.session_timer = None


@attrs.define(eq=False)
class GroupMetadata:
    """One group: membership, generation, protocol, state and the timers of its phase.

    Bookkeeping only: the methods here never answer a request or arm a timer.
    """

    group_id: str
    _state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    #: Insertion-ordered, so "the first member" is well defined.
    members: dict[str, Member] = attrs.field(factory=dict)
    #: Member ids handed out with MEMBER_ID_REQUIRED, each with its expiry timer.
    pending: dict[str, DelayedCall] = attrs.field(factory=dict)
    #: group_instance_id -> member_id, for static members.
    instance_ids: dict[str, str] = attrs.field(factory=dict)
    #: Member ids in the order they joined this round (the leader falls back to the first).
    join_order: list[str] = attrs.field(factory=list)
    #: PreparingRebalance only: the initial-delay or rebalance-timeout timer.
    rebalance_timer: DelayedCall | None = None
    #: True while the first rebalance after Empty is being delayed to batch joiners.
    initial_delay: bool = False
    new_member_added: bool = False
    initial_remaining_ms: int = 0
    #: CompletingRebalance and Stable: members of this generation that have not sent
    #: SyncGroup yet, and the deadline for them.
    pending_sync: set[str] = attrs.field(factory=set)
    sync_timer: DelayedCall | None = None

    @property
    def state(self) -> GroupState:
        return self._state

    def transition_to(self, new: GroupState) -> None:
        """Enter ``new``, cancelling the timers and per-phase bookkeeping of the phase being
        left. Raises :class:`~brokerd.fsm.InvalidTransition` if the table does not allow it."""
        old = self._state
        step(_TABLE, old, new, f"group {self.group_id!r}")
        cancel_call(self.rebalance_timer)
        self.rebalance_timer = None
        self.initial_delay = self.new_member_added = False
        if new is not GroupState.STABLE:
            # Stable keeps the SyncGroup deadline of the generation it completes.
            cancel_call(self.sync_timer)
            self.sync_timer = None
            self.pending_sync.clear()
        if new in (GroupState.EMPTY, GroupState.PREPARING_REBALANCE):
            self.join_order = []
        self._state = new

    # -- membership -----------------------------------------------------------------------

    def add_member(self, member: Member, protocol_type: str) -> None:
        if not self.members:
            # Kafka: an Empty group takes the protocol type of whoever joins it first.
            self.protocol_type = protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.instance_ids[member.group_instance_id] = member.member_id

    def replace_member_id(self, member: Member, new_id: str) -> str:
        """Give ``member`` (a static member re-joining) ``new_id`` everywhere its old id
        was referenced, keeping its place, assignment and leadership; returns the old id."""
        old_id = member.member_id
        self.members = {
            (new_id if mid == old_id else mid): m for mid, m in self.members.items()
        }
        member.member_id = new_id
        if member.group_instance_id is not None:
            self.instance_ids[member.group_instance_id] = new_id
        self.join_order = [new_id if mid == old_id else mid for mid in self.join_order]
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        if self.leader_id == old_id:
            self.leader_id = new_id
        return old_id

    def fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """Kafka's ``isStaticMemberFenced``: the instance id belongs to another member id
        (the caller is an old incarnation of a static member that was replaced)."""
        if group_instance_id is None:
            return False
        current = self.instance_ids.get(group_instance_id)
        return current is not None and current != member_id

    def remove_member(self, member: Member) -> None:
        """Forget ``member`` everywhere it is referenced (its requests are the caller's)."""
        member.cancel_session()
        del self.members[member.member_id]
        instance = member.group_instance_id
        if instance is not None and self.instance_ids.get(instance) == member.member_id:
            del self.instance_ids[instance]
        if member.member_id in self.join_order:
            self.join_order.remove(member.member_id)
        self.pending_sync.discard(member.member_id)
        if self.leader_id == member.member_id:
            self.leader_id = None

    def static_member(self, group_instance_id: str) -> Member | None:
        member_id = self.instance_ids.get(group_instance_id)
        return None if member_id is None else self.members.get(member_id)

    def mark_joined(self, member: Member) -> None:
        member.joined = True
        if member.member_id not in self.join_order:
            self.join_order.append(member.member_id)

    def all_joined(self) -> bool:
        return all(m.joined for m in self.members.values())

    def size(self) -> int:
        """Members plus member ids handed out and not yet used (the group size cap)."""
        return len(self.members) + len(self.pending)

    def take_pending(self, member_id: str) -> bool:
        """Consume a member id handed out with MEMBER_ID_REQUIRED (False: none such)."""
        timer = self.pending.pop(member_id, None)
        cancel_call(timer)
        return timer is not None

    def cancel_pending(self) -> None:
        for timer in self.pending.values():
            cancel_call(timer)
        self.pending.clear()

    def disposable(self) -> bool:
        """Empty with no member, no outstanding member id and no generation yet (one that
        had a generation is kept, so the next one continues from it, as in Kafka)."""
        return (
            self._state is GroupState.EMPTY
            and not self.members
            and not self.pending
            and self.generation == 0
        )

    def max_rebalance_timeout_ms(self) -> int:
        return max(m.rebalance_timeout_ms for m in self.members.values())

    # -- protocols ------------------------------------------------------------------------

    def supports(
        self, protocol_type: str, protocols: list[tuple[str, bytes]], member: Member | None
    ) -> bool:
        """Kafka's ``supportsProtocols``, but a re-joining member is compared only with the
        *other* members, so a lone member may change its protocols freely."""
        others = [m for m in self.members.values() if m is not member]
        if not others:
            return True
        if protocol_type != self.protocol_type:
            return False
        candidates = set.intersection(*(m.protocol_names() for m in others))
        return any(name in candidates for name, _ in protocols)

    def select_protocol(self) -> str:
        """Kafka's ``selectProtocol``: each member votes for its first protocol that every
        member supports; most votes wins (a tie goes to the leader's preference)."""
        members = list(self.members.values())
        candidates = set.intersection(*(m.protocol_names() for m in members))
        votes: Counter[str] = Counter()
        for m in members:
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] += 1
                    break
        if not votes:  # cannot happen: every join checks for a common protocol
            return members[0].protocols[0][0]
        best = max(votes.values())
        first = self.members.get(self.leader_id or "") or members[0]
        for name, _ in first.protocols:
            if votes.get(name) == best:
                return name
        return next(name for name, count in votes.items() if count == best)

    def next_generation(self) -> None:
        """Start the next generation with the members that joined: pick the leader (the
        previous one if still here, else the first to join) and the protocol."""
        self.generation += 1
        if self.leader_id not in self.members:
            present = [mid for mid in self.join_order if mid in self.members]
            self.leader_id = present[0] if present else next(iter(self.members))
        self.protocol_name = self.select_protocol()
        self.transition_to(GroupState.COMPLETING_REBALANCE)
        self.pending_sync = set(self.members)
        for m in self.members.values():
            m.assignment = b""

    def join_result(self, member: Member) -> JoinResult:
        protocol = self.protocol_name or ""
        members: list[tuple[str, str | None, bytes]] = []
        if member.member_id == self.leader_id:
            members = [
                (m.member_id, m.group_instance_id, m.metadata_for(protocol))
                for m in self.members.values()
            ]
        return JoinResult(
            ErrorCode.NONE,
            self.generation,
            protocol,
            self.leader_id or "",
            member.member_id,
            members,
            protocol_type=self.protocol_type,
        )

    def sync_result(self, member: Member) -> SyncResult:
        """A successful SyncGroup answer: ``member``'s assignment, with the protocol."""
        return SyncResult(
            ErrorCode.NONE, member.assignment, self.protocol_type, self.protocol_name
        )

    def protocol_mismatch(self, protocol_type: str | None, protocol_name: str | None) -> bool:
        """SyncGroup v5+: a protocol type or name given that is not the group's (Kafka
        compares only what both sides have)."""
        return any(
            given is not None and ours is not None and given != ours
            for given, ours in (
                (protocol_type, self.protocol_type),
                (protocol_name, self.protocol_name),
            )
        )

    def become_empty(self) -> None:
        """The last member is gone. As Kafka's ``initNextGeneration`` with no members: the
        generation still counts up, the protocol and leader are cleared and the protocol
        type is kept (ListGroups and DescribeGroups show it)."""
        self.transition_to(GroupState.EMPTY)
        self.generation += 1
        self.protocol_name = self.leader_id = None


__all__ = [
    "VALID_PREVIOUS_STATES",
    "GroupMetadata",
    "GroupState",
    "JoinResult",
    "Member",
    "SyncResult",
    "cancel_call",
    "join_error",
]
