# -*- test-case-name: tests.native.test_admin_handlers -*-
"""What the native protocol does with an admin request (types 7 to 14): the call into
:class:`~brokerd.admin.operations.AdminOps`, and the JSON document of its answer.

:func:`admin_call` runs one request and fires with its result (views, or None);
:func:`admin_document` turns that result into the answer's JSON document: the views'
:func:`~brokerd.admin.views.to_json` form (ListGroups sends one summary per group,
:func:`group_summary`, so that its size does not grow with every group's offsets). The
wire encoding and the ACL checks are the protocol's (``brokerd.native.protocol``,
``brokerd.native.acl_checks``).

What this module does not do: touch bytes, sockets, or the core directly.
"""

from __future__ import annotations

from typing import cast

from twisted.internet import defer

from brokerd.admin.operations import AdminOps, ResetMode, ResetSpec
from brokerd.admin.views import GroupView, OffsetResetView, TopicView, to_json
from brokerd.native.admin_messages import (
    AdminRequest,
    AlterTopicConfigsRequest,
    CreatePartitionsRequest,
    DeleteGroupRequest,
    DeleteTopicRequest,
    DescribeGroupRequest,
    DescribeTopicRequest,
    JsonValue,
    ListGroupsRequest,
    ResetOffsetsRequest,
)
from brokerd.native.admin_messages import ResetMode as WireResetMode

__all__ = ["AdminResult", "admin_call", "admin_document", "group_summary"]

#: What an admin operation answers with, before it becomes JSON.
AdminResult = TopicView | GroupView | list[GroupView] | list[OffsetResetView] | None

_MODES = {
    WireResetMode.EARLIEST: ResetMode.EARLIEST,
    WireResetMode.LATEST: ResetMode.LATEST,
    WireResetMode.OFFSET: ResetMode.OFFSET,
    WireResetMode.DATETIME: ResetMode.DATETIME,
}


def admin_call(ops: AdminOps, request: AdminRequest) -> defer.Deferred[AdminResult]:
    """Run ``request``; failures carry the operations' exceptions."""
    result: AdminResult | defer.Deferred[AdminResult]
    match request:
        case DescribeTopicRequest():
            result = ops.describe_topic(request.topic)
        case AlterTopicConfigsRequest():
            result = cast(
                defer.Deferred[AdminResult],
                ops.alter_topic_configs(request.topic, dict(request.set_configs), request.delete),
            )
        case DeleteTopicRequest():
            result = cast(defer.Deferred[AdminResult], ops.delete_topic(request.topic))
        case CreatePartitionsRequest():
            result = cast(
                defer.Deferred[AdminResult], ops.create_partitions(request.topic, request.total)
            )
        case ListGroupsRequest():
            result = ops.list_groups()
        case DescribeGroupRequest():
            result = ops.describe_group(request.group_id)
        case ResetOffsetsRequest():
            result = cast(
                defer.Deferred[AdminResult],
                ops.reset_offsets(
                    request.group_id,
                    request.topic,
                    ResetSpec(_MODES[request.mode], request.value),
                    partitions=request.partitions or None,
                    dry_run=request.dry_run,
                ),
            )
        case DeleteGroupRequest():
            result = cast(defer.Deferred[AdminResult], ops.delete_group(request.group_id))
        case _:
            raise TypeError(f"not a native admin request: {request!r}")
    if isinstance(result, defer.Deferred):
        return result
    return defer.succeed(result)


def group_summary(view: GroupView) -> dict[str, JsonValue]:
    """One group of a ListGroups answer: the :class:`GroupView` fields without the
    member and partition lists, with their counts instead (a consumer group's partitions
    are those it committed offsets of, a share group's those it has read)."""
    return {
        "group_id": view.group_id,
        "group_type": view.group_type,
        "state": view.state,
        "protocol_type": view.protocol_type,
        "protocol": view.protocol,
        "member_count": len(view.members),
        "partitions": len(view.offsets) + len(view.share_partitions),
        "total_lag": view.total_lag,
    }


def admin_document(request: AdminRequest, result: AdminResult) -> JsonValue:
    """The JSON document answering ``request`` with ``result`` (None: no document)."""
    if isinstance(request, ListGroupsRequest):
        return [group_summary(v) for v in cast(list[GroupView], result)]
    if result is None:
        return None
    return cast(JsonValue, to_json(result))
