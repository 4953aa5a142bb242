"""Online migration between the classic protocol and the consumer group protocol
(KIP-848, Kafka 4.x's BIDIRECTIONAL policy), synchronous with ``task.Clock`` on the
group coordinator with a real offsets journal.

- The classic member's JoinGroup over every (member state, what it says it owns) pair:
  the state it lands in, the generation and the assignment SyncGroup hands out.
- Upgrade: two classic members in a Stable classic group, a consumer-protocol member
  joins; the group becomes a consumer group at the classic generation, the classic
  members are told to re-join, get the server's assignment in SyncGroup, commit with
  their generation, and the partitions end balanced with no partition held twice.
- Refusals: a protocol type other than "consumer", a full group.
- A restart mid-migration: the classic members' protocols come back from the journal.
- Downgrade: the consumer-protocol member leaves (or is fenced) and the classic members
  rebalance into a classic group again; with a consumer-protocol member left, no
  downgrade.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer, task

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.consumer.classic_members import (
    encode_assignment,
    parse_assignment,
)
from brokerd.kafka.groups.consumer.coordinator import ConsumerGroupCoordinator, HeartbeatInput
from brokerd.kafka.groups.consumer.persist import decode_group, encode_group
from brokerd.kafka.groups.consumer.state import (
    ClassicProtocol,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.groups.state import GroupState
from brokerd.storage.stores.offsets import OffsetStore

from tests.kafka.groups.consumer.test_classic_members import subscription

T1 = uuid.UUID(int=7)
TOPICS = {"t": (T1, 4)}


_S, _UR, _UL = (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                MemberState.UNRELEASED_PARTITIONS)


# -- the coordinator --------------------------------------------------------------------


class Harness:
    """A group coordinator on a real journal, with classic clients and one consumer-
    protocol client driven by hand."""

    def __init__(self, path: Path) -> None:
        self.path = str(path / "offsets.log")
        self.clock = task.Clock()
        self.store = OffsetStore.open(self.path)
        self.coord = self._new()
        #: classic member -> (member id, generation, partitions of its last SyncGroup)
        self.classic: dict[str, tuple[str, int, frozenset[tuple[str, int]]]] = {}
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}

    def _new(self) -> GroupCoordinator:
        return GroupCoordinator(clock=self.clock, offsets=self.store,
                                run_blocking=defer.maybeDeferred, topics=lambda: TOPICS)

    def restart(self) -> None:
        self.coord.stop()
        self.store.close()
        self.store = OffsetStore.open(self.path)
        self.coord = self._new()

    def join(self, name: str, protocol_type: str = "consumer", owned: bool = False) -> Any:
        member_id = self.classic.get(name, ("", 0, frozenset()))[0]
        have = tuple(sorted(self.classic[name][2])) if owned and name in self.classic else ()
        d = self.coord.join("g", member_id, client_id=name, client_host="h",
                            session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                            protocol_type=protocol_type,
                            protocols=[("range", subscription(("t",), have))],
                            group_instance_id=None, require_known_member_id=False)
        return d

    def sync(self, name: str, result: Any, assignments: list[tuple[str, bytes]]) -> Any:
        out: list[Any] = []
        self.coord.sync("g", result.generation_id, result.member_id, assignments,
                        protocol_type="consumer", protocol_name="range").addCallback(out.append)
        (synced,) = out
        if synced.error_code == 0:
            self.classic[name] = (result.member_id, result.generation_id,
                                  parse_assignment(synced.assignment))
        return synced

    def rejoin(self, name: str, owned: bool = False) -> Any:
        """A classic member's JoinGroup then SyncGroup inside a consumer group (answered
        at once)."""
        out: list[Any] = []
        self.join(name, owned=owned).addCallback(out.append)
        (joined,) = out
        assert joined.error_code == 0, joined
        assert joined.leader_id == "" and joined.members == []
        synced = self.sync(name, joined, [])
        assert synced.error_code == 0, synced
        return joined

    def beat(self, name: str) -> int:
        member_id, generation, _ = self.classic[name]
        return self.coord.heartbeat("g", generation, member_id)

    def hb(self, epoch: int | None = None) -> Any:
        epoch = self.epoch if epoch is None else epoch
        fields: dict[str, Any] = {"owned": self.owned}
        if epoch == 0:
            fields.update(rebalance_timeout_ms=30_000, subscribed_topic_names=("t",),
                          owned={})
        answer = self.coord.consumer.heartbeat(
            HeartbeatInput(group_id="g", member_id="new", member_epoch=epoch, **fields),
            TOPICS)
        if answer.error_code == 0:
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                self.owned = {t: ps for t, ps in answer.assignment.items() if ps}
        return answer

    def settle(self, rounds: int = 6) -> None:
        """Every member heartbeats; a classic member told to re-join does so."""
        for _ in range(rounds):
            for name in sorted(self.classic):
                if self.beat(name) == ErrorCode.REBALANCE_IN_PROGRESS:
                    self.rejoin(name)
            if self.epoch:
                self.hb()


def classic_group(h: Harness) -> None:
    """Two classic members in a Stable classic group, the leader assigning 2/2."""
    a, b = h.join("a"), h.join("b")
    for _ in range(3):
        h.clock.advance(1)
    results: dict[str, Any] = {}
    a.addCallback(lambda r: results.__setitem__("a", r))
    b.addCallback(lambda r: results.__setitem__("b", r))
    ra, rb = results["a"], results["b"]
    leader = "a" if ra.member_id == ra.leader_id else "b"
    ids = {"a": ra.member_id, "b": rb.member_id}
    plan = {ids["a"]: encode_assignment({"t": frozenset({0, 1})}, 1),
            ids["b"]: encode_assignment({"t": frozenset({2, 3})}, 1)}
    follower = "b" if leader == "a" else "a"
    waiting: list[Any] = []
    h.coord.sync("g", results[follower].generation_id, ids[follower], [],
                 protocol_type="consumer", protocol_name="range").addCallback(waiting.append)
    h.sync(leader, results[leader], list(plan.items()))
    h.classic[follower] = (ids[follower], results[follower].generation_id,
                           parse_assignment(waiting[0].assignment))
    assert h.coord.group_state("g") is GroupState.STABLE


def owners(h: Harness) -> dict[str, set[int]]:
    out = {name: {p for _, p in parts} for name, (_, _, parts) in h.classic.items()}
    out["new"] = set(h.owned.get(T1, ()))
    return out


def test_online_upgrade_then_balanced(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    classic_group(h)
    generation = h.classic["a"][1]
    joined = h.hb(0)
    assert joined.error_code == 0
    group = h.coord.consumer.groups["g"]
    assert h.coord.group_state("g") is None and set(group.members) == {
        h.classic["a"][0], h.classic["b"][0], "new"}
    assert group.group_epoch == generation + 1
    # Until they re-join, the classic members keep their generation (commits pass).
    out: list[Any] = []
    h.coord.commit_offsets("g", generation, h.classic["a"][0],
                           [("t", 0, 5, -1, None)]).addCallback(out.append)
    assert out == [{("t", 0): 0}]
    out.clear()
    h.coord.commit_offsets("g", generation + 7, h.classic["a"][0],
                           [("t", 0, 5, -1, None)]).addCallback(out.append)
    assert out == [{("t", 0): ErrorCode.ILLEGAL_GENERATION}]
    assert h.beat("a") == ErrorCode.REBALANCE_IN_PROGRESS
    h.settle()
    final = owners(h)
    assert sorted(len(ps) for ps in final.values()) == [1, 1, 2]
    assert set().union(*final.values()) == {0, 1, 2, 3}
    assert sum(len(ps) for ps in final.values()) == 4
    assert all(h.beat(n) == 0 for n in ("a", "b"))
    assert h.coord.consumer.groups["g"].state.value == "Stable"
    # A classic client's stale generation and unknown ids.
    member_id, gen, _ = h.classic["a"]
    assert h.coord.heartbeat("g", gen - 1, member_id) == ErrorCode.ILLEGAL_GENERATION
    assert h.coord.heartbeat("g", gen, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
    bad: list[Any] = []
    h.coord.sync("g", gen, member_id, [], protocol_name="roundrobin").addCallback(bad.append)
    assert bad[0].error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_a_cooperative_member_confirms_its_revocation_by_rejoining(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    classic_group(h)
    h.hb(0)
    group = h.coord.consumer.groups["g"]
    # The classic member the new target takes a partition from.
    (name,) = [n for n, (mid, _, parts) in h.classic.items()
               if len(group.target[mid].get(T1, ())) < len(parts)]
    member_id, generation, before = h.classic[name]
    # It re-joins listing what it still owns: it keeps what stays, gives the rest up
    # first, at the same generation.
    joined = h.rejoin(name, owned=True)
    member = group.members[member_id]
    assert member.state is MemberState.UNREVOKED_PARTITIONS
    assert joined.generation_id == generation
    kept = h.classic[name][2]
    assert kept < before and len(kept) == 1
    assert h.beat(name) == ErrorCode.REBALANCE_IN_PROGRESS
    # Having revoked, it re-joins owning only what it kept: now at the target epoch.
    again = h.rejoin(name, owned=True)
    assert member.state is MemberState.STABLE
    assert again.generation_id == group.assignment_epoch
    h.settle()
    final = owners(h)
    assert sorted(len(ps) for ps in final.values()) == [1, 1, 2]
    assert set().union(*final.values()) == {0, 1, 2, 3}


def test_a_new_classic_member_joins_the_consumer_group(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    classic_group(h)
    h.hb(0)
    h.settle()
    h.rejoin("c")
    h.settle()
    final = owners(h)
    assert sorted(len(ps) for ps in final.values()) == [1, 1, 1, 1]


def test_classic_join_member_ids_and_a_sync_after_the_epoch_moved(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    classic_group(h)
    h.hb(0)
    h.settle()
    # JoinGroup v4+ without a member id: one is handed out first (MEMBER_ID_REQUIRED).
    out: list[Any] = []
    h.coord.join("g", "", client_id="c", client_host="h", session_timeout_ms=10_000,
                 rebalance_timeout_ms=10_000, protocol_type="consumer",
                 protocols=[("range", subscription(("t",)))], group_instance_id=None,
                 require_known_member_id=True).addCallback(out.append)
    (required,) = out
    assert required.error_code == ErrorCode.MEMBER_ID_REQUIRED and required.member_id
    group = h.coord.consumer.groups["g"]
    assert required.member_id not in group.members
    # It comes back with that id (unknown to the group: it joins as a new member).
    out.clear()
    h.coord.join("g", required.member_id, client_id="c", client_host="h",
                 session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                 protocol_type="consumer", protocols=[("range", subscription(("t",)))],
                 group_instance_id=None, require_known_member_id=True).addCallback(out.append)
    (joined,) = out
    assert joined.error_code == 0 and joined.member_id == required.member_id
    assert group.members[joined.member_id].classic is not None
    # Another join moves the group epoch before this member's SyncGroup: it re-joins.
    h.rejoin("c")
    synced: list[Any] = []
    h.coord.sync("g", joined.generation_id, joined.member_id, []).addCallback(synced.append)
    assert synced[0].error_code == ErrorCode.REBALANCE_IN_PROGRESS
    # A JoinGroup of another protocol type, or metadata that does not parse.
    bad = h.join("x", protocol_type="connect")
    assert bad.result.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_a_classic_member_id_in_a_consumer_group_heartbeat(tmp_path: Path) -> None:
    """A classic member's id heartbeating the consumer protocol: refused unless it joins
    (epoch 0), which makes it a consumer-protocol member."""
    h = Harness(tmp_path)
    classic_group(h)
    h.hb(0)
    member_id, generation, _ = h.classic["a"]
    request = HeartbeatInput(group_id="g", member_id=member_id, member_epoch=generation,
                             owned={})
    assert h.coord.consumer.heartbeat(request, TOPICS).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    joined = h.coord.consumer.heartbeat(HeartbeatInput(
        group_id="g", member_id=member_id, member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",), owned={}), TOPICS)
    assert joined.error_code == 0
    assert h.coord.consumer.groups["g"].members[member_id].classic is None
    assert h.coord.heartbeat("g", joined.member_epoch, member_id) == (
        ErrorCode.UNKNOWN_MEMBER_ID)


def test_upgrade_refused(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    d = h.join("a", protocol_type="connect")
    h.clock.advance(1)
    assert d.result.error_code == 0
    refused = h.hb(0)
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert refused.error_message == ("Cannot upgrade classic group g to consumer group "
                                     "because the group does not use the consumer "
                                     "embedded protocol.")
    assert h.coord.group_state("g") is not None


def test_upgrade_refused_when_full(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    classic_group(h)
    h.coord.consumer.max_group_size = 2
    refused = h.hb(0)
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert "exceeds the consumer group maximum size" in refused.error_message
    assert h.coord.group_state("g") is GroupState.STABLE


def test_a_restart_mid_migration_keeps_the_classic_members(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    classic_group(h)
    h.hb(0)
    h.settle()
    before = owners(h)
    h.restart()
    group = h.coord.consumer.groups["g"]
    assert {m.classic is not None for m in group.members.values()} == {True, False}
    assert all(h.beat(n) == 0 for n in ("a", "b"))
    h.settle()
    assert owners(h) == before


def test_persisted_classic_member_round_trips(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    classic_group(h)
    h.hb(0)
    group = h.coord.consumer.groups["g"]
    again = decode_group("g", encode_group(group))
    for mid, m in group.members.items():
        assert again.members[mid].classic == m.classic
    assert isinstance(again.members[h.classic["a"][0]].classic, ClassicProtocol)
    blob = encode_group(group).replace(b'"session_ms":10000', b'"session_ms":"x"')
    with pytest.raises(ValueError):
        decode_group("g", blob)


def _downgrade_and_rejoin(h: Harness) -> None:
    assert h.coord.group_state("g") is GroupState.PREPARING_REBALANCE
    assert "g" not in h.coord.consumer.groups
    for name in ("a", "b"):
        assert h.beat(name) in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION)
    a, b = h.join("a"), h.join("b")
    for _ in range(3):
        h.clock.advance(1)
    assert a.result.error_code == 0 and b.result.error_code == 0
    assert h.coord.group_state("g") is GroupState.COMPLETING_REBALANCE


def test_online_downgrade_when_the_consumer_member_leaves(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    classic_group(h)
    h.hb(0)
    h.settle()
    h.hb(-1)
    _downgrade_and_rejoin(h)


def test_online_downgrade_when_the_consumer_member_is_fenced(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    classic_group(h)
    h.hb(0)
    h.settle()
    for _ in range(10):
        h.clock.advance(5)
        for name in ("a", "b"):
            if h.beat(name) == ErrorCode.REBALANCE_IN_PROGRESS:
                break
        if "g" not in h.coord.consumer.groups:
            break
    _downgrade_and_rejoin(h)


def test_no_downgrade_while_classic_members_leave(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    classic_group(h)
    h.hb(0)
    h.settle()
    member_id = h.classic.pop("a")[0]
    assert h.coord.leave("g", member_id).result == 0
    assert "g" in h.coord.consumer.groups and h.coord.group_state("g") is None
    assert h.coord.leave("g", member_id).result == ErrorCode.UNKNOWN_MEMBER_ID
    h.settle()
    assert sorted(len(ps) for ps in owners(h).values()) == [2, 2]


# -- a classic member's JoinGroup over every member state --------------------------------

_C, _O = "c", "o"
#: member state of the classic member c -> (its epoch, assigned, pending revocation);
#: the group is at epoch 5, c's target is {0, 1}, the consumer member o's is {2, 3}.
_STATES: dict[str, tuple[MemberState, int, set[int], set[int]]] = {
    "stable at the target": (_S, 5, {0, 1}, set()),
    "stable, the target moved": (_S, 4, {0, 1, 2}, set()),
    "unrevoked partitions": (_UR, 4, {0, 1}, {2}),
    "unreleased partitions": (_UL, 5, {0}, set()),
}
#: (state, what the JoinGroup says it owns: "nothing" (eager) or "all it holds") ->
#: (state after the join, epoch answered as generation, partitions in SyncGroup).
_JOINS: dict[tuple[str, str], tuple[MemberState, int, set[int]]] = {
    ("stable at the target", "nothing"): (_S, 5, {0, 1}),
    ("stable at the target", "all it holds"): (_S, 5, {0, 1}),
    ("stable, the target moved", "nothing"): (_S, 5, {0, 1}),
    ("stable, the target moved", "all it holds"): (_UR, 4, {0, 1}),
    ("unrevoked partitions", "nothing"): (_S, 5, {0, 1}),
    ("unrevoked partitions", "all it holds"): (_UR, 4, {0, 1}),
    ("unreleased partitions", "nothing"): (_UL, 5, {0}),
    ("unreleased partitions", "all it holds"): (_UL, 5, {0}),
}


def _hand_built(state: str) -> tuple[ConsumerGroupCoordinator, ConsumerGroup]:
    coordinator = ConsumerGroupCoordinator(clock=task.Clock(), topics=lambda: TOPICS)
    group = ConsumerGroup("g", group_epoch=5, assignment_epoch=5,
                          subscribed_metadata=dict(TOPICS))
    member_state, epoch, assigned, pending = _STATES[state]
    group.members[_C] = ConsumerMember(
        member_id=_C, subscribed_topic_names=("t",), state=member_state,
        member_epoch=epoch, previous_member_epoch=epoch - 1,
        assigned={T1: frozenset(assigned)}, pending_revocation={T1: frozenset(pending)},
        classic=ClassicProtocol(10_000, (("range", subscription(("t",))),)),
    )
    # o still gives up 1 while c waits for it; otherwise o holds its target.
    o_pending = {1} if state == "unreleased partitions" else set()
    group.members[_O] = ConsumerMember(
        member_id=_O, subscribed_topic_names=("t",), member_epoch=5,
        state=_UR if o_pending else _S, assigned={T1: frozenset({3})},
        pending_revocation={T1: frozenset(o_pending)},
    )
    group.target = {_C: {T1: frozenset({0, 1})}, _O: {T1: frozenset({2, 3})}}
    coordinator.groups["g"] = group
    return coordinator, group


@pytest.mark.parametrize("key", sorted(_JOINS))
def test_classic_join_over_every_member_state(key: tuple[str, str]) -> None:
    state, owns = key
    coordinator, group = _hand_built(state)
    member = group.members[_C]
    held = flatten_names(member) if owns == "all it holds" else ()
    answer = coordinator.classic_join(
        "g", _C, instance_id=None, client_id="c", client_host="h",
        session_timeout_ms=10_000, rebalance_timeout_ms=10_000, protocol_type="consumer",
        protocols=[("range", subscription(("t",), held))],
    )
    expected_state, expected_epoch, expected_parts = _JOINS[key]
    assert answer.error_code == 0 and group.group_epoch == 5
    assert (member.state, answer.generation_id) == (expected_state, expected_epoch)
    synced = coordinator.classic_sync("g", answer.generation_id, _C)
    assert synced.error_code == 0
    assert parse_assignment(synced.assignment) == {("t", p) for p in expected_parts}
    coordinator.stop()


def flatten_names(member: ConsumerMember) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(("t", p) for a in (member.assigned, member.pending_revocation)
                        for ps in a.values() for p in ps))
