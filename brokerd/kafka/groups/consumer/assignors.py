# -*- test-case-name: tests.kafka.groups.consumer.test_assignors -*-
"""The server-side assignors of the consumer group protocol: ``uniform`` (the default)
and ``range``, as Kafka's group coordinator names them.

An assignor maps each member to the partitions it should own (the *target assignment*),
from each member's subscribed topics, the topics' partition counts and the previous
target. ``uniform`` is sticky: a member keeps the partitions it had as long as that keeps
the group balanced (no member owns two partitions more than another that could take
them), so a member joining or leaving moves as few partitions as possible. ``range``
splits each topic's partitions into contiguous ranges over the members subscribed to it,
in member-id order (co-partitioned topics land on the same members).

Pure functions: no I/O, no clock, deterministic (ties broken by member id, topic name,
partition).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Set

#: A member's partitions: topic ID -> partition numbers.
Assignment = Mapping[uuid.UUID, frozenset[int]]

#: What an assignor reads: each member's subscribed topic IDs, each topic's partition
#: count (only topics some member subscribes to), the previous target of each member.
Assignor = Callable[
    [Mapping[str, Set[uuid.UUID]], Mapping[uuid.UUID, int], Mapping[str, Assignment]],
    dict[str, dict[uuid.UUID, frozenset[int]]],
]

Partition = tuple[uuid.UUID, int]


def _result(owned: Mapping[str, set[Partition]]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    for member, parts in owned.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic, p in parts:
            by_topic.setdefault(topic, set()).add(p)
        out[member] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


def uniform(
    subscriptions: Mapping[str, Set[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
    previous: Mapping[str, Assignment],
) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Balanced and sticky. Keeps each member's previous partitions that it still
    subscribes to, hands out the free ones to the least loaded eligible member, then
    moves partitions from the most loaded to eligible members with at least two fewer
    until no such move is left."""
    members = sorted(subscriptions)
    owned: dict[str, set[Partition]] = {m: set() for m in members}
    owner: dict[Partition, str] = {}
    for m in members:
        subscribed = subscriptions[m]
        for topic, ps in previous.get(m, {}).items():
            if topic not in subscribed:
                continue
            for p in ps:
                key = (topic, p)
                if p < partitions.get(topic, 0) and key not in owner:
                    owner[key] = m
                    owned[m].add(key)
    eligible: dict[uuid.UUID, list[str]] = {}
    for m in members:
        for topic in subscriptions[m]:
            if topic in partitions:
                eligible.setdefault(topic, []).append(m)
    # A member above its fair share gives back its highest partitions first, so a
    # joiner takes partitions from the most loaded members (the rest keep theirs).
    _trim_to_quota(owned, owner, subscriptions, partitions)
    for topic in sorted(eligible, key=str):
        for p in range(partitions[topic]):
            key = (topic, p)
            if key in owner:
                continue
            m = min(eligible[topic], key=lambda c: (len(owned[c]), c))
            owner[key] = m
            owned[m].add(key)
    _balance(owned, owner, eligible)
    return _result(owned)


def _trim_to_quota(
    owned: dict[str, set[Partition]],
    owner: dict[Partition, str],
    subscriptions: Mapping[str, Set[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
) -> None:
    """When every member subscribes to the same topics, no member keeps more than the
    ceiling of partitions per member (and only as many members keep that ceiling as the
    remainder allows), as Kafka's homogeneous uniform assignor does."""
    subscribed = {frozenset(s) for s in subscriptions.values()}
    if len(subscribed) != 1 or not owned:
        return
    (topics,) = subscribed
    total = sum(partitions.get(t, 0) for t in topics)
    base, extra = divmod(total, len(owned))
    for m in sorted(owned, key=lambda c: (-len(owned[c]), c)):
        quota = base
        if extra > 0 and len(owned[m]) > base:
            quota, extra = base + 1, extra - 1
        for key in sorted(owned[m], key=lambda k: (str(k[0]), k[1]))[quota:]:
            owned[m].discard(key)
            del owner[key]


def _balance(
    owned: dict[str, set[Partition]],
    owner: dict[Partition, str],
    eligible: Mapping[uuid.UUID, list[str]],
) -> None:
    moved = True
    while moved:
        moved = False
        for key in sorted(owner, key=lambda k: (str(k[0]), k[1]), reverse=True):
            m = owner[key]
            target = min(eligible[key[0]], key=lambda c: (len(owned[c]), c))
            if len(owned[target]) + 1 < len(owned[m]):
                owned[m].discard(key)
                owned[target].add(key)
                owner[key] = target
                moved = True


def range_assignor(
    subscriptions: Mapping[str, Set[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
    previous: Mapping[str, Assignment],
) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Per topic: its subscribers in member-id order, each a contiguous range of
    ``count // members`` partitions, the first ``count % members`` one more."""
    owned: dict[str, set[Partition]] = {m: set() for m in subscriptions}
    for topic in sorted(partitions, key=str):
        subscribers = sorted(m for m, s in subscriptions.items() if topic in s)
        if not subscribers:
            continue
        base, extra = divmod(partitions[topic], len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = base + (1 if i < extra else 0)
            owned[m].update((topic, p) for p in range(start, start + n))
            start += n
    return _result(owned)


#: The assignors by the name a client gives in ``ServerAssignor``; the first is the default.
ASSIGNORS: Mapping[str, Assignor] = {"uniform": uniform, "range": range_assignor}
DEFAULT_ASSIGNOR = "uniform"

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNOR", "Assignment", "Assignor", "range_assignor", "uniform"]
