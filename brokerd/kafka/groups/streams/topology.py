# -*- test-case-name: tests.kafka.groups.streams.test_topology -*-
"""A streams group's topology (KIP-1071) and how it is configured against the topics
as they are: the partition count of every subtopology (its number of tasks) and of
every internal topic, and what keeps the group from running (its status).

A Kafka Streams application declares its topology when a member joins: subtopologies,
each reading source topics (named, or by regex) and repartition topics, writing to
repartition topics, and keeping state in changelog topics. The coordinator, not the
client, decides how many partitions the internal topics have, as Kafka's
``InternalTopicManager`` does:

- a subtopology has as many tasks as its largest source topic has partitions;
- a repartition topic declared without a partition count gets the task count of the
  subtopologies writing to it (the largest; repeated until nothing moves, as one
  repartition topic's count may decide another's);
- the topics of a copartition group must agree: external source topics of different
  counts are INCORRECTLY_PARTITIONED_TOPICS, and repartition topics without a count of
  their own take the group's;
- a changelog topic has one partition per task of its subtopology.

:func:`configure` answers the configured topology, or the statuses Kafka answers a
heartbeat with while the group cannot run (MISSING_SOURCE_TOPICS,
INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS with the topics to create).
Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from brokerd.kafka.regex import InvalidRegex, compile_regex


class TopologyStatus(enum.IntEnum):
    """StreamsGroupHeartbeat's status codes (Kafka's ``Status`` enum, in its order)."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6


