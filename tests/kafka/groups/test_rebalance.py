"""State-machine tests of the classic group coordinator's rebalance protocol
(brokerd.kafka.groups.rebalance, driven through the coordinator; the transition table
itself is tests/kafka/groups/test_state.py's).

- Every (state, input) pair: a group is driven into each state with a ``task.Clock``, one
  input is applied, and the answer code and the state it lands in are checked against a
  table, together with invariants (no leaked timers, every held request answered after
  stop, generation never decreasing within a group's life). Together the pairs must use
  every transition the coordinator can make.
- Random input sequences (hypothesis) with the same invariants after every step.
"""

from __future__ import annotations

from typing import Any, cast

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.internet import defer, task
from twisted.internet.defer import CancelledError, Deferred
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.groups.state import (
    VALID_PREVIOUS_STATES,
    GroupMetadata,
    GroupState,
    JoinResult,
    SyncResult,
)
from brokerd.storage.stores.offsets import (
    CommitOp,
    GroupDeletion,
    GroupUpdate,
    OffsetDeletion,
    OffsetStore,
    StoredGroup,
)

from tests.deferreds import outcome_of

SESSION_MS = 10_000
REBALANCE_MS = 30_000
DELAY_MS = 500
RANGE = [("range", b"meta-range")]

E = GroupState.EMPTY
PR = GroupState.PREPARING_REBALANCE
CR = GroupState.COMPLETING_REBALANCE
ST = GroupState.STABLE
DEAD = GroupState.DEAD
HELD = "held"
Code = int | str  # a Kafka error code, or HELD (no answer yet)


