# -*- test-case-name: tests.native.test_commands -*-
"""Every native request type, declared once: :data:`COMMANDS`.

What this module does: holds one :class:`NativeCommand` row per request type, as AMP's
``Command`` declares a command's arguments, response and responder together. A row
says which message class the decoder makes for the type (its byte layout is the
``wire`` table's, or the admin and queue body codecs'), what the broker does for it
(``respond``: the core, admin or share-group call), how the answer is encoded (the
server's half; the client's decoder lives in ``client_codec``), which ACL rule it
obeys (``authorize``, and ``visible`` for answers filtered to what the principal may
see), and whether a connection keeps reading while it is parked (``parks``). The
connection (``protocol``) looks the row up by the request's class and calls
:meth:`NativeCommand.run`: one dispatch, typed per row.

What it does not do: decode or frame bytes (the codecs do), hold connection state
(:class:`NativeContext` is built per request by the connection), or define the ACL
primitives (``acl_checks``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import attrs
from twisted.internet import defer

from brokerd.core.api import CoreApi
from brokerd.native import operator_wire, server_codec
from brokerd.native.acl_checks import NativeAccess
from brokerd.native.batch_framing import FramedValues, frame_batches, raw_fetch_budget
from brokerd.native.messages import (
    CreateTopicRequest,
    FetchRequest,
    ListOffsetsRequest,
    ListTopicsRequest,
    LongPollFetchRequest,
    ProduceRequest,
    RequestType,
)
from brokerd.native.operator_handlers import operator_document, reset_spec
from brokerd.native.operator_messages import (
    AlterTopicConfigsRequest,
    CreatePartitionsRequest,
    DeleteGroupRequest,
    DeleteTopicRequest,
    DescribeGroupRequest,
    DescribeTopicRequest,
    ListGroupsRequest,
    ResetOffsetsRequest,
)
from brokerd.native.queue_handlers import (
    QueueMember,
    QueueOps,
    acknowledge,
    describe_share_group,
    fetch_records,
    list_share_groups,
)
from brokerd.native.queue_messages import (
    DescribeShareGroupRequest,
    ListShareGroupsRequest,
    QueueAckRequest,
    QueueFetchRequest,
)
from brokerd.native.wire import REQUEST_LAYOUTS, RequestLayout
from brokerd.operator.errors import OperatorUnavailable
from brokerd.operator.operations import OperatorOps
from brokerd.operator.share_groups import ShareGroupView
from brokerd.operator.views import GroupView, OffsetResetView, TopicView
from brokerd.security.acl import Operation
from brokerd.storage.types import (
    COMMITTED_BATCHES,
    COMMITTED_RECORDS,
    AppendInfo,
    LogRead,
    TopicInfo,
)

__all__ = [
    "COMMANDS",
    "MAX_LONG_POLL_WAIT_MS",
    "NativeCommand",
    "NativeContext",
    "authorize",
]

#: A long poll waits at most this long whatever the client asks, so a parked request
#: cannot outlive every timeout (the idle timeout never fires while one is in flight).
MAX_LONG_POLL_WAIT_MS = 300_000

Req = TypeVar("Req")
Res = TypeVar("Res")


@attrs.frozen
class NativeContext:
    """What a command may use for one request of one connection."""

    core: CoreApi
    max_fetch_bytes: int
    #: The connection as a share-group member (queue fetches acquire for it).
    member: QueueMember
    operator_ops: OperatorOps | None = None
    queue_ops: QueueOps | None = None
    #: The ACL view of the connection's principal; None: ACLs are off.
    access: NativeAccess | None = None

    @property
    def operator(self) -> OperatorOps:
        if self.operator_ops is None:
            raise OperatorUnavailable("this listener does not serve operator requests")
        return self.operator_ops

    @property
    def queues(self) -> QueueOps:
        if self.queue_ops is None:
            raise OperatorUnavailable("this listener does not serve share groups")
        return self.queue_ops


@attrs.frozen
class NativeCommand(Generic[Req, Res]):
    """One request type: its message, its responder, its answer and its rules."""

    request_type: RequestType
    #: The message class the decoder builds for this type.
    message: type[Req]
    #: The broker's work: the result, or a Deferred of it.
    respond: Callable[[NativeContext, Req], Res | defer.Deferred[Res]]
    #: The server's answer bytes for that result.
    answer: Callable[[Req, Res], bytes]
    #: Raises :class:`~brokerd.errors.AuthorizationFailed` (or the group form) unless the
    #: principal may make this request.
    authorize: Callable[[NativeAccess, Req], None]
    #: The result as the principal may see it (listings filtered by DESCRIBE).
    visible: Callable[[NativeAccess, Res], Res] | None = None
    #: Parks in the broker (a long poll): the connection keeps reading a little so a
    #: client that goes away is noticed at once.
    parks: bool = False

    @property
    def layout(self) -> RequestLayout | None:
        """Its bytes after the ``u16 type``: its row of the wire table, which the
        decoder and the request encoder walk; None for the admin and queue types, framed
        as ``u32 body_len, body`` (``operator_wire``, ``queue_wire``)."""
        return REQUEST_LAYOUTS.get(self.request_type)

    def run(
        self, context: NativeContext, request: object, seen: Callable[[object], None]
    ) -> defer.Deferred[bytes]:
        """Authorize, respond and encode ``request``; ``seen`` gets the result before it
        is encoded (the metrics count records there)."""
        if not isinstance(request, self.message):
            raise TypeError(f"{request!r} is not a {self.message.__name__}")
        access = context.access
        if access is not None:
            self.authorize(access, request)
        try:
            result = self.respond(context, request)
        except Exception:
            return defer.fail()
        d: defer.Deferred[Res] = (
            result if isinstance(result, defer.Deferred) else defer.succeed(result)
        )
        visible = self.visible
        if access is not None and visible is not None:
            d.addCallback(lambda result: visible(access, result))

        def encoded(result: Res) -> bytes:
            seen(result)
            return self.answer(request, result)

        return d.addCallback(encoded)


# --------------------------------------------------------------------------- responders


def _fetch(context: NativeContext, request: FetchRequest) -> defer.Deferred[FramedValues | LogRead]:
    """A type-2 Fetch: the committed batches as stored, framed in one pass
    (:mod:`brokerd.native.batch_framing`); a read whose batches need the transaction state
    or the decoder (compressed, transactional, compacted, aborted data) is read again as
    decoded records."""
    core = context.core
    max_bytes = context.max_fetch_bytes
    topic, partition, offset = request.topic, request.partition, request.offset

    async def fetch() -> FramedValues | LogRead:
        budget = raw_fetch_budget(max_bytes)
        read = core.reads.read(topic, partition, offset, budget, COMMITTED_BATCHES)
        if not isinstance(read, LogRead):
            read = await read
        data = read.records
        if isinstance(data, bytes) and not read.aborted:
            framed = frame_batches(data, offset, max_bytes)
            if framed is not None and (framed.count or not data):
                return framed
        decoded = core.reads.read(topic, partition, offset, max_bytes, COMMITTED_RECORDS)
        return decoded if isinstance(decoded, LogRead) else await decoded

    return defer.ensureDeferred(fetch())


def _fetch_answer(_request: FetchRequest, result: FramedValues | LogRead) -> bytes:
    if isinstance(result, FramedValues):
        return server_codec.encode_framed_fetch_response(result)
    return server_codec.encode_fetch_response([r.value for r in result.decoded])


def _long_poll(context: NativeContext, request: LongPollFetchRequest) -> defer.Deferred[LogRead]:
    return context.core.wait_records(
        request.topic,
        request.partition,
        request.offset,
        max_value_bytes=min(request.max_bytes, context.max_fetch_bytes),
        min_bytes=request.min_bytes,
        max_wait_ms=min(request.max_wait_ms, MAX_LONG_POLL_WAIT_MS),
    )


def _long_poll_answer(_request: LongPollFetchRequest, found: LogRead) -> bytes:
    return server_codec.encode_long_poll_fetch_response(
        found.high_watermark, [(r.offset, r.value) for r in found.decoded]
    )


def _offsets_answer(_request: ListOffsetsRequest, offsets: tuple[int, int]) -> bytes:
    log_start, latest = offsets
    return server_codec.encode_list_offsets_response(log_start, latest)


def _topics_answer(_request: ListTopicsRequest, topics: Iterable[TopicInfo]) -> bytes:
    return server_codec.encode_list_topics_response(
        (t.name, t.partitions) for t in sorted(topics, key=lambda t: t.name)
    )


def _queue_fetch(context: NativeContext, request: QueueFetchRequest) -> defer.Deferred[bytes]:
    return fetch_records(
        context.queues, context.member, request, context.max_fetch_bytes,
        min(request.max_wait_ms, MAX_LONG_POLL_WAIT_MS),
    )


def _share_groups_filter(
    context: NativeContext,
) -> Callable[[list[ShareGroupView]], list[ShareGroupView]]:
    """What the share-group answers may show: the principal's DESCRIBE filter, or all."""
    access = context.access
    if access is None:
        return lambda groups: groups
    return access.visible_share_groups


