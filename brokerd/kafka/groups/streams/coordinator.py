# -*- test-case-name: tests.kafka.groups.streams.test_coordinator -*-
"""The streams group protocol's coordinator (KIP-1071): StreamsGroupHeartbeat and
StreamsGroupDescribe, and the member-epoch checks of offset commits and fetches.

A Kafka Streams application's members heartbeat with their member epoch; the first
heartbeat of a member brings the application's topology. The coordinator configures the
topology against the topics as they are now (:mod:`.topology`: how many tasks each
subtopology has, how many partitions each internal topic must have), computes the
target assignment of tasks with :mod:`.assignor` whenever the group epoch moves, and
lets each member reconcile towards it on its own heartbeats (:mod:`.reconcile`): an
active task goes to a new owner only after its old owner confirmed its revocation.

The group epoch moves when a member joins or leaves, a member's process, rack or client
tags change, the topology changes, or the partition counts of the topology's topics
change (topics are read on every heartbeat). While the topology cannot run, the group
is NotReady, every member's target is empty and each answer carries the statuses Kafka
answers (MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS
with :attr:`HeartbeatAnswer.to_create`, the topics the caller creates). A member
asking the application to shut down makes every member's answer say
SHUTDOWN_APPLICATION until the group is empty.

Static members (an instance id) may leave with epoch -2 and come back under a new member
id, taking over their assignment; a new member id for an instance id whose member has
not left is UNRELEASED_INSTANCE_ID. A member silent for the group's
``streams.session.timeout.ms`` is removed (fenced); so is one that does not revoke
within its rebalance timeout. What this module does not do: sockets, wire encoding,
topic creation, the durability of the group (its ``on_change`` hook).

Reactor thread only; time comes from the injected clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs
from twisted.logger import Logger

from brokerd.clock import Clock
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.kip848 import members as kip848
from brokerd.kafka.groups.streams.assignor import AssignorMember, assign
from brokerd.kafka.groups.streams.reconcile import next_assignment
from brokerd.kafka.groups.streams.state import (
    LEAVE_EPOCH,
    NO_TASKS,
    STATIC_LEAVE_EPOCH,
    MemberState,
    StreamsGroup,
    StreamsGroupState,
    StreamsMember,
    Task,
    Tasks,
)
from brokerd.kafka.groups.streams.topology import (
    InternalTopic,
    Topology,
    TopologyStatus,
    configure,
)

#: Kafka's defaults of group.streams.session.timeout.ms, .heartbeat.interval.ms,
#: .num.standby.replicas and .max.size.
DEFAULT_SESSION_TIMEOUT_MS = 45_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000
DEFAULT_NUM_STANDBY_REPLICAS = 0
DEFAULT_MAX_GROUP_SIZE = 10_000
#: What the heartbeat answers of task offsets and recovery lag (Kafka's defaults of
#: group.streams.task.offset.interval.ms and acceptable.recovery.lag); this coordinator
#: assigns no warm-up tasks, so neither changes what it does.
TASK_OFFSET_INTERVAL_MS = 60_000
ACCEPTABLE_RECOVERY_LAG = 10_000


@attrs.frozen
class StreamsSettings:
    """One group's configs, as its group configs (or the broker's defaults) say."""

    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    num_standby_replicas: int = DEFAULT_NUM_STANDBY_REPLICAS


@attrs.frozen(kw_only=True)
class HeartbeatInput:
    """A StreamsGroupHeartbeat's fields (None: unchanged since the last heartbeat)."""

    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    #: The tasks the member owns.
    owned: Tasks | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""


@attrs.frozen
class EndpointPartitions:
    """Where a member's tasks' input partitions are, for interactive queries."""

    endpoint: tuple[str, int]
    active: Mapping[str, tuple[int, ...]]
    standby: Mapping[str, tuple[int, ...]]


@attrs.frozen
class HeartbeatAnswer:
    error_code: int
    error_message: str | None = None
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    status: tuple[tuple[TopologyStatus, str], ...] = ()
    #: None: the member keeps what it has; else its whole assignment now.
    assignment: Tasks | None = None
    endpoint_information_epoch: int = 0
    #: None: unchanged since the member's endpoint information epoch.
    endpoints: tuple[EndpointPartitions, ...] | None = None
    #: Internal topics the topology needs that do not exist (the caller creates them).
    to_create: tuple[InternalTopic, ...] = ()


def _error(code: ErrorCode, message: str | None = None) -> HeartbeatAnswer:
    return HeartbeatAnswer(int(code), message)


