"""The consumer group protocol's coordinator (KIP-848): ConsumerGroupHeartbeat and
ConsumerGroupDescribe, and the member-epoch checks of offset commits and fetches.

Every member heartbeats with its member epoch; the coordinator answers with the epoch
and the partitions the member may use now. The group epoch moves when a member joins or
leaves, a subscription or the requested assignor changes, or the subscribed topics'
metadata changes (new partitions, a new topic a regex matches, a deleted topic: the
topics are read on every heartbeat). A regex a member brings is resolved after the
heartbeat that brought it, as Kafka resolves regexes asynchronously, in bounded
slices (:mod:`.regex_resolver`): that heartbeat's answer has the member's named
topics only, and the regex's topics come with a new group epoch, on a later
heartbeat. The target assignment is then computed at once by the group's assignor
(:mod:`.assignors`) and each member reconciles towards it on its own heartbeats
(:mod:`.reconcile`): a partition moves only after its previous owner confirmed its
revocation, and members keep what they are not asked to give up.

Static members (an instance id) may leave with epoch -2 and come back under a new member
id, taking over the same assignment; a new member id for an instance id whose member has
not left is UNRELEASED_INSTANCE_ID. A member that sends no heartbeat for the group's
session timeout is removed (fenced); so is a member that does not revoke within its
rebalance timeout. Errors are Kafka's: FENCED_MEMBER_EPOCH (an epoch the coordinator did
not give, or an old one other than the previous with a subset of the current
partitions), UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND (no such group, or a classic group
that has members), GROUP_MAX_SIZE_REACHED, INVALID_REQUEST, UNSUPPORTED_ASSIGNOR,
INVALID_REGULAR_EXPRESSION.

An empty classic group is converted when a consumer-protocol member joins it (its
committed offsets stay); a non-empty one is handed over by the classic coordinator when
it can be (online upgrade, else GROUP_ID_NOT_FOUND). Its members stay classic members of
the consumer group: they join with JoinGroup, get the server's assignment in SyncGroup
and learn that their target moved as REBALANCE_IN_PROGRESS in Heartbeat
(:mod:`.classic_members`). When the last consumer-protocol member leaves and only classic
members remain, the group goes back to the classic coordinator (online downgrade). What
this module does not do: sockets, wire encoding, durability of the group
(:mod:`brokerd.kafka.groups.coordinator` owns the offsets store), the conversion of a
group's records (:mod:`brokerd.kafka.groups.migration`).

Reactor thread only; time comes from the injected clock.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping, Sequence

import attrs
from twisted.logger import Logger

from brokerd.clock import Clock
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.consumer.assignors import ASSIGNORS, Assignment
from brokerd.kafka.groups.consumer.classic_members import (
    CONSUMER_PROTOCOL_TYPE,
    BadEmbeddedProtocol,
    encode_assignment,
    heartbeat_signal,
    parse_subscription,
    subscription_version,
)
from brokerd.kafka.groups.consumer.reconcile import Partitions, flatten, next_assignment
from brokerd.kafka.groups.consumer.regex_resolver import MayDescribe, RegexResolver, every_topic
from brokerd.kafka.groups.consumer.state import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ClassicProtocol,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
)
from brokerd.kafka.groups.kip848.members import (
    HeartbeatRefused,
    MemberTimers,
    check_epoch,
    commit_error,
    delete_empty,
    fetch_error,
    group_or_refuse,
    known_member,
    leaves_for_now,
    member_of,
    put_member,
    rejoining,
    remove_member,
    replace_static,
    take_fields,
    txn_commit_error,
)
from brokerd.kafka.regex import InvalidRegex, compile_regex

#: Topic metadata as the coordinator reads it: name -> (topic ID, partition count).
TopicMetadata = Mapping[str, tuple[uuid.UUID, int]]

#: Kafka's defaults of group.consumer.session.timeout.ms and
#: group.consumer.heartbeat.interval.ms, and of group.consumer.max.size.
DEFAULT_SESSION_TIMEOUT_MS = 45_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000
DEFAULT_MAX_GROUP_SIZE = 10_000

#: ConsumerGroupHeartbeat's first version whose member ids the client generates.
_CLIENT_MEMBER_ID_FROM = 1


@attrs.frozen
class GroupSettings:
    """One group's timing, as its group configs (or the broker's defaults) say."""

    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS


@attrs.frozen(kw_only=True)
class HeartbeatInput:
    """A ConsumerGroupHeartbeat's fields (None: unchanged since the last heartbeat)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    #: The partitions the member owns, by topic ID.
    owned: Mapping[uuid.UUID, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 1
    #: Whether the member's principal may DESCRIBE a topic: the topics its regex
    #: resolves to are filtered by it (every topic when no ACLs apply).
    may_describe: MayDescribe = every_topic


@attrs.frozen
class HeartbeatAnswer:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    #: None: the member keeps what it has; else its whole assignment now.
    assignment: Mapping[uuid.UUID, frozenset[int]] | None = None


def _error(code: ErrorCode, message: str | None = None) -> HeartbeatAnswer:
    return HeartbeatAnswer(int(code), message)


@attrs.frozen
class ClassicFace:
    """What this coordinator asks of the classic one about a group id: whether a
    classic group holds it with members, to drop an empty one being converted, to hand
    over a non-empty one (online upgrade: the group, or why not) and to take back a
    group whose members all speak the classic protocol (online downgrade)."""

    has_members: Callable[[str], bool | None]
    drop_empty: Callable[[str], None]
    upgrade: Callable[[str, TopicMetadata], ConsumerGroup | str] | None = None
    downgrade: Callable[[ConsumerGroup], None] | None = None


@attrs.frozen
class ClassicJoinAnswer:
    """A JoinGroup answer to a classic member of a consumer group (it never leads: the
    assignment is the server's)."""

    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None


@attrs.frozen
class ClassicSyncAnswer:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


class ConsumerGroupCoordinator:
    """Every consumer-protocol group of this broker.

    :param clock: time source of session and revocation timers.
    :param classic: the classic coordinator's view of the same group ids.
    :param settings: a group's session timeout and heartbeat interval (group configs).
    :param on_change: called with a group after each change of its epochs, members or
        assignments (durability hooks in here).
    :param topics: the topics as they are now, read by the requests of classic members
        (a ConsumerGroupHeartbeat brings its own); without it the last heartbeat's.
    """

    _log = Logger()

    def __init__(
        self,
        *,
        clock: Clock,
        classic: ClassicFace | None = None,
        settings: Callable[[str], GroupSettings] | None = None,
        max_group_size: int = DEFAULT_MAX_GROUP_SIZE,
        on_change: Callable[[ConsumerGroup], None] | None = None,
        topics: Callable[[], TopicMetadata] | None = None,
    ) -> None:
        self._clock = clock
        self._timers = MemberTimers(clock, self._expire, holdings="partitions")
        self._topic_source = topics
        self._classic = classic
        self._settings = settings or (lambda _group_id: GroupSettings())
        self._max_size = max_group_size
        #: group.consumer.max.size (an online upgrade must leave room for the joiner).
        self.max_group_size = max_group_size
        self._on_change = on_change
        self.groups: dict[str, ConsumerGroup] = {}
        self._topics: TopicMetadata = {}
        self._stopped = False
        #: The subscription regexes, resolved in bounded slices.
        self.regexes = RegexResolver(clock, self._regex_resolved)
        #: Groups restored from storage whose regexes no heartbeat has asked about yet:
        #: those keep the topics they had while they are resolved again.
        self._restored: set[str] = set()

    # -- ConsumerGroupHeartbeat -------------------------------------------------------

    def heartbeat(self, request: HeartbeatInput, topics: TopicMetadata) -> HeartbeatAnswer:
        """Answer one ConsumerGroupHeartbeat against the topics as they are now."""
        if self._stopped:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self._topics = topics
        try:
            _validate(request)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(request)
            return self._heartbeat(request)
        except HeartbeatRefused as refused:
            return _error(refused.code, refused.message)

    def _heartbeat(self, request: HeartbeatInput) -> HeartbeatAnswer:
        group = self._group_for(request)
        kept_before = _kept(group, request.member_id)
        joining = request.member_epoch == 0
        member = self._member_for(group, request) if not joining else self._joining(group, request)
        changed = _update_member(member, request) or member.member_id not in group.members
        put_member(group, member)
        if self._refresh_metadata(group, request.may_describe) or changed:
            group.group_epoch += 1
        self._update_target(group)
        before = (member.member_epoch, dict(member.assigned))
        owned = None if request.owned is None else flatten(request.owned)
        self._reconcile(group, member, owned)
        self._arm_session(group, member)
        group.refresh_state()
        if _kept(group, member.member_id) != kept_before:
            self._changed(group)
        full = request.owned is not None and request.subscribed_topic_names is not None
        send = joining or full or before != (member.member_epoch, dict(member.assigned))
        return HeartbeatAnswer(
            0,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self._settings(group.group_id).heartbeat_interval_ms,
            assignment=dict(member.assigned) if send else None,
        )

    def _group_for(self, request: HeartbeatInput) -> ConsumerGroup:
        group_id = request.group_id
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self._classic is not None:
            has_members = self._classic.has_members(group_id)
            if has_members:
                if request.member_epoch != 0 or self._classic.upgrade is None:
                    raise HeartbeatRefused(ErrorCode.GROUP_ID_NOT_FOUND,
                                           f"Group {group_id} is not a consumer group.")
                converted = self._classic.upgrade(group_id, self._topics)
                if isinstance(converted, str):
                    raise HeartbeatRefused(ErrorCode.GROUP_ID_NOT_FOUND, converted)
                self._adopt(converted)
                return converted
            if has_members is not None and request.member_epoch == 0:
                # An empty classic group becomes a consumer group (its offsets stay).
                self._classic.drop_empty(group_id)
                self._log.info("group {group!r}: empty classic group converted to the "
                               "consumer protocol", group=group_id)
        if request.member_epoch != 0:
            raise HeartbeatRefused(ErrorCode.GROUP_ID_NOT_FOUND,
                                   f"Consumer group {group_id} not found.")
        group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def _member_for(self, group: ConsumerGroup, request: HeartbeatInput) -> ConsumerMember:
        member = self._known_member(group, request)
        if member.classic is not None:
            # Its epochs are classic generations; it joins with epoch 0 to switch.
            raise HeartbeatRefused(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {member.member_id} uses the classic protocol.")
        _check_epoch(member, request)
        return member

    def _known_member(self, group: ConsumerGroup, request: HeartbeatInput) -> ConsumerMember:
        return known_member(group, request.member_id, request.instance_id)

    def _joining(self, group: ConsumerGroup, request: HeartbeatInput) -> ConsumerMember:
        member_id = request.member_id or str(uuid.uuid4())
        member = rejoining(group, member_id, request.instance_id, self._timers,
                           start_over=_start_over, max_size=self._max_size,
                           group_kind="consumer group")
        return ConsumerMember(member_id=member_id) if member is None else member

    def _leave(self, request: HeartbeatInput) -> HeartbeatAnswer:
        group = group_or_refuse(self.groups, request.group_id, "consumer group")
        member = self._known_member(group, request)
        if leaves_for_now(member, request.member_epoch):
            self._changed(group)
        else:
            self._remove(group, member, "left the group")
        return HeartbeatAnswer(0, member_id=member.member_id, member_epoch=request.member_epoch,
                               heartbeat_interval_ms=0)

    # -- classic members (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) ------------------

    def has_members(self, group_id: str) -> bool:
        """Whether a consumer group of that id has members (classic requests then come
        here; an empty one is converted by whoever joins it)."""
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def _fresh_topics(self) -> None:
        if self._topic_source is not None:
            self._topics = self._topic_source()

    def classic_join(
        self,
        group_id: str,
        member_id: str,
        *,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        require_known_member_id: bool = False,
    ) -> ClassicJoinAnswer:
        """A JoinGroup of a classic member into a consumer group with members: its
        subscription is taken from its preferred protocol's metadata, the partitions it
        says it owns confirm what it gave up, and it gets its member epoch as generation
        (the assignment follows in SyncGroup). As Kafka: a dynamic member without an id
        gets one with MEMBER_ID_REQUIRED (JoinGroup v4+), and an id the group does not
        know joins as a new member."""
        def fail(code: ErrorCode) -> ClassicJoinAnswer:
            return ClassicJoinAnswer(int(code), member_id)

        group = self.groups.get(group_id)
        if self._stopped or group is None:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE if self._stopped
                        else ErrorCode.UNKNOWN_MEMBER_ID)
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        try:
            subscription = parse_subscription(protocols[0][1])
        except BadEmbeddedProtocol:
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        self._fresh_topics()
        member: ConsumerMember | None
        known = group.members.get(member_id) if member_id else None
        if not member_id and instance_id is None and require_known_member_id:
            if len(group.members) >= self._max_size:
                return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)
            return ClassicJoinAnswer(int(ErrorCode.MEMBER_ID_REQUIRED), str(uuid.uuid4()))
        if known is not None:
            member = known
            if member.classic is None:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            if instance_id is not None and group.static_members.get(instance_id) != member_id:
                return fail(ErrorCode.FENCED_INSTANCE_ID)
        elif member_id:
            if instance_id is not None and group.static_members.get(instance_id) not in (
                None, member_id
            ):
                return fail(ErrorCode.FENCED_INSTANCE_ID)
            if len(group.members) >= self._max_size:
                return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)
            member = ConsumerMember(member_id=member_id, instance_id=instance_id)
        else:
            previous_id = None if instance_id is None else group.static_members.get(instance_id)
            if previous_id is not None:
                previous = group.members[previous_id]
                member = replace_static(group, previous, str(uuid.uuid4()))
            else:
                if len(group.members) >= self._max_size:
                    return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)
                member = ConsumerMember(member_id=str(uuid.uuid4()), instance_id=instance_id)
        new = member.member_id not in group.members
        names = tuple(sorted(set(subscription.topics)))
        changed = new or names != member.subscribed_topic_names
        member.subscribed_topic_names = names
        member.subscribed_topic_regex = None
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.client_id = client_id or member.client_id
        member.client_host = client_host or member.client_host
        member.rack_id = subscription.rack_id or member.rack_id
        member.classic = ClassicProtocol(session_timeout_ms, tuple(protocols))
        group.members[member.member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member.member_id
        if self._refresh_metadata(group) or changed:
            group.group_epoch += 1
        self._update_target(group)
        owned = {(self._topics[t][0], p) for t, p in subscription.owned if t in self._topics}
        self._reconcile(group, member, owned)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            # What it owns is known at once: a second step takes its confirmation.
            self._reconcile(group, member, owned)
        self._arm_session(group, member)
        group.refresh_state()
        self._changed(group)
        return ClassicJoinAnswer(0, member.member_id, member.member_epoch,
                                 CONSUMER_PROTOCOL_TYPE, member.classic.protocol_name)

    def _classic_member(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> tuple[ConsumerGroup, ConsumerMember] | ErrorCode:
        if self._stopped:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is not None and current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        return group, member

    def classic_sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> ClassicSyncAnswer:
        """A SyncGroup of a classic member: its assignment as the server computed it (what
        the client's leader sent is not used)."""
        found = self._classic_member(group_id, generation_id, member_id, instance_id)
        if isinstance(found, ErrorCode):
            return ClassicSyncAnswer(int(found))
        group, member = found
        assert member.classic is not None
        name = member.classic.protocol_name
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != name
        ):
            return ClassicSyncAnswer(int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if (group.group_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS):
            # The target moved since it joined: it must join again (one that is revoking
            # first finishes that, and its next join catches up).
            return ClassicSyncAnswer(int(ErrorCode.REBALANCE_IN_PROGRESS))
        self._arm_session(group, member)
        names = {topic_id: n for n, (topic_id, _) in group.subscribed_metadata.items()}
        by_name = {names[t]: ps for t, ps in member.assigned.items() if t in names}
        data = encode_assignment(by_name, subscription_version(member.classic))
        return ClassicSyncAnswer(0, data, CONSUMER_PROTOCOL_TYPE, name)

    def classic_heartbeat(
        self, group_id: str, generation_id: int, member_id: str,
        instance_id: str | None = None,
    ) -> int:
        """A Heartbeat of a classic member: REBALANCE_IN_PROGRESS when it must re-join
        (:data:`.classic_members.HEARTBEAT_SIGNALS`)."""
        found = self._classic_member(group_id, generation_id, member_id, instance_id)
        if isinstance(found, ErrorCode):
            return int(found)
        group, member = found
        self._arm_session(group, member)
        wanted = flatten(group.target.get(member.member_id, {})) - flatten(member.assigned)
        released = all(group.owner_of(t, p) is None for t, p in wanted)
        at_target = member.member_epoch >= group.group_epoch
        return int(heartbeat_signal(member.state, at_target, released))

    def classic_leave(
        self, group_id: str, leaving: Sequence[tuple[str, str | None]]
    ) -> list[int]:
        """LeaveGroup of classic members ``(member id, instance id)``: one code each."""
        codes: list[int] = []
        for member_id, instance_id in leaving:
            group = self.groups.get(group_id)
            if group is None:
                codes.append(int(ErrorCode.UNKNOWN_MEMBER_ID))
                continue
            if not member_id and instance_id is not None:
                member_id = group.static_members.get(instance_id, "")
            elif instance_id is not None and group.static_members.get(instance_id) != member_id:
                codes.append(int(ErrorCode.FENCED_INSTANCE_ID))
                continue
            member = group.members.get(member_id)
            if member is None or member.classic is None:
                codes.append(int(ErrorCode.UNKNOWN_MEMBER_ID))
                continue
            self._remove(group, member, "left the group (classic protocol)")
            codes.append(int(ErrorCode.NONE))
        return codes

    def is_classic_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        return member is not None and member.classic is not None

    # -- group epoch, target, reconciliation --------------------------------------------

    def _refresh_metadata(
        self, group: ConsumerGroup, requester: MayDescribe | None = None
    ) -> bool:
        """Take the subscribed topics' metadata as it is now; True if it changed (the
        group epoch must then move). ``requester``: the DESCRIBE rights of the heartbeat
        asking (None: no heartbeat asks); only a heartbeat spends work on the regexes
        (:mod:`.regex_resolver`), the others see them as resolved so far."""
        # Each distinct regex once: members of one application share theirs.
        names: set[str] = set()
        regexes: set[str] = set()
        for m in group.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                regexes.add(m.subscribed_topic_regex)
        found = {n for n in names if n in self._topics}
        known = None
        if requester is not None and group.group_id in self._restored:
            self._restored.discard(group.group_id)
            known = functools.partial(_restored_matches, group)
        resolved = self.regexes.resolve(
            group.group_id, regexes, self._topics, requester, known=known)
        if len(resolved) < len(regexes):
            # A regex restored from storage that no heartbeat has asked about (whose
            # principal is not known yet): the topics stay as they are until one does.
            return False
        for matched in resolved.values():
            found |= matched
        metadata = {n: self._topics[n] for n in found}
        if metadata == group.subscribed_metadata:
            return False
        group.subscribed_metadata = metadata
        return True

    def _update_target(self, group: ConsumerGroup) -> None:
        if group.group_epoch <= group.assignment_epoch:
            return
        by_name = group.subscribed_metadata
        subscriptions = {
            m.member_id: {by_name[n][0] for n in self._subscribed(group, m) if n in by_name}
            for m in group.members.values()
        }
        partitions = {topic_id: count for topic_id, count in by_name.values()}
        group.assignor = group.preferred_assignor()
        assignor = ASSIGNORS[group.assignor]
        group.target = dict(assignor(subscriptions, partitions, group.target))
        group.assignment_epoch = group.group_epoch
        self._log.info(
            "group {group!r}: epoch {epoch}, target assignment computed for {count} "
            "member(s) by {assignor}",
            group=group.group_id, epoch=group.group_epoch, count=len(group.members),
            assignor=group.assignor,
        )

    def _subscribed(self, group: ConsumerGroup, member: ConsumerMember) -> set[str]:
        """The topic names a member subscribes to, its regex as resolved so far."""
        found = set(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex
        if regex is None:
            return found
        matched = self.regexes.matched(group.group_id, regex)
        if matched is None:
            matched = _restored_matches(group, regex)
        return found | matched

    def _regex_resolved(self, group_id: str) -> None:
        """A regex of the group has its answer (in a later slice): the group epoch moves
        if its subscribed topics did; members catch up on their next heartbeats."""
        group = self.groups.get(group_id)
        if self._stopped or group is None or not self._refresh_metadata(group):
            return
        group.group_epoch += 1
        self._update_target(group)
        group.refresh_state()
        self._changed(group)

    def _reconcile(
        self, group: ConsumerGroup, member: ConsumerMember, owned: Partitions | None
    ) -> None:
        def held_by_other(topic_id: uuid.UUID, partition: int) -> bool:
            holder = group.owner_of(topic_id, partition)
            return holder is not None and holder != member.member_id

        step = next_assignment(member, group.assignment_epoch,
                               group.target.get(member.member_id, {}), owned, held_by_other)
        was = member.state
        if step.member_epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
        member.member_epoch = step.member_epoch
        member.assigned = dict(step.assigned)
        member.pending_revocation = dict(step.pending_revocation)
        member.state = step.state
        if step.state is MemberState.UNREVOKED_PARTITIONS and was is not step.state:
            self._timers.arm_revocation(group.group_id, member)
        elif step.state is not MemberState.UNREVOKED_PARTITIONS:
            self._timers.cancel_revocation(member)

    # -- timers --------------------------------------------------------------------------

    def _arm_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        timeout = (self._settings(group.group_id).session_timeout_ms if member.classic is None
                   else member.classic.session_timeout_ms)
        self._timers.arm_session(group.group_id, member, timeout)

    def _expire(self, group_id: str, member_id: str, why: str) -> None:
        member = member_of(self.groups, group_id, member_id)
        if member is not None:
            self._remove(self.groups[group_id], member, why)

    def _remove(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        remove_member(group, member)
        self._refresh_metadata(group)
        self._log.info("group {group!r}: member {member!r} {why}; group epoch {epoch}",
                       group=group.group_id, member=member.member_id, why=why,
                       epoch=group.group_epoch)
        self._update_target(group)
        group.refresh_state()
        self._changed(group)
        if member.classic is None:
            self._maybe_downgrade(group)

    def _maybe_downgrade(self, group: ConsumerGroup) -> None:
        """Kafka's online downgrade: the last consumer-protocol member is gone and every
        remaining member speaks the classic protocol; the group goes back to the classic
        coordinator (which makes them re-join)."""
        if self._classic is None or self._classic.downgrade is None or not group.members:
            return
        if any(m.classic is None for m in group.members.values()):
            return
        for m in group.members.values():
            self._timers.cancel_all(m)
        del self.groups[group.group_id]
        group.transition_to(ConsumerGroupState.DEAD)
        self._changed(group)
        self._log.info("group {group!r}: only classic members left; converted back to a "
                       "classic group", group=group.group_id)
        self._classic.downgrade(group)

    def _adopt(self, group: ConsumerGroup) -> None:
        """Take a classic group just converted (online upgrade): its members keep their
        generation as member epoch, with a fresh session each."""
        self.groups[group.group_id] = group
        if any(m.subscribed_topic_regex is not None for m in group.members.values()):
            self._restored.add(group.group_id)
        for member in group.members.values():
            self._arm_session(group, member)
        group.refresh_state()
        self._log.info("group {group!r}: classic group of {count} member(s) converted to "
                       "the consumer protocol at epoch {epoch}", group=group.group_id,
                       count=len(group.members), epoch=group.group_epoch)
        self._changed(group)

    def _changed(self, group: ConsumerGroup) -> None:
        if self._on_change is not None:
            self._on_change(group)

    # -- offsets, admin ------------------------------------------------------------------

    def commit_error(self, group_id: str, member_id: str, epoch: int) -> ErrorCode | None:
        """OffsetCommit's check of a consumer group (None: not a consumer group). A
        commit without a member epoch (< 0) is allowed only while the group is empty."""
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        # A classic member commits with its generation: it knows no member epochs.
        classic = member is not None and member.classic is not None
        return commit_error(group, member_id, epoch, ErrorCode.ILLEGAL_GENERATION if classic
                            else ErrorCode.STALE_MEMBER_EPOCH)

    def txn_commit_error(self, group_id: str, member_id: str, epoch: int) -> ErrorCode | None:
        """TxnOffsetCommit's check of a consumer group (None: not a consumer group). A
        producer outside the group protocol (no member id, epoch -1) passes; otherwise
        the member must be known and the epoch its current one, else ILLEGAL_GENERATION
        (Kafka answers transactional commits so: producers predate STALE_MEMBER_EPOCH)."""
        return txn_commit_error(self.groups.get(group_id), member_id, epoch)

    def fetch_error(self, group_id: str, member_id: str | None, epoch: int) -> ErrorCode:
        """OffsetFetch v9+'s check: a member id and epoch given (epoch >= 0) must be a
        member's current ones."""
        return fetch_error(self.groups.get(group_id), member_id, epoch) or ErrorCode.NONE

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a consumer group: only an empty one (NON_EMPTY_GROUP)."""
        group = delete_empty(self.groups, group_id, ConsumerGroupState.DEAD)
        if isinstance(group, ErrorCode):
            return group
        self._restored.discard(group_id)
        self._changed(group)
        return ErrorCode.NONE

    def drop_empty(self, group_id: str) -> None:
        """Forget an empty consumer group (a classic member is converting it back)."""
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            group.transition_to(ConsumerGroupState.DEAD)
            del self.groups[group_id]
            self._restored.discard(group_id)
            self._changed(group)

    def stop(self) -> None:
        """Cancel every timer; later heartbeats get COORDINATOR_NOT_AVAILABLE."""
        self._stopped = True
        self.regexes.stop()
        for group in self.groups.values():
            for member in group.members.values():
                self._timers.cancel_all(member)
            group.transition_to(ConsumerGroupState.DEAD)
        self.groups.clear()

    def restore(self, group: ConsumerGroup) -> None:
        """Take a group back from storage: every member gets a fresh session (they come
        back, or are fenced when it runs out, as in Kafka). Its members' regexes keep
        the topics the stored metadata was computed with until a heartbeat asks."""
        self.groups[group.group_id] = group
        if any(m.subscribed_topic_regex is not None for m in group.members.values()):
            self._restored.add(group.group_id)
        for member in group.members.values():
            self._arm_session(group, member)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._timers.arm_revocation(group.group_id, member)
        group.state = group.derived_state()


def _restored_matches(group: ConsumerGroup, regex: str) -> frozenset[str]:
    """What a regex restored from storage matches among the topics the group was
    subscribed to (resolved, and ACL-checked, before the restart)."""
    try:
        compiled = compile_regex(regex)
    except InvalidRegex:
        return frozenset()
    return frozenset(n for n in group.subscribed_metadata if compiled.fullmatch(n))


def _kept(group: ConsumerGroup, member_id: str) -> tuple[object, ...]:
    """What a heartbeat of ``member_id`` may change of what is kept durably: the group's
    epochs, assignor and size, and that member's fields (a heartbeat changes no other
    member; the target only moves with the assignment epoch)."""
    m = group.members.get(member_id)
    member = None if m is None else (
        m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
        m.subscribed_topic_names, m.subscribed_topic_regex, m.server_assignor, m.state,
        m.member_epoch, m.previous_member_epoch, _frozen(m.assigned),
        _frozen(m.pending_revocation),
    )
    return (group.group_epoch, group.assignment_epoch, group.assignor, len(group.members),
            member)


def _frozen(assignment: Assignment) -> frozenset[tuple[uuid.UUID, frozenset[int]]]:
    return frozenset((t, frozenset(ps)) for t, ps in assignment.items() if ps)


def _validate(request: HeartbeatInput) -> None:
    """Kafka's checks of a ConsumerGroupHeartbeat before any group is looked at."""

    def bad(message: str) -> HeartbeatRefused:
        return HeartbeatRefused(ErrorCode.INVALID_REQUEST, message)

    epoch = request.member_epoch
    if not request.group_id:
        raise bad("GroupId can't be empty.")
    if request.version >= _CLIENT_MEMBER_ID_FROM and not request.member_id:
        raise bad("MemberId can't be empty.")
    if request.instance_id == "":
        raise bad("InstanceId can't be empty.")
    if request.rack_id == "":
        raise bad("RackId can't be empty.")
    if epoch != 0 and not request.member_id:
        raise bad("MemberId can't be empty.")
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise bad("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or any(request.owned.values()):
            raise bad("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first "
                      "request.")
    elif epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:
            raise bad("InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise bad("MemberEpoch is invalid.")
    if request.server_assignor is not None and request.server_assignor not in ASSIGNORS:
        raise HeartbeatRefused(ErrorCode.UNSUPPORTED_ASSIGNOR,
                       f"ServerAssignor {request.server_assignor} is not supported. "
                       f"Supported assignors: {', '.join(sorted(ASSIGNORS))}.")
    if request.subscribed_topic_regex:
        try:
            compile_regex(request.subscribed_topic_regex)
        except InvalidRegex as e:
            raise HeartbeatRefused(ErrorCode.INVALID_REGULAR_EXPRESSION, str(e)) from None


def _start_over(member: ConsumerMember) -> None:
    member.classic = None  # a classic member switching protocols, if it was one
    member.state = MemberState.STABLE
    member.assigned = {}
    member.pending_revocation = {}


def _check_epoch(member: ConsumerMember, request: HeartbeatInput) -> None:
    owned = request.owned
    check_epoch(
        request.member_epoch, member.member_epoch, member.previous_member_epoch,
        lambda: owned is not None and flatten(owned) <= flatten(member.assigned),
        group_kind="consumer group", holdings="partitions",
    )


def _update_member(member: ConsumerMember, request: HeartbeatInput) -> bool:
    """Take the heartbeat's fields that are given; True if the subscription or the
    requested assignor changed (the group epoch then moves)."""
    changed = False
    # Names and a regex may both be given (librdkafka sends an empty name list with its
    # regex): the member subscribes to the union. An empty regex clears it.
    if request.subscribed_topic_names is not None:
        names = tuple(sorted(set(request.subscribed_topic_names)))
        changed |= names != member.subscribed_topic_names
        member.subscribed_topic_names = names
    if request.subscribed_topic_regex is not None:
        regex = request.subscribed_topic_regex or None
        changed |= regex != member.subscribed_topic_regex
        member.subscribed_topic_regex = regex
    if request.server_assignor is not None:
        changed |= request.server_assignor != member.server_assignor
        member.server_assignor = request.server_assignor
    if request.rack_id is not None:
        member.rack_id = request.rack_id
    take_fields(member, request)
    return changed


def describe_assignment(
    assignment: Assignment, names: Mapping[uuid.UUID, str]
) -> Sequence[tuple[uuid.UUID, str, tuple[int, ...]]]:
    """``(topic ID, topic name, partitions)`` per topic, topics by name (a topic deleted
    since has the name "")."""
    rows = [(t, names.get(t, ""), tuple(sorted(ps))) for t, ps in assignment.items() if ps]
    return sorted(rows, key=lambda r: (r[1], str(r[0])))


__all__ = [
    "DEFAULT_HEARTBEAT_INTERVAL_MS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "ClassicFace",
    "ClassicJoinAnswer",
    "ClassicSyncAnswer",
    "ConsumerGroupCoordinator",
    "GroupSettings",
    "HeartbeatAnswer",
    "HeartbeatInput",
    "TopicMetadata",
    "describe_assignment",
]
