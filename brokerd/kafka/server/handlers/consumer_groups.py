# -*- test-case-name: tests.kafka.groups.consumer.test_state -*-
"""Kafka's consumer group protocol APIs (KIP-848): ConsumerGroupHeartbeat and
ConsumerGroupDescribe.

Each handler turns a decoded request body
(:mod:`brokerd.kafka.wire.messages.consumer_groups`) into a response by calling the
consumer-protocol coordinator (:mod:`brokerd.kafka.groups.consumer.coordinator`, reached
as the classic coordinator's ``consumer``). Topics are named by ID on the wire; the
handler reads the topics' names, IDs and partition counts from the core on every
heartbeat, which is how the coordinator sees new partitions and new topics. Where ACLs
apply, the heartbeat carries what its principal may DESCRIBE: the topics a subscription
regex resolves to are only those (Kafka 4's rule).

It does not parse or build bytes, keep group state, or dispatch:
:class:`~brokerd.kafka.listener.dispatch.KafkaHandlers` routes requests here.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import attrs

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.consumer.assignors import Assignment
from brokerd.kafka.groups.consumer.coordinator import (
    HeartbeatInput,
    TopicMetadata,
    describe_assignment,
)
from brokerd.kafka.groups.consumer.regex_resolver import MayDescribe, every_topic
from brokerd.kafka.groups.consumer.state import ConsumerGroup, ConsumerMember
from brokerd.kafka.server.acl_gate import (
    DENIED_TEXT,
    GROUP_DENIED,
    TOPIC_DENIED,
    Access,
    Gate,
    answer_now,
    describe_each_group,
    refuse_groups_with_denied_topics,
)
from brokerd.kafka.server.handler_base import Outcome, RequestContext
from brokerd.kafka.server.internal_topics import InternalTopics, with_internal
from brokerd.kafka.server.operations_fields import AuthorizedOperations
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.messages import consumer_groups as cg
from brokerd.kafka.wire.messages.consumer_groups import (
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
)
from brokerd.kafka.wire.requests.apis import Request
from brokerd.kafka.wire.schema import AUTHORIZED_OPERATIONS_OMITTED
from brokerd.security.acl import Operation, ResourceType

if TYPE_CHECKING:
    from brokerd.core.api import CoreApi
    from brokerd.kafka.groups.coordinator import GroupCoordinator


def topic_metadata(core: CoreApi, internal: InternalTopics | None = None) -> TopicMetadata:
    """Every topic's ID and partition count, by name (no I/O), with the internal topics
    presented: Kafka's server-side regex resolution (KIP-848) does not skip internal
    topics, and a subscription may name one."""
    found = {
        name: (info.topic_id, info.partitions)
        for name, info in core.topic_registry.topics().items()
    }
    return found if internal is None else with_internal(found, internal)


class ConsumerGroupHandlers:
    """Answers ConsumerGroupHeartbeat and ConsumerGroupDescribe.

    :param core: the broker core (topic names, IDs, partition counts).
    :param coordinator: the group coordinator; its ``consumer`` answers.
    :param is_share_group: whether a share group has an id (such an id is not a
        consumer group: GROUP_ID_NOT_FOUND, as Kafka answers).
    """

    def __init__(
        self,
        core: CoreApi,
        coordinator: GroupCoordinator,
        operations: AuthorizedOperations | None = None,
        *,
        is_share_group: Callable[[str], bool],
        internal_topics: InternalTopics | None = None,
    ) -> None:
        self._core = core
        self._internal = internal_topics
        self._coordinator = coordinator
        self._operations = operations if operations is not None else AuthorizedOperations()
        self._is_share_group = is_share_group

    def routes(self) -> tuple[AnyRoute, ...]:
        return (
            route(CONSUMER_GROUP_HEARTBEAT, self.heartbeat, heartbeat_rule),
            route(CONSUMER_GROUP_DESCRIBE, self.describe, describe_rule),
        )

    async def heartbeat(
        self, conn: RequestContext, req: Request[cg.ConsumerGroupHeartbeatRequest]
    ) -> cg.ConsumerGroupHeartbeatResponse:
        body = req.body
        if body.group_id not in self._coordinator.consumer.groups and self._is_share_group(
            body.group_id
        ):
            return cg.ConsumerGroupHeartbeatResponse(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {body.group_id} is not a consumer group.",
            )
        owned = None
        if body.topic_partitions is not None:
            owned = {t.topic_id: frozenset(t.partitions) for t in body.topic_partitions}
        answer = await self._coordinator.consumer_heartbeat(
            HeartbeatInput(
                group_id=body.group_id,
                member_id=body.member_id,
                member_epoch=body.member_epoch,
                instance_id=body.instance_id,
                rack_id=body.rack_id,
                rebalance_timeout_ms=body.rebalance_timeout_ms,
                subscribed_topic_names=body.subscribed_topic_names,
                subscribed_topic_regex=body.subscribed_topic_regex,
                server_assignor=body.server_assignor,
                owned=owned,
                client_id=req.header.client_id or "",
                client_host=conn.client_host,
                version=req.api_version,
                may_describe=self._may_describe(conn),
            ),
            topic_metadata(self._core, self._internal),
        )
        assignment = None
        if answer.assignment is not None:
            assignment = cg.HeartbeatAssignment(topic_partitions=tuple(
                cg.HeartbeatTopicPartitions(topic_id=t, partitions=tuple(sorted(ps)))
                for t, ps in sorted(answer.assignment.items(), key=lambda i: str(i[0]))
                if ps
            ))
        return cg.ConsumerGroupHeartbeatResponse(
            error_code=answer.error_code,
            error_message=answer.error_message,
            member_id=answer.member_id,
            member_epoch=answer.member_epoch,
            heartbeat_interval_ms=answer.heartbeat_interval_ms,
            assignment=assignment,
        )

    def _may_describe(self, conn: RequestContext) -> MayDescribe:
        authorizer = self._operations.authorizer
        if authorizer is None:
            return every_topic
        return functools.partial(
            authorizer.authorize, conn.state.principal, conn.state.peer_host,
            Operation.DESCRIBE, ResourceType.TOPIC,
        )

    async def describe(
        self, conn: RequestContext, req: Request[cg.ConsumerGroupDescribeRequest]
    ) -> cg.ConsumerGroupDescribeResponse:
        body = req.body
        names = {info.topic_id: name for name, info in self._core.topic_registry.topics().items()}

        def one(group_id: str) -> cg.DescribedConsumerGroup:
            group = self._coordinator.consumer.groups.get(group_id)
            if group is None:
                other_type = (
                    self._coordinator.group_state(group_id) is not None
                    or self._is_share_group(group_id)
                )
                message = (
                    f"Group {group_id} is not a consumer group." if other_type
                    else f"Group {group_id} not found."
                )
                return cg.DescribedConsumerGroup(
                    group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=message,
                )
            operations = (
                self._operations.group(conn, group_id) if body.include_authorized_operations
                else AUTHORIZED_OPERATIONS_OMITTED
            )
            return _described(group, names, operations)

        # One answer per group id, however often it is named.
        return cg.ConsumerGroupDescribeResponse(
            groups=tuple(one(g) for g in dict.fromkeys(body.group_ids))
        )


def _assignment(
    assignment: Assignment, names: dict[uuid.UUID, str]
) -> cg.DescribedAssignment:
    return cg.DescribedAssignment(topic_partitions=tuple(
        cg.DescribedTopicPartitions(topic_id=t, topic_name=n, partitions=ps)
        for t, n, ps in describe_assignment(assignment, names)
    ))


def _member(
    group: ConsumerGroup, m: ConsumerMember, names: dict[uuid.UUID, str]
) -> cg.DescribedMember:
    return cg.DescribedMember(
        member_id=m.member_id,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        member_epoch=m.member_epoch,
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=m.subscribed_topic_names,
        subscribed_topic_regex=m.subscribed_topic_regex,
        assignment=_assignment(m.assigned, names),
        target_assignment=_assignment(group.target.get(m.member_id, {}), names),
        member_type=cg.MEMBER_TYPE_CONSUMER if m.classic is None else cg.MEMBER_TYPE_CLASSIC,
    )


def _described(
    group: ConsumerGroup, names: dict[uuid.UUID, str], operations: int
) -> cg.DescribedConsumerGroup:
    return cg.DescribedConsumerGroup(
        group_id=group.group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor,
        members=tuple(_member(group, m, names) for _, m in sorted(group.members.items())),
        authorized_operations=operations,
    )


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


def heartbeat_rule(
    access: Access, req: Request[cg.ConsumerGroupHeartbeatRequest]
) -> Gate[cg.ConsumerGroupHeartbeatRequest, cg.ConsumerGroupHeartbeatResponse]:
    """READ on the group; DESCRIBE on every subscribed topic named (Kafka's rule)."""
    body = req.body
    if not access.group(Operation.READ, body.group_id):
        return answer_now(req, cg.ConsumerGroupHeartbeatResponse(
            error_code=GROUP_DENIED, error_message=DENIED_TEXT
        ))
    denied = sorted(
        t for t in body.subscribed_topic_names or () if not access.topic(Operation.DESCRIBE, t)
    )
    if denied:
        return answer_now(req, cg.ConsumerGroupHeartbeatResponse(
            error_code=TOPIC_DENIED,
            error_message=f"The following topics are not authorized: {', '.join(denied)}",
        ))
    return Gate(req)


def describe_rule(
    access: Access, req: Request[cg.ConsumerGroupDescribeRequest]
) -> Gate[cg.ConsumerGroupDescribeRequest, cg.ConsumerGroupDescribeResponse]:
    """DESCRIBE on each group; the others are answered GROUP_AUTHORIZATION_FAILED, once
    per group id. A described group using a topic the principal may not DESCRIBE is
    answered TOPIC_AUTHORIZATION_FAILED without its members."""
    gate: Gate[cg.ConsumerGroupDescribeRequest, cg.ConsumerGroupDescribeResponse]
    gate = describe_each_group(
        access, req, lambda g, code: cg.DescribedConsumerGroup(group_id=g, error_code=code)
    )
    refuse = refuse_groups_with_denied_topics(access, _topics_used, _topics_refusal)

    def finish(
        response: cg.ConsumerGroupDescribeResponse | Outcome,
    ) -> cg.ConsumerGroupDescribeResponse | Outcome:
        response = gate.finish(response)
        if isinstance(response, Outcome):
            return response
        return attrs.evolve(response, groups=refuse(response.groups))

    return attrs.evolve(gate, finish=finish)


def _topics_used(group: cg.DescribedConsumerGroup) -> Iterator[str]:
    # Subscriptions too, not only assignments as Kafka: a subscribed topic's name is
    # as much the topic's as its partitions.
    for member in group.members:
        yield from member.subscribed_topic_names
        for assignment in (member.assignment, member.target_assignment):
            for tp in assignment.topic_partitions:
                yield tp.topic_name


def _topics_refusal(group: cg.DescribedConsumerGroup, message: str) -> cg.DescribedConsumerGroup:
    return cg.DescribedConsumerGroup(
        group_id=group.group_id, error_code=TOPIC_DENIED, error_message=message
    )


__all__ = ["ConsumerGroupHandlers", "describe_rule", "heartbeat_rule", "topic_metadata"]
