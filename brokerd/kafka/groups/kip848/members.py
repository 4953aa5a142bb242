"""The KIP-848 member rules that consumer groups and streams groups (KIP-1071) share.

Both protocols identify a member by its member id and, for a static member, its
instance id; both fence a heartbeat whose member epoch is not the member's (a smaller
one passes only as the member's previous epoch, when it owns no more than it is
assigned: it missed the answer that moved it forward); both answer an offset commit or
fetch with the member's epoch checked the same way; both let a static member come back
under a new member id; both remove a member silent for its session timeout or slower
than its rebalance timeout to revoke (:class:`MemberTimers`). The rules are here once;
each coordinator passes its own group and member (anything with the few fields a rule
reads: :class:`Group`, :class:`Member`, :class:`StaticGroup`, :class:`TimedMember`) and
the words its error messages use.

Reactor thread only. The checks only read; :func:`put_member`, :func:`remove_member` and
:func:`replace_static` change the group given, :class:`MemberTimers` arms timers on the
injected clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, Protocol, TypeVar

import attrs

from brokerd.clock import Clock, DelayedCall
from brokerd.kafka.errors import ErrorCode

__all__ = [
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "Group",
    "HeartbeatRefused",
    "Member",
    "MemberTimers",
    "TimedMember",
    "cancel",
    "check_epoch",
    "commit_error",
    "delete_empty",
    "epoch_error",
    "fetch_error",
    "group_or_refuse",
    "known_member",
    "leaves_for_now",
    "member_of",
    "put_member",
    "rejoining",
    "released_static_member",
    "remove_member",
    "replace_static",
    "take_fields",
    "txn_commit_error",
]

#: The member epoch a client sends to leave, and a static member's "I will be back"
#: (it keeps its assignment until its session runs out).
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class Member(Protocol):
    @property
    def member_epoch(self) -> int: ...


_M = TypeVar("_M", bound=Member)
_M_co = TypeVar("_M_co", bound=Member, covariant=True)


class Group(Protocol[_M_co]):
    @property
    def group_id(self) -> str: ...

    @property
    def members(self) -> Mapping[str, _M_co]: ...

    #: Instance id -> member id of the static members.
    @property
    def static_members(self) -> Mapping[str, str]: ...


class TimedMember(Protocol):
    member_epoch: int

    @property
    def member_id(self) -> str: ...

    @property
    def instance_id(self) -> str | None: ...

    @property
    def rebalance_timeout_ms(self) -> int: ...

    session_timer: DelayedCall | None
    revocation_timer: DelayedCall | None


_T = TypeVar("_T", bound=TimedMember)


class StaticGroup(Protocol[_T]):
    """A group's roster, with static members that may come back under a new member
    id."""

    @property
    def group_id(self) -> str: ...

    @property
    def assignment_epoch(self) -> int: ...

    group_epoch: int
    members: dict[str, _T]
    #: Instance id -> member id of the static members.
    static_members: dict[str, str]
    #: Member id -> target assignment (tasks or partitions).
    target: dict[str, Any]


class HeartbeatRefused(Exception):
    """A group heartbeat refused with ``code`` (and Kafka's message for it): the member rules
    here raise it, and each coordinator its own checks (a bad request, an unknown group)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def known_member(group: Group[_M], member_id: str, instance_id: str | None) -> _M:
    """The member a heartbeat (or leave) of a member already in the group names.

    :raises HeartbeatRefused: UNKNOWN_MEMBER_ID for an unknown member or instance id,
        FENCED_INSTANCE_ID when the instance id now belongs to another member id.
    """
    if instance_id is not None:
        current = group.static_members.get(instance_id)
        if current is None:
            raise HeartbeatRefused(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Instance id {instance_id} is unknown.")
        if current != member_id:
            raise HeartbeatRefused(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id "
                f"{instance_id} was fenced by member {current}.",
            )
    member = group.members.get(member_id)
    if member is None:
        raise HeartbeatRefused(ErrorCode.UNKNOWN_MEMBER_ID,
                               f"Member {member_id} is not a member of group "
                               f"{group.group_id}.")
    return member


def released_static_member(group: Group[_M], member_id: str, instance_id: str | None) -> _M | None:
    """For a member joining (epoch 0) with an instance id held by another member id:
    that earlier incarnation, which the joining one replaces; None when there is none.

    :raises HeartbeatRefused: UNRELEASED_INSTANCE_ID when the earlier incarnation has not
        left (epoch -2).
    """
    if instance_id is None:
        return None
    previous_id = group.static_members.get(instance_id)
    if previous_id is None or previous_id == member_id:
        return None
    previous = group.members[previous_id]
    if previous.member_epoch != STATIC_LEAVE_EPOCH:
        raise HeartbeatRefused(
            ErrorCode.UNRELEASED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} "
            f"cannot join the group because the instance id is owned by "
            f"{previous_id} member.",
        )
    return previous


def check_epoch(
    received: int,
    member_epoch: int,
    previous_member_epoch: int,
    owns_no_more: Callable[[], bool],
    *,
    group_kind: str,
    holdings: str,
) -> None:
    """Kafka's rule: a greater epoch than the member's is fenced; a smaller one too,
    unless it is the previous epoch and ``owns_no_more()`` (the member owns no more than
    it is assigned: it missed the answer that moved it forward).

    :param group_kind: "consumer group", "streams group": the message's words.
    :param holdings: "partitions", "tasks": what the message says the member abandons.
    :raises HeartbeatRefused: FENCED_MEMBER_EPOCH.
    """
    if received == member_epoch:
        return
    if received < member_epoch and received == previous_member_epoch and owns_no_more():
        return
    relation = "greater" if received > member_epoch else "smaller"
    raise HeartbeatRefused(
        ErrorCode.FENCED_MEMBER_EPOCH,
        f"The {group_kind} member has a {relation} member epoch ({received}) than the one "
        f"known by the group coordinator ({member_epoch}). The member must abandon "
        f"all its {holdings} and rejoin.",
    )


def epoch_error(member: Member | None, epoch: int, mismatch: ErrorCode) -> ErrorCode:
    """An offset commit's or fetch's check of the member it names: UNKNOWN_MEMBER_ID,
    ``mismatch`` (STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION where Kafka answers so) when
    the epoch is not the member's current one, else NONE."""
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if epoch != member.member_epoch:
        return mismatch
    return ErrorCode.NONE


def cancel(call: DelayedCall | None) -> None:
    """Cancel a member's timer if it is still pending."""
    if call is not None and call.active():
        call.cancel()


#: Called when a member's timer fires: ``(group id, member id, why)``.
Expire = Callable[[str, str, str], None]


class MemberTimers:
    """The session and revocation timers of a coordinator's members.

    :param expire: removes the member whose timer fired.
    :param holdings: "partitions", "tasks": what a member is too slow to revoke (for the
        reason given to ``expire``).
    """

    def __init__(self, clock: Clock, expire: Expire, *, holdings: str) -> None:
        self._clock = clock
        self._expire = expire
        self._late = f"did not revoke its {holdings} within its rebalance timeout"

    def arm_session(self, group_id: str, member: TimedMember, timeout_ms: int) -> None:
        """(Re)start the member's session: it is removed after ``timeout_ms`` unheard."""
        cancel(member.session_timer)
        member.session_timer = self._clock.callLater(
            timeout_ms / 1000.0, self._expire, group_id, member.member_id,
            "session timed out",
        )

    def arm_revocation(self, group_id: str, member: TimedMember) -> None:
        """Give the member its rebalance timeout to revoke what it must give up (none:
        no limit)."""
        self.cancel_revocation(member)
        if member.rebalance_timeout_ms > 0:
            member.revocation_timer = self._clock.callLater(
                member.rebalance_timeout_ms / 1000.0, self._expire, group_id,
                member.member_id, self._late,
            )

    @staticmethod
    def cancel_revocation(member: TimedMember) -> None:
        cancel(member.revocation_timer)
        member.revocation_timer = None

    @classmethod
    def cancel_all(cls, member: TimedMember) -> None:
        """Stop both timers (the member is gone or the coordinator stops)."""
        cancel(member.session_timer)
        cls.cancel_revocation(member)


def replace_static(group: StaticGroup[_T], previous: _T, member_id: str) -> _T:
    """A static member back under a new member id takes over its old incarnation's
    assignment and epoch; the group epoch does not move."""
    MemberTimers.cancel_all(previous)
    del group.members[previous.member_id]
    target = group.target.pop(previous.member_id, None)
    if target is not None:
        group.target[member_id] = target
    # Both member types are attrs classes; a Protocol cannot say so as well.
    member = attrs.evolve(previous, member_id=member_id, session_timer=None,  # type: ignore[misc]
                          revocation_timer=None)
    member.member_epoch = group.assignment_epoch
    group.members[member_id] = member
    return member


def put_member(group: StaticGroup[_T], member: _T) -> None:
    """Enter (or keep) ``member`` in the group's roster, under its instance id too."""
    group.members[member.member_id] = member
    if member.instance_id is not None:
        group.static_members[member.instance_id] = member.member_id


def remove_member(group: StaticGroup[_T], member: _T) -> None:
    """``member`` is gone (it left, or a timer of its ran out): its timers stopped, out
    of the roster and the target (its instance id too, unless a newer incarnation holds
    it), and the group epoch moved on, so that the target is computed again."""
    MemberTimers.cancel_all(member)
    group.group_epoch += 1
    del group.members[member.member_id]
    group.target.pop(member.member_id, None)
    if member.instance_id is not None and (
        group.static_members.get(member.instance_id) == member.member_id
    ):
        del group.static_members[member.instance_id]


_G = TypeVar("_G", bound="StaticGroup[Any]")


def member_of(groups: Mapping[str, StaticGroup[_T]], group_id: str, member_id: str) -> _T | None:
    """Member ``member_id`` of group ``group_id``, if both are still there (a timer that
    fires may find either gone)."""
    group = groups.get(group_id)
    return None if group is None else group.members.get(member_id)


_S_contra = TypeVar("_S_contra", contravariant=True)


class DeletableGroup(Protocol[_S_contra]):
    @property
    def members(self) -> Mapping[str, object]: ...

    def transition_to(self, new: _S_contra, /) -> None: ...


_D = TypeVar("_D", bound="DeletableGroup[Any]")


def delete_empty(groups: MutableMapping[str, _D], group_id: str, dead: object) -> _D | ErrorCode:
    """DeleteGroups of a KIP-848 group: the group, now ``dead`` and out of ``groups``
    (the caller drops what else it keeps of it); GROUP_ID_NOT_FOUND, or NON_EMPTY_GROUP
    for a group with members (only an empty one goes, as Kafka)."""
    group = groups.get(group_id)
    if group is None:
        return ErrorCode.GROUP_ID_NOT_FOUND
    if group.members:
        return ErrorCode.NON_EMPTY_GROUP
    group.transition_to(dead)
    del groups[group_id]
    return group


class HeartbeatFields(Protocol):
    """The heartbeat fields both protocols keep as given, none of which moves the group
    epoch."""

    @property
    def rebalance_timeout_ms(self) -> int: ...

    @property
    def instance_id(self) -> str | None: ...

    @property
    def client_id(self) -> str: ...

    @property
    def client_host(self) -> str: ...


class FieldsMember(Protocol):
    rebalance_timeout_ms: int
    instance_id: str | None
    client_id: str
    client_host: str


def take_fields(member: FieldsMember, request: HeartbeatFields) -> None:
    """Take the :class:`HeartbeatFields` a heartbeat gives (-1, None or "": unchanged)."""
    if request.rebalance_timeout_ms != -1:
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
    if request.instance_id is not None:
        member.instance_id = request.instance_id
    if request.client_id:
        member.client_id = request.client_id
    if request.client_host:
        member.client_host = request.client_host


def group_or_refuse(groups: Mapping[str, _G], group_id: str, group_kind: str) -> _G:
    """The group a leave names; GROUP_ID_NOT_FOUND when there is none."""
    group = groups.get(group_id)
    if group is None:
        raise HeartbeatRefused(ErrorCode.GROUP_ID_NOT_FOUND,
                               f"{group_kind.capitalize()} {group_id} not found.")
    return group


def leaves_for_now(member: TimedMember, epoch: int) -> bool:
    """A leave heartbeat's effect on ``member``: True when it is a static member going
    away for a while (it keeps its assignment until its session runs out; its epoch now
    says so), False when it leaves for good (the caller removes it)."""
    if epoch != STATIC_LEAVE_EPOCH:
        return False
    member.member_epoch = STATIC_LEAVE_EPOCH
    return True


def rejoining(
    group: StaticGroup[_T],
    member_id: str,
    instance_id: str | None,
    timers: MemberTimers,
    *,
    start_over: Callable[[_T], None],
    max_size: int,
    group_kind: str,
) -> _T | None:
    """The member a joining heartbeat (epoch 0) is: a static member back under a new
    member id, or a known member that lost everything (fenced or restarted: it starts
    over with nothing owned, ``start_over`` clears what its type holds); None for a new
    one, when the group has room for it.

    :raises HeartbeatRefused: GROUP_MAX_SIZE_REACHED when a new member would not fit.
    """
    previous = released_static_member(group, member_id, instance_id)
    if previous is not None:
        return replace_static(group, previous, member_id)
    member = group.members.get(member_id)
    if member is not None:
        timers.cancel_revocation(member)
        member.member_epoch = 0
        start_over(member)
        return member
    if len(group.members) >= max_size:
        raise HeartbeatRefused(ErrorCode.GROUP_MAX_SIZE_REACHED,
                               f"The {group_kind} has reached its maximum capacity of "
                               f"{max_size} members.")
    return None


def commit_error(
    group: Group[Member] | None, member_id: str, epoch: int, mismatch: ErrorCode
) -> ErrorCode | None:
    """OffsetCommit's check of a KIP-848 group (None: no such group of this type). A
    commit without a member epoch (< 0) is allowed only while the group is empty."""
    if group is None:
        return None
    if epoch < 0 and not group.members:
        return ErrorCode.NONE
    return epoch_error(group.members.get(member_id), epoch, mismatch)


def txn_commit_error(group: Group[Member] | None, member_id: str, epoch: int) -> ErrorCode | None:
    """TxnOffsetCommit's check (None: no such group of this type). A producer outside
    the group protocol (no member id, epoch -1) passes; otherwise the member must be
    known and the epoch its current one, else ILLEGAL_GENERATION (Kafka answers
    transactional commits so: producers predate STALE_MEMBER_EPOCH)."""
    if group is None:
        return None
    if not member_id and epoch < 0:
        return ErrorCode.NONE
    return epoch_error(group.members.get(member_id), epoch, ErrorCode.ILLEGAL_GENERATION)


def fetch_error(
    group: Group[Member] | None, member_id: str | None, epoch: int
) -> ErrorCode | None:
    """OffsetFetch v9+'s check (None: no such group of this type): a member id and epoch
    given (epoch >= 0) must be a member's current ones."""
    if group is None:
        return None
    if member_id is None or epoch < 0:
        return ErrorCode.NONE
    return epoch_error(group.members.get(member_id), epoch, ErrorCode.STALE_MEMBER_EPOCH)
