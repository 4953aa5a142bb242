# -*- test-case-name: tests.kafka.server.handlers.test_partitions -*-
"""Kafka's partition administration: CreatePartitions, DeleteRecords and DescribeLogDirs.

Each handler turns a decoded request body (:mod:`brokerd.kafka.wire.requests.apis`) into a response
message, calling the broker core (:class:`~brokerd.core.api.CoreApi`):

- CreatePartitions grows topics, one result per topic. brokerd is a single node, so
  manual assignments must name this node alone, one entry per new partition. The new
  partitions are durable when the answer is sent; clients see them on their next
  Metadata refresh.
- DeleteRecords moves each partition's log start offset (-1: the high watermark) and
  answers the new low watermark, once the move is durable.
- DescribeLogDirs describes the one data directory: each partition's bytes on disk, an
  offset lag of 0 (there are no replicas to lag behind), never a future log, and (v4)
  the size and usable space of the filesystem it is on.

A ``timeout_ms`` above zero bounds the wait: past it the answer is REQUEST_TIMED_OUT
while the operation still completes (as Kafka's does). It does not parse or build bytes
and does not dispatch: :class:`~brokerd.kafka.listener.dispatch.KafkaHandlers` routes requests
here.
"""

from __future__ import annotations

from typing import TypeVar

import attrs
from twisted.internet import defer
from twisted.logger import Logger

from brokerd.clock import Clock
from brokerd.core.api import CoreApi
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.acl_gate import (
    CLUSTER_DENIED,
    DENIED_TEXT,
    Access,
    Gate,
    answer_now,
    by_name,
    split_entries,
    topic_op,
)
from brokerd.kafka.server.deadline import DeadlinePassed, within
from brokerd.kafka.server.handler_base import (
    BrokerIdentity,
    RequestContext,
    gather,
    message,
    repeated,
    unexpected_code,
)
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.server.throttle import THROTTLED_TEXT, QuotaEnforcer, mutation_charge
from brokerd.kafka.wire.messages.partitions import (
    CREATE_PARTITIONS,
    DELETE_RECORDS,
    DESCRIBE_LOG_DIRS,
)
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import Operation
from brokerd.storage.logdir.layout import MAX_PARTITIONS

__all__ = ["PartitionAdminHandlers"]

T = TypeVar("T")

#: The low watermark answered with a DeleteRecords error (Kafka's INVALID_LOW_WATERMARK).
INVALID_LOW_WATERMARK = -1


def _within(d: defer.Deferred[T], timeout_ms: int, clock: Clock) -> defer.Deferred[T]:
    """``d``'s result, or a :class:`DeadlinePassed` failure after ``timeout_ms`` (none
    when it is not > 0). ``d`` is not cancelled: the core still completes the operation."""
    if timeout_ms <= 0:
        return d
    return within(d, timeout_ms / 1000.0, clock, f"not done within {timeout_ms} ms")


