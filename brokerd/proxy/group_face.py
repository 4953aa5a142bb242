"""What the REST Proxy's consumer instances ask of the consumer-group coordinator, as
typed Protocols: the Kafka side (``brokerd.kafka.groups.proxy_members``) satisfies them
and the service wiring (``brokerd/app/wiring.py``) passes it in, so nothing here imports
the Kafka listener.

A subscribed instance is a member of the consumer group protocol (KIP-848), as a
``group.protocol=consumer`` Kafka client is: it heartbeats with its member epoch and
the partitions it owns, and is told its assignment. Topics are named here, not by ID;
the Kafka side translates. Errors are Kafka's numeric codes (0: none).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Protocol

import attrs
from twisted.internet.defer import Deferred

#: A ``(topic, partition)``.
TopicPartition = tuple[str, int]

#: Kafka's error codes the instances act on.
NONE = 0
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
STALE_MEMBER_EPOCH = 113
#: ConsumerGroupHeartbeat's epoch of a member leaving its group.
LEAVE_EPOCH = -1


@attrs.frozen
class MemberAnswer:
    """A heartbeat's answer: ``assignment`` None means unchanged."""

    error_code: int
    error_message: str | None = None
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: frozenset[TopicPartition] | None = None


@attrs.frozen(kw_only=True)
class MemberHeartbeat:
    """One heartbeat of an instance: None fields are unchanged since its last one."""

    group_id: str
    member_id: str
    member_epoch: int
    topics: tuple[str, ...] | None = None
    topic_regex: str | None = None
    owned: frozenset[TopicPartition] | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 60_000
    #: Whether the instance's principal may DESCRIBE a topic (a regex resolves to those).
    may_describe: Callable[[str], bool] | None = None


class ProxyGroups(Protocol):
    """The coordinator as the proxy's consumer instances use it. Reactor thread. Implemented
    by :class:`~brokerd.kafka.groups.proxy_members.ProxyMembers`; a Protocol because nothing
    outside ``brokerd/kafka/`` imports the listener but the wiring."""

    def heartbeat(self, beat: MemberHeartbeat) -> Deferred[MemberAnswer]:
        """The member's heartbeat, answered once what it changed in the group is
        durable."""
        ...

    def commit(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        offsets: Mapping[TopicPartition, tuple[int, str]],
    ) -> Deferred[dict[TopicPartition, int]]:
        """Commit ``(offset, metadata)`` per partition (epoch -1, member "": outside
        the group protocol, allowed while the group has no members); fires with an
        error code per partition once durable."""
        ...

    def committed(
        self, group_id: str, partitions: Collection[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[int, str]]:
        """The committed ``(offset, metadata)`` of those partitions (None: every one
        committed), leaving out partitions with none."""
        ...
