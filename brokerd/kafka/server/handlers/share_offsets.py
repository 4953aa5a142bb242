# -*- test-case-name: tests.kafka.server.handlers.test_share_offsets -*-
"""Kafka share group offsets APIs (KIP-932): DescribeShareGroupOffsets,
AlterShareGroupOffsets and DeleteShareGroupOffsets, each handler next to its ACL rule.

A share group's "offset" for a partition is its share-partition start offset (SPSO).
Describe answers it with the lag (v1); alter sets it (the group must have no members, as
Kafka requires: NON_EMPTY_GROUP otherwise), forgetting the records in flight; delete
forgets the group's state for whole topics (then ``share.auto.offset.reset`` applies
again). Changes are durable in the share-state journal before the answer. ACLs as
Kafka: DESCRIBE on the group and the topics for describe, READ for alter and delete.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import attrs

from brokerd.core.api import CoreTopics
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.share.state_service import ShareGroups
from brokerd.kafka.server.acl_gate import (
    GROUP_DENIED,
    TOPIC_DENIED,
    Access,
    Gate,
    answer_now,
    topic_check,
)
from brokerd.kafka.server.handler_base import Outcome, RequestContext
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.messages import share_offsets as m
from brokerd.kafka.wire.messages.share_offsets import (
    ALTER_SHARE_GROUP_OFFSETS,
    DELETE_SHARE_GROUP_OFFSETS,
    DESCRIBE_SHARE_GROUP_OFFSETS,
)
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import Operation

__all__ = ["ShareOffsetHandlers"]


class ShareOffsetHandlers:
    """:param classic_group: whether an id is a classic or consumer group's (such an id
    is no share group's, and alter does not make it one)."""

    def __init__(
        self,
        core: CoreTopics,
        shares: ShareGroups | None,
        *,
        classic_group: Callable[[str], bool] | None = None,
    ) -> None:
        self._core = core
        self._shares = shares
        self._classic_group = classic_group

    def routes(self) -> tuple[AnyRoute, ...]:
        # Without share groups (a listener built without them) each API answers
        # UNSUPPORTED_VERSION, as Kafka does with share groups disabled.
        return (
            route(DESCRIBE_SHARE_GROUP_OFFSETS, self.describe, describe_rule),
            route(ALTER_SHARE_GROUP_OFFSETS, self.alter, alter_rule),
            route(DELETE_SHARE_GROUP_OFFSETS, self.delete, delete_rule),
        )

    @property
    def _s(self) -> ShareGroups:
        assert self._shares is not None
        return self._shares

    def _known(self, group: str) -> bool:
        return group in self._s.coordinator.groups or group in self._s.service.engine.groups()

    async def describe(
        self, conn: RequestContext, req: Request[m.DescribeShareGroupOffsetsRequest]
    ) -> m.DescribeShareGroupOffsetsResponse:
        if self._shares is None:
            return m.DescribeShareGroupOffsetsResponse(
                groups=tuple(
                    m.DescribedShareOffsetsGroup(
                        group_id=g.group_id, error_code=ErrorCode.UNSUPPORTED_VERSION
                    )
                    for g in distinct_groups(req.body.groups)
                )
            )
        body = req.body
        service = self._s.service
        topics = self._core.topics()
        out = []
        for g in distinct_groups(body.groups):
            if not self._known(g.group_id):
                out.append(
                    m.DescribedShareOffsetsGroup(
                        group_id=g.group_id,
                        error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                        error_message=f"Group {g.group_id} not found.",
                    )
                )
                continue
            wanted: dict[str, list[int]] = {}
            if g.topics is None:
                for topic, p in sorted(service.engine.partitions(g.group_id)):
                    wanted.setdefault(topic, []).append(p)
            else:
                for t in g.topics:
                    wanted.setdefault(t.topic_name, []).extend(t.partitions)
            described = []
            for topic, parts in wanted.items():
                info = topics.get(topic)
                rows = []
                for p in parts:
                    if info is None or not 0 <= p < info.partitions:
                        rows.append(
                            m.DescribedShareOffsetsPartition(
                                partition_index=p,
                                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            )
                        )
                        continue
                    start, lag = await service.start_and_lag(g.group_id, topic, p)
                    rows.append(
                        m.DescribedShareOffsetsPartition(
                            partition_index=p,
                            start_offset=start,
                            leader_epoch=0 if start >= 0 else -1,
                            lag=lag,
                        )
                    )
                described.append(
                    m.DescribedShareOffsetsTopic(
                        topic_name=topic,
                        topic_id=info.topic_id if info is not None else m.ZERO_UUID,
                        partitions=tuple(rows),
                    )
                )
            out.append(m.DescribedShareOffsetsGroup(group_id=g.group_id, topics=tuple(described)))
        return m.DescribeShareGroupOffsetsResponse(groups=tuple(out))

    def _refusal(self, group: str) -> tuple[int, str] | None:
        if not self._known(group):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group} not found."
        found = self._s.coordinator.groups.get(group)
        if found is not None and found.members:
            return ErrorCode.NON_EMPTY_GROUP, "The group is not empty."
        return None

    def _alter_refusal(self, group: str) -> tuple[int, str] | None:
        """As :meth:`_refusal`, except that a share group that does not exist yet is
        created by the alter (Kafka 4.4: offsets may be set before the first member
        joins), unless the id is a classic or consumer group's."""
        if self._known(group):
            return self._refusal(group)
        if not group:
            return ErrorCode.INVALID_GROUP_ID, "The group id may not be empty."
        if self._classic_group is not None and self._classic_group(group):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group} is not a share group."
        return None

    async def alter(
        self, conn: RequestContext, req: Request[m.AlterShareGroupOffsetsRequest]
    ) -> m.AlterShareGroupOffsetsResponse:
        if self._shares is None:
            return m.AlterShareGroupOffsetsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        body = req.body
        refused = self._alter_refusal(body.group_id)
        if refused is not None:
            return m.AlterShareGroupOffsetsResponse(error_code=refused[0], error_message=refused[1])
        topics = self._core.topics()
        out = []
        for t in body.topics:
            info = topics.get(t.topic_name)
            rows = []
            for p in t.partitions:
                code = 0
                if info is None or not 0 <= p.partition_index < info.partitions:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.start_offset < 0:
                    code = ErrorCode.INVALID_REQUEST
                else:
                    await self._s.service.set_start(
                        body.group_id, t.topic_name, p.partition_index, p.start_offset
                    )
                rows.append(
                    m.AlteredShareOffsetsPartition(
                        partition_index=p.partition_index,
                        error_code=code,
                    )
                )
            out.append(
                m.AlteredShareOffsetsTopic(
                    topic_name=t.topic_name,
                    topic_id=info.topic_id if info is not None else m.ZERO_UUID,
                    partitions=tuple(rows),
                )
            )
        return m.AlterShareGroupOffsetsResponse(responses=tuple(out))

    async def delete(
        self, conn: RequestContext, req: Request[m.DeleteShareGroupOffsetsRequest]
    ) -> m.DeleteShareGroupOffsetsResponse:
        if self._shares is None:
            return m.DeleteShareGroupOffsetsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        body = req.body
        refused = self._refusal(body.group_id)
        if refused is not None:
            return m.DeleteShareGroupOffsetsResponse(
                error_code=refused[0], error_message=refused[1]
            )
        topics = self._core.topics()
        held = self._s.service.engine.partitions(body.group_id)
        out = []
        for t in body.topics:
            info = topics.get(t.topic_name)
            if info is None:
                out.append(
                    m.DeletedShareOffsetsTopic(
                        topic_name=t.topic_name,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    )
                )
                continue
            for topic, p in sorted(held):
                if topic == t.topic_name:
                    await self._s.service.delete_partition(body.group_id, topic, p)
            out.append(m.DeletedShareOffsetsTopic(topic_name=t.topic_name, topic_id=info.topic_id))
        return m.DeleteShareGroupOffsetsResponse(responses=tuple(out))


