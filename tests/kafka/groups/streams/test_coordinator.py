"""State-machine tests of the streams group coordinator (brokerd.kafka.groups.streams),
synchronous with ``task.Clock``: the group's readiness against its topology (the topology
and the assignor on their own: test_topology.py, test_assignor.py), reconciliation (an
active task never has two owners), epochs and fencing, static members, session and
revocation timeouts, the offset-commit checks.
"""

from __future__ import annotations

import pytest
from twisted.internet import task

from brokerd.fsm import InvalidTransition
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.streams.coordinator import (
    HeartbeatAnswer,
    HeartbeatInput,
    StreamsGroupCoordinator,
    StreamsSettings,
)
from brokerd.kafka.groups.streams.state import (
    GROUP_TRANSITIONS,
    MemberState,
    StreamsGroup,
    StreamsGroupState,
    Tasks,
)
from brokerd.kafka.groups.streams.topology import (
    InternalTopic,
    Subtopology,
    Topology,
    TopologyStatus,
)

SESSION_S = 45.0
REBALANCE_MS = 30_000

#: Lines -> (repartition by word) -> counts, as a word count declares itself.
WORD_COUNT = Topology(1, (
    Subtopology("0", source_topics=("lines",), repartition_sinks=("app-by-word-repartition",)),
    Subtopology(
        "1",
        changelog_topics=(InternalTopic("app-counts-changelog",
                                        configs=(("cleanup.policy", "compact"),)),),
        repartition_sources=(InternalTopic("app-by-word-repartition"),),
    ),
))
INTERNAL = ("app-by-word-repartition", "app-counts-changelog")


def ready_topics(lines: int = 4) -> dict[str, int]:
    return {"lines": lines, **{n: lines for n in INTERNAL}}


# -- coordinator -------------------------------------------------------------------------


class Harness:
    def __init__(self, settings: StreamsSettings | None = None) -> None:
        self.clock = task.Clock()
        self.changes = 0
        self.coordinator = StreamsGroupCoordinator(
            clock=self.clock,
            settings=lambda _g: settings or StreamsSettings(),
            is_other_group=lambda g: g == "classic",
            on_change=self._changed,
        )
        self.topics = ready_topics()

    def _changed(self, group: StreamsGroup) -> None:
        self.changes += 1

    def beat(self, member: str, epoch: int, *, owned: Tasks | None = None,
             group: str = "g", **kw: object) -> HeartbeatAnswer:
        fields: dict[str, object] = {
            "group_id": group, "member_id": member, "member_epoch": epoch, **kw}
        if epoch == 0:
            fields.setdefault("topology", WORD_COUNT)
            fields.setdefault("process_id", f"p-{member}")
            fields.setdefault("rebalance_timeout_ms", REBALANCE_MS)
            owned = owned if owned is not None else Tasks()
        return self.coordinator.heartbeat(HeartbeatInput(owned=owned, **fields),  # type: ignore[arg-type]
                                          self.topics)

    def group(self, group: str = "g") -> StreamsGroup:
        return self.coordinator.groups[group]


def active(answer: HeartbeatAnswer) -> set[tuple[str, int]]:
    assert answer.assignment is not None
    return set(answer.assignment.active)


def test_one_member_gets_every_task() -> None:
    h = Harness()
    a = h.beat("a", 0)
    assert a.error_code == 0 and a.member_epoch == 1 and a.status == ()
    assert active(a) == {(s, p) for s in "01" for p in range(4)}
    assert h.group().state is StreamsGroupState.STABLE
    # A heartbeat that changes nothing kept writes nothing.
    written = h.changes
    again = h.beat("a", a.member_epoch, owned=a.assignment)
    assert again.assignment == a.assignment and h.changes == written


def test_missing_internal_topics_leave_the_group_not_ready() -> None:
    h = Harness()
    h.topics = {"lines": 4}
    a = h.beat("a", 0)
    assert [s for s, _ in a.status] == [TopologyStatus.MISSING_INTERNAL_TOPICS]
    assert {t.name for t in a.to_create} == set(INTERNAL)
    assert a.assignment == Tasks()
    assert h.group().state is StreamsGroupState.NOT_READY
    h.topics = ready_topics()
    b = h.beat("a", a.member_epoch, owned=Tasks())
    assert b.status == () and len(active(b)) == 8
    assert b.member_epoch > a.member_epoch
    assert h.group().state is StreamsGroupState.STABLE


def test_an_active_task_moves_only_after_its_revocation() -> None:
    h = Harness()
    a = h.beat("a", 0)
    everything = Tasks(frozenset(active(a)))
    b = h.beat("b", 0)
    # b joins: nothing is free yet (a holds every task), b waits.
    assert b.assignment == Tasks() and b.member_epoch == 2
    assert h.group().members["b"].state is MemberState.UNRELEASED_TASKS
    a2 = h.beat("a", a.member_epoch, owned=everything)
    assert a2.member_epoch == a.member_epoch  # must revoke first
    kept = active(a2)
    assert len(kept) == 4
    assert h.group().members["a"].state is MemberState.UNREVOKED_TASKS
    b2 = h.beat("b", b.member_epoch, owned=Tasks())
    assert b2.assignment in (None, Tasks())  # still held by a
    a3 = h.beat("a", a2.member_epoch, owned=Tasks(frozenset(kept)))
    assert a3.member_epoch == 2 and h.group().members["a"].state is MemberState.STABLE
    b3 = h.beat("b", b2.member_epoch, owned=Tasks())
    assert active(b3) == everything.active - kept
    assert h.group().state is StreamsGroupState.STABLE