class PartitionAdminHandlers:
    """Answers CreatePartitions, DeleteRecords and DescribeLogDirs.

    :param core: the broker core.
    :param identity: the node id that manual assignments must name.
    :param clock: for the requests' timeouts.
    """

    _log = Logger()

    def __init__(
        self, core: CoreApi, identity: BrokerIdentity, *, clock: Clock,
        quotas: QuotaEnforcer | None = None,
    ) -> None:
        self._core = core
        self._id = identity
        self._clock = clock
        self._quotas = quotas

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(CREATE_PARTITIONS, self.create_partitions, create_partitions_rule),
            route(DELETE_RECORDS, self.delete_records, delete_records_rule),
            route(DESCRIBE_LOG_DIRS, self.describe_log_dirs, describe_log_dirs_rule),
        )

    def _code(self, what: str, exc: BaseException) -> ErrorCode:
        if isinstance(exc, DeadlinePassed):
            return ErrorCode.REQUEST_TIMED_OUT
        return unexpected_code(self._log, what, exc)

    # -- CreatePartitions ------------------------------------------------------------

    async def create_partitions(
        self, conn: RequestContext, req: Request[apis.CreatePartitionsRequest]
    ) -> apis.CreatePartitionsResponse:
        body = req.body
        twice = repeated(t.name for t in body.topics)
        quota = mutation_charge(self._quotas, conn.state.principal, req.header.client_id,
                                strict=req.api_version >= 3)
        results = []
        for t in body.topics:
            if t.name in twice:
                code, text = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
            elif quota.refused():
                code, text = ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_TEXT
            else:
                before = self._core.topic_registry.topics().get(t.name)
                code, text = await self._grow(t, body.validate_only, body.timeout_ms)
                if code == 0 and before is not None and not body.validate_only:
                    quota.charge(t.count - before.partitions)
            results.append(
                apis.CreatePartitionsTopicResult(
                    name=t.name, error_code=code, error_message=text if code else None
                )
            )
        return apis.CreatePartitionsResponse(
            throttle_time_ms=quota.throttle_ms(),
            results=tuple(results))

    def _refusal(self, t: apis.CreatePartitionsTopic) -> tuple[ErrorCode, str] | None:
        info = self._core.topic_registry.topics().get(t.name)
        if info is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist."
        current = info.partitions
        if t.count == current:
            return ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
        if t.count < current:
            return ErrorCode.INVALID_PARTITIONS, (
                f"Topic currently has {current} partitions, which is higher than the "
                f"requested {t.count}."
            )
        if t.count > MAX_PARTITIONS:
            return ErrorCode.INVALID_PARTITIONS, (
                f"brokerd allows at most {MAX_PARTITIONS} partitions per topic."
            )
        if t.assignments is not None:
            added = t.count - current
            if len(t.assignments) != added:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"Increasing the number of partitions by {added} but "
                    f"{len(t.assignments)} assignments provided."
                )
            node = self._id.node_id
            if any(tuple(a.broker_ids) != (node,) for a in t.assignments):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"brokerd is a single node: each new partition's replicas must be "
                    f"[{node}]."
                )
        return None

    async def _grow(
        self, t: apis.CreatePartitionsTopic, validate_only: bool, timeout_ms: int
    ) -> tuple[ErrorCode, str]:
        refusal = self._refusal(t)
        if refusal is not None:
            return refusal
        if validate_only:
            return ErrorCode.NONE, ""
        try:
            await _within(self._core.create_partitions(t.name, t.count), timeout_ms, self._clock)
        except Exception as e:
            return self._code("create partitions", e), message(e)
        return ErrorCode.NONE, ""

    # -- DeleteRecords ---------------------------------------------------------------

    async def delete_records(
        self, conn: RequestContext, req: Request[apis.DeleteRecordsRequest]
    ) -> apis.DeleteRecordsResponse:
        body = req.body
        known = self._core.topic_registry.topics()
        # Every partition at once: each moves and persists on its own.
        flat = await gather(
            [
                self._delete_one(t.name, p, t.name in known, body.timeout_ms)
                for t in body.topics
                for p in t.partitions
            ]
        )
        topics = []
        for t in body.topics:
            mine, flat = flat[: len(t.partitions)], flat[len(t.partitions) :]
            topics.append(apis.DeleteRecordsTopicResult(name=t.name, partitions=tuple(mine)))
        return apis.DeleteRecordsResponse(topics=tuple(topics))

    async def _delete_one(
        self, topic: str, p: apis.DeleteRecordsPartition, known: bool, timeout_ms: int
    ) -> apis.DeleteRecordsPartitionResult:
        code: int = ErrorCode.NONE
        low = INVALID_LOW_WATERMARK
        if not known:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            try:
                low = await _within(
                    self._core.delete_records(topic, p.partition_index, p.offset),
                    timeout_ms,
                    self._clock,
                )
            except Exception as e:
                code = self._code("delete records", e)
        return apis.DeleteRecordsPartitionResult(
            partition_index=p.partition_index, low_watermark=low, error_code=code
        )

    # -- DescribeLogDirs -------------------------------------------------------------

    async def describe_log_dirs(
        self, conn: RequestContext, req: Request[apis.DescribeLogDirsRequest]
    ) -> apis.DescribeLogDirsResponse:
        body = req.body
        usage = self._core.storage.describe_log_dirs()
        sizes = usage.partition_sizes
        if body.topics is None:
            wanted = set(sizes)
        else:
            wanted = {
                (t.topic, p) for t in body.topics for p in t.partitions if (t.topic, p) in sizes
            }
        by_topic: dict[str, list[apis.DescribeLogDirsPartition]] = {}
        for topic, index in sorted(wanted):
            by_topic.setdefault(topic, []).append(
                apis.DescribeLogDirsPartition(
                    partition_index=index,
                    partition_size=sizes[(topic, index)],
                    offset_lag=0,
                    is_future_key=False,
                )
            )
        result = apis.DescribeLogDirsResult(
            error_code=ErrorCode.NONE,
            log_dir=usage.path,
            topics=tuple(
                apis.DescribeLogDirsTopic(name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
            total_bytes=usage.total_bytes,
            usable_bytes=usage.usable_bytes,
        )
        return apis.DescribeLogDirsResponse(results=(result,))


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


def create_partitions_rule(
    access: Access, req: Request[apis.CreatePartitionsRequest]
) -> Gate[apis.CreatePartitionsRequest, apis.CreatePartitionsResponse]:
    return split_entries(
        req, req.body.topics, by_name, topic_op(Operation.ALTER, access),
        lambda t, code: apis.CreatePartitionsTopicResult(
            name=t.name, error_code=code, error_message=DENIED_TEXT
        ),
        narrow=lambda kept: attrs.evolve(req.body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, results=(*r.results, *denied)),
    )


def delete_records_rule(
    access: Access, req: Request[apis.DeleteRecordsRequest]
) -> Gate[apis.DeleteRecordsRequest, apis.DeleteRecordsResponse]:
    def denied(t: apis.DeleteRecordsTopic, code: ErrorCode) -> apis.DeleteRecordsTopicResult:
        return apis.DeleteRecordsTopicResult(name=t.name, partitions=tuple(
            apis.DeleteRecordsPartitionResult(partition_index=p.partition_index, error_code=code)
            for p in t.partitions
        ))

    return split_entries(
        req, req.body.topics, by_name, topic_op(Operation.DELETE, access), denied,
        narrow=lambda kept: attrs.evolve(req.body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )


def describe_log_dirs_rule(
    access: Access, req: Request[apis.DescribeLogDirsRequest]
) -> Gate[apis.DescribeLogDirsRequest, apis.DescribeLogDirsResponse]:
    if access.cluster(Operation.DESCRIBE):
        return Gate(req)
    # Kafka answers no log directories, and from v3 on says why in the top-level code
    # (v1-2 have none; the field is not encoded there).
    return answer_now(
        req, apis.DescribeLogDirsResponse(error_code=CLUSTER_DENIED, results=())
    )