# -- ACL rules -----------------------------------------------------------------------


def describe_rule(
    access: Access, req: Request[m.DescribeShareGroupOffsetsRequest]
) -> Gate[m.DescribeShareGroupOffsetsRequest, m.DescribeShareGroupOffsetsResponse]:
    """DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED once per group id otherwise)
    and on each topic: a topic named and refused gets TOPIC_AUTHORIZATION_FAILED on each
    partition named; of a group's every topic (topics null) only those the principal may
    DESCRIBE are listed, as Kafka does."""
    body = req.body
    may_describe = topic_check(access, Operation.DESCRIBE)
    groups = distinct_groups(body.groups)
    denied = tuple(
        g.group_id for g in groups if not access.group(Operation.DESCRIBE, g.group_id)
    )
    kept = []
    denied_topics: dict[str, tuple[m.DescribeShareOffsetsTopic, ...]] = {}
    for g in groups:
        if g.group_id in denied:
            continue
        if g.topics is not None:
            denied_topics[g.group_id] = tuple(
                t for t in g.topics if not may_describe(t.topic_name)
            )
            g = attrs.evolve(g, topics=tuple(t for t in g.topics if may_describe(t.topic_name)))
        kept.append(g)

    def finish(
        r: m.DescribeShareGroupOffsetsResponse | Outcome,
    ) -> m.DescribeShareGroupOffsetsResponse | Outcome:
        if isinstance(r, Outcome):
            return r
        answered = []
        for g in r.groups:
            refused = tuple(
                m.DescribedShareOffsetsTopic(
                    topic_name=t.topic_name,
                    partitions=tuple(
                        m.DescribedShareOffsetsPartition(partition_index=p, error_code=TOPIC_DENIED)
                        for p in t.partitions
                    ),
                )
                for t in denied_topics.get(g.group_id, ())
            )
            shown = tuple(t for t in g.topics if may_describe(t.topic_name))
            answered.append(attrs.evolve(g, topics=(*shown, *refused)))
        answered.extend(
            m.DescribedShareOffsetsGroup(group_id=gid, error_code=GROUP_DENIED) for gid in denied
        )
        return attrs.evolve(r, groups=tuple(answered))

    return Gate(attrs.evolve(req, body=attrs.evolve(body, groups=tuple(kept))), finish=finish)