class StreamsGroupCoordinator:
    """Every streams group of this broker.

    :param clock: time source of session and revocation timers.
    :param settings: a group's configs (``streams.*`` group configs).
    :param is_other_group: whether a group id is taken by a group of another type
        (classic, consumer or share): such an id is GROUP_ID_NOT_FOUND here, as Kafka.
    :param on_change: called with a group after each change of what is kept of it
        (durability hooks in here).
    """

    _log = Logger()

    def __init__(
        self,
        *,
        clock: Clock,
        settings: Callable[[str], StreamsSettings] | None = None,
        is_other_group: Callable[[str], bool] = lambda _group_id: False,
        max_group_size: int = DEFAULT_MAX_GROUP_SIZE,
        on_change: Callable[[StreamsGroup], None] | None = None,
    ) -> None:
        self._clock = clock
        self._timers = kip848.MemberTimers(clock, self._expire, holdings="tasks")
        self._settings = settings or (lambda _group_id: StreamsSettings())
        self._is_other_group = is_other_group
        self._max_size = max_group_size
        self._on_change = on_change
        self.groups: dict[str, StreamsGroup] = {}
        #: Members that asked the application to shut down, per group.
        self._shutdown: dict[str, str] = {}
        #: The topology description per group, with its topology epoch (KIP-1331).
        self._descriptions: dict[str, tuple[int, object]] = {}
        self._stopped = False

    # -- StreamsGroupHeartbeat ----------------------------------------------------------

    def heartbeat(self, request: HeartbeatInput, topics: Mapping[str, int]) -> HeartbeatAnswer:
        """Answer one StreamsGroupHeartbeat against ``topics`` (name -> partitions)."""
        if self._stopped:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            _validate(request)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(request)
            return self._heartbeat(request, topics)
        except kip848.HeartbeatRefused as refused:
            return _error(refused.code, refused.message)

    def _heartbeat(self, request: HeartbeatInput, topics: Mapping[str, int]) -> HeartbeatAnswer:
        group = self._group_for(request)
        kept_before = _kept(group, request.member_id)
        joining = request.member_epoch == 0
        member = self._joining(group, request) if joining else self._member_for(group, request)
        bump = member.member_id not in group.members
        bump |= _update_member(member, request)
        kip848.put_member(group, member)
        stale: str | None = None
        if request.topology is not None:
            if group.topology is None or (
                request.topology.epoch > group.topology.epoch and len(group.members) == 1
            ):
                group.topology = request.topology
                group.configured = None
                bump = True
            elif request.topology.epoch != group.topology.epoch:
                stale = (f"The member's topology epoch {request.topology.epoch} is not the "
                         f"group's {group.topology.epoch}.")
            member.topology_epoch = request.topology.epoch
        if request.shutdown_application:
            self._shutdown.setdefault(group.group_id, member.member_id)
        bump |= self._refresh_topology(group, topics)
        if bump:
            group.group_epoch += 1
        self._update_target(group)
        before = (member.member_epoch, member.assigned)
        self._reconcile(group, member, request.owned)
        self._arm_session(group, member)
        group.refresh_state()
        if _kept(group, member.member_id) != kept_before:
            self._changed(group)
        full = joining or request.owned is not None
        send = full or before != (member.member_epoch, member.assigned)
        configured = group.configured
        status: list[tuple[TopologyStatus, str]] = []
        if configured is not None:
            status.extend((p.status, p.detail) for p in configured.problems)
        if stale is not None:
            status.append((TopologyStatus.STALE_TOPOLOGY, stale))
        requester = self._shutdown.get(group.group_id)
        if requester is not None:
            status.append((TopologyStatus.SHUTDOWN_APPLICATION,
                           f"The application is requested to shutdown by member {requester}."))
        endpoints = None
        if request.endpoint_information_epoch != group.assignment_epoch:
            endpoints = self._endpoints(group)
        return HeartbeatAnswer(
            0,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self._settings(group.group_id).heartbeat_interval_ms,
            status=tuple(status),
            assignment=member.assigned if send else None,
            endpoint_information_epoch=group.assignment_epoch,
            endpoints=endpoints,
            to_create=() if configured is None else configured.to_create,
        )

    def _group_for(self, request: HeartbeatInput) -> StreamsGroup:
        group = self.groups.get(request.group_id)
        if group is not None:
            return group
        if self._is_other_group(request.group_id):
            raise kip848.HeartbeatRefused(ErrorCode.GROUP_ID_NOT_FOUND,
                                           f"Group {request.group_id} is not a streams group.")
        if request.member_epoch != 0:
            raise kip848.HeartbeatRefused(ErrorCode.GROUP_ID_NOT_FOUND,
                                           f"Streams group {request.group_id} not found.")
        group = self.groups[request.group_id] = StreamsGroup(request.group_id)
        return group

    def _known_member(self, group: StreamsGroup, request: HeartbeatInput) -> StreamsMember:
        return kip848.known_member(group, request.member_id, request.instance_id)

    def _member_for(self, group: StreamsGroup, request: HeartbeatInput) -> StreamsMember:
        member = self._known_member(group, request)
        _check_epoch(member, request)
        return member

    def _joining(self, group: StreamsGroup, request: HeartbeatInput) -> StreamsMember:
        member = kip848.rejoining(group, request.member_id, request.instance_id, self._timers,
                                  start_over=_start_over, max_size=self._max_size,
                                  group_kind="streams group")
        return StreamsMember(member_id=request.member_id) if member is None else member

    def _leave(self, request: HeartbeatInput) -> HeartbeatAnswer:
        group = kip848.group_or_refuse(self.groups, request.group_id, "streams group")
        member = self._known_member(group, request)
        if kip848.leaves_for_now(member, request.member_epoch):
            self._changed(group)
        else:
            self._remove(group, member, "left the group")
        return HeartbeatAnswer(0, member_id=member.member_id, member_epoch=request.member_epoch)

    # -- topology, target, reconciliation -----------------------------------------------

    def _refresh_topology(self, group: StreamsGroup, topics: Mapping[str, int]) -> bool:
        """Configure the topology against the topics if what it reads of them changed;
        True when that moves the group epoch (the task counts changed)."""
        if group.topology is None:
            return False
        metadata = _relevant(group.topology, topics)
        if group.configured is not None and metadata == group.metadata:
            return False
        before = None if group.configured is None else (
            group.configured.task_counts, group.configured.ready)
        group.metadata = metadata
        group.configured = configure(group.topology, topics)
        return before != (group.configured.task_counts, group.configured.ready)

    def internal_topics_needed(
        self, group_id: str, topology: Topology | None, topics: Mapping[str, int]
    ) -> tuple[InternalTopic, ...]:
        """The internal topics a heartbeat's group needs that do not exist yet (its
        caller creates them before the heartbeat is answered, so the first answer can
        carry tasks): of the topology the group runs, else of the one the heartbeat
        brings."""
        group = self.groups.get(group_id)
        chosen = topology if group is None or group.topology is None else group.topology
        if chosen is None:
            return ()
        return configure(chosen, topics).to_create

    def _update_target(self, group: StreamsGroup) -> None:
        if group.group_epoch <= group.assignment_epoch:
            return
        configured = group.configured
        if configured is None or not configured.ready:
            # Nothing can run: every member gives its tasks up.
            group.target = {m: NO_TASKS for m in group.members}
        else:
            members = {
                m.member_id: AssignorMember(m.process_id or m.member_id,
                                            m.assigned.union(m.revoking))
                for m in group.members.values()
            }
            standbys = self._settings(group.group_id).num_standby_replicas
            group.target = assign(members, configured.task_counts, standbys)
        group.assignment_epoch = group.group_epoch
        self._log.info(
            "streams group {group!r}: epoch {epoch}, target assignment computed for "
            "{count} member(s)", group=group.group_id, epoch=group.group_epoch,
            count=len(group.members),
        )

    def _reconcile(self, group: StreamsGroup, member: StreamsMember, owned: Tasks | None) -> None:
        target = group.target.get(member.member_id, NO_TASKS)

        def held_by_other(task: Task) -> bool:
            holder = group.active_owner(task)
            return holder is not None and holder != member.member_id

        step = next_assignment(member, group.assignment_epoch, target, owned, held_by_other)
        if step.member_epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
        revoking_before = bool(member.revoking)
        member.state = step.state
        member.member_epoch = step.member_epoch
        member.assigned = step.assigned
        member.revoking = step.revoking
        if member.revoking and not revoking_before:
            self._timers.arm_revocation(group.group_id, member)
        elif not member.revoking:
            self._timers.cancel_revocation(member)

    def _endpoints(self, group: StreamsGroup) -> tuple[EndpointPartitions, ...]:
        configured = group.configured
        if configured is None:
            return ()
        inputs = configured.inputs

        def partitions(tasks: frozenset[Task]) -> dict[str, tuple[int, ...]]:
            out: dict[str, set[int]] = {}
            for s, p in tasks:
                for topic in inputs.get(s, ()):
                    out.setdefault(topic, set()).add(p)
            return {t: tuple(sorted(ps)) for t, ps in sorted(out.items())}

        return tuple(
            EndpointPartitions(m.user_endpoint, partitions(m.assigned.active),
                               partitions(m.assigned.standby | m.assigned.warmup))
            for _, m in sorted(group.members.items()) if m.user_endpoint is not None
        )

    # -- timers, removal ----------------------------------------------------------------

    def _arm_session(self, group: StreamsGroup, member: StreamsMember) -> None:
        timeout = self._settings(group.group_id).session_timeout_ms
        self._timers.arm_session(group.group_id, member, timeout)

    def _expire(self, group_id: str, member_id: str, why: str) -> None:
        member = kip848.member_of(self.groups, group_id, member_id)
        if member is not None:
            self._remove(self.groups[group_id], member, why)

    def _remove(self, group: StreamsGroup, member: StreamsMember, why: str) -> None:
        kip848.remove_member(group, member)
        if not group.members:
            self._shutdown.pop(group.group_id, None)
        self._log.info("streams group {group!r}: member {member!r} {why}; group epoch {epoch}",
                       group=group.group_id, member=member.member_id, why=why,
                       epoch=group.group_epoch)
        self._update_target(group)
        group.refresh_state()
        self._changed(group)

    def _changed(self, group: StreamsGroup) -> None:
        if self._on_change is not None:
            self._on_change(group)

    # -- topology descriptions (KIP-1331) -----------------------------------------------

    def description_required(self, group_id: str) -> bool:
        """Whether the group has no description of the topology it runs (a heartbeat
        answer then asks the member for one)."""
        group = self.groups.get(group_id)
        if group is None or group.topology is None:
            return False
        stored = self._descriptions.get(group_id)
        return stored is None or stored[0] != group.topology.epoch

    def store_description(
        self, group_id: str, member_id: str, topology_epoch: int, description: object
    ) -> tuple[ErrorCode, str | None]:
        """Keep a member's description of the group's topology (in memory: after a
        restart the next heartbeat asks again). Refused as Kafka refuses: UNKNOWN_MEMBER_ID
        for a member (or group) it does not know, STREAMS_INVALID_TOPOLOGY_EPOCH for an
        epoch that is not the group's topology's."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID, (
                f"Member {member_id} is not a member of streams group {group_id}.")
        if group.topology is None or topology_epoch != group.topology.epoch:
            current = None if group.topology is None else group.topology.epoch
            return ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH, (
                f"Topology epoch {topology_epoch} is not the group's ({current}).")
        self._descriptions[group_id] = (topology_epoch, description)
        return ErrorCode.NONE, None

    def description(self, group_id: str) -> object | None:
        """The stored description of the topology the group runs, if any."""
        group = self.groups.get(group_id)
        stored = self._descriptions.get(group_id)
        if group is None or group.topology is None or stored is None:
            return None
        return stored[1] if stored[0] == group.topology.epoch else None

    # -- offsets, admin -----------------------------------------------------------------

    def commit_error(self, group_id: str, member_id: str, epoch: int) -> ErrorCode | None:
        """OffsetCommit's check of a streams group (None: not a streams group). A commit
        without a member epoch (< 0) is allowed only while the group is empty."""
        return kip848.commit_error(self.groups.get(group_id), member_id, epoch,
                            ErrorCode.STALE_MEMBER_EPOCH)

    def txn_commit_error(self, group_id: str, member_id: str, epoch: int) -> ErrorCode | None:
        """TxnOffsetCommit's check (None: not a streams group): a producer outside the
        group (no member id, epoch -1) passes; else the member's current epoch, or
        ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID as Kafka answers."""
        return kip848.txn_commit_error(self.groups.get(group_id), member_id, epoch)

    def fetch_error(self, group_id: str, member_id: str | None, epoch: int) -> ErrorCode | None:
        """OffsetFetch v9+'s check (None: not a streams group)."""
        return kip848.fetch_error(self.groups.get(group_id), member_id, epoch)

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a streams group: only an empty one (NON_EMPTY_GROUP)."""
        group = kip848.delete_empty(self.groups, group_id, StreamsGroupState.DEAD)
        if isinstance(group, ErrorCode):
            return group
        self._shutdown.pop(group_id, None)
        self._descriptions.pop(group_id, None)
        self._changed(group)
        return ErrorCode.NONE

    def restore(self, group: StreamsGroup) -> None:
        """Take a group back from storage: every member gets a fresh session."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._arm_session(group, member)
            if member.revoking:
                self._timers.arm_revocation(group.group_id, member)
        group.state = group.derived_state()

    def stop(self) -> None:
        """Cancel every timer; later heartbeats get COORDINATOR_NOT_AVAILABLE."""
        self._stopped = True
        for group in self.groups.values():
            for member in group.members.values():
                self._timers.cancel_all(member)
            group.transition_to(StreamsGroupState.DEAD)
        self.groups.clear()


