# -*- test-case-name: tests.test_kafka_protocol -*-
"""ListOffsets (2): the earliest or latest offset of each partition, or the first at a
timestamp; and its ACL rule.

Latest is the high watermark, or the last stable offset for read_committed (v2+; older
versions decode as read_uncommitted). Errors from the core become per-partition codes.
"""

from __future__ import annotations

from typing import Any

import attrs
from twisted.logger import Logger

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.authorize import TOPIC_DENIED, Access, Gate, by_name, split_entries
from brokerd.kafka.server.core_face import KafkaCore
from brokerd.kafka.server.handler_base import LEADER_EPOCH, Connection, unexpected_code
from brokerd.kafka.server.handler_base import gather as _gather
from brokerd.kafka.server.handlers.fetch import READ_COMMITTED
from brokerd.kafka.server.route import Route
from brokerd.kafka.wire import apis
from brokerd.kafka.wire.apis import Request
from brokerd.kafka.wire.codec import ApiKey
from brokerd.security.acl import Operation

#: ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


class ListOffsetsHandler:
    """Answers ListOffsets. One instance per listener."""

    _log = Logger()

    def __init__(self, core: KafkaCore) -> None:
        self._core = core

    def routes(self) -> tuple[Route, ...]:
        """This module's API, with its ACL rule."""
        return (Route(ApiKey.LIST_OFFSETS, self.list_offsets, list_offsets_rule),)

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        """Map ``exc``; log it when it is not one of brokerd's own errors."""
        return unexpected_code(self._log, what, exc)

    async def list_offsets(self, conn: Connection, req: Request) -> Any:
        body: apis.ListOffsetsRequest = req.body
        # v0-1 have no isolation level (it decodes as 0, read_uncommitted).
        read_committed = body.isolation_level == READ_COMMITTED
        topics = []
        for t in body.topics:
            parts = await _gather(
                [self._list_one(t.name, p, read_committed) for p in t.partitions]
            )
            topics.append(apis.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
        return apis.ListOffsetsResponse(topics=tuple(topics))

    async def _list_one(
        self, topic: str, p: apis.ListOffsetsPartition, read_committed: bool
    ) -> apis.ListOffsetsPartitionResponse:
        try:
            if p.timestamp in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
                # Latest is the last stable offset for read_committed, else the HW.
                start, latest = await self._core.list_offsets(
                    topic, p.partition_index, read_committed=read_committed
                )
                offset = latest if p.timestamp == LATEST_TIMESTAMP else start
                timestamp = -1
            else:
                found = await self._core.offset_for_timestamp(
                    topic, p.partition_index, p.timestamp
                )
                offset, timestamp = found if found is not None else (-1, -1)
        except Exception as e:
            return apis.ListOffsetsPartitionResponse(
                partition_index=p.partition_index,
                error_code=self._unexpected("list offsets", e),
            )
        return apis.ListOffsetsPartitionResponse(
            partition_index=p.partition_index,
            error_code=0,
            timestamp=timestamp,
            offset=offset,
            leader_epoch=LEADER_EPOCH,
        )


# -- ACL rule (brokerd.kafka.server.authorize) ------------------------------------------


def list_offsets_rule(access: Access, req: Request) -> Gate:
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


__all__ = ["ListOffsetsHandler", "list_offsets_rule"]