def distinct_groups(
    groups: Iterable[m.DescribeShareOffsetsGroup],
) -> tuple[m.DescribeShareOffsetsGroup, ...]:
    """One entry per group id, in the order first named: a group named twice is asked
    for the topics and partitions of both (every topic if either asks for all). One pass
    over the request: a group id named thousands of times costs no more than its topics."""
    first: dict[str, m.DescribeShareOffsetsGroup] = {}
    # group id -> topic -> partitions (None: every topic), in the order first named.
    wanted: dict[str, dict[str, dict[int, None]] | None] = {}
    for g in groups:
        first.setdefault(g.group_id, g)
        topics = wanted.setdefault(g.group_id, {})
        if topics is None:
            continue
        if g.topics is None:
            wanted[g.group_id] = None
            continue
        for t in g.topics:
            topics.setdefault(t.topic_name, {}).update(dict.fromkeys(t.partitions))
    return tuple(attrs.evolve(g, topics=_topics_of(wanted[gid])) for gid, g in first.items())


def _topics_of(
    topics: dict[str, dict[int, None]] | None,
) -> tuple[m.DescribeShareOffsetsTopic, ...] | None:
    if topics is None:
        return None
    return tuple(
        m.DescribeShareOffsetsTopic(topic_name=name, partitions=tuple(ps))
        for name, ps in topics.items()
    )


_Q = TypeVar("_Q")
_P = TypeVar("_P")


def _group_and_topics_read(
    access: Access,
    req: Request[_Q],
    group_id: str,
    topics: Iterable[str],
    refused: Callable[[int], _P],
) -> Gate[_Q, _P]:
    """READ on the group (else GROUP_AUTHORIZATION_FAILED) and on every topic named
    (else TOPIC_AUTHORIZATION_FAILED), for the whole request: one topic denied refuses
    it all."""
    if not access.group(Operation.READ, group_id):
        return answer_now(req, refused(GROUP_DENIED))
    if all(access.topic(Operation.READ, t) for t in topics):
        return Gate(req)
    return answer_now(req, refused(TOPIC_DENIED))


def alter_rule(
    access: Access, req: Request[m.AlterShareGroupOffsetsRequest]
) -> Gate[m.AlterShareGroupOffsetsRequest, m.AlterShareGroupOffsetsResponse]:
    return _group_and_topics_read(
        access, req, req.body.group_id, (t.topic_name for t in req.body.topics),
        lambda code: m.AlterShareGroupOffsetsResponse(error_code=code),
    )


def delete_rule(
    access: Access, req: Request[m.DeleteShareGroupOffsetsRequest]
) -> Gate[m.DeleteShareGroupOffsetsRequest, m.DeleteShareGroupOffsetsResponse]:
    return _group_and_topics_read(
        access, req, req.body.group_id, (t.topic_name for t in req.body.topics),
        lambda code: m.DeleteShareGroupOffsetsResponse(error_code=code),
    )