@attrs.frozen
class InternalTopic:
    """A repartition or changelog topic: ``partitions`` 0 when the coordinator decides."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_regexes: tuple[str, ...] = ()
    changelog_topics: tuple[InternalTopic, ...] = ()
    repartition_sinks: tuple[str, ...] = ()
    repartition_sources: tuple[InternalTopic, ...] = ()
    #: Each a set of topic names (sources and repartition sources) to copartition.
    copartition_groups: tuple[frozenset[str], ...] = ()


@attrs.frozen
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def internal_topic_names(self) -> frozenset[str]:
        return frozenset(
            t.name for s in self.subtopologies
            for t in (*s.changelog_topics, *s.repartition_sources)
        )


@attrs.frozen
class Problem:
    status: TopologyStatus
    detail: str


@attrs.frozen
class ConfiguredTopology:
    """The topology against the topics as they were when configured.

    ``task_counts``: tasks per subtopology, for a topology that can run. ``problems``:
    why it cannot (empty when it can). ``to_create``: internal topics that do not exist,
    with the partition count they must have. ``source_partitions``: each subtopology's
    input topics (source and repartition) with their partition counts, for the
    endpoint information of interactive queries.
    """

    task_counts: Mapping[str, int]
    problems: tuple[Problem, ...] = ()
    to_create: tuple[InternalTopic, ...] = ()
    inputs: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)

    @property
    def ready(self) -> bool:
        return not self.problems


def _sources(s: Subtopology, topics: Mapping[str, int]) -> list[str]:
    """A subtopology's external source topics: its named ones and those its regexes
    match among the topics that exist (internal topics excepted)."""
    found = list(s.source_topics)
    for regex in s.source_regexes:
        try:
            compiled = compile_regex(regex)
        except InvalidRegex:
            continue
        found.extend(n for n in sorted(topics) if compiled.fullmatch(n) and n not in found)
    return found


def configure(topology: Topology, topics: Mapping[str, int]) -> ConfiguredTopology:
    """Configure ``topology`` against ``topics`` (name -> partition count)."""
    sources = {s.subtopology_id: _sources(s, topics) for s in topology.subtopologies}
    missing = sorted({t for ts in sources.values() for t in ts if t not in topics})
    if missing:
        return ConfiguredTopology({}, (Problem(
            TopologyStatus.MISSING_SOURCE_TOPICS,
            f"Source topics {', '.join(missing)} are missing.",
        ),))
    repartition: dict[str, int] = {}
    declared: dict[str, InternalTopic] = {}
    for s in topology.subtopologies:
        for t in s.repartition_sources:
            declared[t.name] = t
            if t.partitions > 0:
                repartition[t.name] = t.partitions
    _copartition(topology, sources, topics, repartition)

    def tasks(s: Subtopology) -> int:
        counts = [topics[t] for t in sources[s.subtopology_id]]
        counts += [repartition[t.name] for t in s.repartition_sources if t.name in repartition]
        return max(counts, default=0)

    # A repartition topic's count follows from its writers' task counts, which may
    # follow from other repartition topics: repeat until nothing moves.
    for _ in range(len(declared) + 1):
        moved = False
        for s in topology.subtopologies:
            n = tasks(s)
            if n == 0:
                continue
            for sink in s.repartition_sinks:
                derived = sink in declared and declared[sink].partitions <= 0
                if derived and repartition.get(sink, 0) < n:
                    repartition[sink] = n
                    moved = True
        _copartition(topology, sources, topics, repartition)
        if not moved:
            break
    undecided = sorted(n for n in declared if n not in repartition)
    if undecided:
        return ConfiguredTopology({}, (Problem(
            TopologyStatus.MISSING_SOURCE_TOPICS,
            f"The partition counts of {', '.join(undecided)} cannot be derived.",
        ),))
    problems = _copartition_problems(topology, sources, topics, repartition)
    if problems:
        return ConfiguredTopology({}, problems)
    task_counts = {s.subtopology_id: tasks(s) for s in topology.subtopologies}
    wanted: dict[str, InternalTopic] = {
        name: attrs.evolve(t, partitions=repartition[name]) for name, t in declared.items()
    }
    for s in topology.subtopologies:
        for t in s.changelog_topics:
            wanted[t.name] = attrs.evolve(t, partitions=task_counts[s.subtopology_id])
    wrong = sorted(
        f"{n} ({topics[n]} partitions, {t.partitions} expected)"
        for n, t in wanted.items() if n in topics and topics[n] != t.partitions
    )
    if wrong:
        return ConfiguredTopology({}, (Problem(
            TopologyStatus.INCORRECTLY_PARTITIONED_TOPICS,
            f"Internal topics are incorrectly partitioned: {', '.join(wrong)}",
        ),))
    inputs = {
        s.subtopology_id: (*sources[s.subtopology_id], *(t.name for t in s.repartition_sources))
        for s in topology.subtopologies
    }
    absent = tuple(t for n, t in sorted(wanted.items()) if n not in topics)
    if absent:
        return ConfiguredTopology(task_counts, (Problem(
            TopologyStatus.MISSING_INTERNAL_TOPICS,
            f"Internal topics are missing: [{', '.join(t.name for t in absent)}]",
        ),), absent, inputs)
    return ConfiguredTopology(task_counts, (), (), inputs)


def _copartition(
    topology: Topology,
    sources: Mapping[str, list[str]],
    topics: Mapping[str, int],
    repartition: dict[str, int],
) -> None:
    """Give the repartition topics of a copartition group without a count the group's
    (its external topics' count, else the largest repartition count known)."""
    for s in topology.subtopologies:
        fixed = {t.name for t in s.repartition_sources if t.partitions > 0}
        for group in s.copartition_groups:
            external = [topics[t] for t in group if t in topics and t not in repartition]
            known = [repartition[t] for t in group if t in repartition]
            count = max(external, default=0) or max(known, default=0)
            if count == 0:
                continue
            for t in group:
                if t not in topics and t not in fixed and any(
                    t == r.name for r in s.repartition_sources
                ):
                    repartition[t] = count


def _copartition_problems(
    topology: Topology,
    sources: Mapping[str, list[str]],
    topics: Mapping[str, int],
    repartition: Mapping[str, int],
) -> tuple[Problem, ...]:
    for s in topology.subtopologies:
        for group in s.copartition_groups:
            counts = {
                t: repartition[t] if t in repartition else topics.get(t, 0) for t in sorted(group)
            }
            if len(set(counts.values())) > 1:
                listed = ", ".join(f"{t}={n}" for t, n in counts.items())
                return (Problem(
                    TopologyStatus.INCORRECTLY_PARTITIONED_TOPICS,
                    f"The topics of a copartition group of subtopology {s.subtopology_id} "
                    f"have different partition counts: {listed}",
                ),)
    return ()


__all__ = [
    "ConfiguredTopology",
    "InternalTopic",
    "Problem",
    "Subtopology",
    "Topology",
    "TopologyStatus",
    "configure",
]
