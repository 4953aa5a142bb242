"""The native protocol's operator requests (types 7 to 14) and their answer.

What this module does: defines one attrs-frozen request class per operator request type,
:class:`OperatorResponse` (what a client decodes from a successful answer), the reset
modes' wire codes and the named limits of the operator requests. The layouts are in
``brokerd.native.operator_wire``; the format is specified in ``docs/protocol.md``
(section 2.8); the request types and error codes are in ``brokerd.native.messages``.

What it does not do: encode, decode, or know what the broker does with a request
(``brokerd.native.operator_handlers`` and ``brokerd.operator.operations``).
"""

from __future__ import annotations

import enum

import attrs

__all__ = [
    "MAX_OPERATOR_CONFIGS",
    "MAX_OPERATOR_REQUEST_BYTES",
    "MAX_OPERATOR_RESPONSE_BYTES",
    "OPERATOR_RESET_DRY_RUN",
    "AlterTopicConfigsRequest",
    "CreatePartitionsRequest",
    "DeleteGroupRequest",
    "DeleteTopicRequest",
    "DescribeGroupRequest",
    "DescribeTopicRequest",
    "JsonValue",
    "ListGroupsRequest",
    "OperatorRequest",
    "OperatorResponse",
    "ResetMode",
    "ResetOffsetsRequest",
]

#: An admin request's body (after ``u16 type, u32 body_len``) is at most this long; a
#: longer one is refused (REQUEST_TOO_LARGE) and its bytes skipped as they arrive.
MAX_OPERATOR_REQUEST_BYTES = 64 * 1024
#: An AlterTopicConfigs request names at most this many configs (brokerd knows fewer).
MAX_OPERATOR_CONFIGS = 256
#: The JSON document of an answer is at most this long: the server refuses to send a
#: longer one (RESPONSE_TOO_LARGE) and the client refuses to wait for one.
MAX_OPERATOR_RESPONSE_BYTES = 16 * 1024 * 1024
#: ResetOffsets' flag bit: compute and answer the new offsets, commit nothing.
OPERATOR_RESET_DRY_RUN = 0x01

#: A JSON document as ``json.loads`` returns it.
JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


class ResetMode(enum.IntEnum):
    """ResetOffsets' ``u8 mode``: where the group's offsets move to."""

    EARLIEST = 0
    LATEST = 1
    #: ``value`` is the offset (clamped to the log start offset and high watermark).
    OFFSET = 2
    #: ``value`` is a time in milliseconds since the epoch.
    DATETIME = 3


@attrs.frozen
class DescribeTopicRequest:
    """Type 7: one topic's partitions (offsets, sizes) and effective configs."""

    topic: str


@attrs.frozen
class AlterTopicConfigsRequest:
    """Type 8: set the ``set_configs`` overrides and delete the ``delete`` ones (the
    broker default applies again)."""

    topic: str
    set_configs: tuple[tuple[str, str], ...] = ()
    delete: tuple[str, ...] = ()


@attrs.frozen
class DeleteTopicRequest:
    """Type 9: delete a topic and its data."""

    topic: str


@attrs.frozen
class CreatePartitionsRequest:
    """Type 10: grow a topic to ``total`` partitions (the new total, as in Kafka)."""

    topic: str
    total: int


@attrs.frozen
class ListGroupsRequest:
    """Type 11: every consumer group, summarised."""


@attrs.frozen
class DescribeGroupRequest:
    """Type 12: one group's members, assignments, committed offsets and lag."""

    group_id: str


@attrs.frozen
class ResetOffsetsRequest:
    """Type 13: move an inactive group's committed offsets of ``topic`` (every
    partition when ``partitions`` is empty)."""

    group_id: str
    topic: str
    mode: ResetMode
    value: int = 0
    partitions: tuple[int, ...] = ()
    dry_run: bool = False


@attrs.frozen
class DeleteGroupRequest:
    """Type 14: delete an inactive group with its committed offsets."""

    group_id: str


OperatorRequest = (
    DescribeTopicRequest
    | AlterTopicConfigsRequest
    | DeleteTopicRequest
    | CreatePartitionsRequest
    | ListGroupsRequest
    | DescribeGroupRequest
    | ResetOffsetsRequest
    | DeleteGroupRequest
)


@attrs.frozen
class OperatorResponse:
    """A successful answer to an operator request (native types 7 to 14): its JSON
    document (None for the types that answer with the error code alone, DeleteTopic and
    DeleteGroup)."""

    request_type: int
    document: JsonValue = None
