"""Online migration of a group between the classic protocol and the consumer group
protocol (KIP-848), as Kafka 4.x's BIDIRECTIONAL ``group.consumer.migration.policy``
does it: one group converted as a whole, its members kept.

- Upgrade (:func:`consumer_group_from_classic`): a consumer-protocol member joins a
  classic group with members. Allowed only for a group of protocol type "consumer"
  whose every member's metadata and assignment are the consumer embedded protocol, and
  with room for one more member. The group epoch and every member epoch are the classic
  generation; each member keeps the partitions it was assigned, which is also the
  target, so nothing moves until the new member's join bumps the epoch.
- Downgrade (:func:`classic_group_from_consumer`): the last consumer-protocol member of
  a consumer group left and the rest speak the classic protocol. The classic group gets
  the group epoch as generation and each member its protocols and current assignment;
  the classic coordinator then rebalances it.

Pure: no timers, no journal; :mod:`brokerd.kafka.groups.coordinator` does the rest.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from brokerd.kafka.groups.consumer.classic_members import (
    CONSUMER_PROTOCOL_TYPE,
    BadEmbeddedProtocol,
    encode_assignment,
    parse_assignment,
    parse_subscription,
    subscription_version,
)
from brokerd.kafka.groups.consumer.state import (
    ClassicProtocol,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from brokerd.kafka.groups.kip848.members import put_member
from brokerd.kafka.groups.state import GroupMetadata, Member

#: name -> (topic ID, partition count), as the consumer coordinator reads topics.
Topics = Mapping[str, tuple[uuid.UUID, int]]


def consumer_group_from_classic(
    classic: GroupMetadata, topics: Topics, max_size: int
) -> ConsumerGroup | str:
    """The consumer group ``classic`` becomes, or why it cannot (Kafka's message; the
    joining member is answered GROUP_ID_NOT_FOUND). A full group is refused rather than
    converted for a joiner it has no room for."""
    gid = classic.group_id
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return (f"Cannot upgrade classic group {gid} to consumer group because the group "
                f"does not use the consumer embedded protocol.")
    if len(classic.members) >= max_size:
        return (f"Cannot upgrade classic group {gid} to consumer group because the group "
                f"size exceeds the consumer group maximum size.")
    generation = classic.generation
    group = ConsumerGroup(gid, group_epoch=generation, assignment_epoch=generation)
    for m in classic.members.values():
        chosen = classic.protocol_name or (m.protocols[0][0] if m.protocols else "")
        protocols = sorted(m.protocols, key=lambda p: p[0] != chosen)
        try:
            subscription = parse_subscription(m.metadata_for(chosen))
            owned = parse_assignment(m.assignment)
        except BadEmbeddedProtocol:
            return (f"Cannot upgrade classic group {gid} to consumer group because the "
                    f"embedded consumer protocol is malformed.")
        assigned: dict[uuid.UUID, frozenset[int]] = {}
        for name, partition in owned:
            if name in topics:
                topic_id = topics[name][0]
                assigned[topic_id] = assigned.get(topic_id, frozenset()) | {partition}
        member = ConsumerMember(
            member_id=m.member_id,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            state=MemberState.STABLE,
            member_epoch=generation,
            previous_member_epoch=generation,
            assigned=assigned,
            classic=ClassicProtocol(m.session_timeout_ms, tuple(protocols)),
        )
        put_member(group, member)
        group.target[member.member_id] = dict(assigned)
    names = {n for m in group.members.values() for n in m.subscribed_topic_names}
    group.subscribed_metadata = {n: topics[n] for n in sorted(names) if n in topics}
    return group


def classic_group_from_consumer(group: ConsumerGroup) -> GroupMetadata:
    """The classic group a consumer group of classic members only becomes (Empty: the
    caller starts its rebalance)."""
    classic = GroupMetadata(group.group_id, generation=group.group_epoch,
                            protocol_type=CONSUMER_PROTOCOL_TYPE)
    names = {topic_id: n for n, (topic_id, _) in group.subscribed_metadata.items()}
    for m in group.members.values():
        assert m.classic is not None, "only classic members are converted back"
        by_name = {names[t]: ps for t, ps in m.assigned.items() if t in names}
        member = Member(
            member_id=m.member_id,
            group_instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout_ms=m.classic.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            protocols=list(m.classic.protocols),
            assignment=encode_assignment(by_name, subscription_version(m.classic)),
        )
        classic.add_member(member, CONSUMER_PROTOCOL_TYPE)
    if classic.members:
        classic.leader_id = next(iter(classic.members))
        classic.protocol_name = classic.select_protocol()
    return classic


__all__ = ["classic_group_from_consumer", "consumer_group_from_classic"]
