"""State-machine tests of the consumer group protocol's coordinator
(brokerd.kafka.groups.consumer), synchronous with ``task.Clock``.

- The transition tables: every (from, to) group-state pair and every (member state,
  reconciliation outcome) pair is allowed or refused as the tables say.
- The coordinator over every (group state, input) pair: a group is driven into each
  state it can rest in, one input is applied, the state it lands in and the group epoch
  are checked against a table.
- Kafka's errors, static members, session and revocation timeouts, the regexes,
  offset-commit checks, conversion from an empty classic group.

Reconciliation over every (member state, input) pair and the assignors are tested beside
their modules (test_reconcile.py, test_assignors.py)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable

import pytest
from twisted.internet import task

from brokerd.fsm import InvalidTransition
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.consumer.coordinator import (
    ClassicFace,
    ConsumerGroupCoordinator,
    GroupSettings,
    HeartbeatAnswer,
    HeartbeatInput,
)
from brokerd.kafka.groups.consumer.state import (
    GROUP_TRANSITIONS,
    MEMBER_TRANSITIONS,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
    Reconciliation,
    member_next_state,
)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
TOPICS = {"t1": (T1, 6), "t2": (T2, 2)}
SESSION_S = 45.0

E = ConsumerGroupState.EMPTY
A = ConsumerGroupState.ASSIGNING
R = ConsumerGroupState.RECONCILING
S = ConsumerGroupState.STABLE
D = ConsumerGroupState.DEAD


# -- the tables ----------------------------------------------------------------------


@pytest.mark.parametrize(("old", "new"), list(itertools.product(ConsumerGroupState, repeat=2)))
def test_group_transition_table(old: ConsumerGroupState, new: ConsumerGroupState) -> None:
    group = ConsumerGroup("g", state=old)
    if new in GROUP_TRANSITIONS[old]:
        group.transition_to(new)
        assert group.state is new
    else:
        with pytest.raises(InvalidTransition):
            group.transition_to(new)
        assert group.state is old


def test_dead_is_final_and_live_states_reach_each_other() -> None:
    assert GROUP_TRANSITIONS[D] == {D}
    for state in (E, A, R, S):
        assert GROUP_TRANSITIONS[state] == set(ConsumerGroupState)


@pytest.mark.parametrize(
    ("state", "outcome"), list(itertools.product(MemberState, Reconciliation))
)
def test_member_transition_table(state: MemberState, outcome: Reconciliation) -> None:
    if (state, outcome) in MEMBER_TRANSITIONS:
        assert member_next_state(state, outcome) is MEMBER_TRANSITIONS[(state, outcome)]
    else:
        # Only a member asked to revoke can have a revocation pending.
        assert outcome is Reconciliation.REVOCATION_PENDING
        assert state is not MemberState.UNREVOKED_PARTITIONS
        with pytest.raises(InvalidTransition):
            member_next_state(state, outcome)


def test_derived_state() -> None:
    group = ConsumerGroup("g")
    assert group.derived_state() is E
    group.members["m"] = ConsumerMember("m", member_epoch=1)
    group.group_epoch, group.assignment_epoch = 2, 1
    assert group.derived_state() is A
    group.assignment_epoch = 2
    assert group.derived_state() is R
    group.members["m"].member_epoch = 2
    assert group.derived_state() is S
    group.members["m"].state = MemberState.UNRELEASED_PARTITIONS
    assert group.derived_state() is R


# -- the coordinator ------------------------------------------------------------------


class Harness:
    def __init__(self, classic: ClassicFace | None = None, max_size: int = 100) -> None:
        self.clock = task.Clock()
        self.topics: dict[str, tuple[uuid.UUID, int]] = dict(TOPICS)
        self.coord = ConsumerGroupCoordinator(
            clock=self.clock, classic=classic, max_group_size=max_size,
            settings=lambda _g: GroupSettings(45_000, 5_000),
        )
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, dict[uuid.UUID, frozenset[int]]] = {}

    def hb(self, member_id: str, epoch: int | None = None, *, group: str = "g",
           **fields: object) -> HeartbeatAnswer:
        if epoch is None:
            epoch = self.epochs.get(member_id, 0)
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 30_000)
            fields.setdefault("subscribed_topic_names", ("t1",))
            fields.setdefault("owned", {})
        fields.setdefault("owned", self.owned.get(member_id, {}))
        answer = self.coord.heartbeat(
            HeartbeatInput(group_id=group, member_id=member_id, member_epoch=epoch,
                           **fields),  # type: ignore[arg-type]
            self.topics,
        )
        if answer.error_code == 0:
            self.epochs[member_id] = answer.member_epoch
            if answer.assignment is not None:
                self.owned[member_id] = dict(answer.assignment)
        return answer

    def settle(self, *members: str, rounds: int = 6) -> None:
        for _ in range(rounds):
            for m in members:
                assert self.hb(m).error_code == 0

    def group(self, group_id: str = "g") -> ConsumerGroup:
        return self.coord.groups[group_id]

    def parts(self, member_id: str) -> set[int]:
        return set(self.owned.get(member_id, {}).get(T1, frozenset()))


def test_a_lone_member_gets_everything_in_one_heartbeat() -> None:
    h = Harness()
    answer = h.hb("a")
    assert (answer.error_code, answer.member_epoch, answer.heartbeat_interval_ms) == (0, 1, 5000)
    assert h.parts("a") == set(range(6))
    assert h.group().state is S and h.group().group_epoch == 1


def test_a_joiner_gets_partitions_only_after_their_owner_revoked_them() -> None:
    h = Harness()
    h.hb("a")
    joined = h.hb("b")
    # The group moved to epoch 2; b is at it, waiting for a's partitions.
    assert joined.member_epoch == 2 and h.parts("b") == set()
    assert h.group().members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert h.group().state is R
    # a is told to keep three (its epoch stays until it confirms).
    revoke = h.hb("a")
    assert revoke.member_epoch == 1 and len(h.parts("a")) == 3
    # b still gets nothing: a has not confirmed.
    assert h.hb("b").assignment is None
    # a confirms (its heartbeat lists only what it kept): it moves to epoch 2.
    assert h.hb("a").member_epoch == 2
    got = h.hb("b")
    assert got.assignment is not None and h.parts("b") == set(range(6)) - h.parts("a")
    assert h.group().state is S


def test_members_keep_unaffected_partitions_when_a_third_joins() -> None:
    h = Harness()
    h.hb("a")
    h.hb("b")
    h.settle("a", "b")
    before = {m: h.parts(m) for m in "ab"}
    h.hb("c")
    h.settle("a", "b", "c")
    for m in "ab":
        assert h.parts(m) <= before[m] and len(h.parts(m)) == 2
    assert sorted(len(h.parts(m)) for m in "abc") == [2, 2, 2]
    assert h.group().state is S


# (group state, input) -> (state after, group epoch moved).
GroupSetup = Callable[[Harness], None]


def _empty(h: Harness) -> None:
    h.hb("a")
    h.hb("a", -1)


def _reconciling(h: Harness) -> None:
    h.hb("a")
    h.hb("b")


def _stable(h: Harness) -> None:
    h.hb("a")
    h.hb("b")
    h.settle("a", "b")


SETUPS: dict[ConsumerGroupState, GroupSetup] = {E: _empty, R: _reconciling, S: _stable}

Input = Callable[[Harness], None]

def _join(h: Harness) -> None:
    h.hb("z")


def _heartbeat(h: Harness) -> None:
    if "a" in h.group().members:
        h.hb("a")


def _leave(h: Harness) -> None:
    if "a" in h.group().members:
        h.hb("a", -1)


def _session_expiry(h: Harness) -> None:
    h.clock.advance(SESSION_S + 1)


def _new_partitions(h: Harness) -> None:
    h.topics["t1"] = (T1, 8)
    h.hb("a" if "a" in h.group().members else "z")


def _subscription_change(h: Harness) -> None:
    if "a" in h.group().members:
        h.hb("a", subscribed_topic_names=("t1", "t2"))


INPUTS: dict[str, Input] = {
    "join": _join,
    "heartbeat": _heartbeat,
    "leave": _leave,
    "session expiry": _session_expiry,
    "new partitions": _new_partitions,
    "subscription change": _subscription_change,
}

#: (state, input) -> state after. Reconciling stays Reconciling on one heartbeat of a
#: (b has not released/confirmed); every member gone leaves the group Empty.
EXPECTED: dict[tuple[ConsumerGroupState, str], ConsumerGroupState] = {
    (E, "join"): S,
    (E, "heartbeat"): E,
    (E, "leave"): E,
    (E, "session expiry"): E,
    (E, "new partitions"): S,
    (E, "subscription change"): E,
    (R, "join"): R,
    (R, "heartbeat"): R,
    (R, "leave"): R,
    (R, "session expiry"): E,
    (R, "new partitions"): R,
    (R, "subscription change"): R,
    (S, "join"): R,
    (S, "heartbeat"): S,
    (S, "leave"): R,
    (S, "session expiry"): E,
    (S, "new partitions"): R,
    (S, "subscription change"): R,
}

#: Inputs that move the group epoch, per state.
EPOCH_MOVES: dict[tuple[ConsumerGroupState, str], bool] = {
    key: key[1] in {"join", "leave", "session expiry", "new partitions", "subscription change"}
    and not (key[0] is E and key[1] in {"leave", "session expiry", "subscription change"})
    for key in EXPECTED
}


@pytest.mark.parametrize(("state", "name"), sorted(EXPECTED, key=lambda k: (k[0].value, k[1])))
def test_every_group_state_and_input(state: ConsumerGroupState, name: str) -> None:
    h = Harness()
    SETUPS[state](h)
    assert h.group().state is state
    epoch = h.group().group_epoch
    INPUTS[name](h)
    group = h.coord.groups["g"]
    assert group.state is EXPECTED[(state, name)]
    assert (group.group_epoch > epoch) is EPOCH_MOVES[(state, name)]
    # No member is left without a session timer; expired ones are gone.
    for m in group.members.values():
        assert m.session_timer is not None and m.session_timer.active()


def test_every_pair_is_in_the_table() -> None:
    assert set(EXPECTED) == set(itertools.product(SETUPS, INPUTS))


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"group_id": ""}, "GroupId can't be empty."),
        ({"member_id": ""}, "MemberId can't be empty."),
        ({"instance_id": ""}, "InstanceId can't be empty."),
        ({"rack_id": ""}, "RackId can't be empty."),
        ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ({"owned": None}, "TopicPartitions must be empty when (re-)joining."),
        ({"owned": {T1: frozenset({1})}}, "TopicPartitions must be empty when (re-)joining."),
        ({"subscribed_topic_names": None},
         "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."),
        ({"member_epoch": -3}, "MemberEpoch is invalid."),
        ({"member_epoch": -2}, "InstanceId can't be null."),
    ],
)
def test_invalid_requests(fields: dict[str, object], message: str) -> None:
    h = Harness()
    base: dict[str, object] = {
        "group_id": "g", "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 1,
        "subscribed_topic_names": ("t1",), "owned": {},
    }
    base.update(fields)
    answer = h.coord.heartbeat(HeartbeatInput(**base), h.topics)  # type: ignore[arg-type]
    assert (answer.error_code, answer.error_message) == (ErrorCode.INVALID_REQUEST, message)


def test_v0_member_ids_are_made_by_the_coordinator() -> None:
    h = Harness()
    answer = h.coord.heartbeat(
        HeartbeatInput(group_id="g", member_id="", member_epoch=0, rebalance_timeout_ms=1,
                       subscribed_topic_names=("t1",), owned={}, version=0),
        h.topics,
    )
    assert answer.error_code == 0 and answer.member_id and uuid.UUID(answer.member_id)


def test_epochs_the_coordinator_did_not_give_are_fenced() -> None:
    h = Harness()
    h.hb("a")
    assert h.hb("a", 5).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    h.hb("b")
    h.settle("a", "b")
    assert h.epochs["a"] == 2
    # The previous epoch with a subset of what it has: a lost answer, accepted.
    assert h.hb("a", 1, owned={T1: frozenset(h.parts("a"))}).error_code == 0
    # The previous epoch claiming more: fenced.
    assert h.hb("a", 1, owned={T1: frozenset(range(6))}).error_code == (
        ErrorCode.FENCED_MEMBER_EPOCH
    )


def test_unknown_members_and_groups() -> None:
    h = Harness()
    assert h.hb("a", 3).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    h.hb("a")
    assert h.hb("nobody", 1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.hb("nobody", -1).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_group_max_size() -> None:
    h = Harness(max_size=2)
    h.hb("a")
    h.hb("b")
    assert h.hb("c").error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert h.hb("a").error_code == 0


def test_assignors_and_regexes_are_checked() -> None:
    h = Harness()
    assert h.hb("a", server_assignor="sticky").error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    bad = h.hb("a", subscribed_topic_names=None, subscribed_topic_regex="t[")
    assert bad.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_names_and_a_regex_together_subscribe_to_both() -> None:
    # librdkafka joins with an empty name list and its regex.
    h = Harness()
    h.hb("a", subscribed_topic_names=(), subscribed_topic_regex="(^t2)")
    h.clock.advance(0)  # the regex is resolved
    h.hb("a")
    assert h.owned["a"] == {T2: frozenset({0, 1})}
    h.hb("b", subscribed_topic_names=("t1",), subscribed_topic_regex="t2")
    member = h.group().members["b"]
    assert (member.subscribed_topic_names, member.subscribed_topic_regex) == (("t1",), "t2")
    # An empty regex clears it.
    h.hb("b", h.epochs["b"], subscribed_topic_regex="")
    assert h.group().members["b"].subscribed_topic_regex is None


def test_range_assignor_by_request() -> None:
    h = Harness()
    h.hb("a", server_assignor="range")
    h.hb("b", server_assignor="range")
    h.settle("a", "b")
    assert (h.parts("a"), h.parts("b")) == ({0, 1, 2}, {3, 4, 5})
    assert h.group().assignor == "range"


def test_regex_subscription_and_a_new_matching_topic() -> None:
    h = Harness()
    h.hb("a", subscribed_topic_names=None, subscribed_topic_regex="t.*")
    h.clock.advance(0)
    h.hb("a")
    assert h.owned["a"] == {T1: frozenset(range(6)), T2: frozenset({0, 1})}
    epoch = h.group().group_epoch
    t3 = uuid.UUID(int=3)
    h.topics["t3"] = (t3, 1)
    h.topics["__internal"] = (uuid.UUID(int=4), 1)
    h.hb("a")  # finds the new topics: the regex is checked against them after it
    h.clock.advance(0)
    h.hb("a")
    assert h.group().group_epoch == epoch + 1
    assert h.owned["a"][t3] == frozenset({0}) and len(h.owned["a"]) == 3


def test_static_member_leaves_for_a_while_and_comes_back_under_a_new_id() -> None:
    h = Harness()
    h.hb("a", instance_id="i1")
    h.hb("b")
    h.settle("a", "b")
    kept = h.parts("a")
    epoch = h.group().group_epoch
    # A new id for an instance whose member has not left: refused.
    assert h.hb("a2", instance_id="i1").error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    left = h.hb("a", -2, instance_id="i1")
    assert (left.error_code, left.member_epoch) == (0, -2)
    back = h.hb("a2", 0, instance_id="i1")
    assert back.error_code == 0 and back.member_epoch == epoch
    assert h.parts("a2") == kept and h.group().group_epoch == epoch
    assert "a" not in h.group().members
    # The old id is fenced by the instance.
    assert h.hb("a", 3, instance_id="i1").error_code == ErrorCode.FENCED_INSTANCE_ID


def test_session_timeout_fences_a_silent_member() -> None:
    h = Harness()
    h.hb("a")
    h.hb("b")
    h.settle("a", "b")
    for _ in range(10):
        h.clock.advance(5)
        h.hb("a")
    assert "b" not in h.group().members
    h.settle("a")
    assert h.parts("a") == set(range(6))
    assert h.hb("b", h.epochs["b"]).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    h = Harness()
    h.hb("a", rebalance_timeout_ms=10_000)
    h.hb("b")
    h.hb("a")  # told to revoke
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    h.clock.advance(11)
    assert "a" not in h.group().members
    h.hb("b")
    assert h.parts("b") == set(range(6))


def test_offset_commit_and_fetch_checks() -> None:
    h = Harness()
    assert h.coord.commit_error("classic", "m", 1) is None
    h.hb("a")
    assert h.coord.commit_error("g", "a", 1) is ErrorCode.NONE
    assert h.coord.commit_error("g", "a", 0) is ErrorCode.STALE_MEMBER_EPOCH
    assert h.coord.commit_error("g", "x", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.coord.commit_error("g", "", -1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.coord.fetch_error("g", "a", 0) is ErrorCode.STALE_MEMBER_EPOCH
    assert h.coord.fetch_error("g", None, -1) is ErrorCode.NONE
    h.hb("a", -1)
    assert h.coord.commit_error("g", "", -1) is ErrorCode.NONE


def test_an_empty_classic_group_converts_a_busy_one_does_not() -> None:
    classic = {"busy": True, "idle": False}
    dropped: list[str] = []
    h = Harness(ClassicFace(has_members=classic.get, drop_empty=dropped.append))
    assert h.hb("a", group="busy").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert h.hb("a", group="idle").error_code == 0
    assert dropped == ["idle"]
    assert h.coord.delete("idle") == ErrorCode.NON_EMPTY_GROUP
    h.hb("a", -1, group="idle")
    assert h.coord.delete("idle") == ErrorCode.NONE and "idle" not in h.coord.groups


def test_stop_refuses_and_cancels_timers() -> None:
    h = Harness()
    h.hb("a")
    h.coord.stop()
    assert h.clock.getDelayedCalls() == []
    assert h.hb("a").error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


# -- assignors ----------------------------------------------------------------------------


def test_regexes_match_whole_names_internal_topics_included() -> None:
    """As Kafka 4.4's resolver: the whole name must match, and internal topics are not
    skipped."""
    h = Harness()
    h.topics = {"t1": (T1, 1), "t10": (T2, 1), "__t1": (uuid.UUID(int=3), 1),
                "x": (uuid.UUID(int=4), 1)}
    h.hb("a", subscribed_topic_names=None, subscribed_topic_regex="t.")
    h.clock.advance(0)
    assert set(h.group().subscribed_metadata) == {"t1"}
    h.hb("a", subscribed_topic_regex=".*t1")
    h.clock.advance(0)
    assert set(h.group().subscribed_metadata) == {"t1", "__t1"}


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        # What RE2 (and so Kafka's RE2/J) refuses, in RE2's words.
        ("(?=t)t1", "invalid perl operator"),
        ("(t)\\1", "invalid escape sequence"),
        ("t*+", "bad repetition operator"),
        ("t[", "missing ]"),
        ("t" * 4097, "longer than 4096"),
        # A program over RE2's memory budget: it would take long to compile.
        (".{0,249}" * 40, "pattern too large"),
    ],
)
def test_regexes_kafka_refuses_are_invalid_regular_expressions(pattern: str, why: str) -> None:
    h = Harness()
    answer = h.hb("a", subscribed_topic_names=None, subscribed_topic_regex=pattern)
    assert answer.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert answer.error_message is not None and why in answer.error_message


@pytest.mark.parametrize(
    "pattern",
    [
        "(^orders-.*)", "(orders|payments)-.*", "[a-z]+-[a-z]+-.*", "(ab)+", "x{2,5}",
        # librdkafka joins several regex subscriptions into one (its test 0033).
        "(^topic_a.*)|(^topic_b.*)|(^topic_c.*)|(^topic_d.*)",
        # Nested and many repetitions: RE2 matches them in linear time.
        "(a+)+b", "(a|ab)*c", "a.*b.*c.*d.*",
        # Java syntax RE2 shares: quoting, named groups.
        "\\Qa.b\\E", "(?<name>t)1", "(?P<name>t)1",
    ],
)
def test_regexes_kafka_accepts_are_accepted(pattern: str) -> None:
    h = Harness()
    answer = h.hb("a", subscribed_topic_names=None, subscribed_topic_regex=pattern)
    assert answer.error_code == 0
