"""The consumer-protocol assignors: uniform (balanced and sticky, with different
subscriptions) and range (each topic split)."""

from __future__ import annotations

from brokerd.kafka.groups.consumer.assignors import range_assignor, uniform

from tests.kafka.groups.consumer.test_state import T1, T2


def test_uniform_is_balanced_and_sticky() -> None:
    subs = {m: {T1} for m in "abc"}
    first = uniform(subs, {T1: 6}, {})
    assert sorted(len(a[T1]) for a in first.values()) == [2, 2, 2]
    subs["d"] = {T1}
    second = uniform(subs, {T1: 6}, first)
    assert sorted(len(a.get(T1, ())) for a in second.values()) == [1, 1, 2, 2]
    for m in "abc":
        assert second[m][T1] <= first[m][T1]


def test_uniform_with_different_subscriptions() -> None:
    out = uniform({"a": {T1, T2}, "b": {T1}}, {T1: 6, T2: 2}, {})
    assert out["a"][T2] == {0, 1} and T2 not in out["b"]
    assert abs(len(out["b"][T1]) - (len(out["a"][T1]) + 2)) <= 1


def test_range_splits_each_topic() -> None:
    out = range_assignor({"a": {T1, T2}, "b": {T1, T2}}, {T1: 5, T2: 2}, {})
    assert out["a"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0})}
    assert out["b"] == {T1: frozenset({3, 4}), T2: frozenset({1})}
