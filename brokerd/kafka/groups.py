"""Classic Kafka consumer-group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup and
OffsetCommit/OffsetFetch semantics), for one broker that coordinates every group.

Membership follows the classic ("eager") protocol, in which the *leader client* computes
the assignment: the coordinator collects every member's JoinGroup, picks a protocol all
members support, answers each member (only the leader gets the member list), then hands
out the assignment bytes the leader sent in its SyncGroup. Group states are Kafka's:
Empty, PreparingRebalance, CompletingRebalance, Stable (and Dead once stopped). The error
rules are those of shared/notes/kafka-protocol.md section 6.2, which were checked against
real clients; notably OffsetCommit is *accepted* during PreparingRebalance.

Time comes from an injected ``IReactorTime`` (session timeouts, rebalance timeouts, the
initial rebalance delay), so tests drive it with ``task.Clock``. Committed offsets go to
an :class:`~brokerd.storage.offsets.OffsetStore` through the injected ``run_blocking``
(a worker thread in production); commits are queued and written one batch at a time, so
they reach the journal in arrival order and share fsyncs (group commit).

Membership survives restarts as in Kafka: whenever a generation becomes Stable the group
(protocol, generation, leader, members with their chosen-protocol metadata and assignment)
is written to the same store, in the same ordered write queue as commits, and an Empty
group gets a tombstone. On construction every stored group is restored as Stable with a
fresh session timer per member, so members carry on with their generation (Heartbeat and
OffsetCommit succeed) and members that never come back time out and trigger a rebalance.
A restart mid-rebalance restores the last Stable generation; members of the newer one
then get ILLEGAL_GENERATION and re-join.

What this module does not do: no sockets or wire encoding (``brokerd.kafka.handlers``
maps requests to these calls), no incremental
cooperative rebalancing on the broker side (clients do it within the classic protocol),
and only a simplified static membership: a known ``group_instance_id`` joining with an
empty member id replaces (fences) the old member and triggers a rebalance.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter, deque
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

import attrs
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.errors import InvalidTopic
from brokerd.names import MAX_GROUP_ID_LENGTH, validate_topic_name
from brokerd.storage.offsets import (
    MAX_METADATA_LENGTH,
    OffsetStore,
    StoredGroup,
    StoredMember,
)

_T = TypeVar("_T")

OffsetEntry = tuple[str, int, int, int, str | None]
"""``(topic, partition, offset, leader_epoch, metadata)`` of one OffsetCommit partition."""

#: Kafka's group.max.size is effectively unbounded; this cap (members plus member ids
#: handed out with MEMBER_ID_REQUIRED and not yet used) keeps a client that loops on
#: JoinGroup from growing one group without bound. Beyond it: GROUP_MAX_SIZE_REACHED.
MAX_GROUP_SIZE = 10_000

#: Only this much of the client id goes into a generated member id (client ids may be up to
#: 32 KiB on the wire; the member id is echoed in every group response).
MAX_CLIENT_ID_IN_MEMBER_ID = 128

_INT32_MAX = 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _DelayedCall(Protocol):
    """``_DelayedCall`` as mypy can check it (zope interface methods lack ``self``)."""

    def active(self) -> bool: ...
    def cancel(self) -> None: ...
    def reset(self, seconds: float) -> None: ...


class _Scheduler(Protocol):
    """``IReactorTime.callLater`` as mypy can check it."""

    def callLater(
        self, delay: float, callable: Callable[..., object], *args: object, **kw: object
    ) -> _DelayedCall: ...


class ErrorCode(enum.IntEnum):
    """The Kafka error codes this coordinator answers (``Errors.java``)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_NOT_AVAILABLE = 15
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82


class GroupState(enum.Enum):
    """A group's state, named as Kafka names it (DescribeGroups shows these strings)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@attrs.frozen
class JoinResult:
    """The JoinGroup response fields. ``members`` is non-empty only for the leader:
    ``(member_id, group_instance_id, metadata of the chosen protocol)``."""

    error_code: int
    generation_id: int
    protocol_name: str
    leader_id: str
    member_id: str
    members: list[tuple[str, str | None, bytes]] = attrs.field(factory=list)


@attrs.frozen
class SyncResult:
    """The SyncGroup response fields: this member's assignment (opaque bytes)."""

    error_code: int
    assignment: bytes = b""


@attrs.define(eq=False)
class _Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    #: Has (re)joined in the current PreparingRebalance round.
    joined: bool = False
    join_waiter: Deferred[JoinResult] | None = None
    sync_waiter: Deferred[SyncResult] | None = None
    session_timer: _DelayedCall | None = None
    assignment: bytes = b""

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""


