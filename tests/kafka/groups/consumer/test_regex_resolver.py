"""Subscription regexes that cannot stall the broker (KIP-848 ``SubscribedTopicRegex``):
resolution in bounded slices on a fake clock (the hostile patterns of tests/kafka/test_regex.py),
and the DESCRIBE filter.
"""

from __future__ import annotations

import time
import uuid

from brokerd.kafka.groups.consumer import regex_resolver
from brokerd.kafka.regex import compile_regex

from .test_state import Harness
from tests.kafka.test_regex import HOSTILE_8, HOSTILE_16


def _topic(n: int) -> tuple[uuid.UUID, int]:
    return uuid.UUID(int=1000 + n), 1


def test_a_member_subscribing_to_the_hostile_regex_gets_the_right_topics() -> None:
    h = Harness()
    h.topics = {"a" * 60: _topic(1), "a" * 59 + "x": _topic(2)}
    started = time.monotonic()
    answer = h.hb("a", subscribed_topic_names=None, subscribed_topic_regex=HOSTILE_8)
    for _ in range(1000):
        if not h.coord.regexes.busy:
            break
        h.clock.advance(0)
    h.hb("a")
    assert time.monotonic() - started < 10
    assert answer.error_code == 0
    assert set(h.group().subscribed_metadata) == {"a" * 59 + "x"}
    assert h.owned["a"] == {_topic(2)[0]: frozenset({0})}


def test_a_costly_resolution_runs_in_bounded_slices_off_the_heartbeat() -> None:
    h = Harness()
    h.topics = {f"t{n:04d}-" + "a" * 40: _topic(n) for n in range(400)}
    resolver = h.coord.regexes
    checked: list[str] = []
    real_check = regex_resolver._Resolution.check

    def counting(self: regex_resolver._Resolution, name: str) -> int:
        checked.append(name)
        return real_check(self, name)

    # Each reactor turn's work: the clock runs every turn in one advance.
    per_turn: list[int] = []
    real_turn = resolver._turn

    def turn() -> None:
        before = len(checked)
        real_turn()
        per_turn.append(len(checked) - before)

    resolver._turn = turn  # type: ignore[method-assign]
    regex_resolver._Resolution.check = counting  # type: ignore[method-assign]
    try:
        answer = h.hb("a", subscribed_topic_names=None, subscribed_topic_regex=HOSTILE_16)
        cost = compile_regex(HOSTILE_16).cost * 46 + regex_resolver.MATCH_OVERHEAD
        per_slice = -(-regex_resolver.SLICE_COST // cost)
        # The heartbeat is answered without matching anything (as in Kafka, the regex is
        # resolved after it), and without the regex's topics.
        assert answer.error_code == 0 and answer.assignment == {}
        assert not checked and resolver.busy
        epoch = h.group().group_epoch
        h.clock.advance(0)
    finally:
        regex_resolver._Resolution.check = real_check  # type: ignore[method-assign]
    assert not resolver.busy and sorted(checked) == sorted(h.topics)
    assert len(per_turn) >= 400 // per_slice and max(per_turn) <= per_slice
    # Resolved (nothing matched: no name ends in x); a new matching topic, seen by the
    # next heartbeat, is checked after it and assigned on the one after.
    assert h.group().group_epoch == epoch
    h.topics["b" * 20 + "x"] = _topic(999)
    h.hb("a")
    h.clock.advance(0)
    h.hb("a")
    assert h.owned["a"] == {_topic(999)[0]: frozenset({0})}
    assert h.group().group_epoch == epoch + 1


def test_the_epoch_moves_when_a_later_slice_resolves_the_regex() -> None:
    h = Harness()
    h.topics = {f"t{n:04d}-" + "a" * 40 + "x": _topic(n) for n in range(300)}
    h.hb("a", subscribed_topic_names=None, subscribed_topic_regex=HOSTILE_16)
    epoch = h.group().group_epoch
    while h.coord.regexes.busy:
        h.clock.advance(0)
    assert h.group().group_epoch == epoch + 1
    assert len(h.group().subscribed_metadata) == 300
    h.hb("a")
    assert len(h.owned["a"]) == 300


def test_a_regex_resolves_only_to_topics_the_member_may_describe() -> None:
    h = Harness()
    h.topics = {"orders-eu": _topic(1), "orders-us": _topic(2), "orders-secret": _topic(3)}
    h.hb("a", subscribed_topic_names=None, subscribed_topic_regex="orders-.*",
         may_describe=lambda topic: topic != "orders-secret")
    h.clock.advance(0)
    h.hb("a")
    assert set(h.group().subscribed_metadata) == {"orders-eu", "orders-us"}
    assert set(h.owned["a"]) == {_topic(1)[0], _topic(2)[0]}


def test_regexes_no_member_uses_are_forgotten() -> None:
    h = Harness()
    h.hb("a", subscribed_topic_names=None, subscribed_topic_regex="t.*")
    h.clock.advance(0)
    assert h.coord.regexes.matched("g", "t.*") == {"t1", "t2"}
    h.hb("a", h.epochs["a"], subscribed_topic_regex="t1")
    assert h.coord.regexes.matched("g", "t.*") is None
    h.clock.advance(0)
    assert h.coord.regexes.matched("g", "t1") == {"t1"}


def test_topics_deleted_while_a_regex_resolves_are_left_out() -> None:
    h = Harness()
    h.topics = {f"t{n:04d}-" + "a" * 40 + "x": _topic(n) for n in range(50)}
    h.hb("a", subscribed_topic_names=None, subscribed_topic_regex=HOSTILE_16)
    assert h.coord.regexes.busy
    kept = {name: value for name, value in h.topics.items() if name.startswith("t000")}
    h.topics = kept
    h.hb("a")
    h.clock.advance(0)
    h.hb("a")
    assert set(h.group().subscribed_metadata) == set(kept)
    assert set(h.owned["a"]) == {topic_id for topic_id, _ in kept.values()}


def test_a_pass_that_ends_after_deletions_shows_only_live_topics() -> None:
    h = Harness()
    h.topics = {f"t{n:04d}-" + "a" * 40 + "x": _topic(n) for n in range(3)}
    h.hb("a", subscribed_topic_names=None, subscribed_topic_regex=HOSTILE_16)
    assert h.coord.regexes.busy
    # The pass goes on over the names it began with; one is gone when it ends.
    (first, *rest) = sorted(h.topics)
    del h.topics[first]
    for _ in range(3):
        assert h.hb("a").error_code == 0
        h.clock.advance(0)
    assert set(h.group().subscribed_metadata) == set(rest)


def test_resolved_regexes_share_one_snapshot_of_the_topic_names() -> None:
    # Many groups with a regex each must not hold a copy of every topic name each.
    h = Harness()
    h.topics = {f"t{n:04d}": _topic(n) for n in range(500)}
    for g in range(20):
        h.hb(f"m{g}", group=f"g{g}", subscribed_topic_names=None,
             subscribed_topic_regex=f"t00{g % 10}.")
    while h.coord.regexes.busy:
        h.clock.advance(0)
    resolutions = [r for rs in h.coord.regexes._groups.values() for r in rs.values()]
    assert len(resolutions) == 20 and not h.coord.regexes.busy
    assert len({id(r.base) for r in resolutions}) == 1
    assert all(len(r.matched) == 10 for r in resolutions)
