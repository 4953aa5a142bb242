"""The operator's views (:mod:`brokerd.operator.views`): their derived figures and
:func:`~brokerd.operator.views.to_json`, the one JSON form every output shows."""

from __future__ import annotations

import json

import attrs

from brokerd.operator.share_groups import SharePartitionView
from brokerd.operator.views import (
    CONSUMER_GROUP,
    GroupOffsetView,
    GroupView,
    MemberView,
    PartitionView,
    TopicView,
    to_json,
)


def partition(p: int, start: int, hw: int, size: int = 100) -> PartitionView:
    return PartitionView("t", p, start, hw, hw, size, 1)


def share_partition(backlog: int) -> SharePartitionView:
    fields = {f.name: 0 for f in attrs.fields(SharePartitionView)}
    return SharePartitionView(**{**fields, "topic": "t", "backlog": backlog})  # type: ignore[arg-type]


def test_partition_and_topic_figures() -> None:
    assert partition(0, 5, 12).records == 7
    assert partition(0, 12, 5).records == 0  # never negative
    topic = TopicView("t", (partition(0, 2, 10, 100), partition(1, 0, 3, 50)), {})
    assert (topic.size_bytes, topic.end_offsets, topic.records) == (150, 13, 11)


def test_configs_are_kept_sorted() -> None:
    topic = TopicView("t", (), {"z.b": "1", "a.c": "2"})
    assert list(topic.configs) == ["a.c", "z.b"]


def test_total_lag_adds_offsets_lag_and_share_backlog() -> None:
    group = GroupView("g", "Stable", offsets=(
        GroupOffsetView("t", 0, 5, 12, 7), GroupOffsetView("gone", 0, 1, None, None)))
    assert group.total_lag == 7
    share = GroupView("s", "Stable", share_partitions=(share_partition(3), share_partition(4)))
    assert share.total_lag == 7


def test_to_json_includes_derived_figures_and_is_json() -> None:
    topic = TopicView("t", (partition(0, 2, 10),), {"k": "v"},
                      overrides=frozenset({"k", "a"}), topic_id="abc")
    doc = to_json(topic)
    assert doc["overrides"] == ["a", "k"]
    assert doc["configs"] == {"k": "v"}
    assert (doc["size_bytes"], doc["end_offsets"], doc["records"]) == (100, 10, 8)
    assert doc["partitions"][0]["records"] == 8
    assert doc["partitions"][0]["offline"] is None
    group = GroupView("g", "Stable", members=(MemberView("m", "c", "h", assignment=(("t", 0),)),),
                      group_type=CONSUMER_GROUP)
    gdoc = to_json([group])[0]
    assert gdoc["members"][0]["assignment"] == [["t", 0]]
    assert (gdoc["group_type"], gdoc["total_lag"]) == ("consumer", 0)
    assert json.loads(json.dumps(to_json({1: topic}))) == {"1": doc}
