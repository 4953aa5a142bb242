# -*- test-case-name: tests.kafka.server.handlers.test_list_offsets -*-
"""ListOffsets (2): the earliest or latest offset of each partition, the first at a
timestamp, or the record with the largest timestamp; and its ACL rule.

Latest is the high watermark, or the last stable offset for read_committed (v2+; v1
decodes as read_uncommitted); a timestamp lookup, as Kafka's, answers no offset for a
record at or past that offset. brokerd keeps no tiered storage, so the earliest local
offset (v8) is the log start offset, and the latest tiered offset (v9) and the earliest
offset pending upload (v11) are answered as Kafka answers them for a topic without
tiered storage: no offset (-1), no error. Each special timestamp is refused
(UNSUPPORTED_VERSION) below the version that introduced it, a partition named twice is
INVALID_REQUEST, and errors from the core become per-partition codes. The v10 timeout
(for remote storage lookups) has nothing to bound: every answer is local.
"""

from __future__ import annotations

from collections import Counter

import attrs
from twisted.logger import Logger

from brokerd.core.api import CoreApi
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.acl_gate import TOPIC_DENIED, Access, Gate, by_name, split_entries
from brokerd.kafka.server.handler_base import LEADER_EPOCH, RequestContext, unexpected_code
from brokerd.kafka.server.handler_base import gather as _gather
from brokerd.kafka.server.internal_topics import InternalTopics
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.messages.list_offsets import LIST_OFFSETS
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import Operation
from brokerd.storage.types import Isolation

#: ListOffsets special timestamps (Kafka's ``ListOffsetsRequest``).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
#: The first request version that may carry each special timestamp; any other negative
#: timestamp is refused at every version.
SPECIAL_SINCE = {
    LATEST_TIMESTAMP: 1,
    EARLIEST_TIMESTAMP: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11,
}
#: What "no offset" is in an answer (Kafka's UNKNOWN_OFFSET / UNKNOWN_TIMESTAMP / epoch).
NO_OFFSET = -1


def timestamp_refused(timestamp: int, version: int) -> bool:
    """True when ``timestamp`` is a special one ``version`` does not know (or none)."""
    return timestamp < 0 and version < SPECIAL_SINCE.get(timestamp, 0x7FFF)