def test_standby_replicas_of_the_group_config() -> None:
    h = Harness(StreamsSettings(num_standby_replicas=1))
    a = h.beat("a", 0)
    h.beat("b", 0)
    h.beat("a", a.member_epoch, owned=Tasks(frozenset(active(a))))
    target = h.group().target
    assert len(target["a"].standby) == len(target["b"].active) == 4
    assert target["a"].standby == target["b"].active


def test_fencing_and_errors() -> None:
    h = Harness()
    a = h.beat("a", 0)
    assert h.beat("a", a.member_epoch + 5).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert h.beat("x", 3).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.beat("a", 1, group="nope").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert h.beat("a", 0, group="classic").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    no_topology = h.coordinator.heartbeat(HeartbeatInput(
        group_id="g", member_id="c", member_epoch=0, rebalance_timeout_ms=1,
        process_id="p"), h.topics)
    assert no_topology.error_code == ErrorCode.INVALID_REQUEST
    assert h.beat("", 0).error_code == ErrorCode.INVALID_REQUEST


def test_session_expiry_hands_the_tasks_over() -> None:
    h = Harness()
    a = h.beat("a", 0)
    b = h.beat("b", 0)
    h.clock.advance(SESSION_S - 1)
    b2 = h.beat("b", b.member_epoch, owned=Tasks())
    h.clock.advance(2)  # a has been silent for its whole session
    assert set(h.group().members) == {"b"}
    b3 = h.beat("b", b2.member_epoch, owned=Tasks())
    assert len(active(b3)) == 8 and b3.member_epoch > a.member_epoch


def test_a_member_that_does_not_revoke_is_removed() -> None:
    h = Harness()
    a = h.beat("a", 0)
    h.beat("b", 0)
    h.beat("a", a.member_epoch, owned=Tasks(frozenset(active(a))))
    h.clock.advance(REBALANCE_MS / 1000 + 1)
    assert set(h.group().members) == {"b"}


def test_static_member_comes_back_with_its_tasks() -> None:
    h = Harness()
    a = h.beat("a", 0, instance_id="i1")
    left = h.beat("a", -2, instance_id="i1")
    assert left.member_epoch == -2 and "a" in h.group().members
    # The same process (Kafka Streams keeps its process id in its state directory).
    again = h.beat("a2", 0, instance_id="i1", process_id="p-a")
    assert again.member_epoch == a.member_epoch and active(again) == active(a)
    assert set(h.group().members) == {"a2"}
    taken = h.beat("a3", 0, instance_id="i1")
    assert taken.error_code == ErrorCode.UNRELEASED_INSTANCE_ID


def test_leaving_and_deleting() -> None:
    h = Harness()
    h.beat("a", 0)
    assert h.coordinator.delete("g") == ErrorCode.NON_EMPTY_GROUP
    assert h.beat("a", -1).error_code == 0
    assert h.group().state is StreamsGroupState.EMPTY
    assert h.coordinator.delete("g") == ErrorCode.NONE
    assert "g" not in h.coordinator.groups


def test_offset_commit_checks() -> None:
    h = Harness()
    a = h.beat("a", 0)
    c = h.coordinator
    assert c.commit_error("other", "a", 1) is None
    assert c.commit_error("g", "a", a.member_epoch) == ErrorCode.NONE
    assert c.commit_error("g", "a", a.member_epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert c.commit_error("g", "zz", a.member_epoch) == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.txn_commit_error("g", "a", a.member_epoch + 1) == ErrorCode.ILLEGAL_GENERATION
    assert c.fetch_error("g", "a", a.member_epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH


def test_shutdown_request_reaches_every_member() -> None:
    h = Harness()
    a = h.beat("a", 0)
    b = h.beat("b", 0)
    h.beat("a", a.member_epoch, owned=Tasks(), shutdown_application=True)
    answer = h.beat("b", b.member_epoch, owned=Tasks())
    assert TopologyStatus.SHUTDOWN_APPLICATION in [s for s, _ in answer.status]


def test_dead_is_final() -> None:
    group = StreamsGroup("g")
    group.transition_to(StreamsGroupState.DEAD)
    with pytest.raises(InvalidTransition):
        group.transition_to(StreamsGroupState.EMPTY)
    assert GROUP_TRANSITIONS[StreamsGroupState.DEAD] == {StreamsGroupState.DEAD}


def test_topology_description_is_asked_for_until_stored() -> None:
    h = Harness()
    h.beat("a", 0)
    c = h.coordinator
    assert c.description_required("g")
    code, _ = c.store_description("g", "a", WORD_COUNT.epoch + 1, "d")
    assert code == ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH
    assert c.store_description("g", "zz", WORD_COUNT.epoch, "d")[0] == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.store_description("g", "a", WORD_COUNT.epoch, "d") == (ErrorCode.NONE, None)
    assert not c.description_required("g") and c.description("g") == "d"