def _kept(group: StreamsGroup, member_id: str) -> tuple[object, ...]:
    """What a heartbeat of ``member_id`` may change of what is kept durably: the group's
    epochs, topology, configuration and membership, and that member's fields (a
    heartbeat changes no other member; the target moves only with the assignment epoch).
    Most heartbeats change none of it, and then nothing is written."""
    m = group.members.get(member_id)
    member = None if m is None else (
        m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
        m.topology_epoch, m.process_id, m.user_endpoint, m.client_tags, m.state,
        m.member_epoch, m.previous_member_epoch, m.assigned, m.revoking,
    )
    configured = None if group.configured is None else (
        tuple(sorted(group.configured.task_counts.items())), group.configured.ready)
    return (group.group_epoch, group.assignment_epoch, group.topology, configured,
            frozenset(group.members), member)


def _relevant(topology: Topology, topics: Mapping[str, int]) -> dict[str, int]:
    """The partition counts the topology's configuration depends on: its named topics'
    and, with regex sources, every topic's (-1: does not exist)."""
    if any(s.source_regexes for s in topology.subtopologies):
        return dict(topics)
    names = set(topology.internal_topic_names())
    for s in topology.subtopologies:
        names.update(s.source_topics)
    return {n: topics.get(n, -1) for n in sorted(names)}