@attrs.define(eq=False)
class _Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    #: Insertion-ordered, so "the first member" is well defined.
    members: dict[str, _Member] = attrs.field(factory=dict)
    #: Member ids handed out with MEMBER_ID_REQUIRED, each with its expiry timer.
    pending: dict[str, _DelayedCall] = attrs.field(factory=dict)
    #: group_instance_id -> member_id, for static members.
    instance_ids: dict[str, str] = attrs.field(factory=dict)
    #: Member ids in the order they joined this round (the leader falls back to the first).
    join_order: list[str] = attrs.field(factory=list)
    rebalance_timer: _DelayedCall | None = None
    #: True while the first rebalance after Empty is being delayed to batch joiners.
    initial_delay: bool = False
    new_member_added: bool = False
    initial_remaining_ms: int = 0
    #: Members of this generation that have not sent SyncGroup yet, and the deadline.
    pending_sync: set[str] = attrs.field(factory=set)
    sync_timer: _DelayedCall | None = None


@attrs.define(eq=False)
class _PendingCommit:
    group_id: str
    entries: list[OffsetEntry]
    results: dict[tuple[str, int], int]
    waiter: Deferred[dict[tuple[str, int], int]]


def _cancel(call: _DelayedCall | None) -> None:
    if call is not None and call.active():
        call.cancel()


def _group_id_too_long(group_id: str) -> bool:
    return len(group_id.encode("utf-8", "surrogatepass")) > MAX_GROUP_ID_LENGTH


