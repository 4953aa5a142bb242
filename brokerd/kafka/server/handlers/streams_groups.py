# -*- test-case-name: tests.kafka.server.handlers.test_streams_groups -*-
"""Kafka's streams group protocol APIs (KIP-1071): StreamsGroupHeartbeat and
StreamsGroupDescribe.

Each handler turns a decoded request body (:mod:`brokerd.kafka.wire.messages.streams_groups`)
into a response by calling the streams coordinator
(:mod:`brokerd.kafka.groups.streams.coordinator`, reached as the group coordinator's
``streams``). The topics' partition counts are read from the core on every heartbeat.
Before a heartbeat is answered, the internal topics its group's topology needs and that
do not exist are created here (where ACLs apply, only with CREATE on the cluster or the
topic, Kafka's rule) (repartition and changelog topics, with the partition
counts the coordinator decided and the configs the topology declares), so the answer
can carry tasks at once; a topic that cannot be created leaves the group NotReady with
MISSING_INTERNAL_TOPICS in every answer, as Kafka answers, and is tried again on the
next heartbeat.

It does not parse or build bytes, keep group state, or dispatch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs
from twisted.logger import Logger

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.streams.coordinator import (
    ACCEPTABLE_RECOVERY_LAG,
    TASK_OFFSET_INTERVAL_MS,
    HeartbeatInput,
)
from brokerd.kafka.groups.streams.state import StreamsGroup, StreamsMember, Tasks, task_map
from brokerd.kafka.groups.streams.topology import (
    InternalTopic,
    Subtopology,
    Topology,
)
from brokerd.kafka.server.acl_gate import (
    DENIED_TEXT,
    GROUP_DENIED,
    Access,
    Gate,
    answer_now,
    describe_each_group,
)
from brokerd.kafka.server.handler_base import RequestContext
from brokerd.kafka.server.operations_fields import AuthorizedOperations
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.messages import streams_groups as sg
from brokerd.kafka.wire.messages.streams_groups import (
    STREAMS_GROUP_DESCRIBE,
    STREAMS_GROUP_HEARTBEAT,
    STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE,
)
from brokerd.kafka.wire.requests.apis import Request
from brokerd.kafka.wire.schema import AUTHORIZED_OPERATIONS_OMITTED
from brokerd.security.acl import CLUSTER_NAME, Operation, ResourceType

if TYPE_CHECKING:
    from brokerd.core.api import CoreApi
    from brokerd.kafka.groups.coordinator import GroupCoordinator

#: The most subtopologies, and topics per subtopology, one topology may declare: the
#: request is bounded by its frame, this bounds the work of configuring it.
MAX_SUBTOPOLOGIES = 10_000
MAX_TOPICS_PER_SUBTOPOLOGY = 10_000


class StreamsGroupHandlers:
    """Answers StreamsGroupHeartbeat and StreamsGroupDescribe.

    :param core: the broker core (topics, and the creation of internal topics).
    :param coordinator: the group coordinator; its ``streams`` answers.
    :param is_share_group: whether a share group has an id (not a streams group then).
    """

    _log = Logger()

    def __init__(
        self,
        core: CoreApi,
        coordinator: GroupCoordinator,
        operations: AuthorizedOperations | None = None,
        *,
        is_share_group: Callable[[str], bool],
    ) -> None:
        self._core = core
        self._coordinator = coordinator
        self._operations = operations if operations is not None else AuthorizedOperations()
        self._is_share_group = is_share_group

    def routes(self) -> tuple[AnyRoute, ...]:
        return (
            route(STREAMS_GROUP_HEARTBEAT, self.heartbeat, heartbeat_rule),
            route(STREAMS_GROUP_DESCRIBE, self.describe, describe_rule),
            route(STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, self.update_description,
                  update_description_rule),
        )

    def _topics(self) -> dict[str, int]:
        return {name: info.partitions for name, info in self._core.topic_registry.topics().items()}

    async def heartbeat(
        self, conn: RequestContext, req: Request[sg.StreamsGroupHeartbeatRequest]
    ) -> sg.StreamsGroupHeartbeatResponse:
        body = req.body
        streams = self._coordinator.streams
        if body.group_id not in streams.groups and self._is_share_group(body.group_id):
            return sg.StreamsGroupHeartbeatResponse(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {body.group_id} is not a streams group.",
            )
        topology = None
        if body.topology is not None:
            try:
                topology = _topology(body.topology)
            except ValueError as e:
                return sg.StreamsGroupHeartbeatResponse(
                    error_code=ErrorCode.STREAMS_INVALID_TOPOLOGY, error_message=str(e)
                )
        if body.member_epoch >= 0:
            needed = streams.internal_topics_needed(body.group_id, topology, self._topics())
            for topic in needed:
                if self._may_create(conn, topic.name):
                    await self._create(body.group_id, topic)
        answer = await self._coordinator.streams_heartbeat(
            HeartbeatInput(
                group_id=body.group_id,
                member_id=body.member_id,
                member_epoch=body.member_epoch,
                endpoint_information_epoch=body.endpoint_information_epoch,
                instance_id=body.instance_id,
                rack_id=body.rack_id,
                rebalance_timeout_ms=body.rebalance_timeout_ms,
                topology=topology,
                owned=_owned(body),
                process_id=body.process_id,
                user_endpoint=(None if body.user_endpoint is None
                               else (body.user_endpoint.host, body.user_endpoint.port)),
                client_tags=(None if body.client_tags is None
                             else tuple((kv.key, kv.value) for kv in body.client_tags)),
                shutdown_application=body.shutdown_application,
                client_id=req.header.client_id or "",
                client_host=conn.client_host,
            ),
            self._topics(),
        )
        tasks = answer.assignment
        required = answer.error_code == 0 and streams.description_required(body.group_id)
        return sg.StreamsGroupHeartbeatResponse(
            error_code=answer.error_code,
            error_message=answer.error_message,
            member_id=answer.member_id or body.member_id,
            member_epoch=answer.member_epoch,
            heartbeat_interval_ms=answer.heartbeat_interval_ms,
            acceptable_recovery_lag_legacy=ACCEPTABLE_RECOVERY_LAG,
            task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS,
            acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG,
            status=None if answer.error_code else tuple(
                sg.Status(status_code=int(code), status_detail=detail)
                for code, detail in answer.status
            ),
            active_tasks=None if tasks is None else _task_ids(tasks.active),
            standby_tasks=None if tasks is None else _task_ids(tasks.standby),
            warmup_tasks=None if tasks is None else _task_ids(tasks.warmup),
            topology_description_required=required,
            endpoint_information_epoch=answer.endpoint_information_epoch,
            partitions_by_user_endpoint=None if answer.endpoints is None else tuple(
                sg.EndpointToPartitions(
                    user_endpoint=sg.Endpoint(host=e.endpoint[0], port=e.endpoint[1]),
                    active_partitions=_topic_partitions(e.active),
                    standby_partitions=_topic_partitions(e.standby),
                )
                for e in answer.endpoints
            ),
        )

    def _may_create(self, conn: RequestContext, topic: str) -> bool:
        """Kafka's rule for the internal topics a heartbeat makes: CREATE on the cluster
        or on the topic (without it they stay missing: MISSING_INTERNAL_TOPICS)."""
        authorizer = self._operations.authorizer
        if authorizer is None:
            return True
        who = (conn.state.principal, conn.state.peer_host, Operation.CREATE)
        return authorizer.authorize(*who, ResourceType.CLUSTER, CLUSTER_NAME) or (
            authorizer.authorize(*who, ResourceType.TOPIC, topic))

    async def _create(self, group_id: str, topic: InternalTopic) -> None:
        if topic.name in self._core.topic_registry.topics():
            return  # made meanwhile by another member's heartbeat
        try:
            await self._core.create_topic(topic.name, topic.partitions, dict(topic.configs))
        except Exception as e:
            if topic.name not in self._core.topic_registry.topics():
                self._log.warn(
                    "streams group {group!r}: internal topic {topic!r} not created: {error}",
                    group=group_id, topic=topic.name, error=str(e),
                )
            return
        self._log.info(
            "streams group {group!r}: internal topic {topic!r} created with {n} partition(s)",
            group=group_id, topic=topic.name, n=topic.partitions,
        )

    async def update_description(
        self, conn: RequestContext, req: Request[sg.StreamsGroupTopologyDescriptionUpdateRequest]
    ) -> sg.StreamsGroupTopologyDescriptionUpdateResponse:
        """Keep the topology description a member sends when its heartbeat answer asked
        for one (KIP-1331); StreamsGroupDescribe v1 gives it back."""
        body = req.body
        code, message = self._coordinator.streams.store_description(
            body.group_id, body.member_id, body.topology_epoch, body.topology_description
        )
        return sg.StreamsGroupTopologyDescriptionUpdateResponse(
            error_code=code, error_message=message
        )

    async def describe(
        self, conn: RequestContext, req: Request[sg.StreamsGroupDescribeRequest]
    ) -> sg.StreamsGroupDescribeResponse:
        body = req.body
        streams = self._coordinator.streams

        def one(group_id: str) -> sg.DescribedStreamsGroup:
            group = streams.groups.get(group_id)
            if group is None:
                return sg.DescribedStreamsGroup(
                    group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=f"Group {group_id} not found.",
                )
            operations = (
                self._operations.group(conn, group_id) if body.include_authorized_operations
                else AUTHORIZED_OPERATIONS_OMITTED
            )
            described = _described(group, operations)
            if body.include_topology_description:
                kept = streams.description(group_id)
                stored = kept if isinstance(kept, sg.TopologyDescription) else None
                described = attrs.evolve(
                    described,
                    topology_description=stored,
                    topology_description_status=(
                        sg.DESCRIPTION_NOT_STORED if stored is None
                        else sg.DESCRIPTION_AVAILABLE
                    ),
                )
            return described

        return sg.StreamsGroupDescribeResponse(
            groups=tuple(one(g) for g in dict.fromkeys(body.group_ids))
        )


def _internal(t: sg.TopicInfo) -> InternalTopic:
    return InternalTopic(t.name, t.partitions, t.replication_factor,
                         tuple((kv.key, kv.value) for kv in t.topic_configs))


def _topology(wire: sg.Topology) -> Topology:
    """The coordinator's view of a heartbeat's topology; ValueError if it is out of
    bounds or its copartition groups point outside their subtopology."""
    if len(wire.subtopologies) > MAX_SUBTOPOLOGIES:
        raise ValueError(f"Topology has more than {MAX_SUBTOPOLOGIES} subtopologies.")
    out = []
    for s in wire.subtopologies:
        sizes = (len(s.source_topics), len(s.source_topic_regex),
                 len(s.state_changelog_topics), len(s.repartition_sink_topics),
                 len(s.repartition_source_topics), len(s.copartition_groups))
        if max(sizes) > MAX_TOPICS_PER_SUBTOPOLOGY:
            raise ValueError(f"Subtopology {s.subtopology_id} is too large.")
        groups = []
        for g in s.copartition_groups:
            try:
                names = {s.source_topics[i] for i in g.source_topics}
                names |= {s.repartition_source_topics[i].name for i in g.repartition_source_topics}
            except IndexError:
                raise ValueError(
                    f"Subtopology {s.subtopology_id}: a copartition group names a topic "
                    f"index out of range."
                ) from None
            groups.append(frozenset(names))
        out.append(Subtopology(
            s.subtopology_id,
            tuple(s.source_topics),
            tuple(s.source_topic_regex),
            tuple(_internal(t) for t in s.state_changelog_topics),
            tuple(s.repartition_sink_topics),
            tuple(_internal(t) for t in s.repartition_source_topics),
            tuple(groups),
        ))
    return Topology(wire.epoch, tuple(out))


def _owned(body: sg.StreamsGroupHeartbeatRequest) -> Tasks | None:
    lists = (body.active_tasks, body.standby_tasks, body.warmup_tasks)
    if all(x is None for x in lists):
        return None

    def tasks(ids: tuple[sg.TaskIds, ...] | None) -> frozenset[tuple[str, int]]:
        return frozenset((t.subtopology_id, p) for t in ids or () for p in t.partitions)

    return Tasks(tasks(body.active_tasks), tasks(body.standby_tasks), tasks(body.warmup_tasks))


def _task_ids(tasks: frozenset[tuple[str, int]]) -> tuple[sg.TaskIds, ...]:
    return tuple(
        sg.TaskIds(subtopology_id=s, partitions=tuple(sorted(ps)))
        for s, ps in task_map(tasks).items()
    )


def _topic_partitions(by_topic: Mapping[str, tuple[int, ...]]) -> tuple[sg.TopicPartitions, ...]:
    return tuple(sg.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items())


def _topic_info(t: InternalTopic) -> sg.TopicInfo:
    return sg.TopicInfo(
        name=t.name, partitions=t.partitions, replication_factor=t.replication_factor,
        topic_configs=tuple(sg.KeyValue(key=k, value=v) for k, v in t.configs),
    )


def _assignment(tasks: Tasks) -> sg.DescribedAssignment:
    return sg.DescribedAssignment(
        active_tasks=_task_ids(tasks.active),
        standby_tasks=_task_ids(tasks.standby),
        warmup_tasks=_task_ids(tasks.warmup),
    )


def _member(group: StreamsGroup, m: StreamsMember) -> sg.DescribedMember:
    return sg.DescribedMember(
        member_id=m.member_id,
        member_epoch=m.member_epoch,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        client_id=m.client_id,
        client_host=m.client_host,
        topology_epoch=m.topology_epoch,
        process_id=m.process_id,
        user_endpoint=(None if m.user_endpoint is None
                       else sg.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1])),
        client_tags=tuple(sg.KeyValue(key=k, value=v) for k, v in m.client_tags),
        assignment=_assignment(m.assigned),
        target_assignment=_assignment(group.target.get(m.member_id, Tasks())),
    )


def _described(group: StreamsGroup, operations: int) -> sg.DescribedStreamsGroup:
    topology = None
    if group.topology is not None:
        counts = {} if group.configured is None else group.configured.task_counts
        topology = sg.DescribedTopology(
            epoch=group.topology.epoch,
            subtopologies=tuple(
                sg.DescribedSubtopology(
                    subtopology_id=s.subtopology_id,
                    source_topics=s.source_topics,
                    repartition_sink_topics=s.repartition_sinks,
                    state_changelog_topics=tuple(
                        _topic_info(attrs.evolve(
                            t, partitions=counts.get(s.subtopology_id, t.partitions)))
                        for t in s.changelog_topics
                    ),
                    repartition_source_topics=tuple(
                        _topic_info(t) for t in s.repartition_sources
                    ),
                )
                for s in group.topology.subtopologies
            ),
        )
    return sg.DescribedStreamsGroup(
        group_id=group.group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        topology=topology,
        members=tuple(_member(group, m) for _, m in sorted(group.members.items())),
        assignor_name="sticky",
        authorized_operations=operations,
    )


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


def heartbeat_rule(
    access: Access, req: Request[sg.StreamsGroupHeartbeatRequest]
) -> Gate[sg.StreamsGroupHeartbeatRequest, sg.StreamsGroupHeartbeatResponse]:
    """READ on the group (Kafka's rule; the internal topics are the group's to make)."""
    body = req.body
    if not access.group(Operation.READ, body.group_id):
        return answer_now(req, sg.StreamsGroupHeartbeatResponse(
            error_code=GROUP_DENIED, error_message=DENIED_TEXT
        ))
    return Gate(req)


def describe_rule(
    access: Access, req: Request[sg.StreamsGroupDescribeRequest]
) -> Gate[sg.StreamsGroupDescribeRequest, sg.StreamsGroupDescribeResponse]:
    """DESCRIBE on each group; the others are answered GROUP_AUTHORIZATION_FAILED, once
    per group id."""
    return describe_each_group(
        access, req, lambda g, code: sg.DescribedStreamsGroup(group_id=g, error_code=code)
    )


def update_description_rule(
    access: Access, req: Request[sg.StreamsGroupTopologyDescriptionUpdateRequest]
) -> Gate[
    sg.StreamsGroupTopologyDescriptionUpdateRequest,
    sg.StreamsGroupTopologyDescriptionUpdateResponse,
]:
    """READ on the group, as its heartbeat."""
    body = req.body
    if not access.group(Operation.READ, body.group_id):
        return answer_now(req, sg.StreamsGroupTopologyDescriptionUpdateResponse(
            error_code=GROUP_DENIED, error_message=DENIED_TEXT
        ))
    return Gate(req)


__all__ = [
    "StreamsGroupHandlers",
    "describe_rule",
    "heartbeat_rule",
    "update_description_rule",
]
