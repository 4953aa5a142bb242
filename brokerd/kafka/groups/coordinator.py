"""Classic Kafka consumer-group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup and
OffsetCommit/OffsetFetch semantics), for one broker that coordinates every group. This
module is the public entry point: :class:`GroupCoordinator` and the result types.

Membership follows the classic ("eager") protocol, in which the *leader client* computes
the assignment: the coordinator collects every member's JoinGroup, picks a protocol all
members support, answers each member (only the leader gets the member list), then hands
out the assignment bytes the leader sent in its SyncGroup. Group states are Kafka's:
Empty, PreparingRebalance, CompletingRebalance, Stable (and Dead once stopped); the
transition table is in :mod:`brokerd.kafka.groups.state`, the rebalance protocol in
:mod:`brokerd.kafka.groups.rebalance`. Error rules follow Kafka's coordinator as real
clients expect it; notably OffsetCommit is *accepted* during PreparingRebalance.

Time comes from an injected ``IReactorTime`` (session timeouts, rebalance timeouts, the
initial rebalance delay), so tests drive it with ``task.Clock``. Committed offsets go to
an :class:`~brokerd.storage.stores.offsets.OffsetStore` through the injected ``run_blocking``
(a worker thread in production) via the ordered, batched write queue of
:mod:`brokerd.kafka.groups.store` (group commit). Every group operation (a request, a
timer, a client giving up) returns its group records and answers as a
:class:`~brokerd.coordinator_runtime.CoordinatorResult`, which the coordinator's
:class:`~brokerd.coordinator_runtime.CoordinatorRuntime` writes through that same
queue before it releases the answers.

Membership survives restarts as in Kafka: whenever a generation becomes Stable the group
(protocol, generation, leader, members with their chosen-protocol metadata and assignment)
is written to the same store, in the same ordered write queue as commits, and an Empty
group gets a tombstone. On construction every stored group is restored as Stable with a
fresh session timer per member, so members carry on with their generation (Heartbeat and
OffsetCommit succeed) and members that never come back time out and trigger a rebalance.
A restart mid-rebalance restores the last Stable generation; members of the newer one
then get ILLEGAL_GENERATION and re-join.

Static membership (KIP-345) as in Kafka's classic coordinator: a member joining with a
known ``group_instance_id`` and an empty member id takes over the old member's place
under a new member id (the old id is then FENCED_INSTANCE_ID); if the group is Stable
and the member's protocols are unchanged, it gets the current generation and, at
SyncGroup, its old assignment, with no rebalance. An Empty group keeps its generation
(the next one continues from it, across restarts too). The admin APIs (ListGroups,
DescribeGroups, DeleteGroups, OffsetDelete) are :attr:`GroupCoordinator.admin`
(:mod:`brokerd.kafka.groups.group_admin`).

Groups of the consumer group protocol (KIP-848) share the group-id namespace, the offsets
store and the admin APIs: :attr:`GroupCoordinator.consumer`
(:mod:`brokerd.kafka.groups.consumer.coordinator`) holds them, offset commits and fetches
of such groups are checked by member epoch, their state is journalled whenever it changes
and restored at start, and :attr:`GroupCoordinator.group_configs` holds every group's
config overrides. An empty group of either protocol converts to the other when a member
of the other joins it. A non-empty one migrates online as Kafka 4.x's BIDIRECTIONAL
policy does (:mod:`brokerd.kafka.groups.migration`): a consumer-protocol member joining
a classic group converts it, and the consumer coordinator then answers the classic
members' JoinGroup, SyncGroup, Heartbeat and LeaveGroup; when the last consumer-protocol
member leaves a group of classic members, it becomes a classic group again.

What this module does not do: no sockets or wire encoding (``brokerd.kafka.listener.dispatch``
maps requests to these calls), no incremental cooperative rebalancing on the broker side
(clients do it within the classic protocol). LeaveGroup v3+ removes several members
at once, each by member id or (an operator's removal) by group instance id alone.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, TypeVar, cast

import attrs
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from brokerd.clock import Clock
from brokerd.coordinator_runtime import CoordinatorResult, CoordinatorRuntime, ParkedRequest
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.consumer.coordinator import (
    ClassicFace,
    ConsumerGroupCoordinator,
    GroupSettings,
    HeartbeatAnswer,
    HeartbeatInput,
    TopicMetadata,
)
from brokerd.kafka.groups.consumer.persist import decode_group, encode_group
from brokerd.kafka.groups.consumer.state import ConsumerGroup, ConsumerGroupState
from brokerd.kafka.groups.group_admin import GroupAdmin
from brokerd.kafka.groups.group_configs import HEARTBEAT_INTERVAL, SESSION_TIMEOUT, GroupConfigs
from brokerd.kafka.groups.migration import (
    classic_group_from_consumer,
    consumer_group_from_classic,
)
from brokerd.kafka.groups.rebalance import Out, Rebalancer, record_group
from brokerd.kafka.groups.state import (
    GroupMetadata,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    join_error,
)
from brokerd.kafka.groups.store import (
    STORE_FAILED,
    CommitQueue,
    CommitResults,
    OffsetEntry,
    check_offsets,
    commit_member_error,
    fetch_rows,
    restored_group,
    txn_member_error,
)
from brokerd.kafka.groups.streams import persist as streams_persist
from brokerd.kafka.groups.streams.coordinator import HeartbeatAnswer as StreamsHeartbeatAnswer
from brokerd.kafka.groups.streams.coordinator import HeartbeatInput as StreamsHeartbeatInput
from brokerd.kafka.groups.streams.coordinator import StreamsGroupCoordinator
from brokerd.kafka.groups.streams.state import StreamsGroup, StreamsGroupState
from brokerd.names import MAX_GROUP_ID_LENGTH
from brokerd.storage.stores.offsets import (
    ConsumerGroupUpdate,
    GroupUpdate,
    JournalOp,
    OffsetStore,
)

#: Kafka's group.max.size is effectively unbounded; this cap (members plus member ids
#: handed out with MEMBER_ID_REQUIRED and not yet used) keeps a client that loops on
#: JoinGroup from growing one group without bound. Beyond it: GROUP_MAX_SIZE_REACHED.
MAX_GROUP_SIZE = 10_000

#: Only this much of the client id goes into a generated member id (client ids may be up to
#: 32 KiB on the wire; the member id is echoed in every group response).
MAX_CLIENT_ID_IN_MEMBER_ID = 128


def _group_id_too_long(group_id: str) -> bool:
    return len(group_id.encode("utf-8", "surrogatepass")) > MAX_GROUP_ID_LENGTH

_A = TypeVar("_A")


class _Kip848Group(Protocol):
    @property
    def group_epoch(self) -> int: ...

    @property
    def members(self) -> Mapping[str, object]: ...


_K = TypeVar("_K", bound=_Kip848Group)


class GroupCoordinator:
    """Every consumer group of this broker. Reactor thread only.

    Checks each request (coordinator up, group id, member, generation) and hands the
    valid ones to the :class:`~brokerd.kafka.groups.rebalance.Rebalancer`.

    :param clock: time source for every timer.
    :param offsets: the durable store of committed offsets (already open).
    :param run_blocking: ``run_blocking(f, *args) -> Deferred`` runs a blocking call in a
        worker thread (tests pass a synchronous fake).
    :param initial_rebalance_delay_ms: Kafka's ``group.initial.rebalance.delay.ms``
        (Kafka: 3 s; shorter here so a lone consumer starts quickly).
    :param min_session_timeout_ms: Kafka's ``group.min.session.timeout.ms``.
    :param max_session_timeout_ms: Kafka's ``group.max.session.timeout.ms``.
    :param topics: every topic's ID and partition count now, by name (what classic
        members of a consumer group subscribe to).
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
        consumer_defaults: GroupSettings | None = None,
        topics: Callable[[], TopicMetadata] | None = None,
    ) -> None:
        self._offsets = offsets
        self._min_session_ms = min_session_timeout_ms
        self._max_session_ms = max_session_timeout_ms
        self._max_group_size = max_group_size
        self._groups: dict[str, GroupMetadata] = {}
        self._stopped = False
        self._writes = CommitQueue(offsets=offsets, run_blocking=run_blocking)
        # Group records go through the offsets journal's writer, in one order with the
        # commits, and the answers that report them wait for them.
        self._runtime: CoordinatorRuntime[JournalOp] = CoordinatorRuntime(
            self._writes.journal, self._cancelled
        )
        self._rebalancer = Rebalancer(
            clock=cast(Clock, clock),
            groups=self._groups,
            initial_rebalance_delay_ms=initial_rebalance_delay_ms,
            run=self._runtime.run,
        )
        defaults = consumer_defaults or GroupSettings()
        #: Every group's config overrides (the GROUP config resource).
        self.group_configs = GroupConfigs(
            broker_values={
                SESSION_TIMEOUT: defaults.session_timeout_ms,
                HEARTBEAT_INTERVAL: defaults.heartbeat_interval_ms,
            },
            stored=offsets.group_configs(),
            write=self._writes.store_group_configs,
        )
        #: The consumer group protocol's groups (KIP-848), in the same namespace of
        #: group ids: a group id is a classic group or a consumer group, never both.
        self.consumer = ConsumerGroupCoordinator(
            clock=cast(Clock, clock),
            classic=ClassicFace(has_members=self._classic_has_members,
                                drop_empty=self._drop_empty_classic,
                                upgrade=self._upgrade_classic,
                                downgrade=self._downgrade_consumer),
            settings=self.group_configs.consumer_settings,
            on_change=self._consumer_changed,
            topics=topics,
        )
        #: The last state queued for the journal per consumer group (written on change).
        self._consumer_written: dict[str, bytes] = {}
        #: Streams groups (KIP-1071), in the same namespace of group ids.
        self.streams = StreamsGroupCoordinator(
            clock=cast(Clock, clock),
            settings=self.group_configs.streams_settings,
            is_other_group=self._is_classic_or_consumer,
            on_change=self._streams_changed,
        )
        #: The last state queued for the journal per streams group.
        self._streams_written: dict[str, bytes] = {}
        #: The result being built while a request runs in the consumer coordinator: its
        #: group records go with the request's answer (None: a timer's change, queued
        #: on its own).
        self._collecting: Out | None = None
        #: ListGroups, DescribeGroups, DeleteGroups and OffsetDelete.
        self.admin = GroupAdmin(
            groups=self._groups, offsets=offsets, writes=self._writes,
            stopped=self._is_stopped, consumer=self.consumer, streams=self.streams,
        )
        self._restore()

    def _is_stopped(self) -> bool:
        return self._stopped

    def _is_classic_or_consumer(self, group_id: str) -> bool:
        """Whether a classic or consumer group holds an id (a streams group may not)."""
        return group_id in self._groups or group_id in self.consumer.groups
    def _cancelled(self, parked: ParkedRequest) -> CoordinatorResult[JournalOp, None]:
        self._rebalancer.cancelled(parked)
        return CoordinatorResult((), None)

    def _classic_has_members(self, group_id: str) -> bool | None:
        """None without a classic group of that id, else whether it has members (or
        member ids handed out and not yet used)."""
        group = self._groups.get(group_id)
        return None if group is None else group.size() > 0

    def _drop_empty_classic(self, group_id: str) -> None:
        """An empty classic group becomes a consumer group: forget it here (its
        committed offsets stay in the store)."""
        group = self._groups.get(group_id)
        if group is not None and group.size() == 0:
            out = Out()
            self._rebalancer.kill(out, group)
            del self._groups[group_id]
            out.record(GroupUpdate(group_id, None))
            self._runtime.run(out.result(None))

    def _upgrade_classic(self, group_id: str, topics: TopicMetadata) -> ConsumerGroup | str:
        """Online upgrade: hand a classic group with members over to the consumer
        coordinator (:mod:`.migration` says whether it can be), or say why not."""
        group = self._groups.get(group_id)
        if group is None:
            return f"Group {group_id} is not a consumer group."
        converted = consumer_group_from_classic(group, topics, self.consumer.max_group_size)
        if isinstance(converted, str):
            self._log.info("group {group!r}: {why}", group=group_id, why=converted)
            return converted
        # Members parked in a rebalance join again, now into the consumer group.
        out = Out()
        self._rebalancer.kill(out, group, ErrorCode.REBALANCE_IN_PROGRESS)
        del self._groups[group_id]
        out.record(GroupUpdate(group_id, None))
        self._runtime.run(out.result(None))
        return converted

    def _downgrade_consumer(self, consumer: ConsumerGroup) -> None:
        """Online downgrade: a consumer group of classic members only becomes a classic
        group, which rebalances at once."""
        group = classic_group_from_consumer(consumer)
        self._groups[group.group_id] = group
        out = Out()
        self._rebalancer.adopt(out, group, "converted back from the consumer protocol")
        self._runtime.run(out.result(None))

    def _consumer_changed(self, group: ConsumerGroup) -> None:
        """Journal a consumer group's state when what is kept of it changed (most
        heartbeats change nothing), or its tombstone once it is gone."""
        dead = group.state is ConsumerGroupState.DEAD
        self._journal(self._consumer_written, group.group_id,
                      None if dead else encode_group(group))

    def _store_consumer(self, group_id: str, state: bytes | None) -> None:
        if self._collecting is not None:
            self._collecting.record(ConsumerGroupUpdate(group_id, state))
        else:
            self._writes.store_consumer_group(group_id, state)

    def consumer_heartbeat(
        self, request: HeartbeatInput, topics: TopicMetadata
    ) -> Deferred[HeartbeatAnswer]:
        """A ConsumerGroupHeartbeat (KIP-848), answered once the group state it
        changed is durable; NOT_COORDINATOR (retriable) if that write failed."""
        return self._heartbeat(lambda: self.consumer.heartbeat(request, topics),
                               HeartbeatAnswer(int(STORE_FAILED)),
                               self._consumer_written, request.group_id)

    def _streams_changed(self, group: StreamsGroup) -> None:
        """Journal a streams group's state when what is kept of it changed, or its
        tombstone once it is gone (beside the consumer groups' records: one namespace)."""
        dead = group.state is StreamsGroupState.DEAD
        self._journal(self._streams_written, group.group_id,
                      None if dead else streams_persist.encode_group(group))

    def _journal(self, written: dict[str, bytes], group_id: str, state: bytes | None) -> None:
        """Queue a KIP-848 group's ``state`` for the journal when it is not the last one
        queued (``written``), or its tombstone (``state`` None: the group is gone) when a
        state was."""
        if state is None:
            if written.pop(group_id, None) is not None:
                self._store_consumer(group_id, None)
        elif written.get(group_id) != state:
            written[group_id] = state
            self._store_consumer(group_id, state)

    @contextlib.contextmanager
    def _collect(self) -> Iterator[Out]:
        """The result a request builds: the group records the consumer and streams
        coordinators journal meanwhile go with its answer."""
        out = Out()
        outer, self._collecting = self._collecting, out
        try:
            yield out
        finally:
            self._collecting = outer

    @staticmethod
    def _forget_if_failed(
        d: Deferred[_A], written: dict[str, bytes], group_id: str, failed: Callable[[_A], bool]
    ) -> Deferred[_A]:
        """``d``, forgetting the group's last queued state if its answer says the write
        failed: not stored after all, the next change writes the group's whole state."""

        def forget_written(answered: _A) -> _A:
            if failed(answered):
                written.pop(group_id, None)
            return answered

        return d.addCallback(forget_written)

    def streams_heartbeat(
        self, request: StreamsHeartbeatInput, topics: Mapping[str, int]
    ) -> Deferred[StreamsHeartbeatAnswer]:
        """A StreamsGroupHeartbeat (KIP-1071), answered once the group state it changed
        is durable, as :meth:`consumer_heartbeat`; NOT_COORDINATOR (retriable) if that
        write failed."""
        return self._heartbeat(lambda: self.streams.heartbeat(request, topics),
                               StreamsHeartbeatAnswer(int(STORE_FAILED)),
                               self._streams_written, request.group_id)

    def _heartbeat(
        self, beat: Callable[[], _A], failed: _A, written: dict[str, bytes], group_id: str
    ) -> Deferred[_A]:
        """A KIP-848 heartbeat (consumer or streams): its answer once the group state it
        changed is durable, else ``failed`` (and the group's state is written whole at its
        next change)."""
        with self._collect() as out:
            answer = beat()
        d = self._runtime.run(out.result(answer, failed))
        if out.records:
            self._forget_if_failed(d, written, group_id, lambda answered: answered is failed)
        return d

    def _restore_kip848(
        self,
        kind: str,
        group_id: str,
        blob: bytes,
        decode: Callable[[str, bytes], _K],
        restore: Callable[[_K], None],
        written: dict[str, bytes],
    ) -> None:
        """Restore one stored consumer or streams (``kind``) group; an unreadable one is
        logged and left out."""
        try:
            group = decode(group_id, blob)
        except ValueError as e:
            self._log.error("group {group!r}: stored {kind} group state unreadable "
                            "({why}); left out", group=group_id, kind=kind, why=str(e))
            return
        restore(group)
        written[group_id] = blob
        self._log.info("group {group!r}: restored {kind} group at epoch {epoch} with "
                       "{count} member(s)", group=group_id, kind=kind,
                       epoch=group.group_epoch, count=len(group.members))

    def _restore(self) -> None:
        """Rebuild every group the store holds as of its last stored generation: Stable,
        or Empty (keeping its generation) if it had no members; and every
        consumer-protocol group as it last was, each member with a fresh session."""
        for group_id, blob in sorted(self._offsets.consumer_groups_state().items()):
            if streams_persist.is_streams_record(blob):
                self._restore_kip848("streams", group_id, blob, streams_persist.decode_group,
                                     self.streams.restore, self._streams_written)
            else:
                self._restore_kip848("consumer", group_id, blob, decode_group,
                                     self.consumer.restore, self._consumer_written)
        for group_id, stored in sorted(self._offsets.groups_metadata().items()):
            if group_id in self.consumer.groups or group_id in self.streams.groups:
                continue
            group = restored_group(group_id, stored)
            self._groups[group_id] = group
            # A fresh session each: the clients had no way to heartbeat while we were down.
            for member in group.members.values():
                self._rebalancer.arm_session(group, member)
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
        """``(group_id, protocol_type)`` of every group (ListGroups)."""
        return self.admin.list_groups()[1]

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
        skip_assignment_supported: bool = False,
        reason: str | None = None,
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
        :param skip_assignment_supported: JoinGroup v9+: a static leader that re-joins a
            Stable group unchanged is answered as the leader, with the members and
            ``skip_assignment`` (it keeps the assignment it has); below v9 it is answered
            as a follower of its old member id, as Kafka does.
        :param reason: JoinGroup v8+: what the client says, for the rebalance log line.
        """
        candidate = Member(
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=(
                rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms
            ),
            protocols=list(protocols),
        )
        with self._collect() as out:
            answer = self._join(
                out,
                group_id,
                candidate,
                protocol_type,
                _JoinOptions(require_known_member_id, skip_assignment_supported, reason),
            )
        failed = None
        if isinstance(answer, JoinResult):
            failed = join_error(STORE_FAILED, answer.member_id)
        return self._runtime.run(out.result(answer, failed))

    def _join(
        self,
        out: Out,
        group_id: str,
        candidate: Member,
        protocol_type: str,
        options: _JoinOptions,
    ) -> ParkedRequest | JoinResult:
        member_id = candidate.member_id
        instance_id = candidate.group_instance_id

        def fail(code: ErrorCode, mid: str = member_id) -> JoinResult:
            return join_error(code, mid)

        if self._stopped:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group_id or _group_id_too_long(group_id):
            return fail(ErrorCode.INVALID_GROUP_ID)
        if not self._min_session_ms <= candidate.session_timeout_ms <= self._max_session_ms:
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        if not protocol_type or not candidate.protocols:
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group_id in self.streams.groups:
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)  # Kafka's answer
        consumer = self.consumer.groups.get(group_id)
        if consumer is not None:
            if consumer.members:
                # A consumer group with members takes classic members in (migration).
                answer = self.consumer.classic_join(
                    group_id, member_id, instance_id=instance_id,
                    client_id=candidate.client_id, client_host=candidate.client_host,
                    session_timeout_ms=candidate.session_timeout_ms,
                    rebalance_timeout_ms=candidate.rebalance_timeout_ms,
                    protocol_type=protocol_type, protocols=candidate.protocols,
                    require_known_member_id=options.require_known,
                )
                return JoinResult(
                    answer.error_code, answer.generation_id, answer.protocol_name or "", "",
                    answer.member_id, [], protocol_type=answer.protocol_type,
                )
            self.consumer.drop_empty(group_id)
        group = self._groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if member_id and group is not None and group.fenced(instance_id, member_id):
            # Kafka: an id other than the instance's current one is an old incarnation.
            return fail(ErrorCode.FENCED_INSTANCE_ID)
        if member_id and member is None and (group is None or member_id not in group.pending):
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        # A static member re-joining with an empty member id replaces its old incarnation.
        replaced: Member | None = None
        if group is not None and member is None and instance_id is not None:
            replaced = group.static_member(instance_id)
        if group is not None and not group.supports(
            protocol_type, candidate.protocols, member or replaced
        ):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

        if member is not None:
            assert group is not None
            if instance_id is not None and member.group_instance_id != instance_id:
                return fail(ErrorCode.FENCED_INSTANCE_ID)
            changed = _update_member(member, candidate)
            return self._rebalancer.rejoin(out, group, member, changed, options.reason)
        if replaced is not None:
            assert group is not None
            return self._replace_static(out, group, replaced, candidate, options)

        size = 0 if group is None else group.size()
        if replaced is None and not member_id and size >= self._max_group_size:
            return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)

        if group is None:
            group = self._groups[group_id] = GroupMetadata(group_id)
        if not member_id:
            new_id = _new_member_id(instance_id or candidate.client_id)
            if instance_id is None and options.require_known:
                # Kafka (JoinGroup v4+): hand out the id first and only admit the member
                # when it comes back with it, so a client that times out mid-join and
                # retries does not leave a ghost member behind.
                self._rebalancer.hand_out_member_id(group, new_id, candidate.session_timeout_ms)
                return fail(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            candidate.member_id = new_id
        else:
            group.take_pending(member_id)

        return self._rebalancer.admit(out, group, candidate, protocol_type, options.reason)

    def _replace_static(
        self,
        out: Out,
        group: GroupMetadata,
        member: Member,
        candidate: Member,
        options: _JoinOptions,
    ) -> ParkedRequest | JoinResult:
        """Kafka's ``updateStaticMemberAndRebalance``: a static member re-joined with an
        empty member id; it takes over its old incarnation's place under a new id."""
        old_leader = group.leader_id
        self._rebalancer.fence(out, member)
        old_id = group.replace_member_id(member, _new_member_id(candidate.group_instance_id or ""))
        changed = _update_member(member, candidate)
        self._log.info(
            "group {group!r}: static member {instance!r} re-joined as {new!r}, fencing {old!r}",
            group=group.group_id,
            instance=member.group_instance_id,
            new=member.member_id,
            old=old_id,
        )
        if group.state is GroupState.STABLE and not changed:
            # No rebalance: the member gets this generation, and at SyncGroup its old
            # assignment.
            self._rebalancer.arm_session(group, member)
            record_group(out, group)
            result = group.join_result(member)
            if options.skip_assignment_supported:
                # v9+ (as Kafka): the leader learns it leads, with the members, and that
                # it must not compute an assignment a Stable group would never hand out.
                return attrs.evolve(result, skip_assignment=member.member_id == group.leader_id)
            # Below v9 the leader id answered is the one before the replacement (as
            # Kafka does), so a re-joining leader takes itself for a follower.
            return attrs.evolve(result, leader_id=old_leader or "", members=[])
        # CompletingRebalance (the leader may be assigning the old id), changed protocols,
        # or a rebalance already being prepared: the member joins the round.
        return self._rebalancer.rejoin(out, group, member, True, options.reason)

    # -- SyncGroup, Heartbeat, LeaveGroup -----------------------------------------------

    def _member_for(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> tuple[GroupMetadata, Member] | ErrorCode:
        """The common checks of SyncGroup and Heartbeat."""
        if self._stopped:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not group_id or _group_id_too_long(group_id):
            return ErrorCode.INVALID_GROUP_ID
        group = self._groups.get(group_id)
        if group is not None and group.fenced(instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return group, member

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: list[tuple[str, bytes]],
        *,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Deferred[SyncResult]:
        """Handle a SyncGroup. A follower's answer is held until the leader's SyncGroup
        (carrying every member's assignment) arrives. Cancelling is harmless.

        ``protocol_type`` and ``protocol_name`` (SyncGroup v5+; None = not given) must be
        the group's, else INCONSISTENT_GROUP_PROTOCOL (checked after the generation, as
        Kafka checks it)."""
        with self._collect() as out:
            answer = self._sync(
                out, group_id, generation_id, member_id, assignments,
                group_instance_id, protocol_type, protocol_name,
            )
        return self._runtime.run(out.result(answer, SyncResult(STORE_FAILED)))

    def _sync(
        self,
        out: Out,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: list[tuple[str, bytes]],
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ParkedRequest | SyncResult:
        if not self._stopped and self.consumer.has_members(group_id):
            answer = self.consumer.classic_sync(
                group_id, generation_id, member_id, instance_id=group_instance_id,
                protocol_type=protocol_type, protocol_name=protocol_name,
            )
            return SyncResult(answer.error_code, answer.assignment,
                              answer.protocol_type, answer.protocol_name)
        found = self._member_for(group_id, generation_id, member_id, group_instance_id)
        if isinstance(found, ErrorCode):
            return SyncResult(found)
        group, member = found
        if group.protocol_mismatch(protocol_type, protocol_name):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        return self._rebalancer.sync(out, group, member, assignments)

    def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        group_instance_id: str | None = None,
    ) -> int:
        """Handle a Heartbeat: 0, or 27 while a rebalance is being prepared (that is how
        members learn they must re-join), or 22/25/24/15/82. Answered at once: it only
        restarts the member's session timer, which nothing stored holds (the LeaveGroup
        and SyncGroup that change the group wait for their records)."""
        if not self._stopped and self.consumer.has_members(group_id):
            return self.consumer.classic_heartbeat(group_id, generation_id, member_id,
                                                   group_instance_id)
        found = self._member_for(group_id, generation_id, member_id, group_instance_id)
        if isinstance(found, ErrorCode):
            return int(found)
        group, member = found
        self._rebalancer.arm_session(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            return int(ErrorCode.REBALANCE_IN_PROGRESS)
        return int(ErrorCode.NONE)

    def leave(self, group_id: str, member_id: str) -> Deferred[int]:
        """Handle a LeaveGroup (v0-2): the rest of the group rebalances, or it goes Empty.
        One error code: the request's, else the member's (as Kafka answers v0-2); given
        once the group's record is durable, as :meth:`leave_members`."""
        d = self.leave_members(group_id, [(member_id, None, None)])
        return d.addCallback(lambda answer: answer[0] or (answer[1][0] if answer[1] else 0))

    def leave_members(
        self, group_id: str, leaving: list[tuple[str, str | None, str | None]]
    ) -> Deferred[tuple[int, list[int]]]:
        """Handle a LeaveGroup v3+: ``(member_id, group_instance_id, reason)`` each.

        Fires with the request's error code and, when it is 0, one code per member in
        request order, once the records its leaving made are durable (a classic group
        left Empty: its Empty record, so the members answered as gone are gone after a
        restart; a consumer group: its new state); NOT_COORDINATOR (retriable) if that
        write failed. As Kafka's classic coordinator: an empty member id with a
        known instance id removes that static member (an operator's removal); a member
        id handed out with MEMBER_ID_REQUIRED is forgotten; otherwise the member must be
        known and, given an instance id, be that instance's current member
        (FENCED_INSTANCE_ID if another one is). An unknown group is UNKNOWN_MEMBER_ID for
        the whole request. The rest of the group rebalances once the members are gone."""
        with self._collect() as out:
            answer = self._leave_members(out, group_id, leaving)
        failed: tuple[int, list[int]] = (int(STORE_FAILED), [])
        d = self._runtime.run(out.result(answer, failed))
        if out.records and group_id in self.consumer.groups:
            self._forget_if_failed(d, self._consumer_written, group_id,
                                   lambda answered: answered[0] == STORE_FAILED)
        return d

    def _leave_members(
        self, out: Out, group_id: str, leaving: list[tuple[str, str | None, str | None]]
    ) -> tuple[int, list[int]]:
        if self._stopped:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE), []
        if not group_id or _group_id_too_long(group_id):
            return int(ErrorCode.INVALID_GROUP_ID), []
        if self.consumer.has_members(group_id):
            return int(ErrorCode.NONE), self.consumer.classic_leave(
                group_id, [(member_id, instance_id) for member_id, instance_id, _ in leaving]
            )
        group = self._groups.get(group_id)
        if group is None:
            return int(ErrorCode.UNKNOWN_MEMBER_ID), []
        codes = [
            int(self._leave_one(out, group, member_id, instance_id, reason))
            for member_id, instance_id, reason in leaving
        ]
        self._rebalancer.forget_if_disposable(group)
        return int(ErrorCode.NONE), codes

    def _leave_one(
        self,
        out: Out,
        group: GroupMetadata,
        member_id: str,
        instance_id: str | None,
        reason: str | None,
    ) -> ErrorCode:
        why = "left the group" if reason is None else f"left the group ({reason})"
        if not member_id:
            static = None if instance_id is None else group.static_member(instance_id)
            if static is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._rebalancer.remove_member(out, group, static, why)
            return ErrorCode.NONE
        if group.take_pending(member_id):
            return ErrorCode.NONE
        if instance_id is not None:
            current = group.instance_ids.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._rebalancer.remove_member(out, group, member, why)
        return ErrorCode.NONE

    # -- offsets ------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: list[OffsetEntry],
        *,
        group_instance_id: str | None = None,
        missing_group_not_found: bool = False,
    ) -> Deferred[CommitResults]:
        """Handle an OffsetCommit. Fires, with an error code per ``(topic, partition)``,
        only after the accepted offsets are fsync'd; they are then visible to
        :meth:`fetch_offsets`.

        Group rules: generation -1 on a group without members (simple consumer / manual
        assignment) is accepted; generation -1 on a group with members, or an unknown
        member: 25; a stale generation: 22; CompletingRebalance: 27; PreparingRebalance
        and Stable: accepted. An empty group id is allowed, as in Kafka (it is only ever
        a key in the journal). Partitions are then judged one by one
        (:func:`~brokerd.kafka.groups.store.check_offsets`).

        :param missing_group_not_found: OffsetCommit v9+: a generation given (>= 0) for
            a group that does not exist (no members, no generation, no committed offset)
            is GROUP_ID_NOT_FOUND, as Kafka answers those versions; below v9 it stays 25.
        """
        consumer_code = self.consumer.commit_error(group_id, member_id, generation_id)
        if consumer_code is None:
            consumer_code = self.streams.commit_error(group_id, member_id, generation_id)
        if consumer_code is not None:
            return self._store_offsets(group_id, offsets, self._precheck(group_id) or consumer_code)
        code = self._check_commit(group_id, generation_id, member_id, group_instance_id)
        if (
            code is ErrorCode.UNKNOWN_MEMBER_ID
            and missing_group_not_found
            and generation_id >= 0
            and group_id not in self._groups
            and not self._offsets.committed(group_id)
        ):
            code = ErrorCode.GROUP_ID_NOT_FOUND
        return self._store_offsets(group_id, offsets, code)

    def commit_txn_offsets(
        self, group_id: str, offsets: list[OffsetEntry]
    ) -> Deferred[CommitResults]:
        """A committed transaction's offsets: :meth:`commit_offsets` without group rules
        (TxnOffsetCommit checked them), through the same durable write queue."""
        return self._store_offsets(group_id, offsets, self._precheck(group_id))

    def check_txn_member(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """TxnOffsetCommit's group check (:func:`~brokerd.kafka.groups.store.txn_member_error`)."""
        code = self._precheck(group_id)
        consumer = self.consumer.txn_commit_error(group_id, member_id, generation_id)
        if consumer is None:
            consumer = self.streams.txn_commit_error(group_id, member_id, generation_id)
        if consumer is not None:
            return code or consumer
        group = self._groups.get(group_id)
        return code or txn_member_error(group, generation_id, member_id, group_instance_id)

    def _store_offsets(
        self, group_id: str, offsets: list[OffsetEntry], code: ErrorCode
    ) -> Deferred[CommitResults]:
        if code is not ErrorCode.NONE:
            return defer.succeed({(t, p): int(code) for t, p, *_ in offsets})
        results, accepted = check_offsets(offsets)
        if not accepted:
            return defer.succeed(results)
        return self._writes.commit(group_id, accepted, results)

    def _precheck(self, group_id: str) -> ErrorCode:
        if self._stopped:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if _group_id_too_long(group_id):
            return ErrorCode.INVALID_GROUP_ID
        return ErrorCode.NONE

    def _check_commit(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        group = self._groups.get(group_id)
        code = self._precheck(group_id) or commit_member_error(
            group, generation_id, member_id, instance_id
        )
        if code is ErrorCode.NONE and group is not None and member_id in group.members:
            self._rebalancer.arm_session(group, group.members[member_id])
        return code

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> list[tuple[str, int, int, int, str, int]]:
        """Handle an OffsetFetch from memory (no I/O):
        ``(topic, partition, offset, leader_epoch, metadata, error_code)`` per partition,
        with ``-1, -1, ""`` and error 0 where nothing is committed (the client then applies
        auto.offset.reset). ``partitions=None`` means every committed partition."""
        return fetch_rows(self._offsets, group_id, partitions, self._precheck(group_id))

    def fetch_member_error(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+'s member check of a consumer-protocol group (0: none)."""
        streams = self.streams.fetch_error(group_id, member_id, member_epoch)
        return int(self._precheck(group_id) or streams or self.consumer.fetch_error(
            group_id, member_id, member_epoch
        ))

    # -- shutdown -----------------------------------------------------------------------

    def stop(self) -> Deferred[None]:
        """Cancel every timer and answer every held JoinGroup/SyncGroup (and queued, not yet
        started commit) with COORDINATOR_NOT_AVAILABLE; later calls get the same error.
        A commit already being written still fires with its real outcome.

        Returns a Deferred that fires once the journal is quiet: the write in progress has
        finished and group records still waiting (the last Stable generations) are
        written, so the offsets store may then be closed."""
        if not self._stopped:
            self._stopped = True
            self.consumer.stop()
            self.streams.stop()
            out = Out()
            for group in self._groups.values():
                self._rebalancer.kill(out, group)
            self._groups.clear()
            refused = self._writes.refuse_queued(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            self._runtime.run(out.result(None))
            for waiter, answer in refused:
                if not waiter.called:
                    waiter.callback(answer)
        return self._writes.drained()


@attrs.frozen
class _JoinOptions:
    """How a JoinGroup's version shapes its handling (see :meth:`GroupCoordinator.join`)."""

    require_known: bool
    skip_assignment_supported: bool
    reason: str | None


def _new_member_id(prefix: str) -> str:
    return f"{prefix[:MAX_CLIENT_ID_IN_MEMBER_ID]}-{uuid.uuid4()}"


def _update_member(member: Member, candidate: Member) -> bool:
    """Take a re-join's fields; True if the member's protocols changed."""
    changed = member.protocols != candidate.protocols
    member.client_id = candidate.client_id
    member.client_host = candidate.client_host
    member.session_timeout_ms = candidate.session_timeout_ms
    member.rebalance_timeout_ms = candidate.rebalance_timeout_ms
    member.protocols = candidate.protocols
    return changed


__all__ = [
    "MAX_GROUP_SIZE",
    "GroupCoordinator",
    "GroupState",
    "JoinResult",
    "OffsetEntry",
    "SyncResult",
]