class GroupCoordinator:
    """Every consumer group of this broker. Reactor thread only.

    :param clock: time source for every timer.
    :param offsets: the durable store of committed offsets (already open).
    :param run_blocking: ``run_blocking(f, *args) -> Deferred`` runs a blocking call in a
        worker thread (tests pass a synchronous fake).
    :param initial_rebalance_delay_ms: Kafka's ``group.initial.rebalance.delay.ms``
        (Kafka: 3 s; shorter here so a lone consumer starts quickly).
    :param min_session_timeout_ms: Kafka's ``group.min.session.timeout.ms``.
    :param max_session_timeout_ms: Kafka's ``group.max.session.timeout.ms``.
    """

    _log = Logger()

    def __init__(
        self,
        *,
        clock: IReactorTime,
        offsets: OffsetStore,
        run_blocking: Callable[..., Deferred[Any]],
        initial_rebalance_delay_ms: int = 500,
        min_session_timeout_ms: int = 6000,
        max_session_timeout_ms: int = 1800000,
        max_group_size: int = MAX_GROUP_SIZE,
    ) -> None:
        self._clock = cast(_Scheduler, clock)
        self._offsets = offsets
        self._run_blocking = run_blocking
        self._initial_delay_ms = initial_rebalance_delay_ms
        self._min_session_ms = min_session_timeout_ms
        self._max_session_ms = max_session_timeout_ms
        self._max_group_size = max_group_size
        self._groups: dict[str, _Group] = {}
        self._stopped = False
        # Answers are queued and fired only once the state change that produced them is
        # complete, so a callback that calls back into the coordinator sees a consistent
        # group.
        self._outbox: deque[tuple[Deferred[Any], object]] = deque()
        self._commit_queue: list[_PendingCommit] = []
        #: Membership records (None: tombstone) waiting to be written with the next batch.
        self._group_writes: list[tuple[str, StoredGroup | None]] = []
        self._commit_in_flight = False
        #: Fired by stop()'s Deferred once no journal write is queued or running.
        self._drained: list[Deferred[None]] = []
        self._restore()

    def _restore(self) -> None:
        """Rebuild every group the store holds as Stable, as of its last stored generation."""
        for group_id, stored in sorted(self._offsets.groups_metadata().items()):
            if not stored.members:
                continue
            group = _Group(
                group_id,
                state=GroupState.STABLE,
                generation=stored.generation,
                protocol_type=stored.protocol_type,
                protocol_name=stored.protocol_name,
                leader_id=stored.leader_id,
            )
            for m in stored.members:
                member = _Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    session_timeout_ms=m.session_timeout_ms,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    # Only the chosen protocol's metadata is kept (it is all the leader
                    # ever sees); a re-join brings the member's full list again.
                    protocols=[(stored.protocol_name, m.metadata)],
                    assignment=m.assignment,
                )
                group.members[m.member_id] = member
                if m.group_instance_id is not None:
                    group.instance_ids[m.group_instance_id] = m.member_id
            if group.leader_id not in group.members:
                group.leader_id = next(iter(group.members))
            self._groups[group_id] = group
            # A fresh session each: the clients had no way to heartbeat while we were down.
            for member in group.members.values():
                self._arm_session(group, member)
            self._log.info(
                "group {group!r}: restored generation {generation} with {count} member(s)",
                group=group_id,
                generation=group.generation,
                count=len(group.members),
            )

    # -- inspection ---------------------------------------------------------------------

    def group_state(self, group_id: str) -> GroupState | None:
        """The group's state, or None when the coordinator holds nothing for it."""
        if self._stopped:
            return GroupState.DEAD
        group = self._groups.get(group_id)
        return None if group is None else group.state

    def list_groups(self) -> list[tuple[str, str]]:
        """``(group_id, protocol_type)`` of every group with members (ListGroups)."""
        return [
            (g.group_id, g.protocol_type or "")
            for g in self._groups.values()
            if g.protocol_type is not None
        ]

    # -- JoinGroup ----------------------------------------------------------------------

    def join(
        self,
        group_id: str,
        member_id: str,
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        group_instance_id: str | None,
        require_known_member_id: bool,
    ) -> Deferred[JoinResult]:
        """Handle a JoinGroup. The Deferred is held until the join phase completes (all
        known members re-joined, or the rebalance timeout dropped the stragglers).

        Cancelling the Deferred (the client's connection closed) leaves the member in the
        group; it re-joins or its session times out. Errors arrive as ``error_code``,
        never as failures.

        :param rebalance_timeout_ms: JoinGroup v0 has none; pass ``session_timeout_ms``
            (any value <= 0 is taken to mean that).
        :param require_known_member_id: JoinGroup v4+: a new dynamic member first gets
            MEMBER_ID_REQUIRED with its id, and must join again with it.
        """
        try:
            d = self._join(
                group_id,
                member_id,
                client_id=client_id,
                client_host=client_host,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=(
                    rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms
                ),
                protocol_type=protocol_type,
                protocols=list(protocols),
                group_instance_id=group_instance_id,
                require_known_member_id=require_known_member_id,
            )
        finally:
            self._flush_outbox()
        return d

    def _join(
        self,
        group_id: str,
        member_id: str,
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        group_instance_id: str | None,
        require_known_member_id: bool,
    ) -> Deferred[JoinResult]:
        def fail(code: ErrorCode, mid: str = member_id) -> Deferred[JoinResult]:
            return defer.succeed(JoinResult(code, -1, "", "", mid, []))

        if self._stopped:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group_id or _group_id_too_long(group_id):
            return fail(ErrorCode.INVALID_GROUP_ID)
        if not self._min_session_ms <= session_timeout_ms <= self._max_session_ms:
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        if not protocol_type or not protocols:
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        group = self._groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if member_id and member is None and (group is None or member_id not in group.pending):
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        # A static member re-joining with an empty member id replaces its old incarnation.
        replaced: _Member | None = None
        if group is not None and member is None and group_instance_id is not None:
            old_id = group.instance_ids.get(group_instance_id)
            replaced = None if old_id is None else group.members.get(old_id)
        if group is not None and not self._supports(
            group, protocol_type, protocols, member or replaced
        ):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

        if member is not None:
            assert group is not None
            if group_instance_id is not None and member.group_instance_id != group_instance_id:
                return fail(ErrorCode.FENCED_INSTANCE_ID)
            return self._join_existing(
                group,
                member,
                client_id=client_id,
                client_host=client_host,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                protocols=protocols,
            )

        size = 0 if group is None else len(group.members) + len(group.pending)
        if replaced is None and not member_id and size >= self._max_group_size:
            return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)

        if group is None:
            group = self._groups[group_id] = _Group(group_id)
        if not member_id:
            new_id = self._new_member_id(group_instance_id or client_id)
            if group_instance_id is None and require_known_member_id:
                # Kafka (JoinGroup v4+): hand out the id first and only admit the member
                # when it comes back with it, so a client that times out mid-join and
                # retries does not leave a ghost member behind.
                group.pending[new_id] = self._clock.callLater(
                    session_timeout_ms / 1000, self._on_pending_expired, group, new_id
                )
                return fail(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            member_id = new_id
        else:
            _cancel(group.pending.pop(member_id, None))

        if replaced is not None:
            self._log.info(
                "group {group!r}: static member {instance!r} re-joined, fencing {old!r}",
                group=group.group_id,
                instance=group_instance_id,
                old=replaced.member_id,
            )
            self._drop_member(group, replaced, ErrorCode.FENCED_INSTANCE_ID)
        member = _Member(
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocols=protocols,
        )
        group.members[member_id] = member
        if group_instance_id is not None:
            group.instance_ids[group_instance_id] = member_id
        if group.protocol_type is None:
            group.protocol_type = protocol_type
        self._log.info(
            "group {group!r}: member {member!r} joined ({state})",
            group=group.group_id,
            member=member_id,
            state=group.state.value,
        )
        if group.state is GroupState.PREPARING_REBALANCE:
            if group.initial_delay:
                group.new_member_added = True
        else:
            self._prepare_rebalance(group, f"new member {member_id} joined")
        d = self._await_join(group, member)
        self._maybe_complete_join(group)
        return d

    def _join_existing(
        self,
        group: _Group,
        member: _Member,
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocols: list[tuple[str, bytes]],
    ) -> Deferred[JoinResult]:
        changed = member.protocols != protocols
        member.client_id = client_id
        member.client_host = client_host
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.protocols = protocols
        if group.state is GroupState.PREPARING_REBALANCE:
            d = self._await_join(group, member)
            self._maybe_complete_join(group)
            return d
        # CompletingRebalance or Stable (an Empty group has no members). A follower that
        # re-joins with unchanged metadata just gets the current generation again; the
        # leader re-joining means it wants a new assignment (e.g. topic metadata changed).
        rebalance = changed or (
            group.state is GroupState.STABLE and member.member_id == group.leader_id
        )
        if not rebalance:
            self._arm_session(group, member)
            return defer.succeed(self._join_result(group, member))
        reason = "member metadata changed" if changed else "leader re-joined"
        self._prepare_rebalance(group, f"{reason} ({member.member_id})")
        d = self._await_join(group, member)
        self._maybe_complete_join(group)
        return d

    def _await_join(self, group: _Group, member: _Member) -> Deferred[JoinResult]:
        """Park ``member``'s JoinGroup until the join phase completes."""
        old = member.join_waiter
        if old is not None:
            # The same member joined again while its first JoinGroup was held (its client
            # reconnected): the first request's answer goes nowhere useful; tell it to retry.
            self._deliver(
                old,
                JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, -1, "", "", member.member_id, []),
            )
        d: Deferred[JoinResult] = Deferred(
            lambda cancelled: self._join_cancelled(group, member, cancelled)
        )
        member.join_waiter = d
        member.joined = True
        if member.member_id not in group.join_order:
            group.join_order.append(member.member_id)
        # A member parked in JoinGroup cannot heartbeat; the rebalance timeout bounds it.
        self._arm_session(group, member)
        return d

    def _join_cancelled(self, group: _Group, member: _Member, d: Deferred[JoinResult]) -> None:
        if member.join_waiter is d:
            member.join_waiter = None
            # Still counted as joined for this round; if it never comes back, its session
            # times out like any silent member's.
            if self._is_current(group, member):
                self._arm_session(group, member)
        self._flush_outbox()

    def _supports(
        self,
        group: _Group,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        member: _Member | None,
    ) -> bool:
        """Kafka's ``supportsProtocols``, but a re-joining member is compared only with the
        *other* members, so a lone member may change its protocols freely."""
        others = [m for m in group.members.values() if m is not member]
        if not others:
            return True
        if protocol_type != group.protocol_type:
            return False
        candidates = set.intersection(*(m.protocol_names() for m in others))
        return any(name in candidates for name, _ in protocols)

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix[:MAX_CLIENT_ID_IN_MEMBER_ID]}-{uuid.uuid4()}"

    def _on_pending_expired(self, group: _Group, member_id: str) -> None:
        # The client never came back with the id MEMBER_ID_REQUIRED gave it.
        if group.pending.pop(member_id, None) is not None:
            self._maybe_forget(group)

    # -- rebalance state machine --------------------------------------------------------

    def _prepare_rebalance(self, group: _Group, reason: str) -> None:
        """Enter PreparingRebalance: every member must join again."""
        was_empty = group.state is GroupState.EMPTY
        self._log.info(
            "group {group!r}: preparing rebalance (generation {generation}): {reason}",
            group=group.group_id,
            generation=group.generation,
            reason=reason,
        )
        _cancel(group.sync_timer)
        group.sync_timer = None
        group.pending_sync.clear()
        for m in group.members.values():
            m.joined = False
            if m.sync_waiter is not None:
                waiter, m.sync_waiter = m.sync_waiter, None
                self._deliver(waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                self._arm_session(group, m)
        group.join_order = []
        group.state = GroupState.PREPARING_REBALANCE
        _cancel(group.rebalance_timer)
        timeout_ms = max(m.rebalance_timeout_ms for m in group.members.values())
        if was_empty and self._initial_delay_ms > 0:
            # Kafka's group.initial.rebalance.delay.ms: wait a little for more consumers
            # of a starting application, so they do not cause a rebalance each.
            delay_ms = min(self._initial_delay_ms, timeout_ms)
            group.initial_delay = True
            group.new_member_added = False
            group.initial_remaining_ms = max(timeout_ms - delay_ms, 0)
            group.rebalance_timer = self._clock.callLater(
                delay_ms / 1000, self._on_initial_delay, group
            )
        else:
            group.initial_delay = False
            group.rebalance_timer = self._clock.callLater(
                timeout_ms / 1000, self._on_rebalance_timeout, group
            )

    def _on_initial_delay(self, group: _Group) -> None:
        group.rebalance_timer = None
        if (
            self._groups.get(group.group_id) is not group
            or group.state is not GroupState.PREPARING_REBALANCE
            or not group.initial_delay
        ):
            return
        if group.new_member_added and group.initial_remaining_ms > 0:
            # Joiners are still arriving: wait another delay, within the rebalance timeout.
            delay_ms = min(self._initial_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms -= delay_ms
            group.new_member_added = False
            group.rebalance_timer = self._clock.callLater(
                delay_ms / 1000, self._on_initial_delay, group
            )
            return
        group.initial_delay = False
        self._complete_join(group)
        self._flush_outbox()

    def _on_rebalance_timeout(self, group: _Group) -> None:
        group.rebalance_timer = None
        if (
            self._groups.get(group.group_id) is group
            and group.state is GroupState.PREPARING_REBALANCE
        ):
            self._complete_join(group)
        self._flush_outbox()

    def _maybe_complete_join(self, group: _Group) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and not group.initial_delay
            and all(m.joined for m in group.members.values())
        ):
            self._complete_join(group)

    def _complete_join(self, group: _Group) -> None:
        """End the join phase: drop stragglers, start the next generation, answer joins."""
        _cancel(group.rebalance_timer)
        group.rebalance_timer = None
        for straggler in [m for m in group.members.values() if not m.joined]:
            self._log.info(
                "group {group!r}: member {member!r} did not re-join in time, removed",
                group=group.group_id,
                member=straggler.member_id,
            )
            self._drop_member(group, straggler, ErrorCode.UNKNOWN_MEMBER_ID)
        if not group.members:
            self._go_empty(group)
            return
        group.generation += 1
        if group.leader_id not in group.members:
            present = [mid for mid in group.join_order if mid in group.members]
            group.leader_id = present[0] if present else next(iter(group.members))
        group.protocol_name = self._select_protocol(group)
        group.state = GroupState.COMPLETING_REBALANCE
        group.pending_sync = set(group.members)
        timeout_ms = max(m.rebalance_timeout_ms for m in group.members.values())
        group.sync_timer = self._clock.callLater(
            timeout_ms / 1000, self._on_sync_timeout, group, group.generation
        )
        self._log.info(
            "group {group!r}: generation {generation} with {count} member(s), "
            "protocol {protocol!r}, leader {leader!r}",
            group=group.group_id,
            generation=group.generation,
            count=len(group.members),
            protocol=group.protocol_name,
            leader=group.leader_id,
        )
        for m in group.members.values():
            m.assignment = b""
            if m.join_waiter is not None:
                waiter, m.join_waiter = m.join_waiter, None
                self._deliver(waiter, self._join_result(group, m))
            self._arm_session(group, m)

    def _select_protocol(self, group: _Group) -> str:
        """Kafka's ``selectProtocol``: each member votes for its first protocol that every
        member supports; most votes wins (a tie goes to the leader's preference)."""
        members = list(group.members.values())
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
        first = group.members.get(group.leader_id or "") or members[0]
        for name, _ in first.protocols:
            if votes.get(name) == best:
                return name
        return next(name for name, count in votes.items() if count == best)

    def _join_result(self, group: _Group, member: _Member) -> JoinResult:
        protocol = group.protocol_name or ""
        members: list[tuple[str, str | None, bytes]] = []
        if member.member_id == group.leader_id:
            members = [
                (m.member_id, m.group_instance_id, m.metadata_for(protocol))
                for m in group.members.values()
            ]
        return JoinResult(
            ErrorCode.NONE,
            group.generation,
            protocol,
            group.leader_id or "",
            member.member_id,
            members,
        )

    def _on_sync_timeout(self, group: _Group, generation: int) -> None:
        group.sync_timer = None
        if (
            self._groups.get(group.group_id) is not group
            or group.generation != generation
            or group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
        ):
            return
        # Kafka's pending-sync timeout: members that were given this generation but never
        # sent SyncGroup within the rebalance timeout. A silent member is already caught
        # by its session timer; this catches one that heartbeats but never syncs (a
        # leader like that would otherwise hold its followers' SyncGroups for ever).
        late = [group.members[mid] for mid in group.pending_sync if mid in group.members]
        group.pending_sync.clear()
        if not late:
            return
        for m in late:
            self._log.info(
                "group {group!r}: member {member!r} did not sync in time, removed",
                group=group.group_id,
                member=m.member_id,
            )
            self._drop_member(group, m, ErrorCode.UNKNOWN_MEMBER_ID)
        self._after_departure(group, "members did not sync in time")
        self._flush_outbox()

    def _drop_member(self, group: _Group, member: _Member, code: ErrorCode) -> None:
        """Remove ``member`` and answer whatever it has parked; no state transition."""
        _cancel(member.session_timer)
        member.session_timer = None
        if member.join_waiter is not None:
            waiter, member.join_waiter = member.join_waiter, None
            self._deliver(waiter, JoinResult(code, -1, "", "", member.member_id, []))
        if member.sync_waiter is not None:
            sync_waiter, member.sync_waiter = member.sync_waiter, None
            self._deliver(sync_waiter, SyncResult(code))
        del group.members[member.member_id]
        instance = member.group_instance_id
        if instance is not None and group.instance_ids.get(instance) == member.member_id:
            del group.instance_ids[instance]
        if member.member_id in group.join_order:
            group.join_order.remove(member.member_id)
        group.pending_sync.discard(member.member_id)
        if group.leader_id == member.member_id:
            group.leader_id = None

    def _remove_member(self, group: _Group, member: _Member, code: ErrorCode, why: str) -> None:
        """A member left or timed out: drop it and rebalance the rest (or go Empty)."""
        self._log.info(
            "group {group!r}: member {member!r} removed: {why}",
            group=group.group_id,
            member=member.member_id,
            why=why,
        )
        self._drop_member(group, member, code)
        self._after_departure(group, f"member {member.member_id} {why}")

    def _after_departure(self, group: _Group, reason: str) -> None:
        if not group.members:
            self._go_empty(group)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)
        elif group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            self._prepare_rebalance(group, reason)

    def _go_empty(self, group: _Group) -> None:
        _cancel(group.rebalance_timer)
        _cancel(group.sync_timer)
        group.rebalance_timer = group.sync_timer = None
        group.state = GroupState.EMPTY
        group.protocol_type = group.protocol_name = group.leader_id = None
        group.initial_delay = group.new_member_added = False
        group.pending_sync.clear()
        group.join_order = []
        self._log.info("group {group!r} is empty", group=group.group_id)
        # Nobody to restore after a restart (the store skips it if nothing was stored).
        self._queue_group_write(group.group_id, None)
        self._maybe_forget(group)

    def _persist_group(self, group: _Group) -> None:
        protocol = group.protocol_name or ""
        stored = StoredGroup(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol_name=protocol,
            leader_id=group.leader_id or "",
            members=tuple(
                StoredMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    session_timeout_ms=m.session_timeout_ms,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    metadata=m.metadata_for(protocol),
                    assignment=m.assignment,
                )
                for m in group.members.values()
            ),
        )
        self._queue_group_write(group.group_id, stored)

    def _queue_group_write(self, group_id: str, stored: StoredGroup | None) -> None:
        # Only the latest record per group matters; earlier queued ones are superseded.
        self._group_writes = [w for w in self._group_writes if w[0] != group_id]
        self._group_writes.append((group_id, stored))
        self._start_commit()

    def _maybe_forget(self, group: _Group) -> None:
        # An Empty group has nothing worth keeping (its stored membership is tombstoned), so
        # with no outstanding member ids it is dropped: memory then scales with live
        # members, not with every id ever used. Its committed offsets live on in the store.
        if (
            group.state is GroupState.EMPTY
            and not group.members
            and not group.pending
            and self._groups.get(group.group_id) is group
        ):
            del self._groups[group.group_id]

    # -- sessions -----------------------------------------------------------------------

    def _is_current(self, group: _Group, member: _Member) -> bool:
        return (
            self._groups.get(group.group_id) is group
            and group.members.get(member.member_id) is member
        )

    def _arm_session(self, group: _Group, member: _Member) -> None:
        """(Re)start ``member``'s session timeout, unless it is parked in Join/SyncGroup
        (it cannot heartbeat then; the rebalance timeout bounds the wait instead)."""
        if member.join_waiter is not None or member.sync_waiter is not None:
            _cancel(member.session_timer)
            member.session_timer = None
            return
        seconds = member.session_timeout_ms / 1000
        if member.session_timer is not None and member.session_timer.active():
            member.session_timer.reset(seconds)
        else:
            member.session_timer = self._clock.callLater(
                seconds, self._on_session_expired, group, member
            )

    def _on_session_expired(self, group: _Group, member: _Member) -> None:
        member.session_timer = None
        if not self._is_current(group, member):
            return
        self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID, "session timed out")
        self._flush_outbox()

    def _member_for(
        self, group_id: str, generation_id: int, member_id: str
    ) -> tuple[_Group, _Member] | ErrorCode:
        """The common checks of SyncGroup and Heartbeat (note table 6.2)."""
        if self._stopped:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not group_id or _group_id_too_long(group_id):
            return ErrorCode.INVALID_GROUP_ID
        group = self._groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return group, member

    # -- SyncGroup, Heartbeat, LeaveGroup -----------------------------------------------

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: list[tuple[str, bytes]],
    ) -> Deferred[SyncResult]:
        """Handle a SyncGroup. A follower's answer is held until the leader's SyncGroup
        (carrying every member's assignment) arrives. Cancelling is harmless."""
        try:
            d = self._sync(group_id, generation_id, member_id, assignments)
        finally:
            self._flush_outbox()
        return d

    def _sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: list[tuple[str, bytes]],
    ) -> Deferred[SyncResult]:
        found = self._member_for(group_id, generation_id, member_id)
        if isinstance(found, ErrorCode):
            return defer.succeed(SyncResult(found))
        group, member = found
        if group.state is GroupState.PREPARING_REBALANCE:
            return defer.succeed(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            _cancel(group.sync_timer)
            group.sync_timer = None
        if group.state is GroupState.STABLE:
            self._arm_session(group, member)
            return defer.succeed(SyncResult(ErrorCode.NONE, member.assignment))
        # CompletingRebalance.
        if member.sync_waiter is not None:
            self._deliver(member.sync_waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        d: Deferred[SyncResult] = Deferred(
            lambda cancelled: self._sync_cancelled(group, member, cancelled)
        )
        member.sync_waiter = d
        self._arm_session(group, member)
        if member_id == group.leader_id:
            given = dict(assignments)  # a repeated member id: the last entry wins
            group.state = GroupState.STABLE
            self._log.info(
                "group {group!r}: generation {generation} is stable",
                group=group.group_id,
                generation=group.generation,
            )
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            # Queued before any member is answered, so the record is in the write queue
            # ahead of every commit those members make with this generation.
            self._persist_group(group)
            for m in group.members.values():
                if m.sync_waiter is not None:
                    waiter, m.sync_waiter = m.sync_waiter, None
                    self._deliver(waiter, SyncResult(ErrorCode.NONE, m.assignment))
                    self._arm_session(group, m)
        return d

    def _sync_cancelled(self, group: _Group, member: _Member, d: Deferred[SyncResult]) -> None:
        if member.sync_waiter is d:
            member.sync_waiter = None
            if self._is_current(group, member):
                self._arm_session(group, member)
        self._flush_outbox()

    def heartbeat(self, group_id: str, generation_id: int, member_id: str) -> int:
        """Handle a Heartbeat: 0, or 27 while a rebalance is being prepared (that is how
        members learn they must re-join), or 22/25/24/15."""
        found = self._member_for(group_id, generation_id, member_id)
        if isinstance(found, ErrorCode):
            return int(found)
        group, member = found
        self._arm_session(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            return int(ErrorCode.REBALANCE_IN_PROGRESS)
        return int(ErrorCode.NONE)

    def leave(self, group_id: str, member_id: str) -> int:
        """Handle a LeaveGroup (v0-2): the rest of the group rebalances, or it goes Empty."""
        if self._stopped:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group_id or _group_id_too_long(group_id):
            return int(ErrorCode.INVALID_GROUP_ID)
        group = self._groups.get(group_id)
        if group is None:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        if member_id in group.pending:
            _cancel(group.pending.pop(member_id))
            self._maybe_forget(group)
            return int(ErrorCode.NONE)
        member = group.members.get(member_id)
        if member is None:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        try:
            self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID, "left the group")
        finally:
            self._flush_outbox()
        return int(ErrorCode.NONE)

    # -- offsets ------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: list[OffsetEntry],
    ) -> Deferred[dict[tuple[str, int], int]]:
        """Handle an OffsetCommit. Fires, with an error code per ``(topic, partition)``,
        only after the accepted offsets are fsync'd; they are then visible to
        :meth:`fetch_offsets`.

        Group rules (note table 6.2): generation -1 on a group without members (simple
        consumer / manual assignment) is accepted; generation -1 on a group with members,
        or an unknown member: 25; a stale generation: 22; CompletingRebalance: 27;
        PreparingRebalance and Stable: accepted. An empty group id is allowed, as in
        Kafka (it is only ever a key in the journal).
        """
        keys = [(topic, partition) for topic, partition, *_ in offsets]
        code = self._check_commit(group_id, generation_id, member_id)
        if code is not ErrorCode.NONE:
            return defer.succeed({key: int(code) for key in keys})
        results: dict[tuple[str, int], int] = {}
        accepted: list[OffsetEntry] = []
        for entry in offsets:
            topic, partition, offset, leader_epoch, metadata = entry
            if metadata is not None and (
                len(metadata.encode("utf-8", "surrogatepass")) > MAX_METADATA_LENGTH
            ):
                results[(topic, partition)] = int(ErrorCode.OFFSET_METADATA_TOO_LARGE)
            elif not (
                _valid_topic(topic)
                and 0 <= partition <= _INT32_MAX
                and _INT64_MIN <= offset <= _INT64_MAX
                and -(2**31) <= leader_epoch <= _INT32_MAX
            ):
                results[(topic, partition)] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                results[(topic, partition)] = int(ErrorCode.NONE)
                accepted.append(entry)
        if not accepted:
            return defer.succeed(results)
        d: Deferred[dict[tuple[str, int], int]] = Deferred()
        self._commit_queue.append(_PendingCommit(group_id, accepted, results, d))
        self._start_commit()
        return d

    def _check_commit(self, group_id: str, generation_id: int, member_id: str) -> ErrorCode:
        if self._stopped:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if _group_id_too_long(group_id):
            return ErrorCode.INVALID_GROUP_ID
        group = self._groups.get(group_id)
        if group is None or not group.members:
            # Nobody is a member: only a commit from outside the group protocol (generation
            # -1) makes sense; a member of a generation that no longer exists must re-join.
            return ErrorCode.NONE if generation_id < 0 else ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if generation_id < 0 or member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        # Stable, or PreparingRebalance: Kafka stores the commit; refusing it would make
        # clients re-deliver what they already processed.
        self._arm_session(group, member)
        return ErrorCode.NONE

    def _start_commit(self) -> None:
        """Write every queued commit in one store call (one fsync), one batch at a time so
        that commits reach the journal in the order they arrived."""
        if self._commit_in_flight:
            return
        if not (self._commit_queue or self._group_writes):
            drained, self._drained = self._drained, []
            for d in drained:
                d.callback(None)
            return
        batch, self._commit_queue = self._commit_queue, []
        groups, self._group_writes = self._group_writes, []
        self._commit_in_flight = True
        d = self._run_blocking(self._write_batch, [(c.group_id, c.entries) for c in batch], groups)
        d.addBoth(self._commit_done, batch)

    def _write_batch(
        self,
        commits: list[tuple[str, list[OffsetEntry]]],
        groups: list[tuple[str, StoredGroup | None]],
    ) -> None:
        # Worker thread: touches only the store.
        self._offsets.commit_many(commits, groups=groups)

    def _commit_done(self, result: object, batch: list[_PendingCommit]) -> None:
        self._commit_in_flight = False
        failed = isinstance(result, Failure)
        if isinstance(result, Failure):
            # Group records lost this way only cost a rebalance after a restart.
            self._log.failure("writing consumer offsets / group metadata failed", result)
        for commit in batch:
            answer = dict(commit.results)
            if failed:
                for topic, partition, *_ in commit.entries:
                    answer[(topic, partition)] = int(ErrorCode.UNKNOWN_SERVER_ERROR)
            if not commit.waiter.called:
                commit.waiter.callback(answer)
        self._start_commit()

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> list[tuple[str, int, int, int, str, int]]:
        """Handle an OffsetFetch from memory (no I/O):
        ``(topic, partition, offset, leader_epoch, metadata, error_code)`` per partition,
        with ``-1, -1, ""`` and error 0 where nothing is committed (the client then applies
        auto.offset.reset). ``partitions=None`` means every committed partition."""
        code = ErrorCode.NONE
        if self._stopped:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif _group_id_too_long(group_id):
            code = ErrorCode.INVALID_GROUP_ID
        if partitions is None:
            if code is not ErrorCode.NONE:
                return []
            committed = self._offsets.committed(group_id)
            return [
                (topic, partition, offset, epoch, metadata or "", 0)
                for (topic, partition), (offset, epoch, metadata) in sorted(committed.items())
            ]
        out: list[tuple[str, int, int, int, str, int]] = []
        for topic, partition in partitions:
            found = None
            if code is ErrorCode.NONE:
                found = self._offsets.fetch(group_id, topic, partition)
            if found is None:
                out.append((topic, partition, -1, -1, "", int(code)))
            else:
                offset, epoch, metadata = found
                out.append((topic, partition, offset, epoch, metadata or "", 0))
        return out

    # -- shutdown -----------------------------------------------------------------------

    def stop(self) -> Deferred[None]:
        """Cancel every timer and answer every held JoinGroup/SyncGroup (and queued, not yet
        started commit) with COORDINATOR_NOT_AVAILABLE; later calls get the same error.
        A commit already being written still fires with its real outcome.

        Returns a Deferred that fires once the journal is quiet: the write in progress has
        finished and group records still waiting (the last Stable generations) are
        written, so the offsets store may then be closed."""
        drained: Deferred[None] = Deferred()
        self._drained.append(drained)
        if self._stopped:
            self._start_commit()
            return drained
        self._stopped = True
        for group in self._groups.values():
            _cancel(group.rebalance_timer)
            _cancel(group.sync_timer)
            group.rebalance_timer = group.sync_timer = None
            for timer in group.pending.values():
                _cancel(timer)
            group.pending.clear()
            for m in group.members.values():
                _cancel(m.session_timer)
                m.session_timer = None
                if m.join_waiter is not None:
                    waiter, m.join_waiter = m.join_waiter, None
                    self._deliver(
                        waiter,
                        JoinResult(
                            ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", "", m.member_id, []
                        ),
                    )
                if m.sync_waiter is not None:
                    sync_waiter, m.sync_waiter = m.sync_waiter, None
                    self._deliver(sync_waiter, SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            group.state = GroupState.DEAD
        self._groups.clear()
        queued, self._commit_queue = self._commit_queue, []
        for commit in queued:
            answer = dict(commit.results)
            for topic, partition, *_ in commit.entries:
                answer[(topic, partition)] = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            self._deliver(commit.waiter, answer)
        self._flush_outbox()
        self._start_commit()
        return drained

    # -- plumbing -----------------------------------------------------------------------

    def _deliver(self, d: Deferred[_T], result: _T) -> None:
        self._outbox.append((d, result))

    def _flush_outbox(self) -> None:
        while self._outbox:
            d, result = self._outbox.popleft()
            if not d.called:  # a cancelled Deferred has already fired with CancelledError
                d.callback(result)


def _valid_topic(topic: str) -> bool:
    try:
        validate_topic_name(topic)
    except InvalidTopic:
        return False
    return True


__all__ = [
    "MAX_GROUP_SIZE",
    "ErrorCode",
    "GroupCoordinator",
    "GroupState",
    "JoinResult",
    "OffsetEntry",
    "SyncResult",
]
