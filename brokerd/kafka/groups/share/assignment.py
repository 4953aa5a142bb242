# -*- test-case-name: tests.kafka.groups.share.test_coordinator -*-
"""Which share-group member gets which partitions (pure).

As Kafka's share group assignor, every subscribed partition gets at least one member and
a partition may go to several members (they then share its records): with as many
members as partitions or fewer, the partitions are dealt round-robin over the members;
with more members than partitions, the members are dealt round-robin over the
partitions, so every member has work and some partitions have several members. Members
and partitions are taken in sorted order, so the answer depends on the group alone, and
a member that subscribes to a topic alone among others only gets that topic's partitions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["assign"]

TopicPartition = tuple[str, int]


def assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> dict[str, set[TopicPartition]]:
    """``{member: {(topic, partition)}}`` for members' ``subscriptions`` (topic names)
    and each existing topic's partition count."""
    out: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    topics = sorted({t for ts in subscriptions.values() for t in ts if t in partitions})
    for topic in topics:
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        count = partitions[topic]
        if not members or count <= 0:
            continue
        if len(members) <= count:
            for p in range(count):
                out[members[p % len(members)]].add((topic, p))
        else:
            for i, member in enumerate(members):
                out[member].add((topic, i % count))
    return out