def _admin_answer(request_type: RequestType) -> Callable[[object, Any], bytes]:
    def answer(request: object, result: Any) -> bytes:
        return operator_wire.encode_answer(request_type, operator_document(request, result))

    return answer


def _as_is(_request: object, answer: bytes) -> bytes:
    """The queue responders encode their own answers."""
    return answer


# --------------------------------------------------------------------------- ACL rules


def _allow(_access: NativeAccess, _request: object) -> None:
    """Always allowed: the answer is filtered instead (``visible``)."""


def _read_topic(access: NativeAccess, request: Any) -> None:
    access.require_topic(Operation.READ, request.topic)


def _describe_topic(access: NativeAccess, request: Any) -> None:
    access.require_topic(Operation.DESCRIBE, request.topic)


def _read_group_and_topic(access: NativeAccess, request: Any) -> None:
    # Kafka's ShareFetch, ShareAcknowledge and offset reset rule: READ on both.
    access.require_group(Operation.READ, request.group_id)
    access.require_topic(Operation.READ, request.topic)


def _describe_group(access: NativeAccess, request: Any) -> None:
    access.require_group(Operation.DESCRIBE, request.group_id)


def _delete_group(access: NativeAccess, request: DeleteGroupRequest) -> None:
    access.require_group(Operation.DELETE, request.group_id)


