# -*- test-case-name: tests.kafka.server.test_internal_topics -*-
"""Kafka's internal topics as clients see them: ``__consumer_offsets`` and
``__transaction_state`` in Metadata and DescribeTopicPartitions, marked internal.

brokerd keeps committed offsets and transaction state in journals of its own
(:mod:`brokerd.storage.stores`), never in topics; but clients and tools expect Kafka's
internal topics to be there once a coordinator has been used: franz-go checks that a
regex subscription skips ``__consumer_offsets``, lag monitors list it, ``kafka-topics
--describe`` shows it. So they are presented as Kafka presents them on one broker, with
Kafka's default partition counts (``offsets.topic.num.partitions`` and
``transaction.state.log.num.partitions``, 50 each), led by this node in its one leader
epoch.

Kafka creates each one when it is first needed: ``__consumer_offsets`` at the first
group-coordinator lookup (FindCoordinator for a group), ``__transaction_state`` at the
first transaction-coordinator lookup, either when a client asks Metadata for it by name
(with auto-creation allowed). brokerd does the same with :meth:`InternalTopics.create`.
They are never written by clients (Produce answers INVALID_TOPIC_EXCEPTION, as Kafka
does), never stored, and not in the core's topic table, so the server-side regex
subscriptions of the consumer group protocol (which match that table) never see them, as
Kafka's skip internal topics. ``__share_group_state`` is Kafka's share coordinator's
topic, looked up broker to broker: brokerd has no share coordinator (share state is in
its own journal), so no client ever needs it, and it is not presented.

Each topic's ID is derived from the cluster id and its name: the same across restarts,
distinct per cluster. What a topic "created" here remembers lasts until a restart; every
group or transactional client looks its coordinator up again first thing, which brings
the topic back. Sans-IO.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from brokerd.kafka.server.offsets_topic import OffsetsTopicLog
from brokerd.storage.types import TopicInfo

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
#: Kafka's defaults: ``offsets.topic.num.partitions``, ``transaction.state.log.num.partitions``.
OFFSETS_TOPIC_PARTITIONS = 50
TRANSACTION_STATE_PARTITIONS = 50
#: FindCoordinator's key types whose coordinator keeps its state in an internal topic.
COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1

#: Each presented internal topic: its partition count and the configs Kafka creates it
#: with (what DescribeConfigs would show as the topic's own).
PRESENTED: Mapping[str, tuple[int, Mapping[str, str]]] = {
    OFFSETS_TOPIC: (
        OFFSETS_TOPIC_PARTITIONS,
        {"cleanup.policy": "compact", "compression.type": "producer",
         "segment.bytes": "104857600"},
    ),
    TRANSACTION_STATE_TOPIC: (
        TRANSACTION_STATE_PARTITIONS,
        {"cleanup.policy": "compact", "compression.type": "uncompressed",
         "min.insync.replicas": "1", "segment.bytes": "104857600",
         "unclean.leader.election.enable": "false"},
    ),
}
_TOPIC_OF_KEY_TYPE: Mapping[int, str] = {
    COORDINATOR_GROUP: OFFSETS_TOPIC,
    COORDINATOR_TRANSACTION: TRANSACTION_STATE_TOPIC,
}
#: The namespace of the internal topics' IDs (uuid5 over cluster id and name).
_ID_NAMESPACE = uuid.UUID("6f1d2c4e-9a57-4b0e-8c51-3f2a7d9e0b14")


def internal_topic_id(cluster_id: str, name: str) -> uuid.UUID:
    """The ID of internal topic ``name`` in cluster ``cluster_id`` (stable, and never one
    of Kafka's reserved IDs: a version-5 UUID is neither all zeros nor 0...01)."""
    return uuid.uuid5(_ID_NAMESPACE, f"{cluster_id}/{name}")


class InternalTopics:
    """The internal topics this broker presents, created as Kafka creates them.

    :param cluster_id: the cluster id, read when a topic is created (it is known only
        once the broker started).
    :param offsets_log: ``__consumer_offsets``'s records, kept in step with the offsets
        journal (:mod:`brokerd.kafka.server.offsets_topic`); None: the topic has no
        readable partitions.
    """

    def __init__(
        self, cluster_id: Callable[[], str], offsets_log: OffsetsTopicLog | None = None
    ) -> None:
        self._cluster_id = cluster_id
        self._created: dict[str, TopicInfo] = {}
        self._offsets_log = offsets_log

    def create(self, name: str) -> TopicInfo | None:
        """Present internal topic ``name`` from now on (nothing for a name brokerd does
        not present); its :class:`TopicInfo`, or None."""
        info = self._created.get(name)
        if info is not None:
            return info
        spec = PRESENTED.get(name)
        if spec is None:
            return None
        partitions, configs = spec
        info = TopicInfo(
            name, partitions, configs,
            topic_id=internal_topic_id(self._cluster_id(), name),
        )
        self._created[name] = info
        return info

    def coordinator_looked_up(self, key_type: int) -> None:
        """A client asked FindCoordinator for a key of ``key_type``: the internal topic
        that coordinator keeps its state in exists from now on."""
        name = _TOPIC_OF_KEY_TYPE.get(key_type)
        if name is not None:
            self.create(name)

    def topics(self) -> Mapping[str, TopicInfo]:
        """The internal topics presented now, by name."""
        return self._created

    def get(self, name: str) -> TopicInfo | None:
        return self._created.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return next((t for t in self._created.values() if t.topic_id == topic_id), None)

    def readable(self, name: str) -> OffsetsTopicLog | None:
        """The records of internal topic ``name`` if it is presented now and readable
        (only ``__consumer_offsets`` is, when it has a log); else None."""
        if name != OFFSETS_TOPIC or name not in self._created:
            return None
        return self._offsets_log


def with_internal(
    topics: dict[str, tuple[uuid.UUID, int]], internal: InternalTopics
) -> dict[str, tuple[uuid.UUID, int]]:
    """``topics`` (name -> ID and partition count) with the internal topics presented
    added: Kafka's server-side regex resolution (KIP-848) does not skip internal topics,
    and a subscription may name one."""
    for name, info in internal.topics().items():
        topics.setdefault(name, (info.topic_id, info.partitions))
    return topics


__all__ = [
    "OFFSETS_TOPIC",
    "OFFSETS_TOPIC_PARTITIONS",
    "PRESENTED",
    "TRANSACTION_STATE_PARTITIONS",
    "TRANSACTION_STATE_TOPIC",
    "InternalTopics",
    "internal_topic_id",
    "with_internal",
]
