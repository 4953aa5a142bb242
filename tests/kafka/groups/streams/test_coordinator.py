"""State-machine tests of the streams group coordinator (brokerd.kafka.groups.streams),
synchronous with ``task.Clock``: the topology's configuration (partition counts of the
internal topics, copartitioning, the statuses), the sticky assignor with standbys,
reconciliation (an active task never has two owners), epochs and fencing, static
members, session and revocation timeouts, the offset-commit checks.
"""

from __future__ import annotations

import pytest
from twisted.internet import task

from brokerd.fsm import InvalidTransition
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.streams.assignor import AssignorMember, assign
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
    configure,
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


# -- topology ----------------------------------------------------------------------------


def test_internal_topics_take_the_source_partition_count() -> None:
    configured = configure(WORD_COUNT, {"lines": 3})
    assert configured.task_counts == {"0": 3, "1": 3}
    assert [p.status for p in configured.problems] == [TopologyStatus.MISSING_INTERNAL_TOPICS]
    assert {(t.name, t.partitions) for t in configured.to_create} == {
        ("app-by-word-repartition", 3), ("app-counts-changelog", 3)}
    changelog = next(t for t in configured.to_create if t.name == "app-counts-changelog")
    assert changelog.configs == (("cleanup.policy", "compact"),)
    assert configure(WORD_COUNT, ready_topics(3)).ready


def test_missing_source_topic() -> None:
    configured = configure(WORD_COUNT, {})
    assert [p.status for p in configured.problems] == [TopologyStatus.MISSING_SOURCE_TOPICS]
    assert "lines" in configured.problems[0].detail
    assert not configured.to_create


def test_internal_topic_with_the_wrong_partition_count() -> None:
    topics = {**ready_topics(4), "app-counts-changelog": 2}
    configured = configure(WORD_COUNT, topics)
    assert [p.status for p in configured.problems] == [
        TopologyStatus.INCORRECTLY_PARTITIONED_TOPICS]


def test_copartitioned_sources_must_agree_and_repartition_topics_follow() -> None:
    join = Topology(1, (
        Subtopology("0", source_topics=("left",), repartition_sinks=("rekeyed",)),
        Subtopology("1", source_topics=("table",),
                    repartition_sources=(InternalTopic("rekeyed"),),
                    copartition_groups=(frozenset({"table", "rekeyed"}),)),
    ))
    # The repartition topic's writer has 5 tasks but the group's external topic 3:
    # copartitioning decides (and then disagrees with nothing).
    configured = configure(join, {"left": 3, "table": 3})
    assert configured.task_counts == {"0": 3, "1": 3}
    assert configure(join, {"left": 3, "table": 3, "rekeyed": 3}).ready
    two_sources = Topology(1, (Subtopology(
        "0", source_topics=("a", "b"), copartition_groups=(frozenset({"a", "b"}),)),))
    bad = configure(two_sources, {"a": 2, "b": 3})
    assert [p.status for p in bad.problems] == [TopologyStatus.INCORRECTLY_PARTITIONED_TOPICS]


def test_regex_sources_match_existing_topics() -> None:
    topology = Topology(1, (Subtopology("0", source_regexes=("in-.*",)),))
    assert configure(topology, {"in-a": 2, "in-b": 5, "other": 9}).task_counts == {"0": 5}


# -- assignor ----------------------------------------------------------------------------


def members(*ids: str, previous: dict[str, Tasks] | None = None) -> dict[str, AssignorMember]:
    previous = previous or {}
    return {m: AssignorMember(f"p-{m}", previous.get(m, Tasks())) for m in ids}


def test_assignor_balances_and_sticks() -> None:
    one = assign(members("a"), {"0": 4})
    assert one["a"].active == {("0", p) for p in range(4)}
    two = assign(members("a", "b", previous=one), {"0": 4})
    assert len(two["a"].active) == len(two["b"].active) == 2
    # Sticky: "a" keeps two of the tasks it had; only two move.
    assert two["a"].active <= one["a"].active
    assert not two["a"].active & two["b"].active


def test_standbys_go_to_other_processes() -> None:
    out = assign(members("a", "b", "c"), {"0": 3}, num_standby=1)
    for m, tasks in out.items():
        assert len(tasks.active) == 1 and len(tasks.standby) == 1
        assert not tasks.active & tasks.standby, m
    standbys = [t for tasks in out.values() for t in tasks.standby]
    assert sorted(standbys) == [("0", 0), ("0", 1), ("0", 2)]
    # Two members of one process: no standby on the active owner's process.
    same = {"a": AssignorMember("p", Tasks()), "b": AssignorMember("p", Tasks())}
    assert all(not t.standby for t in assign(same, {"0": 2}, num_standby=1).values())


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
