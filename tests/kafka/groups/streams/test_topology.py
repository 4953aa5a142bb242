"""A streams group's topology: internal topics take their source's partition count, missing
and wrong topics are named, copartitioned sources agree, regex sources match."""

from __future__ import annotations

from brokerd.kafka.groups.streams.topology import (
    InternalTopic,
    Subtopology,
    Topology,
    TopologyStatus,
    configure,
)

from tests.kafka.groups.streams.test_coordinator import WORD_COUNT, ready_topics


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
