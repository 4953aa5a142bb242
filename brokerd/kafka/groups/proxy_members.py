"""The group coordinator as the REST Proxy's consumer instances use it
(:class:`brokerd.proxy.group_face.ProxyGroups`): KIP-848 heartbeats with topics named,
not by ID, and offset commits and fetches in ``(topic, partition)`` terms.

Only translation: the rules are the coordinator's, so an instance of the proxy and a
Kafka client in the same group are held to the same ones. Reactor thread only.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping

from twisted.internet.defer import Deferred

from brokerd.kafka.groups.consumer.coordinator import (
    HeartbeatAnswer,
    HeartbeatInput,
    TopicMetadata,
)
from brokerd.kafka.groups.consumer.regex_resolver import every_topic
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.proxy.group_face import MemberAnswer, MemberHeartbeat, TopicPartition


class ProxyMembers:
    """:class:`~brokerd.proxy.group_face.ProxyGroups` over the group coordinator.

    :param coordinator: the broker's group coordinator.
    :param topics: every topic's ID and partition count now, by name.
    """

    def __init__(
        self, coordinator: GroupCoordinator, topics: Callable[[], TopicMetadata]
    ) -> None:
        self._coordinator = coordinator
        self._topics = topics

    def heartbeat(self, beat: MemberHeartbeat) -> Deferred[MemberAnswer]:
        topics = self._topics()
        owned = None
        if beat.owned is not None:
            by_id: dict[uuid.UUID, set[int]] = {}
            for topic, partition in beat.owned:
                known = topics.get(topic)
                if known is not None:
                    by_id.setdefault(known[0], set()).add(partition)
            owned = {t: frozenset(ps) for t, ps in by_id.items()}
        # Through the coordinator's runtime, as a ConsumerGroupHeartbeat: answered once
        # the group's records it changed are durable.
        beating = self._coordinator.consumer_heartbeat(
            HeartbeatInput(
                group_id=beat.group_id,
                member_id=beat.member_id,
                member_epoch=beat.member_epoch,
                rebalance_timeout_ms=beat.rebalance_timeout_ms,
                subscribed_topic_names=beat.topics,
                subscribed_topic_regex=beat.topic_regex,
                owned=owned,
                client_id=beat.client_id,
                client_host=beat.client_host,
                may_describe=beat.may_describe or every_topic,
            ),
            topics,
        )
        return beating.addCallback(self._member_answer, beat, topics)

    def _member_answer(
        self, answer: HeartbeatAnswer, beat: MemberHeartbeat, topics: TopicMetadata
    ) -> MemberAnswer:
        assignment = None
        if answer.assignment is not None:
            names = {info[0]: name for name, info in topics.items()}
            assignment = frozenset(
                (names[t], p)
                for t, partitions in answer.assignment.items()
                if t in names
                for p in partitions
            )
        return MemberAnswer(
            error_code=answer.error_code,
            error_message=answer.error_message,
            member_id=answer.member_id or beat.member_id,
            member_epoch=answer.member_epoch,
            heartbeat_interval_ms=answer.heartbeat_interval_ms,
            assignment=assignment,
        )

    def commit(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        offsets: Mapping[TopicPartition, tuple[int, str]],
    ) -> Deferred[dict[TopicPartition, int]]:
        entries = [
            (topic, partition, offset, -1, metadata)
            for (topic, partition), (offset, metadata) in sorted(offsets.items())
        ]
        d = self._coordinator.commit_offsets(group_id, member_epoch, member_id, list(entries))
        return d.addCallback(dict)

    def committed(
        self, group_id: str, partitions: Collection[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[int, str]]:
        rows = self._coordinator.fetch_offsets(
            group_id, None if partitions is None else sorted(partitions)
        )
        return {
            (topic, partition): (offset, metadata)
            for topic, partition, offset, _epoch, metadata, code in rows
            if code == 0 and offset >= 0
        }
