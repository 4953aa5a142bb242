# -*- test-case-name: tests.kafka.groups.test_rebalance -*-
"""The rebalance protocol of the classic consumer-group coordinator, for requests that have
already passed the coordinator's checks (valid group id, known member, right generation).

:class:`Rebalancer` moves groups through their states (see
:mod:`brokerd.kafka.groups.state` for the transition table) in response to members joining,
syncing, heartbeating, leaving and timing out:

- Empty / Stable / CompletingRebalance -> PreparingRebalance when a member joins, changes
  its metadata, the leader re-joins, or a member leaves or times out. Every member must
  then JoinGroup again; their JoinGroups are held.
- PreparingRebalance -> CompletingRebalance once every member re-joined, or the rebalance
  timeout dropped the stragglers (the first rebalance of an Empty group first waits the
  initial-rebalance delay, extended while new members keep arriving). The held JoinGroups
  are answered; the next generation starts.
- CompletingRebalance -> Stable when the leader's SyncGroup brings the assignment; held
  SyncGroups are answered and the generation is queued for the journal.
- any -> Empty when the last member is gone: the generation still counts up and an
  Empty-group record (protocol type and generation) is queued, as Kafka does; a group
  that never had a generation is forgotten once no member id is outstanding.

Every operation works on a :class:`~brokerd.coordinator_runtime.ResultBuilder`:
the group records it makes and the answers it gives requests held earlier (a parked
JoinGroup or SyncGroup is a :class:`~brokerd.coordinator_runtime.ParkedRequest`,
never a Deferred). The coordinator's runtime gives those answers once the records are
durable, after the whole state change is made, so a client callback that calls back
into the coordinator sees a consistent group. Timers are the one place this module
starts an operation itself; it hands their results to the ``run`` it is given.

What this module does not do: validate requests, look groups up by id for clients, or
write or answer anything itself (the runtime,
:class:`~brokerd.coordinator_runtime.CoordinatorRuntime`, does both).
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.logger import Logger

from brokerd.clock import Clock
from brokerd.coordinator_runtime import (
    CoordinatorResult,
    ParkedRequest,
    ResultBuilder,
)
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.state import (
    GroupMetadata,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    cancel_call,
    join_error,
)
from brokerd.kafka.groups.store import STORE_FAILED, stored_group
from brokerd.storage.stores.offsets import GroupUpdate, JournalOp

#: What one group operation builds: group records (the offsets journal's) and answers.
Out = ResultBuilder[JournalOp]
#: A finished operation, as the runtime takes it.
GroupResult = CoordinatorResult[JournalOp, object]


def _answer_join(out: Out, to: ParkedRequest, result: JoinResult) -> None:
    out.release(to, result, join_error(STORE_FAILED, result.member_id))


def _answer_sync(out: Out, to: ParkedRequest, result: SyncResult) -> None:
    out.release(to, result, SyncResult(STORE_FAILED))


def _answer_parked(out: Out, member: Member, code: ErrorCode) -> None:
    """Answer the member's parked JoinGroup and SyncGroup (if any) with ``code``."""
    if member.join_waiter is not None:
        waiter, member.join_waiter = member.join_waiter, None
        _answer_join(out, waiter, join_error(code, member.member_id))
    if member.sync_waiter is not None:
        sync_waiter, member.sync_waiter = member.sync_waiter, None
        _answer_sync(out, sync_waiter, SyncResult(code))


def record_group(out: Out, group: GroupMetadata) -> None:
    """Record ``group``'s membership (its Stable generation, or Empty with its
    generation) for the journal."""
    out.record(GroupUpdate(group.group_id, stored_group(group)))


