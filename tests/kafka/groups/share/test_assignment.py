"""The share-group assignor: every subscribed partition gets a member; with more members
than partitions members share partitions; the answer depends on the group alone."""

from __future__ import annotations

from brokerd.kafka.groups.share.assignment import assign


def test_partitions_are_dealt_round_robin_over_fewer_members() -> None:
    got = assign({"b": ["t"], "a": ["t"]}, {"t": 5})
    assert got == {"a": {("t", 0), ("t", 2), ("t", 4)}, "b": {("t", 1), ("t", 3)}}


def test_more_members_than_partitions_share_them_and_every_member_has_work() -> None:
    got = assign({m: ["t"] for m in ("m1", "m2", "m3", "m4", "m5")}, {"t": 2})
    assert all(len(parts) == 1 for parts in got.values())
    owners = [m for m, parts in got.items() if ("t", 0) in parts]
    assert owners == ["m1", "m3", "m5"]
    assert set().union(*got.values()) == {("t", 0), ("t", 1)}


def test_a_member_gets_only_its_topics_and_unknown_or_empty_topics_give_nothing() -> None:
    subscriptions = {"a": ["t", "u"], "b": ["u"], "c": ["missing"], "d": ["empty"]}
    got = assign(subscriptions, {"t": 2, "u": 2, "empty": 0})
    assert got["a"] == {("t", 0), ("t", 1), ("u", 0)}
    assert got["b"] == {("u", 1)}
    assert got["c"] == set() and got["d"] == set()


def test_the_answer_does_not_depend_on_the_order_members_arrived_in() -> None:
    forward = {"x": ["t"], "y": ["t"], "z": ["t"]}
    backward = dict(reversed(list(forward.items())))
    assert assign(forward, {"t": 7}) == assign(backward, {"t": 7})
