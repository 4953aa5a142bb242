# -*- test-case-name: tests.kafka.server.handlers.test_group_admin -*-
"""Kafka consumer-group admin APIs: ListGroups, DescribeGroups, DeleteGroups and
OffsetDelete.

Each handler turns a decoded request body (:mod:`brokerd.kafka.wire.requests.apis`) into a response
message by calling the coordinator's admin part
(:class:`brokerd.kafka.groups.group_admin.GroupAdmin`, the group coordinator's ``admin``).
OffsetDelete partitions of topics that do not exist get UNKNOWN_TOPIC_OR_PARTITION here,
as Kafka answers them.

It does not parse or build bytes, keep group state, or dispatch:
:class:`~brokerd.kafka.listener.dispatch.KafkaHandlers` routes requests here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.group_admin import GroupDescription
from brokerd.kafka.server.acl_gate import (
    GROUP_DENIED,
    Access,
    Gate,
    answer_now,
    by_name,
    itself,
    keep_only,
    split_entries,
    topic_op,
)
from brokerd.kafka.server.handler_base import RequestContext
from brokerd.kafka.server.operations_fields import AuthorizedOperations
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.messages.group_admin import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    OFFSET_DELETE,
)
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import Operation

if TYPE_CHECKING:
    from brokerd.core.api import CoreApi
    from brokerd.kafka.groups.coordinator import GroupCoordinator
    from brokerd.kafka.groups.share.state_service import ShareGroups

#: ListGroups' type (and protocol type) of share groups (KIP-932).
SHARE_GROUP_TYPE = "share"
#: DescribeGroups' first version answering GROUP_ID_NOT_FOUND for an unknown group.
_DESCRIBE_NOT_FOUND_FROM = 6

#: Why a group was not deleted, by error code (DeleteGroups v3+'s per-group message;
#: ``{}`` is the group id). A code not listed gets Kafka's name for it.
_DELETION_REFUSED: Mapping[int, str] = {
    ErrorCode.GROUP_ID_NOT_FOUND: "Group {} does not exist.",
    ErrorCode.NON_EMPTY_GROUP: "Group {} still has members; only an empty group can be deleted.",
    ErrorCode.INVALID_GROUP_ID: "Group id {!r} is not a valid group id.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Not authorized to delete group {}.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The group coordinator of {} is not available.",
    ErrorCode.NOT_COORDINATOR: "This broker is not the coordinator of group {}.",
}


class GroupAdminHandlers:
    """Answers the group admin APIs.

    :param core: the broker core (topic existence for OffsetDelete).
    :param coordinator: the group coordinator; its ``admin`` is looked up per request.
    """

    def __init__(
        self,
        core: CoreApi,
        coordinator: GroupCoordinator,
        operations: AuthorizedOperations | None = None,
        share_groups: ShareGroups | None = None,
    ) -> None:
        self._core = core
        self._coordinator = coordinator
        #: Share groups (id, state) for ListGroups (``brokerd.kafka.groups.share``).
        self._share_groups = share_groups
        self._operations = operations if operations is not None else AuthorizedOperations()

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(LIST_GROUPS, self.list_groups, list_groups_rule),
            route(DESCRIBE_GROUPS, self.describe_groups, describe_groups_rule),
            route(DELETE_GROUPS, self.delete_groups, delete_groups_rule),
            route(OFFSET_DELETE, self.offset_delete, offset_delete_rule),
        )

    async def list_groups(
        self, conn: RequestContext, req: Request[apis.ListGroupsRequest]
    ) -> apis.ListGroupsResponse:
        body = req.body
        # The filters are empty before v4 and v5 (the fields' defaults), so every group is
        # listed; group_state is only on the wire from v4, group_type from v5.
        admin = self._coordinator.admin
        code, groups = admin.list_groups_with_states(body.states_filter, body.types_filter)
        listed = [
            apis.ListedGroup(
                group_id=g, protocol_type=t, group_state=s, group_type=admin.group_type(g)
            )
            for g, t, s in groups
        ]
        if self._share_groups is not None:
            types = {t.strip().lower() for t in body.types_filter}
            states = {s.strip().lower() for s in body.states_filter}
            listed.extend(
                apis.ListedGroup(
                    group_id=g, protocol_type=SHARE_GROUP_TYPE, group_state=s,
                    group_type=SHARE_GROUP_TYPE,
                )
                for g, s in self._share_groups.listing()
                if (not types or SHARE_GROUP_TYPE in types) and (not states or s.lower() in states)
            )
        return apis.ListGroupsResponse(error_code=code, groups=tuple(listed))

    async def describe_groups(
        self, conn: RequestContext, req: Request[apis.DescribeGroupsRequest]
    ) -> apis.DescribeGroupsResponse:
        body = req.body
        # v6+ (KIP-1043): a group that does not exist is GROUP_ID_NOT_FOUND, not Dead.
        described = self._coordinator.admin.describe(
            list(body.groups), req.api_version >= _DESCRIBE_NOT_FOUND_FROM, classic_only=True
        )
        # As Kafka: asked for (v3+), and only for the groups described without error.
        asked = req.api_version >= 3 and body.include_authorized_operations

        def operations(d: GroupDescription) -> int:
            if asked and d.error_code == 0:
                return self._operations.group(conn, d.group_id)
            return apis.AUTHORIZED_OPERATIONS_OMITTED

        return apis.DescribeGroupsResponse(
            groups=tuple(
                apis.DescribedGroup(
                    error_code=d.error_code,
                    error_message=d.error_message,
                    group_id=d.group_id,
                    group_state=d.state,
                    protocol_type=d.protocol_type,
                    protocol_data=d.protocol,
                    authorized_operations=operations(d),
                    members=tuple(
                        apis.DescribedGroupMember(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                        )
                        for m in d.members
                    ),
                )
                for d in described
            )
        )

    async def delete_groups(
        self, conn: RequestContext, req: Request[apis.DeleteGroupsRequest]
    ) -> apis.DeleteGroupsResponse:
        body = req.body
        names = list(body.groups_names)
        shared: dict[str, int] = {}
        if self._share_groups is not None:
            for g in names:
                code = await self._share_groups.delete(g)
                if code is not None:
                    shared[g] = code
        results: Sequence[tuple[str, int]] = await self._coordinator.admin.delete_groups(
            [g for g in names if g not in shared]
        )
        answered = dict(results)
        return apis.DeleteGroupsResponse(
            results=tuple(
                deletion_result(g, shared[g] if g in shared else answered[g])
                for g in dict.fromkeys(names)
            )
        )

    async def offset_delete(
        self, conn: RequestContext, req: Request[apis.OffsetDeleteRequest]
    ) -> apis.OffsetDeleteResponse:
        body = req.body
        if self._share_groups is not None and self._share_groups.exists(body.group_id):
            # A share group has no committed offsets (Kafka: "is not a consumer group");
            # its start offsets go through DeleteShareGroupOffsets.
            return apis.OffsetDeleteResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND)
        known = self._core.topic_registry.topics()
        codes: dict[tuple[str, int], int] = {}
        wanted: list[tuple[str, int]] = []
        for t in body.topics:
            info = known.get(t.name)
            for p in t.partitions:
                if info is None or not 0 <= p < info.partitions:
                    codes[(t.name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    wanted.append((t.name, p))
        result: tuple[int, Mapping[tuple[str, int], int]] = (
            await self._coordinator.admin.delete_offsets(body.group_id, wanted)
        )
        top, per_partition = result
        if top != ErrorCode.NONE:
            return apis.OffsetDeleteResponse(error_code=top)
        codes.update(per_partition)
        return apis.OffsetDeleteResponse(
            topics=tuple(
                apis.OffsetDeleteResponseTopic(
                    name=t.name,
                    partitions=tuple(
                        apis.OffsetDeleteResponsePartition(
                            partition_index=p,
                            error_code=codes.get((t.name, p), ErrorCode.NONE),
                        )
                        for p in t.partitions
                    ),
                )
                for t in body.topics
            )
        )


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


def list_groups_rule(
    access: Access, req: Request[apis.ListGroupsRequest]
) -> Gate[apis.ListGroupsRequest, apis.ListGroupsResponse]:
    if access.cluster(Operation.DESCRIBE):
        return Gate(req)
    return Gate(req, finish=keep_only(
        lambda r: r.groups,
        lambda r, kept: attrs.evolve(r, groups=kept),
        lambda g: access.group(Operation.DESCRIBE, g.group_id),
    ))


def describe_groups_rule(
    access: Access, req: Request[apis.DescribeGroupsRequest]
) -> Gate[apis.DescribeGroupsRequest, apis.DescribeGroupsResponse]:
    return split_entries(
        req, req.body.groups, itself,
        lambda g: None if access.group(Operation.DESCRIBE, g) else GROUP_DENIED,
        lambda g, code: apis.DescribedGroup(error_code=code, group_id=g),
        narrow=lambda kept: attrs.evolve(req.body, groups=kept),
        widen=lambda r, denied: attrs.evolve(r, groups=(*r.groups, *denied)),
    )


def delete_groups_rule(
    access: Access, req: Request[apis.DeleteGroupsRequest]
) -> Gate[apis.DeleteGroupsRequest, apis.DeleteGroupsResponse]:
    return split_entries(
        req, req.body.groups_names, itself,
        lambda g: None if access.group(Operation.DELETE, g) else GROUP_DENIED,
        deletion_result,
        narrow=lambda kept: attrs.evolve(req.body, groups_names=kept),
        widen=lambda r, denied: attrs.evolve(r, results=(*r.results, *denied)),
    )


def offset_delete_rule(
    access: Access, req: Request[apis.OffsetDeleteRequest]
) -> Gate[apis.OffsetDeleteRequest, apis.OffsetDeleteResponse]:
    body = req.body
    if not access.group(Operation.DELETE, body.group_id):
        return answer_now(req, apis.OffsetDeleteResponse(error_code=GROUP_DENIED))

    def denied(t: apis.OffsetDeleteRequestTopic, code: ErrorCode) -> apis.OffsetDeleteResponseTopic:
        return apis.OffsetDeleteResponseTopic(name=t.name, partitions=tuple(
            apis.OffsetDeleteResponsePartition(partition_index=i, error_code=code)
            for i in t.partitions
        ))

    return split_entries(
        req, body.topics, by_name, topic_op(Operation.READ, access), denied,
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )


def deletion_result(group_id: str, code: int) -> apis.DeletableGroupResult:
    """DeleteGroups' answer for one group: its code and, when it was not deleted, why
    (sent from v3, dropped on the wire before)."""
    if code == ErrorCode.NONE:
        return apis.DeletableGroupResult(group_id=group_id, error_code=code)
    template = _DELETION_REFUSED.get(code)
    if template is None:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"error {code}"
        template = "Group {} was not deleted: " + name + "."
    return apis.DeletableGroupResult(
        group_id=group_id, error_code=code, error_message=template.format(group_id)
    )