class Rebalancer:
    """Drives every group's state machine. Reactor thread only.

    :param groups: the coordinator's groups by id (shared; groups that go Empty with no
        outstanding member id are removed from it here).
    :param initial_rebalance_delay_ms: Kafka's ``group.initial.rebalance.delay.ms``.
    :param run: applies the result of an operation a timer started (the runtime's).
    """

    _log = Logger()

    def __init__(
        self,
        *,
        clock: Clock,
        groups: dict[str, GroupMetadata],
        initial_rebalance_delay_ms: int,
        run: Callable[[GroupResult], object],
    ) -> None:
        self._clock = clock
        self._groups = groups
        self._initial_delay_ms = initial_rebalance_delay_ms
        self._run = run

    def _timer_done(self, out: Out) -> None:
        self._run(out.result(None))

    # -- joining --------------------------------------------------------------------------

    def admit(
        self,
        out: Out,
        group: GroupMetadata,
        member: Member,
        protocol_type: str,
        client_reason: str | None = None,
    ) -> ParkedRequest:
        """A new member joins: it is added and the group (re)balances. ``client_reason``
        (JoinGroup v8+) goes into the log line of the rebalance it starts."""
        group.add_member(member, protocol_type)
        self._log.info(
            "group {group!r}: member {member!r} joined ({state})",
            group=group.group_id,
            member=member.member_id,
            state=group.state.value,
        )
        if group.state is GroupState.PREPARING_REBALANCE:
            if group.initial_delay:
                group.new_member_added = True
        else:
            self._prepare_rebalance(
                out, group, _with_reason(f"new member {member.member_id} joined", client_reason)
            )
        return self._join_round(out, group, member)

    def rejoin(
        self,
        out: Out,
        group: GroupMetadata,
        member: Member,
        changed: bool,
        client_reason: str | None = None,
    ) -> ParkedRequest | JoinResult:
        """A known member joins again (its fields already updated; ``changed``: its
        protocols differ from before)."""
        if group.state is GroupState.PREPARING_REBALANCE:
            return self._join_round(out, group, member)
        # CompletingRebalance or Stable (an Empty group has no members). A follower that
        # re-joins with unchanged metadata just gets the current generation again; the
        # leader re-joining means it wants a new assignment (e.g. topic metadata changed).
        rebalance = changed or (
            group.state is GroupState.STABLE and member.member_id == group.leader_id
        )
        if not rebalance:
            self.arm_session(group, member)
            return group.join_result(member)
        reason = "member metadata changed" if changed else "leader re-joined"
        self._prepare_rebalance(
            out, group, _with_reason(f"{reason} ({member.member_id})", client_reason)
        )
        return self._join_round(out, group, member)

    def hand_out_member_id(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        """Remember an id given with MEMBER_ID_REQUIRED until it is used or expires."""
        group.pending[member_id] = self._clock.callLater(
            timeout_ms / 1000, self._on_pending_expired, group, member_id
        )

    def _on_pending_expired(self, group: GroupMetadata, member_id: str) -> None:
        # The client never came back with the id MEMBER_ID_REQUIRED gave it.
        del group.pending[member_id]
        self.forget_if_disposable(group)

    def _join_round(self, out: Out, group: GroupMetadata, member: Member) -> ParkedRequest:
        parked = self._await_join(out, group, member)
        self._maybe_complete_join(out, group)
        return parked

    def _await_join(self, out: Out, group: GroupMetadata, member: Member) -> ParkedRequest:
        """Park ``member``'s JoinGroup until the join phase completes."""
        old = member.join_waiter
        if old is not None:
            # The same member joined again while its first JoinGroup was held (its client
            # reconnected): the first request's answer goes nowhere useful; tell it to retry.
            _answer_join(out, old, join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        parked = ParkedRequest(group.group_id)
        member.join_waiter = parked
        group.mark_joined(member)
        # A member parked in JoinGroup cannot heartbeat; the rebalance timeout bounds it.
        self.arm_session(group, member)
        return parked

    def cancelled(self, parked: ParkedRequest) -> None:
        """The client of a parked JoinGroup or SyncGroup went away. A removed member's
        request was already answered, so this is a current member's. It still counts as
        joined for this round; if it never comes back, its session times out like any
        silent member's."""
        group = self._groups.get(parked.holder)
        if group is None:
            return
        for member in group.members.values():
            if member.join_waiter is parked:
                member.join_waiter = None
            elif member.sync_waiter is parked:
                member.sync_waiter = None
            else:
                continue
            self.arm_session(group, member)
            return

    # -- PreparingRebalance -> CompletingRebalance ----------------------------------------

    def adopt(self, out: Out, group: GroupMetadata, reason: str) -> None:
        """Take in a group converted from the consumer protocol (Empty, with members):
        every member gets a session and must join again."""
        for m in group.members.values():
            self.arm_session(group, m)
        self._prepare_rebalance(out, group, reason)

    def _prepare_rebalance(self, out: Out, group: GroupMetadata, reason: str) -> None:
        """Enter PreparingRebalance: every member must join again."""
        was_empty = group.state is GroupState.EMPTY
        self._log.info(
            "group {group!r}: preparing rebalance (generation {generation}): {reason}",
            group=group.group_id,
            generation=group.generation,
            reason=reason,
        )
        group.transition_to(GroupState.PREPARING_REBALANCE)
        for m in group.members.values():
            m.joined = False
            if m.sync_waiter is not None:
                waiter, m.sync_waiter = m.sync_waiter, None
                _answer_sync(out, waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                self.arm_session(group, m)
        timeout_ms = group.max_rebalance_timeout_ms()
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
            group.rebalance_timer = self._clock.callLater(
                timeout_ms / 1000, self._on_rebalance_timeout, group
            )

    def _on_initial_delay(self, group: GroupMetadata) -> None:
        # Armed only in PreparingRebalance with initial_delay set; any transition cancels it.
        assert group.state is GroupState.PREPARING_REBALANCE and group.initial_delay
        group.rebalance_timer = None
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
        out = Out()
        self._complete_join(out, group)
        self._timer_done(out)

    def _on_rebalance_timeout(self, group: GroupMetadata) -> None:
        # Armed only in PreparingRebalance; any transition cancels it.
        assert group.state is GroupState.PREPARING_REBALANCE
        group.rebalance_timer = None
        out = Out()
        self._complete_join(out, group)
        self._timer_done(out)

    def _maybe_complete_join(self, out: Out, group: GroupMetadata) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and not group.initial_delay
            and group.all_joined()
        ):
            self._complete_join(out, group)

    def _complete_join(self, out: Out, group: GroupMetadata) -> None:
        """End the join phase: drop stragglers, start the next generation, answer joins."""
        for straggler in [m for m in group.members.values() if not m.joined]:
            self._log.info(
                "group {group!r}: member {member!r} did not re-join in time, removed",
                group=group.group_id,
                member=straggler.member_id,
            )
            self.drop_member(out, group, straggler, ErrorCode.UNKNOWN_MEMBER_ID)
        if not group.members:
            self._go_empty(out, group)
            return
        group.next_generation()
        group.sync_timer = self._clock.callLater(
            group.max_rebalance_timeout_ms() / 1000, self._on_sync_timeout, group
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
            if m.join_waiter is not None:
                waiter, m.join_waiter = m.join_waiter, None
                _answer_join(out, waiter, group.join_result(m))
            self.arm_session(group, m)

    # -- CompletingRebalance -> Stable ----------------------------------------------------

    def sync(
        self, out: Out, group: GroupMetadata, member: Member, assignments: list[tuple[str, bytes]]
    ) -> ParkedRequest | SyncResult:
        """SyncGroup of a current member in CompletingRebalance or Stable."""
        group.pending_sync.discard(member.member_id)
        if not group.pending_sync:
            cancel_call(group.sync_timer)
            group.sync_timer = None
        if group.state is GroupState.STABLE:
            self.arm_session(group, member)
            return group.sync_result(member)
        if member.sync_waiter is not None:
            _answer_sync(out, member.sync_waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        parked = ParkedRequest(group.group_id)
        member.sync_waiter = parked
        self.arm_session(group, member)
        if member.member_id == group.leader_id:
            self._complete_sync(out, group, dict(assignments))  # a repeated id: the last wins
        return parked

    def _complete_sync(self, out: Out, group: GroupMetadata, given: dict[str, bytes]) -> None:
        group.transition_to(GroupState.STABLE)
        self._log.info(
            "group {group!r}: generation {generation} is stable",
            group=group.group_id,
            generation=group.generation,
        )
        for m in group.members.values():
            m.assignment = given.get(m.member_id, b"")
        # The members are answered once the record is durable (as Kafka answers
        # SyncGroup after its append), so it is written ahead of every commit they make
        # with this generation.
        record_group(out, group)
        for m in group.members.values():
            if m.sync_waiter is not None:
                waiter, m.sync_waiter = m.sync_waiter, None
                _answer_sync(out, waiter, group.sync_result(m))
                self.arm_session(group, m)

    def _on_sync_timeout(self, group: GroupMetadata) -> None:
        # Armed on entering CompletingRebalance; every transition but -> Stable cancels it.
        assert group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
        group.sync_timer = None
        # Kafka's pending-sync timeout: members that were given this generation but never
        # sent SyncGroup within the rebalance timeout. A silent member is already caught
        # by its session timer; this catches one that heartbeats but never syncs (a
        # leader like that would otherwise hold its followers' SyncGroups for ever).
        late = [group.members[mid] for mid in group.pending_sync if mid in group.members]
        group.pending_sync.clear()
        if not late:
            return
        out = Out()
        for m in late:
            self._log.info(
                "group {group!r}: member {member!r} did not sync in time, removed",
                group=group.group_id,
                member=m.member_id,
            )
            self.drop_member(out, group, m, ErrorCode.UNKNOWN_MEMBER_ID)
        self._after_departure(out, group, "members did not sync in time")
        self._timer_done(out)

    # -- departures -----------------------------------------------------------------------

    def fence(self, out: Out, member: Member) -> None:
        """Answer a static member's parked requests with FENCED_INSTANCE_ID: they were
        made by the incarnation that a re-join is replacing (it stays in the group)."""
        _answer_parked(out, member, ErrorCode.FENCED_INSTANCE_ID)

    def drop_member(
        self, out: Out, group: GroupMetadata, member: Member, code: ErrorCode
    ) -> None:
        """Remove ``member`` and answer whatever it has parked; no state transition."""
        _answer_parked(out, member, code)
        group.remove_member(member)

    def remove_member(self, out: Out, group: GroupMetadata, member: Member, why: str) -> None:
        """A member left or timed out: drop it and rebalance the rest (or go Empty)."""
        self._log.info(
            "group {group!r}: member {member!r} removed: {why}",
            group=group.group_id,
            member=member.member_id,
            why=why,
        )
        self.drop_member(out, group, member, ErrorCode.UNKNOWN_MEMBER_ID)
        self._after_departure(out, group, f"member {member.member_id} {why}")

    def _after_departure(self, out: Out, group: GroupMetadata, reason: str) -> None:
        if not group.members:
            self._go_empty(out, group)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(out, group)
        elif group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            self._prepare_rebalance(out, group, reason)

    def _go_empty(self, out: Out, group: GroupMetadata) -> None:
        group.become_empty()
        self._log.info(
            "group {group!r} is empty (generation {generation})",
            group=group.group_id,
            generation=group.generation,
        )
        # No member to restore after a restart, but the generation and protocol type are
        # kept, so the next generation continues from this one (as in Kafka).
        record_group(out, group)
        self.forget_if_disposable(group)

    def forget_if_disposable(self, group: GroupMetadata) -> None:
        # A group that never reached a generation (only member ids handed out with
        # MEMBER_ID_REQUIRED that expired or left) has nothing worth keeping, so it is
        # dropped: a client looping on JoinGroup cannot grow the map this way.
        if group.disposable() and self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]

    # -- sessions -------------------------------------------------------------------------

    def arm_session(self, group: GroupMetadata, member: Member) -> None:
        """(Re)start ``member``'s session timeout, unless it is parked in Join/SyncGroup
        (it cannot heartbeat then; the rebalance timeout bounds the wait instead)."""
        if member.parked:
            member.cancel_session()
            return
        seconds = member.session_timeout_ms / 1000
        if member.session_timer is not None and member.session_timer.active():
            member.session_timer.reset(seconds)
        else:
            member.session_timer = self._clock.callLater(
                seconds, self._on_session_expired, group, member
            )

    def _on_session_expired(self, group: GroupMetadata, member: Member) -> None:
        # Removing a member cancels its session timer, so the member is still current.
        member.session_timer = None
        out = Out()
        self.remove_member(out, group, member, "session timed out")
        self._timer_done(out)

    # -- shutdown -------------------------------------------------------------------------

    def kill(
        self,
        out: Out,
        group: GroupMetadata,
        code: ErrorCode = ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ) -> None:
        """Cancel every timer of ``group`` and answer its parked requests with ``code``
        (COORDINATOR_NOT_AVAILABLE at shutdown; REBALANCE_IN_PROGRESS when the group is
        converted to the consumer protocol, so they join again); the group goes Dead."""
        group.cancel_pending()
        for m in group.members.values():
            m.cancel_session()
            _answer_parked(out, m, code)
        group.transition_to(GroupState.DEAD)


def _with_reason(why: str, client_reason: str | None) -> str:
    """A rebalance's log reason, with what the client said (KIP-800) when it said it."""
    return why if client_reason is None else f"{why}; client reason: {client_reason}"


__all__ = ["GroupResult", "Out", "Rebalancer", "record_group"]