class ListOffsetsHandler:
    """Answers ListOffsets. One instance per listener."""

    _log = Logger()

    def __init__(self, core: CoreApi, internal_topics: InternalTopics | None = None) -> None:
        self._core = core
        self._internal = internal_topics

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's API, with its ACL rule."""
        return (route(LIST_OFFSETS, self.list_offsets, list_offsets_rule),)

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        """Map ``exc``; log it when it is not one of brokerd's own errors."""
        return unexpected_code(self._log, what, exc)

    async def list_offsets(
        self, conn: RequestContext, req: Request[apis.ListOffsetsRequest]
    ) -> apis.ListOffsetsResponse:
        body = req.body
        # v1 has no isolation level (it decodes as 0, read_uncommitted).
        read_committed = body.isolation_level == Isolation.READ_COMMITTED
        named = Counter((t.name, p.partition_index) for t in body.topics for p in t.partitions)
        topics = []
        for t in body.topics:
            parts = await _gather(
                [
                    self._refused(p, ErrorCode.INVALID_REQUEST)
                    if named[(t.name, p.partition_index)] > 1
                    else self._refused(p, ErrorCode.UNSUPPORTED_VERSION)
                    if timestamp_refused(p.timestamp, req.api_version)
                    else self._list_one(t.name, p, read_committed)
                    for p in t.partitions
                ]
            )
            topics.append(apis.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
        return apis.ListOffsetsResponse(topics=tuple(topics))

    @staticmethod
    async def _refused(
        p: apis.ListOffsetsPartition, code: ErrorCode
    ) -> apis.ListOffsetsPartitionResponse:
        return apis.ListOffsetsPartitionResponse(
            partition_index=p.partition_index, error_code=code
        )

    async def _list_one(
        self, topic: str, p: apis.ListOffsetsPartition, read_committed: bool
    ) -> apis.ListOffsetsPartitionResponse:
        log = None if self._internal is None else self._internal.readable(topic)
        if log is not None:
            return _internal_offsets(log.bounds(p.partition_index), p)
        try:
            # Also the partition's existence check, whatever the timestamp.
            start, latest = await self._core.reads.list_offsets(
                topic, p.partition_index, read_committed=read_committed
            )
            found = await self._lookup(topic, p, start, latest)
        except Exception as e:
            return apis.ListOffsetsPartitionResponse(
                partition_index=p.partition_index,
                error_code=self._unexpected("list offsets", e),
            )
        if found is None:
            return apis.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, leader_epoch=NO_OFFSET
            )
        offset, timestamp = found
        return apis.ListOffsetsPartitionResponse(
            partition_index=p.partition_index,
            error_code=0,
            timestamp=timestamp,
            offset=offset,
            leader_epoch=LEADER_EPOCH,
        )

    async def _lookup(
        self, topic: str, p: apis.ListOffsetsPartition, start: int, latest: int
    ) -> tuple[int, int] | None:
        """``(offset, timestamp)`` for ``p``'s timestamp, or None for no offset. ``latest``
        is the first offset the request may not see (HW, or LSO for read_committed)."""
        ts = p.timestamp
        if ts == LATEST_TIMESTAMP:
            return latest, NO_OFFSET
        if ts in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            # No tiered storage: the local log starts where the log does.
            return start, NO_OFFSET
        if ts in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return None  # nothing is tiered, nothing is pending upload
        if ts == MAX_TIMESTAMP:
            found = await self._core.reads.max_timestamp_offset(topic, p.partition_index)
        else:
            found = await self._core.reads.offset_for_timestamp(topic, p.partition_index, ts)
        if found is None or found[0] >= latest:
            return None
        return found


def _internal_offsets(
    bounds: tuple[int, int] | None, p: apis.ListOffsetsPartition
) -> apis.ListOffsetsPartitionResponse:
    """A readable internal topic's partition: its start and end; a lookup by
    timestamp finds no offset (its records are not indexed by time)."""
    if bounds is None:
        return apis.ListOffsetsPartitionResponse(
            partition_index=p.partition_index,
            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )
    start, end = bounds
    offset = {
        LATEST_TIMESTAMP: end, EARLIEST_TIMESTAMP: start, EARLIEST_LOCAL_TIMESTAMP: start,
    }.get(p.timestamp)
    if offset is None:
        return apis.ListOffsetsPartitionResponse(
            partition_index=p.partition_index, leader_epoch=NO_OFFSET
        )
    return apis.ListOffsetsPartitionResponse(
        partition_index=p.partition_index, error_code=0, timestamp=NO_OFFSET,
        offset=offset, leader_epoch=LEADER_EPOCH,
    )


# -- ACL rule (brokerd.kafka.server.acl_gate) ------------------------------------------


def list_offsets_rule(
    access: Access, req: Request[apis.ListOffsetsRequest]
) -> Gate[apis.ListOffsetsRequest, apis.ListOffsetsResponse]:
    def denied(t: apis.ListOffsetsTopic, code: ErrorCode) -> apis.ListOffsetsTopicResponse:
        return apis.ListOffsetsTopicResponse(name=t.name, partitions=tuple(
            apis.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code)
            for p in t.partitions
        ))

    def error(name: str) -> ErrorCode | None:
        return None if access.topic(Operation.DESCRIBE, name) else TOPIC_DENIED

    return split_entries(
        req, req.body.topics, by_name, error, denied,
        narrow=lambda kept: attrs.evolve(req.body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )


__all__ = ["ListOffsetsHandler", "list_offsets_rule", "timestamp_refused"]
