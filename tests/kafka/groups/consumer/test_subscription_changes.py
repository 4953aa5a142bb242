"""A consumer-protocol member whose subscription changes, whose regex is new, or whose
topics are deleted or grow, reconciled as Kafka's coordinator does (synchronous, with
``task.Clock``): the cases librdkafka's own tests 0033 and 0045 drive with
``TEST_CONSUMER_GROUP_PROTOCOL=consumer``.
"""

from __future__ import annotations

import uuid

from brokerd.kafka.groups.consumer.state import MemberState

from tests.kafka.groups.consumer.test_state import T1, T2, Harness

REGEX_TOPICS = {T1: frozenset(range(6)), T2: frozenset({0, 1})}


def test_a_new_regex_adds_its_topics_on_a_later_heartbeat() -> None:
    # librdkafka's 0045_resubscribe_with_regex: a regex and a literal name together give
    # the literal topic first, the regex's topics with the next group epoch.
    h = Harness()
    h.topics["lit"] = (uuid.UUID(int=9), 2)
    joined = h.hb("a", subscribed_topic_names=("lit",), subscribed_topic_regex="t.*")
    assert joined.assignment == {uuid.UUID(int=9): frozenset({0, 1})}
    epoch = h.group().group_epoch
    # Resolving the regex moves the group epoch; the member is not at it yet.
    h.clock.advance(0)
    assert h.group().group_epoch == epoch + 1
    assert h.group().members["a"].member_epoch == epoch
    answer = h.hb("a")
    assert answer.member_epoch == epoch + 1
    assert answer.assignment == {uuid.UUID(int=9): frozenset({0, 1}), **REGEX_TOPICS}


def test_a_regex_nobody_uses_is_forgotten_and_resolved_again() -> None:
    h = Harness()
    h.hb("a", subscribed_topic_names=(), subscribed_topic_regex="t.*")
    h.clock.advance(0)
    h.hb("a")
    assert h.owned["a"] == REGEX_TOPICS
    assert h.hb("a", -1).error_code == 0
    assert h.coord.regexes.matched("g", "t.*") is None
    # Joining again with the same regex: nothing until it is resolved again.
    h.epochs.pop("a")
    h.owned.pop("a")
    assert h.hb("a", subscribed_topic_names=(), subscribed_topic_regex="t.*").assignment == {}
    h.clock.advance(0)
    assert h.hb("a").assignment == REGEX_TOPICS


def test_a_regex_other_members_resolved_serves_a_joiner_at_once() -> None:
    h = Harness()
    h.hb("a", subscribed_topic_names=(), subscribed_topic_regex="t2")
    h.clock.advance(0)
    h.settle("a")
    epoch = h.group().group_epoch
    h.hb("b", subscribed_topic_names=(), subscribed_topic_regex="t2")
    # Only b's joining moved the epoch; no resolution is pending.
    assert h.group().group_epoch == h.group().assignment_epoch == epoch + 1
    assert all(c.func.__name__ != "_resolve_regexes" for c in h.clock.getDelayedCalls())
    h.settle("a", "b")
    assert len(h.owned["a"][T2]) == len(h.owned["b"][T2]) == 1


def test_a_deleted_topics_partitions_are_revoked_before_the_member_moves_on() -> None:
    # librdkafka's 0045_subscribe_update_topic_remove against Kafka 4.2.1: after f is
    # deleted, the heartbeat is answered with g's partitions only and the member's epoch
    # unchanged (Kafka's CurrentAssignmentBuilder takes the deleted topic's partitions
    # as partitions to revoke); the next epoch comes once the member confirms.
    h = Harness()
    h.hb("a", subscribed_topic_names=("t1", "t2"))
    assert h.owned["a"] == REGEX_TOPICS
    epoch = h.group().group_epoch
    del h.topics["t2"]
    # librdkafka leaves its unchanged owned partitions out of the heartbeat.
    answer = h.hb("a", owned=None)
    member = h.group().members["a"]
    assert answer.member_epoch == epoch and member.state is MemberState.UNREVOKED_PARTITIONS
    assert answer.assignment == {T1: frozenset(range(6))}
    assert member.pending_revocation == {T2: frozenset({0, 1})}
    # Still owning t2's partitions: nothing moves.
    assert h.hb("a", owned=REGEX_TOPICS).member_epoch == epoch
    # It lists only t1's: the new epoch.
    answer = h.hb("a")
    assert answer.member_epoch == h.group().group_epoch > epoch
    assert h.group().members["a"].state is MemberState.STABLE
    assert h.group().members["a"].pending_revocation == {}
    epoch = answer.member_epoch
    del h.topics["t1"]
    answer = h.hb("a", owned=None)
    assert answer.assignment == {} and answer.member_epoch == epoch
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert h.hb("a", owned={}).member_epoch == h.group().group_epoch > epoch
    assert h.group().members["a"].state is MemberState.STABLE


def test_a_member_that_no_longer_lists_a_deleted_topic_moves_on_at_once() -> None:
    h = Harness()
    h.hb("a", subscribed_topic_names=("t1", "t2"))
    epoch = h.group().group_epoch
    del h.topics["t2"]
    answer = h.hb("a", owned={T1: frozenset(range(6))})
    assert answer.member_epoch == h.group().group_epoch > epoch
    assert h.group().members["a"].state is MemberState.STABLE


def test_a_member_revoking_a_topic_that_is_then_deleted_still_confirms() -> None:
    h = Harness()
    h.hb("a", subscribed_topic_names=("t1", "t2"))
    epoch = h.group().group_epoch
    # It drops t2 from its subscription: t2 must be revoked...
    h.hb("a", subscribed_topic_names=("t1",), owned=None)
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # ...and t2 is deleted before it confirms: as in Kafka, it is still waited for.
    del h.topics["t2"]
    h.hb("a", owned=None)
    member = h.group().members["a"]
    assert member.state is MemberState.UNREVOKED_PARTITIONS and member.member_epoch == epoch
    h.hb("a")
    member = h.group().members["a"]
    assert member.state is MemberState.STABLE
    assert member.member_epoch == h.group().group_epoch


def test_a_member_that_already_gave_up_what_it_must_revoke_goes_on_at_once() -> None:
    # Kafka asks for a revocation only of partitions the heartbeat says it still owns.
    h = Harness()
    h.hb("a", subscribed_topic_names=("t1",))
    epoch = h.group().group_epoch
    answer = h.hb("a", subscribed_topic_names=("t2",), owned={})
    assert answer.member_epoch == epoch + 1
    assert answer.assignment == {T2: frozenset({0, 1})}
    assert h.group().members["a"].state is MemberState.STABLE


def test_a_subscription_change_is_answered_in_the_same_heartbeat() -> None:
    h = Harness()
    h.hb("a", subscribed_topic_names=("t1",))
    # Unchanged owned partitions are left out of the heartbeat, as librdkafka does.
    answer = h.hb("a", subscribed_topic_names=("t2",), owned=None)
    assert answer.assignment == {}
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    answer = h.hb("a", owned={})
    assert answer.assignment == {T2: frozenset({0, 1})}


def test_grown_partitions_are_added_without_a_revocation() -> None:
    # librdkafka's 0045_subscribe_update_non_exist_and_partchange, second half: Kafka's
    # incremental protocol assigns the new partitions; the member revokes nothing.
    h = Harness()
    h.hb("a", subscribed_topic_names=("t2",))
    h.topics["t2"] = (T2, 4)
    answer = h.hb("a")
    assert answer.assignment == {T2: frozenset(range(4))}
    assert h.group().members["a"].state is MemberState.STABLE