def _validate(request: HeartbeatInput) -> None:
    """Kafka's checks of a StreamsGroupHeartbeat before any group is looked at."""

    def bad(message: str) -> kip848.HeartbeatRefused:
        return kip848.HeartbeatRefused(ErrorCode.INVALID_REQUEST, message)

    epoch = request.member_epoch
    if not request.group_id:
        raise bad("GroupId can't be empty.")
    if not request.member_id:
        raise bad("MemberId can't be empty.")
    if request.instance_id == "":
        raise bad("InstanceId can't be empty.")
    if request.rack_id == "":
        raise bad("RackId can't be empty.")
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise bad("RebalanceTimeoutMs must be provided in first request.")
        if request.topology is None:
            raise bad("Topology must be non-null when joining.")
        if not request.topology.subtopologies:
            raise bad("Topology must have at least one subtopology.")
        if request.owned is not None and request.owned:
            raise bad("ActiveTasks, StandbyTasks and WarmupTasks must be empty when "
                      "(re-)joining.")
        if not request.process_id:
            raise bad("ProcessId must be provided in first request.")
    elif epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:
            raise bad("InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise bad("MemberEpoch is invalid.")
    elif request.topology is not None:
        raise bad("Topology can only be provided when (re-)joining.")


def _start_over(member: StreamsMember) -> None:
    member.state = MemberState.STABLE
    member.assigned = NO_TASKS
    member.revoking = NO_TASKS


def _check_epoch(member: StreamsMember, request: HeartbeatInput) -> None:
    owned = request.owned
    kip848.check_epoch(
        request.member_epoch, member.member_epoch, member.previous_member_epoch,
        lambda: owned is not None and owned.all() <= member.assigned.all(),
        group_kind="streams group", holdings="tasks",
    )


def _update_member(member: StreamsMember, request: HeartbeatInput) -> bool:
    """Take the heartbeat's fields that are given; True if one that the assignment
    depends on changed (the group epoch then moves)."""
    changed = False
    if request.process_id is not None:
        changed |= request.process_id != member.process_id
        member.process_id = request.process_id
    if request.rack_id is not None:
        changed |= request.rack_id != member.rack_id
        member.rack_id = request.rack_id
    if request.client_tags is not None:
        changed |= request.client_tags != member.client_tags
        member.client_tags = request.client_tags
    if request.user_endpoint is not None:
        member.user_endpoint = request.user_endpoint
    kip848.take_fields(member, request)
    return changed


__all__ = [
    "DEFAULT_HEARTBEAT_INTERVAL_MS",
    "DEFAULT_NUM_STANDBY_REPLICAS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "EndpointPartitions",
    "HeartbeatAnswer",
    "HeartbeatInput",
    "StreamsGroupCoordinator",
    "StreamsSettings",
]