class _MemoryStore:
    """What the coordinator uses of :class:`OffsetStore`, in memory."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[tuple[str, int], tuple[int, int, str | None]]] = {}
        self.stored: dict[str, StoredGroup] = {}

    def write_batch(self, ops: Any) -> None:
        for op in ops:
            if isinstance(op, CommitOp):
                for topic, partition, offset, epoch, metadata in op.entries:
                    self.offsets.setdefault(op.group_id, {})[(topic, partition)] = (
                        offset,
                        epoch,
                        metadata,
                    )
            elif isinstance(op, GroupUpdate):
                if op.value is None:
                    self.stored.pop(op.group_id, None)
                else:
                    self.stored[op.group_id] = op.value
            elif isinstance(op, GroupDeletion):
                self.stored.pop(op.group_id, None)
                self.offsets.pop(op.group_id, None)
            else:
                assert isinstance(op, OffsetDeletion)
                for key in op.partitions:
                    self.offsets.get(op.group_id, {}).pop(key, None)
                if not self.offsets.get(op.group_id, True):
                    del self.offsets[op.group_id]

    def groups(self) -> list[str]:
        return sorted(self.offsets)

    def groups_metadata(self) -> dict[str, StoredGroup]:
        return dict(self.stored)

    def consumer_groups_state(self) -> dict[str, bytes]:
        return {}

    def group_configs(self) -> dict[str, dict[str, str]]:
        return {}

    def fetch(self, group_id: str, topic: str, partition: int) -> Any:
        return self.offsets.get(group_id, {}).get((topic, partition))

    def committed(self, group_id: str) -> dict[tuple[str, int], tuple[int, int, str | None]]:
        return dict(self.offsets.get(group_id, {}))


@attrs.define
class _Scene:
    """A group driven into some state: the leader ``a``, a follower ``b`` (``"nobody"``
    where the state has no such member) and the generation they know."""

    a: str = "nobody"
    b: str = "nobody"
    generation: int = 0


class _Harness:
    """A coordinator on a ``task.Clock`` that remembers every Deferred it handed out and
    every transition its groups made."""

    def __init__(self, transitions: list[tuple[GroupState, GroupState]]) -> None:
        self.clock = task.Clock()
        self.coord = GroupCoordinator(
            clock=self.clock,
            offsets=cast(OffsetStore, _MemoryStore()),
            run_blocking=defer.maybeDeferred,
            initial_rebalance_delay_ms=DELAY_MS,
        )
        self.transitions = transitions
        self.waiting: list[Deferred[Any]] = []
        #: Per group object (kept alive, so no two share an identity): the highest
        #: generation seen.
        self.generations: dict[GroupMetadata, int] = {}

    def track(self, d: Deferred[Any]) -> Deferred[Any]:
        self.waiting.append(d)
        return d

    def join(
        self,
        member_id: str = "",
        *,
        require_known: bool = False,
        client: str = "c",
        instance: str | None = None,
    ) -> Deferred[JoinResult]:
        d = self.coord.join(
            "g",
            member_id,
            client_id=client,
            client_host="/127.0.0.1",
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=REBALANCE_MS,
            protocol_type="consumer",
            protocols=list(RANGE),
            group_instance_id=instance,
            require_known_member_id=require_known,
        )
        return self.track(d)

    def sync(
        self, generation: int, member_id: str, assignment: bool = False
    ) -> Deferred[SyncResult]:
        given = [(m, b"x") for m in self.members()] if assignment else []
        return self.track(self.coord.sync("g", generation, member_id, given))

    def group(self) -> GroupMetadata | None:
        return self.coord._groups.get("g")

    def members(self) -> list[str]:
        group = self.group()
        return [] if group is None else list(group.members)

    def heartbeat_all(self) -> None:
        group = self.group()
        if group is not None:
            for member_id in list(group.members):
                self.coord.heartbeat("g", group.generation, member_id)


    # -- driving a group into each state ----------------------------------------------------

    def stable_single(self, instance: str | None = None) -> _Scene:
        d = self.join(instance=instance)
        self.clock.advance(DELAY_MS / 1000)
        a = outcome_of(d).member_id
        assert outcome_of(self.sync(1, a, True)).error_code == 0
        return _Scene(a, "nobody", 1)

    def stable_pair(self) -> _Scene:
        a = self.stable_single().a
        d_b = self.join(client="b")
        d_a = self.join(a)
        b = outcome_of(d_b).member_id
        assert outcome_of(d_a).generation_id == 2
        d_sync_b = self.sync(2, b)
        assert outcome_of(self.sync(2, a, True)).error_code == 0
        assert outcome_of(d_sync_b).error_code == 0
        return _Scene(a, b, 2)

    def scene(self, name: str) -> _Scene:
        if name == "absent":
            return _Scene()
        if name == "empty":
            assert outcome_of(self.join(require_known=True)).error_code == 79
            return _Scene()
        if name == "preparing_initial":
            self.join()
            return _Scene(self.members()[0], "nobody", 0)
        if name == "stable_single":
            return self.stable_single()
        if name == "stable_static":
            return self.stable_single(instance=STATIC_INSTANCE)
        scene = self.stable_pair()
        if name == "preparing":
            self.join(client="c")
        elif name == "completing":
            d_a = self.join(scene.a)  # the leader re-joins: a new generation
            outcome_of(self.join(scene.b))
            assert outcome_of(d_a).generation_id == 3
            scene.generation = 3
        elif name == "dead":
            self.coord.stop()
        else:
            assert name == "stable", name
        return scene

    # -- inputs ---------------------------------------------------------------------------

    def apply(self, name: str, scene: _Scene) -> Code | None:
        """Apply one input; its answer code (HELD if a Deferred has none yet), or None for
        a pure passage of time."""
        gen, a, b = scene.generation, scene.a, scene.b
        answer: Deferred[Any] | int
        if name == "join_new":
            answer = self.join(client="new")
        elif name == "join_known":
            answer = self.join(a)
        elif name == "join_known_follower":
            answer = self.join(b)
        elif name == "join_unknown":
            answer = self.join("made-up")
        elif name == "sync_leader":
            answer = self.sync(gen, a, True)
        elif name == "sync_follower":
            answer = self.sync(gen, b)
        elif name == "sync_wrong_generation":
            answer = self.sync(gen + 1, a)
        elif name == "heartbeat":
            answer = self.coord.heartbeat("g", gen, a)
        elif name == "leave":
            answer = self.track(self.coord.leave("g", a))
        elif name == "session_expiry":  # nobody heartbeats for a session timeout
            self.clock.advance(SESSION_MS / 1000)
            return None
        elif name == "rebalance_timeout":  # members heartbeat but do nothing else
            for _ in range(REBALANCE_MS // 3000):
                self.heartbeat_all()
                self.clock.advance(3)
            return None
        elif name == "initial_delay_expiry":
            self.clock.advance(DELAY_MS / 1000)
            return None
        elif name == "join_static":  # the static member's process restarted
            answer = self.join(client="static", instance=STATIC_INSTANCE)
        elif name == "describe":
            return self.coord.admin.describe(["g"])[0].error_code
        elif name == "delete_group":
            answer = self.track(self.coord.admin.delete_groups(["g"]))
        elif name == "offset_delete":
            answer = self.track(self.coord.admin.delete_offsets("g", [("t", 0)]))
        elif name == "commit_good":
            # A member commits with its generation; without members, outside the protocol.
            member, generation = (a, gen) if a != "nobody" else ("", -1)
            answer = self.track(
                self.coord.commit_offsets("g", generation, member, [("t", 0, 5, 0, None)])
            )
        elif name == "commit_bad_generation":
            answer = self.track(
                self.coord.commit_offsets("g", gen + 1, a, [("t", 0, 5, 0, None)])
            )
        else:
            assert name == "fetch_offsets", name
            return self.coord.fetch_offsets("g", [("t", 0)])[0][5]
        if isinstance(answer, int):
            return answer
        if not answer.called:
            return HELD
        got = outcome_of(answer)
        if isinstance(got, int):  # LeaveGroup
            return got
        if isinstance(got, list):  # DeleteGroups: [(group, code)]
            return cast(int, got[0][1])
        if isinstance(got, tuple):  # OffsetDelete: (group code, {partition: code})
            return cast(int, got[0] or got[1][("t", 0)])
        return got[("t", 0)] if isinstance(got, dict) else got.error_code

    # -- invariants -----------------------------------------------------------------------

    def check_invariants(self) -> None:
        timers = 0
        for group in self.coord._groups.values():
            assert group.state is not DEAD
            if group.state is E:
                assert not group.members
                assert group.pending or group.generation > 0, "an idle new group is kept"
            if group.state is PR:
                assert group.rebalance_timer is not None and group.rebalance_timer.active()
                timers += 1
            else:
                assert group.rebalance_timer is None
            if group.state in (CR, ST):
                assert group.leader_id in group.members
                assert group.pending_sync <= set(group.members)
            else:
                assert group.sync_timer is None and not group.pending_sync
            if group.sync_timer is not None:
                assert group.sync_timer.active()
                timers += 1
            assert set(group.join_order) <= set(group.members)
            timers += len(group.pending)
            for m in group.members.values():
                session = m.session_timer is not None and m.session_timer.active()
                assert m.parked != session, (m, m.parked, session)
                timers += session
            seen = self.generations.get(group, 0)
            assert group.generation >= seen, "generation went down"
            self.generations[group] = group.generation
        # Every pending call is one of the timers above: nothing leaked.
        assert len(self.clock.getDelayedCalls()) == timers, (
            self.clock.getDelayedCalls(),
            timers,
        )

    def stop_and_check(self) -> None:
        self.coord.stop()
        assert self.clock.getDelayedCalls() == []
        for d in self.waiting:
            assert d.called, "a Deferred was left unanswered after stop"
            d.addErrback(lambda f: f.trap(CancelledError))


SCENES = [
    "absent",
    "empty",
    "preparing_initial",
    "preparing",
    "completing",
    "stable",
    "stable_single",
    "stable_static",
    "dead",
]
INPUTS = [
    "join_new",
    "join_known",
    "join_known_follower",
    "join_unknown",
    "sync_leader",
    "sync_follower",
    "sync_wrong_generation",
    "heartbeat",
    "leave",
    "session_expiry",
    "rebalance_timeout",
    "initial_delay_expiry",
    "commit_good",
    "commit_bad_generation",
    "fetch_offsets",
    "join_static",
    "describe",
    "delete_group",
    "offset_delete",
]

#: The group.instance.id of the static member of the "stable_static" scene and of the
#: "join_static" input (in other scenes a new static member).
STATIC_INSTANCE = "static-1"

_ = None  # the input has no answer of its own (time passes)

#: (answer code, state after) per scene, in INPUTS order. Codes are Kafka's:
#: 0 NONE, 15 COORDINATOR_NOT_AVAILABLE, 22 ILLEGAL_GENERATION, 25 UNKNOWN_MEMBER_ID,
#: 27 REBALANCE_IN_PROGRESS, 68 NON_EMPTY_GROUP, 69 GROUP_ID_NOT_FOUND,
#: 86 GROUP_SUBSCRIBED_TO_TOPIC (the test's member metadata is not a consumer
#: subscription, so every topic counts as subscribed, as in Kafka). A state of None: the
#: coordinator holds nothing for the group; E after a member left: the group keeps its
#: generation.
EXPECTED: dict[str, list[tuple[Code | None, GroupState | None]]] = {
    "absent": [
        (HELD, PR), (25, None), (25, None), (25, None),
        (25, None), (25, None), (25, None), (25, None), (25, None),
        (_, None), (_, None), (_, None),
        (0, None), (25, None), (0, None),
        (HELD, PR), (0, None), (69, None), (69, None),
    ],
    "empty": [  # only a member id handed out with MEMBER_ID_REQUIRED
        (HELD, PR), (25, E), (25, E), (25, E),
        (25, E), (25, E), (25, E), (25, E), (25, E),
        (_, None), (_, None), (_, E),  # the id expires with the session timeout
        (0, E), (25, E), (0, E),
        (HELD, PR), (0, E), (0, None), (0, E),
    ],
    "preparing_initial": [  # the first member waits out the initial delay
        (HELD, PR), (HELD, PR), (25, PR), (25, PR),
        (27, PR), (25, PR), (22, PR), (27, PR), (0, E),
        (_, CR), (_, CR), (_, CR),
        (0, PR), (22, PR), (0, PR),
        (HELD, PR), (0, PR), (68, PR), (86, PR),
    ],
    "preparing": [  # Stable pair; a third member joined, the two have not re-joined
        (HELD, PR), (HELD, PR), (HELD, PR), (25, PR),
        (27, PR), (27, PR), (22, PR), (27, PR), (0, PR),
        (_, CR), (_, CR), (_, PR),  # both old members dropped; the newcomer goes on
        (0, PR), (22, PR), (0, PR),
        (HELD, PR), (0, PR), (68, PR), (86, PR),
    ],
    "completing": [  # joined generation 3, nobody synced yet
        (HELD, PR), (0, CR), (0, CR), (25, CR),
        (0, ST), (HELD, CR), (22, CR), (0, CR), (0, PR),
        (_, E), (_, E), (_, CR),  # nobody synced within the rebalance timeout
        (27, CR), (22, CR), (0, CR),
        (HELD, PR), (0, CR), (68, CR), (86, CR),
    ],
    "stable": [
        (HELD, PR), (HELD, PR), (0, ST), (25, ST),
        (0, ST), (0, ST), (22, ST), (0, ST), (0, PR),
        (_, E), (_, ST), (_, ST),
        (0, ST), (22, ST), (0, ST),
        (HELD, PR), (0, ST), (68, ST), (86, ST),
    ],
    "stable_single": [  # the lone leader re-joining completes the round at once
        (HELD, PR), (0, CR), (25, ST), (25, ST),
        (0, ST), (25, ST), (22, ST), (0, ST), (0, E),
        (_, E), (_, ST), (_, ST),
        (0, ST), (22, ST), (0, ST),
        (HELD, PR), (0, ST), (68, ST), (86, ST),
    ],
    "stable_static": [  # as stable_single, but its member is static: a restarted
        # static member takes its place back without a rebalance
        (HELD, PR), (0, CR), (25, ST), (25, ST),
        (0, ST), (25, ST), (22, ST), (0, ST), (0, E),
        (_, E), (_, ST), (_, ST),
        (0, ST), (22, ST), (0, ST),
        (0, ST), (0, ST), (68, ST), (86, ST),
    ],
    "dead": [
        (15, DEAD), (15, DEAD), (15, DEAD), (15, DEAD),
        (15, DEAD), (15, DEAD), (15, DEAD), (15, DEAD), (15, DEAD),
        (_, DEAD), (_, DEAD), (_, DEAD),
        (15, DEAD), (15, DEAD), (15, DEAD),
        (15, DEAD), (15, DEAD), (15, DEAD), (15, DEAD),
    ],
}  # fmt: skip


class StateInputMatrixTests(SynchronousTestCase):
    def test_every_state_and_input(self) -> None:
        transitions: list[tuple[GroupState, GroupState]] = []
        original = GroupMetadata.transition_to

        def recording(group: GroupMetadata, new: GroupState) -> None:
            old = group.state
            original(group, new)
            transitions.append((old, new))

        self.patch(GroupMetadata, "transition_to", recording)
        mismatches: list[str] = []
        for scene_name in SCENES:
            self.assertEqual(len(EXPECTED[scene_name]), len(INPUTS), scene_name)
            for input_name, (code, state) in zip(INPUTS, EXPECTED[scene_name], strict=True):
                h = _Harness(transitions)
                scene = h.scene(scene_name)
                if scene_name != "dead":
                    h.check_invariants()
                got = h.apply(input_name, scene)
                got_state = h.coord.group_state("g")
                if (got, got_state) != (code, state):
                    mismatches.append(
                        f"{scene_name} + {input_name}: got {got}, {got_state}; "
                        f"expected {code}, {state}"
                    )
                if scene_name != "dead":
                    h.check_invariants()
                h.stop_and_check()
        self.assertEqual(mismatches, [])
        # Every transition the table allows is used, except Dead -> Dead (stop is
        # idempotent, so a Dead group is never stopped again).
        allowed = {(old, new) for new, olds in VALID_PREVIOUS_STATES.items() for old in olds}
        self.assertEqual(set(transitions), allowed - {(DEAD, DEAD)})


_OPS = [*INPUTS, "cancel", "join_pending", "advance"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(SCENES[:-1]),
    st.lists(st.tuples(st.sampled_from(_OPS), st.integers(0, 5)), max_size=30),
)
def check_random_inputs(start: str, ops: list[tuple[str, int]]) -> None:
    """From any state, any sequence of inputs by any of the members keeps the invariants;
    after stop no timer is left and every Deferred has been answered."""
    h = _Harness([])
    h.scene(start)
    pending_ids: list[str] = []
    for op, n in ops:
        members = h.members() or ["nobody"]
        group = h.group()
        gen = group.generation if group is not None else 0
        scene = _Scene(members[n % len(members)], members[(n + 1) % len(members)], gen)
        if op == "cancel":
            live = [d for d in h.waiting if not d.called]
            if live:
                live[n % len(live)].cancel()
        elif op == "join_pending":
            if n % 2 or not pending_ids:
                got = outcome_of(h.join(require_known=True))
                if got.error_code == 79:
                    pending_ids.append(got.member_id)
            else:
                h.join(pending_ids[n % len(pending_ids)], require_known=True)
        elif op == "advance":
            h.clock.advance(n * 1.7)
        else:
            h.apply(op, scene)
        h.check_invariants()
    h.stop_and_check()


class RandomInputTests(SynchronousTestCase):
    def test_random_inputs_keep_the_invariants(self) -> None:
        check_random_inputs()
