# -*- test-case-name: tests.kafka.groups.share.test_coordinator -*-
"""The share group coordinator: share groups' members, epochs, assignments and sessions.

A member joins with ShareGroupHeartbeat epoch 0 (it chose its own member id), is given
the group's epoch and its partitions (:func:`~.assignment.assign`), heartbeats every
``share.heartbeat.interval.ms`` and leaves with epoch -1; a member silent for
``share.session.timeout.ms`` is removed. The group epoch rises on every change of
membership, subscriptions or topic partition counts; the assignment follows at once
(there is no revocation step in share groups: records, not partitions, are owned).
A member leaving releases the records it holds (the records engine does that:
:class:`~brokerd.core.share.service.ShareService`).

Share sessions (ShareFetch's ``ShareSessionEpoch``): epoch 0 opens a member's session
with the request's partitions, each later request must carry the next epoch and adds and
forgets partitions, -1 closes it (:meth:`ShareGroupCoordinator.close_session`, called once
that request's acknowledgements are applied). Sessions are bounded as Kafka bounds them:
one per member (keyed by group and member id: a member's new session replaces its old
one), so at most ``group.share.max.size`` per group, and ``max_sessions`` in all
(``group.share.max.share.sessions``). At that cap a new session is refused
(:attr:`SessionError.LIMIT_REACHED`) and the live ones go on untouched: evicting the
oldest would let anyone with a few groups of their own break every other group's
sessions. Only a session whose member is gone (it left without closing it) is evicted to
make room. Everything here is memory only: a restart forgets members and sessions
(clients rejoin), while the records' state is durable in the share state journal.

Operators' views (``brokerd.operator``) read the members through
:class:`~brokerd.operator.group_face.ShareMembersFace`. What it does not do: read or write
records, or encode anything.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Mapping

import attrs

from brokerd.clock import Clock, DelayedCall
from brokerd.kafka.groups.share.assignment import assign

__all__ = ["HeartbeatResult", "Member", "SessionError", "ShareGroup", "ShareGroupCoordinator"]

TopicPartition = tuple[str, int]
ASSIGNOR_NAME = "simple"
#: Most members one share group holds (Kafka's ``group.share.max.size``).
MAX_MEMBERS = 200
#: Most share sessions kept (Kafka's ``group.share.max.share.sessions``).
MAX_SESSIONS = 2000
#: Longest member id accepted.
MAX_MEMBER_ID = 255


class HeartbeatError(enum.Enum):
    NONE = "none"
    UNKNOWN_MEMBER = "unknown member"
    FENCED = "fenced member epoch"
    INVALID = "invalid request"
    GROUP_FULL = "group max size reached"


class SessionError(enum.Enum):
    NOT_FOUND = "share session not found"
    INVALID_EPOCH = "invalid share session epoch"
    #: Only members open sessions (which bounds a group's sessions by its members).
    UNKNOWN_MEMBER = "unknown member"
    LIMIT_REACHED = "the broker holds its most share sessions (group.share.max.share.sessions)"


@attrs.define
class Member:
    member_id: str
    epoch: int
    topics: tuple[str, ...]
    client_id: str
    client_host: str
    rack_id: str | None = None
    assigned: set[TopicPartition] = attrs.Factory(set)
    timer: DelayedCall | None = None

    @property
    def group_instance_id(self) -> None:
        """Share groups have no static members (what operators' views ask of a member)."""
        return None

    def assigned_partitions(self) -> tuple[TopicPartition, ...]:
        """Its assignment, sorted (what operators' views ask of a member)."""
        return tuple(sorted(self.assigned))


@attrs.define
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Member] = attrs.Factory(dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"


@attrs.frozen
class HeartbeatResult:
    error: HeartbeatError
    member_epoch: int = 0
    assignment: frozenset[TopicPartition] | None = None
    message: str | None = None


@attrs.define
class _Session:
    epoch: int
    partitions: set[TopicPartition]
    #: Closed by its client (epoch -1), its acknowledgements still being applied.
    closing: bool = False


class ShareGroupCoordinator:
    """See the module docstring.

    :param clock: the reactor or a ``task.Clock`` (session timeouts).
    :param partition_counts: topic name -> partition count of existing topics, read live.
    :param on_member_gone: called with (group, member id) when a member leaves or times
        out (the records it holds are released).
    :param session_timeout_ms: ``(group) -> ms``, read per heartbeat.
    :param max_sessions: most share sessions held at once (Kafka's
        ``group.share.max.share.sessions``).
    """

    def __init__(
        self,
        *,
        clock: Clock,
        partition_counts: Callable[[], Mapping[str, int]],
        on_member_gone: Callable[[str, str], None],
        session_timeout_ms: Callable[[str], int],
        heartbeat_interval_ms: Callable[[str], int],
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self._clock = clock
        self._partition_counts = partition_counts
        self._on_member_gone = on_member_gone
        self._session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.groups: dict[str, ShareGroup] = {}
        self._sessions: dict[tuple[str, str], _Session] = {}
        self.max_sessions = max_sessions
        #: Sessions whose member left without closing them (insertion ordered, oldest
        #: first): the only ones evicted to make room for a new session.
        self._orphans: dict[tuple[str, str], None] = {}

    # -- membership ----------------------------------------------------------------------

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        topics: Iterable[str] | None,
        *,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatResult:
        if not member_id or len(member_id) > MAX_MEMBER_ID:
            return HeartbeatResult(HeartbeatError.INVALID, message="MemberId can't be empty.")
        # Only a member joining makes a group: a heartbeat of any other epoch for an
        # unknown group must not leave an empty group behind (a client could invent
        # ids without end).
        known = self.groups.get(group_id)
        member = None if known is None else known.members.get(member_id)
        if member_epoch == -1:
            if known is not None and member is not None:
                self._remove(known, member, left=True)
            return HeartbeatResult(HeartbeatError.NONE, member_epoch=-1)
        if member_epoch != 0 and member is None:
            return HeartbeatResult(HeartbeatError.UNKNOWN_MEMBER)
        if member_epoch == 0 and topics is None:
            return HeartbeatResult(
                HeartbeatError.INVALID,
                message="SubscribedTopicNames must be set in first request.",
            )
        group = self.groups.setdefault(group_id, ShareGroup(group_id))
        if member is None:  # joining: any other epoch was answered above
            if len(group.members) >= MAX_MEMBERS:
                return HeartbeatResult(HeartbeatError.GROUP_FULL)
            member = Member(member_id, 0, tuple(sorted(set(topics or ()))), client_id,
                            client_host)
            group.members[member_id] = member
            group.epoch += 1
        elif member_epoch not in (0, member.epoch):
            return HeartbeatResult(HeartbeatError.FENCED)
        if topics is not None and tuple(sorted(set(topics))) != member.topics:
            member.topics = tuple(sorted(set(topics)))
            group.epoch += 1
        if rack_id is not None:
            member.rack_id = rack_id
        self._reassign(group)
        # A member takes the group's assignment epoch when it heartbeats (the others
        # keep the epoch they were last told until their own heartbeat).
        member.epoch = group.assignment_epoch
        self._touch(group, member)
        return HeartbeatResult(
            HeartbeatError.NONE, member_epoch=member.epoch,
            assignment=frozenset(member.assigned),
        )

    def _reassign(self, group: ShareGroup) -> None:
        counts = dict(self._partition_counts())
        wanted = assign({m.member_id: m.topics for m in group.members.values()}, counts)
        changed = any(wanted[m.member_id] != m.assigned for m in group.members.values())
        if changed:
            group.epoch = max(group.epoch, group.assignment_epoch + 1)
        if changed or group.assignment_epoch != group.epoch:
            group.assignment_epoch = group.epoch
            for m in group.members.values():
                m.assigned = wanted[m.member_id]

    def _touch(self, group: ShareGroup, member: Member) -> None:
        if member.timer is not None and member.timer.active():
            member.timer.cancel()
        timeout = self._session_timeout_ms(group.group_id) / 1000.0
        member.timer = self._clock.callLater(
            timeout, self._expired, group.group_id, member.member_id
        )

    def _expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is not None and member is not None:
            member.timer = None
            self._remove(group, member, left=False)

    def _remove(self, group: ShareGroup, member: Member, *, left: bool) -> None:
        if member.timer is not None and member.timer.active():
            member.timer.cancel()
        del group.members[member.member_id]
        group.epoch += 1
        self._reassign(group)
        key = (group.group_id, member.member_id)
        if left and key in self._sessions:
            # A client leaving says so, then closes its share session with its last
            # acknowledgements (the two may cross): its records are released when the
            # session closes, when their locks expire, or when the session is evicted.
            self._orphans[key] = None
            return
        self._forget_session(key)
        self._on_member_gone(group.group_id, member.member_id)

    def member_groups(self) -> Collection[str]:
        """The groups held, with members or empty (operators' views)."""
        return self.groups.keys()

    def members(self, group_id: str) -> list[Member]:
        """Group ``group_id``'s members by member id (operators' views)."""
        group = self.groups.get(group_id)
        return [] if group is None else [m for _, m in sorted(group.members.items())]

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def delete_group(self, group_id: str) -> bool:
        """Forget an empty group; False if it has members."""
        group = self.groups.get(group_id)
        if group is not None and group.members:
            return False
        self.groups.pop(group_id, None)
        return True

    def stop(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                if member.timer is not None and member.timer.active():
                    member.timer.cancel()
                member.timer = None

    # -- share sessions ------------------------------------------------------------------

    def session(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[TopicPartition],
        forgotten: Iterable[TopicPartition],
    ) -> set[TopicPartition] | SessionError:
        """The session's partitions after this request (see the module docstring)."""
        key = (group_id, member_id)
        if epoch == 0:
            if not self.is_member(group_id, member_id):
                return SessionError.UNKNOWN_MEMBER
            self._forget_session(key)
            if len(self._sessions) >= self.max_sessions and not self._evict_orphan():
                return SessionError.LIMIT_REACHED
            session = self._sessions[key] = _Session(1, set(added))
            return set(session.partitions)
        found = self._sessions.get(key)
        if epoch == -1:
            # Kept until close_session: the closing request's acknowledgements are
            # applied first, and a leave heartbeat crossing them must not release the
            # records they acknowledge.
            if found is None or found.closing:
                return SessionError.NOT_FOUND
            found.closing = True
            return set(found.partitions)
        if found is None or found.closing:
            return SessionError.NOT_FOUND
        if epoch != found.epoch:
            return SessionError.INVALID_EPOCH
        found.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        found.partitions |= set(added)
        found.partitions -= set(forgotten)
        return set(found.partitions)

    def close_session(self, group_id: str, member_id: str) -> None:
        """End a share session its client closed (epoch -1), once its acknowledgements
        are applied; the caller then releases what the member still holds."""
        self._forget_session((group_id, member_id))

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    def _forget_session(self, key: tuple[str, str]) -> None:
        self._sessions.pop(key, None)
        self._orphans.pop(key, None)

    def _evict_orphan(self) -> bool:
        """Drop the oldest session whose member is gone, releasing what it held; False
        when every session belongs to a live member (or is closing)."""
        while self._orphans:
            key = next(iter(self._orphans))
            del self._orphans[key]
            session = self._sessions.get(key)
            if session is None or session.closing or self.is_member(*key):
                # Closing: its own request ends it. A member back under the same id
                # owns its session again.
                continue
            del self._sessions[key]
            self._on_member_gone(*key)
            return True
        return False