def _produce_allowed(access: NativeAccess, request: ProduceRequest) -> None:
    access.require_produce(request.topic)


def _create_allowed(access: NativeAccess, request: CreateTopicRequest) -> None:
    access.require_create(request.topic)


def _topic_op(op: Operation) -> Callable[[NativeAccess, Any], None]:
    def check(access: NativeAccess, request: Any) -> None:
        access.require_topic(op, request.topic)

    return check


# --------------------------------------------------------------------------- the table

_ROWS: tuple[NativeCommand[Any, Any], ...] = (
    NativeCommand[ProduceRequest, AppendInfo](
        RequestType.PRODUCE,
        ProduceRequest,
        lambda c, r: c.core.produce_values(r.topic, r.partition, list(r.values)),
        lambda _r, info: server_codec.encode_produce_response(info.base_offset),
        _produce_allowed,
    ),
    NativeCommand[FetchRequest, FramedValues | LogRead](
        RequestType.FETCH, FetchRequest, _fetch, _fetch_answer, _read_topic
    ),
    NativeCommand[CreateTopicRequest, object](
        RequestType.CREATE_TOPIC,
        CreateTopicRequest,
        lambda c, r: c.core.create_topic(r.topic, r.partitions),
        lambda _r, _result: server_codec.encode_create_topic_response(),
        _create_allowed,
    ),
    NativeCommand[ListOffsetsRequest, tuple[int, int]](
        RequestType.LIST_OFFSETS,
        ListOffsetsRequest,
        # The native fetch reads committed data only: "latest" is the LSO.
        lambda c, r: c.core.reads.list_offsets(r.topic, r.partition, read_committed=True),
        _offsets_answer,
        _describe_topic,
    ),
    NativeCommand[ListTopicsRequest, list[TopicInfo]](
        RequestType.LIST_TOPICS,
        ListTopicsRequest,
        lambda c, _r: c.core.topic_registry.list_topics(),
        _topics_answer,
        _allow,
        visible=lambda access, topics: access.visible(topics),
    ),
    NativeCommand[LongPollFetchRequest, LogRead](
        RequestType.LONG_POLL_FETCH,
        LongPollFetchRequest,
        _long_poll,
        _long_poll_answer,
        _read_topic,
        parks=True,
    ),
    NativeCommand[DescribeTopicRequest, TopicView](
        RequestType.DESCRIBE_TOPIC,
        DescribeTopicRequest,
        lambda c, r: c.operator.describe_topic(r.topic),
        _admin_answer(RequestType.DESCRIBE_TOPIC),
        _describe_topic,
    ),
    NativeCommand[AlterTopicConfigsRequest, TopicView](
        RequestType.ALTER_TOPIC_CONFIGS,
        AlterTopicConfigsRequest,
        lambda c, r: c.operator.alter_topic_configs(r.topic, dict(r.set_configs), r.delete),
        _admin_answer(RequestType.ALTER_TOPIC_CONFIGS),
        _topic_op(Operation.ALTER_CONFIGS),
    ),
    NativeCommand[DeleteTopicRequest, None](
        RequestType.DELETE_TOPIC,
        DeleteTopicRequest,
        lambda c, r: c.operator.delete_topic(r.topic),
        _admin_answer(RequestType.DELETE_TOPIC),
        _topic_op(Operation.DELETE),
    ),
    NativeCommand[CreatePartitionsRequest, TopicView](
        RequestType.CREATE_PARTITIONS,
        CreatePartitionsRequest,
        lambda c, r: c.operator.create_partitions(r.topic, r.total),
        _admin_answer(RequestType.CREATE_PARTITIONS),
        _topic_op(Operation.ALTER),
    ),
    NativeCommand[ListGroupsRequest, list[GroupView]](
        RequestType.LIST_GROUPS,
        ListGroupsRequest,
        lambda c, _r: c.operator.list_groups(),
        _admin_answer(RequestType.LIST_GROUPS),
        _allow,
        visible=lambda access, groups: access.visible_groups(groups),
    ),
    NativeCommand[DescribeGroupRequest, GroupView](
        RequestType.DESCRIBE_GROUP,
        DescribeGroupRequest,
        lambda c, r: c.operator.describe_group(r.group_id),
        _admin_answer(RequestType.DESCRIBE_GROUP),
        _describe_group,
        visible=lambda access, group: access.visible_group(group),
    ),
    NativeCommand[ResetOffsetsRequest, list[OffsetResetView]](
        RequestType.RESET_OFFSETS,
        ResetOffsetsRequest,
        lambda c, r: c.operator.reset_offsets(
            r.group_id,
            r.topic,
            reset_spec(r),
            partitions=r.partitions or None,
            dry_run=r.dry_run,
        ),
        _admin_answer(RequestType.RESET_OFFSETS),
        _read_group_and_topic,
    ),
    NativeCommand[DeleteGroupRequest, None](
        RequestType.DELETE_GROUP,
        DeleteGroupRequest,
        lambda c, r: c.operator.delete_group(r.group_id),
        _admin_answer(RequestType.DELETE_GROUP),
        _delete_group,
    ),
    NativeCommand[QueueFetchRequest, bytes](
        RequestType.QUEUE_FETCH,
        QueueFetchRequest,
        _queue_fetch,
        _as_is,
        _read_group_and_topic,
        parks=True,
    ),
    NativeCommand[QueueAckRequest, bytes](
        RequestType.QUEUE_ACKNOWLEDGE,
        QueueAckRequest,
        lambda c, r: defer.Deferred.fromCoroutine(acknowledge(c.queues, c.member, r)),
        _as_is,
        _read_group_and_topic,
    ),
    NativeCommand[DescribeShareGroupRequest, bytes](
        RequestType.DESCRIBE_SHARE_GROUP,
        DescribeShareGroupRequest,
        lambda c, r: describe_share_group(c.queues, r, _share_groups_filter(c)),
        _as_is,
        _describe_group,
    ),
    NativeCommand[ListShareGroupsRequest, bytes](
        RequestType.LIST_SHARE_GROUPS,
        ListShareGroupsRequest,
        lambda c, _r: list_share_groups(c.queues, _share_groups_filter(c)),
        _as_is,
        _allow,
    ),
)

#: Every native request type's row, by the message class its decoder builds.
COMMANDS: dict[type, NativeCommand[Any, Any]] = {row.message: row for row in _ROWS}


def authorize(access: NativeAccess, request: object) -> None:
    """Apply ``request``'s ACL rule (its row's ``authorize``); an unknown message is
    refused."""
    command = COMMANDS.get(type(request))
    if command is None:
        access.refuse()
    else:
        command.authorize(access, request)
