# -*- test-case-name: tests.native.test_operator_handlers -*-
"""The operator requests' (types 7 to 14) pieces their rows in
:data:`brokerd.native.commands.COMMANDS` use: :func:`operator_document` turns an
:class:`~brokerd.operator.operations.OperatorOps` result into the answer's JSON document, the
views' :func:`~brokerd.operator.views.to_json` form (ListGroups sends one summary per
group, :func:`group_summary`, so that its size does not grow with every group's
offsets), and :func:`reset_spec` the operations' form of a reset target. Each row holds
its own call into ``OperatorOps`` and its ACL rule.

What this module does not do: touch bytes, sockets, or the core directly.
"""

from __future__ import annotations

from typing import cast

from brokerd.native.operator_messages import (
    JsonValue,
    ListGroupsRequest,
    ResetOffsetsRequest,
)
from brokerd.native.operator_messages import ResetMode as WireResetMode
from brokerd.operator.operations import ResetMode, ResetSpec
from brokerd.operator.views import GroupView, OffsetResetView, TopicView, to_json

__all__ = ["AdminResult", "group_summary", "operator_document", "reset_spec"]

#: What an admin operation answers with, before it becomes JSON.
AdminResult = TopicView | GroupView | list[GroupView] | list[OffsetResetView] | None

_MODES = {
    WireResetMode.EARLIEST: ResetMode.EARLIEST,
    WireResetMode.LATEST: ResetMode.LATEST,
    WireResetMode.OFFSET: ResetMode.OFFSET,
    WireResetMode.DATETIME: ResetMode.DATETIME,
}


def reset_spec(request: ResetOffsetsRequest) -> ResetSpec:
    """The operations' form of a ResetOffsets request's target."""
    return ResetSpec(_MODES[request.mode], request.value)


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


def operator_document(request: object, result: AdminResult) -> JsonValue:
    """The JSON document answering ``request`` with ``result`` (None: no document)."""
    if isinstance(request, ListGroupsRequest):
        return [group_summary(v) for v in cast(list[GroupView], result)]
    if result is None:
        return None
    return cast(JsonValue, to_json(result))
