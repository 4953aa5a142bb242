# -*- test-case-name: tests.native.test_queue_handlers -*-
"""What the native protocol does with a queue request (types 15 to 18).

A native queue consumer is **one member per connection** (:class:`QueueMember`): its
member id is made when the connection opens (``native-`` and 32 hex digits), every
record a queue fetch acquires on that connection is held by it, only that connection can
acknowledge those records, and when the connection closes everything it still holds is
released at once (available again, its delivery count kept). A record whose lock times
out (the group's ``share.record.lock.duration.ms``) is released by the share engine's
timer however the connection fares. There is no join, heartbeat or assignment: a native
consumer names the partition it reads, and several consumers may read one partition,
which is what a share group is for (``docs/queues.md``).

:func:`fetch_records`, :func:`acknowledge`, :func:`describe_share_group` and
:func:`list_share_groups` answer one request each against :class:`QueueOps` (the share
service and the share-group views), with the answer's bytes; their rows in
:data:`brokerd.native.commands.COMMANDS` call them and hold their ACL rules. The framing
is ``brokerd.native.queue_wire``'s.

What this module does not do: touch sockets, know Kafka's share group coordinator, or
decide record states (``brokerd.core.share`` does).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import attrs
from twisted.internet import defer
from twisted.python.failure import Failure

from brokerd.core.share.partition import AckBatch, InvalidAcknowledgement
from brokerd.core.share.service import AcquireResult, FetchResult, ShareService
from brokerd.core.share.states import AckType
from brokerd.native import queue_wire
from brokerd.native.queue_messages import (
    DescribeShareGroupRequest,
    QueueAckRequest,
    QueueFetchRequest,
    QueueRecord,
)
from brokerd.operator.errors import GroupNotFound
from brokerd.operator.share_groups import ShareGroupInspector, ShareGroupView
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.header import BATCH_HEADER_SIZE, read_header
from brokerd.storage.segment.batch_reads import MAX_DECODED_BATCH_BYTES

__all__ = [
    "QueueMember",
    "QueueOps",
    "acknowledge",
    "describe_share_group",
    "fetch_records",
    "list_share_groups",
    "records_of",
]

_ACK_TYPES = {1: AckType.ACCEPT, 2: AckType.RELEASE, 3: AckType.REJECT}


@attrs.frozen
class QueueOps:
    """What the queue requests use: the share service and the views."""

    service: ShareService
    inspector: ShareGroupInspector


class QueueMember:
    """One connection's identity in the share groups it consumes from."""

    def __init__(self, member_id: str | None = None) -> None:
        self.member_id = member_id or f"native-{uuid.uuid4().hex}"
        #: Groups this connection acquired records in (released when it closes).
        self.groups: set[str] = set()
        self.closed = False

    def release(self, service: ShareService) -> defer.Deferred[None]:
        """Give back whatever this member holds in every group it used."""
        self.closed = True
        return defer.gatherResults(
            [
                defer.Deferred.fromCoroutine(service.release_member(g, self.member_id))
                for g in sorted(self.groups)
            ],
            consumeErrors=True,
        ).addCallback(lambda _: None)


def records_of(result: AcquireResult) -> list[QueueRecord]:
    """The acquired records of ``result``, in offset order, each with its delivery
    count (the batches hold the records around them too: those are left out)."""
    counts: dict[int, int] = {}
    for r in result.ranges:
        counts.update(dict.fromkeys(range(r.first, r.last + 1), r.delivery_count))
    out: list[QueueRecord] = []
    data = result.records
    pos = 0
    while pos + BATCH_HEADER_SIZE <= len(data):
        header = read_header(data, pos)
        batch = data[pos : pos + header.size]
        pos += header.size
        if header.is_control:
            continue
        for record in decode_records(batch, max_uncompressed=MAX_DECODED_BATCH_BYTES):
            delivery = counts.get(record.offset)
            if delivery is not None:
                out.append(
                    QueueRecord(record.offset, delivery, record.key or b"", record.value or b"")
                )
    return out


def fetch_records(
    ops: QueueOps,
    member: QueueMember,
    request: QueueFetchRequest,
    max_bytes: int,
    max_wait_ms: int,
) -> defer.Deferred[bytes]:
    member.groups.add(request.group_id)
    acquiring = ops.service.fetch(
        request.group_id,
        member.member_id,
        (),
        [(request.topic, request.partition)],
        max_records=request.max_records,
        max_bytes=max_bytes,
        min_bytes=1,
        max_wait_ms=max_wait_ms,
        cancelled=lambda: member.closed,
    )
    # Cancelling the answer (the connection went away) leaves the acquisition running
    # rather than cancelling into the share service, whose waits are shared with other
    # requests of the partition; it ends soon (``cancelled`` stops its long poll), and
    # whatever it acquired for nobody is given back then.
    answer: defer.Deferred[bytes] = defer.Deferred()

    def acquired(fetched: FetchResult) -> defer.Deferred[None] | None:
        if fetched.refused is not None:
            if not answer.called:
                answer.errback(fetched.refused)
            return None
        (result,) = fetched.results
        if answer.called or member.closed:
            if result.ranges:
                return defer.Deferred.fromCoroutine(
                    ops.service.release_member(request.group_id, member.member_id)
                )
            if not answer.called:
                answer.callback(b"")
            return None
        try:
            if result.error is not None:
                raise result.error
            raw = queue_wire.encode_fetch_answer(records_of(result))
        except Exception as exc:
            answer.errback(exc)
        else:
            answer.callback(raw)
        return None

    def failed(failure: Failure) -> None:
        if not answer.called:
            answer.errback(failure)

    acquiring.addCallbacks(acquired, failed)
    return answer


async def acknowledge(ops: QueueOps, member: QueueMember, request: QueueAckRequest) -> bytes:
    batches = [AckBatch(r.first, r.last, (_ACK_TYPES[int(r.kind)],)) for r in request.ranges]
    try:
        await ops.service.acknowledge(
            request.group_id, request.topic, request.partition, member.member_id, batches
        )
    except KeyError:
        # The group never fetched from this partition: nothing of it is acquired.
        raise InvalidAcknowledgement(
            f"share group {request.group_id!r} holds nothing of {request.topic}-"
            f"{request.partition}"
        ) from None
    return queue_wire.encode_ack_answer()


def describe_share_group(
    ops: QueueOps,
    request: DescribeShareGroupRequest,
    visible: Callable[[list[ShareGroupView]], list[ShareGroupView]],
) -> bytes:
    """The DescribeShareGroup answer: the group as ``visible`` lets it be seen."""
    view = ops.inspector.group(request.group_id)
    if view is None:
        raise GroupNotFound(f"share group {request.group_id!r} is not known")
    shown = visible([view])
    view = shown[0] if shown else ShareGroupView(request.group_id)
    return queue_wire.encode_document_answer(view.to_json())  # type: ignore[arg-type]


def list_share_groups(
    ops: QueueOps, visible: Callable[[list[ShareGroupView]], list[ShareGroupView]]
) -> bytes:
    """The ListShareGroups answer: one summary per group ``visible`` shows."""
    rows = [v.summary() for v in visible(ops.inspector.groups())]
    return queue_wire.encode_document_answer(rows)  # type: ignore[arg-type]
