# -*- test-case-name: tests.test_kafka_protocol -*-
"""Kafka consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit and OffsetFetch.

Each handler turns a decoded request body (:mod:`brokerd.kafka.wire.apis`) into a response
message by calling the classic group coordinator
(:mod:`brokerd.kafka.groups.coordinator`, duck-typed here by
:class:`GroupCoordinatorLike` so tests can pass fakes). This node coordinates every group.
A JoinGroup or SyncGroup held for a rebalance is tracked on the connection
and answered with nothing if the client goes away.

It does not parse or build bytes, keep group state, or dispatch:
:class:`~brokerd.kafka.server.dispatch.KafkaHandlers` routes requests here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, Protocol

import attrs
from twisted.internet import defer
from twisted.logger import Logger

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.authorize import (
    DENIED_TEXT,
    GROUP_DENIED,
    TOPIC_DENIED,
    TXN_DENIED,
    Access,
    Gate,
    Rule,
    answer_now,
    by_name,
    commit_topics_denied,
    keep_only,
    split_entries,
    topic_op,
)
from brokerd.kafka.server.handler_base import (
    NO_RESPONSE,
    BrokerIdentity,
    Connection,
    Outcome,
    unexpected_code,
)
from brokerd.kafka.server.route import Route
from brokerd.kafka.wire import apis
from brokerd.kafka.wire.apis import Request
from brokerd.kafka.wire.codec import ApiKey
from brokerd.security.acl import Operation

if TYPE_CHECKING:
    from brokerd.kafka.server.core_face import KafkaCore

#: Errors that concern the whole coordinator, repeated at the top of OffsetFetch v2+.
#: FindCoordinator's key type of a transaction coordinator (0 is a group's).
_COORDINATOR_TRANSACTION = 1

#: OffsetFetch's first version with the ``groups`` form (several groups per request).
_OFFSET_FETCH_GROUPS_FROM = 8

_COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


class JoinResultLike(Protocol):
    @property
    def error_code(self) -> int: ...
    @property
    def generation_id(self) -> int: ...
    @property
    def protocol_name(self) -> str | None: ...
    @property
    def leader_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def members(self) -> Sequence[tuple[str, str | None, bytes]]: ...


class SyncResultLike(Protocol):
    @property
    def error_code(self) -> int: ...
    @property
    def assignment(self) -> bytes: ...


class GroupCoordinatorLike(Protocol):
    """The classic group coordinator (:mod:`brokerd.kafka.groups.coordinator`). Error codes in its
    results are Kafka ints. Deferred results are typed ``Any`` because Deferred is
    invariant; they are :class:`JoinResultLike` / :class:`SyncResultLike` /
    ``dict[(topic, partition), code]``."""

    def join(
        self,
        group_id: str,
        member_id: str,
        /,
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        group_instance_id: str | None,
        require_known_member_id: bool,
    ) -> defer.Deferred[Any]: ...

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: list[tuple[str, bytes]],
        /,
        *,
        group_instance_id: str | None = None,
    ) -> defer.Deferred[Any]: ...

    def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        /,
        *,
        group_instance_id: str | None = None,
    ) -> int: ...

    def leave(self, group_id: str, member_id: str, /) -> int: ...

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: list[tuple[str, int, int, int, str | None]],
        /,
        *,
        group_instance_id: str | None = None,
    ) -> defer.Deferred[Any]: ...

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None, /
    ) -> Sequence[tuple[str, int, int, int, str | None, int]]: ...


#: A group's partitions whose transactional offset commit is not yet complete.
PendingOffsets = Callable[[str], AbstractSet[tuple[str, int]]]


class GroupHandlers:
    """Answers the consumer-group APIs.

    :param core: the broker core (topic existence for OffsetCommit).
    :param coordinator: the group coordinator (:class:`GroupCoordinatorLike`).
    :param identity: where clients are told the coordinator is (read live).
    :param pending_offsets: a group's partitions with a transactional offset commit not
        yet complete (the transaction coordinator's); None = transactions disabled.
    """

    _log = Logger()

    def __init__(
        self,
        core: KafkaCore,
        coordinator: GroupCoordinatorLike,
        identity: BrokerIdentity,
        *,
        pending_offsets: PendingOffsets | None = None,
    ) -> None:
        self._core = core
        self._groups = coordinator
        self._id = identity
        self._pending = pending_offsets

    def routes(self) -> tuple[Route, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            Route(ApiKey.FIND_COORDINATOR, self.find_coordinator, find_coordinator_rule),
            Route(ApiKey.JOIN_GROUP, self.join_group, join_group_rule),
            Route(ApiKey.SYNC_GROUP, self.sync_group, sync_group_rule),
            Route(ApiKey.HEARTBEAT, self.heartbeat, heartbeat_rule),
            Route(ApiKey.LEAVE_GROUP, self.leave_group, leave_group_rule),
            Route(ApiKey.OFFSET_COMMIT, self.offset_commit, offset_commit_rule),
            Route(ApiKey.OFFSET_FETCH, self.offset_fetch, offset_fetch_rule),
        )

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        return unexpected_code(self._log, what, exc)

    async def find_coordinator(self, conn: Connection, req: Request) -> Any:
        body: apis.FindCoordinatorRequest = req.body
        ident = self._id
        if body.key_type not in (0, 1):
            return apis.FindCoordinatorResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"unknown coordinator key type {body.key_type}",
                node_id=-1, host="", port=-1,
            )
        # Groups and (key type 1) transactional ids: this node coordinates both (the
        # transaction APIs are answered by brokerd.kafka.server.handlers.txn).
        return apis.FindCoordinatorResponse(
            error_code=0, error_message=None,
            node_id=ident.node_id, host=ident.advertised_host, port=ident.advertised_port,
        )


    async def join_group(self, conn: Connection, req: Request) -> Any:
        body: apis.JoinGroupRequest = req.body
        rebalance = body.rebalance_timeout_ms
        if rebalance < 0:
            rebalance = body.session_timeout_ms  # v0 has no rebalance timeout (Kafka)
        # Tracked: a JoinGroup held for a rebalance is cancelled if the client goes
        # away (the coordinator keeps the member until its session times out).
        joining = conn.track(self._groups.join(
            body.group_id,
            body.member_id,
            client_id=req.header.client_id or "",
            client_host=conn.client_host,
            session_timeout_ms=body.session_timeout_ms,
            rebalance_timeout_ms=rebalance,
            protocol_type=body.protocol_type,
            protocols=[(p.name, p.metadata) for p in body.protocols],
            group_instance_id=body.group_instance_id,
            require_known_member_id=req.api_version >= 4,
        ))
        try:
            result: JoinResultLike = await joining
        except defer.CancelledError:
            return NO_RESPONSE
        return apis.JoinGroupResponse(
            error_code=result.error_code,
            generation_id=result.generation_id,
            protocol_name=result.protocol_name or "",
            leader=result.leader_id,
            member_id=result.member_id,
            members=tuple(
                apis.JoinGroupMember(member_id=m, group_instance_id=g, metadata=md)
                for m, g, md in result.members
            ),
        )

    async def sync_group(self, conn: Connection, req: Request) -> Any:
        body: apis.SyncGroupRequest = req.body
        syncing = conn.track(self._groups.sync(
            body.group_id,
            body.generation_id,
            body.member_id,
            [(a.member_id, a.assignment) for a in body.assignments],
            group_instance_id=body.group_instance_id,
        ))
        try:
            result: SyncResultLike = await syncing
        except defer.CancelledError:
            return NO_RESPONSE
        return apis.SyncGroupResponse(
            error_code=result.error_code, assignment=result.assignment or b""
        )

    async def heartbeat(self, conn: Connection, req: Request) -> Any:
        body: apis.HeartbeatRequest = req.body
        code = self._groups.heartbeat(
            body.group_id, body.generation_id, body.member_id,
            group_instance_id=body.group_instance_id,
        )
        return apis.HeartbeatResponse(error_code=code)

    async def leave_group(self, conn: Connection, req: Request) -> Any:
        body: apis.LeaveGroupRequest = req.body
        code = self._groups.leave(body.group_id, body.member_id)
        return apis.LeaveGroupResponse(error_code=code)

    async def offset_commit(self, conn: Connection, req: Request) -> Any:
        body: apis.OffsetCommitRequest = req.body
        codes: dict[tuple[str, int], int] = {}
        # Group ids and membership are the coordinator's to judge; topic existence is
        # the core's (Kafka refuses commits for partitions that do not exist).
        known = self._core.topics()
        offsets: list[tuple[str, int, int, int, str | None]] = []
        for t in body.topics:
            info = known.get(t.name)
            for p in t.partitions:
                if info is None or not 0 <= p.partition_index < info.partitions:
                    codes[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    offsets.append(
                        (t.name, p.partition_index, p.committed_offset,
                         p.committed_leader_epoch, p.committed_metadata)
                    )
        if offsets:
            try:
                stored: Mapping[tuple[str, int], int] = await self._groups.commit_offsets(
                    body.group_id, body.generation_id, body.member_id, offsets,
                    group_instance_id=body.group_instance_id,
                )
            except Exception as e:
                code = self._unexpected("offset commit", e)
                stored = {(o[0], o[1]): code for o in offsets}
            for o in offsets:
                # A partition the coordinator did not answer for was not stored.
                codes[(o[0], o[1])] = stored.get((o[0], o[1]), ErrorCode.UNKNOWN_SERVER_ERROR)
        return apis.OffsetCommitResponse(
            topics=tuple(
                apis.OffsetCommitTopicResponse(
                    name=t.name,
                    partitions=tuple(
                        apis.OffsetCommitPartitionResponse(
                            partition_index=p.partition_index,
                            error_code=codes[(t.name, p.partition_index)],
                        )
                        for p in t.partitions
                    ),
                )
                for t in body.topics
            )
        )

    async def offset_fetch(self, conn: Connection, req: Request) -> Any:
        body: apis.OffsetFetchRequest = req.body
        if req.api_version >= _OFFSET_FETCH_GROUPS_FROM:
            answers = []
            for group in body.groups:
                topics, top = self._fetch_group(group.group_id, group.topics, body.require_stable)
                answers.append(apis.OffsetFetchResponseGroup(
                    group_id=group.group_id, topics=topics, error_code=top
                ))
            return apis.OffsetFetchResponse(groups=tuple(answers))
        topics, top = self._fetch_group(body.group_id, body.topics, body.require_stable)
        return apis.OffsetFetchResponse(topics=topics, error_code=top)

    def _fetch_group(
        self,
        group_id: str,
        topics: Sequence[apis.OffsetFetchTopic] | None,
        require_stable: bool,
    ) -> tuple[tuple[apis.OffsetFetchTopicResponse, ...], int]:
        """One group's answer: its topics and its group-level error."""
        wanted = (
            None
            if topics is None
            else [(t.name, p) for t in topics for p in t.partition_indexes]
        )
        rows: Sequence[tuple[str, int, int, int, str | None, int]]
        top: int
        try:
            rows = self._groups.fetch_offsets(group_id, wanted)
        except Exception as e:
            code = self._unexpected("offset fetch", e)
            rows = [(t, p, -1, -1, "", int(code)) for t, p in wanted or ()]
            top = code
        else:
            # Coordinator-level errors go at the top too (v2+ clients look there).
            top = next(
                (r[5] for r in rows if r[5] in _COORDINATOR_ERRORS), ErrorCode.NONE
            )
            if require_stable and self._pending is not None:
                rows = _unstable(rows, self._pending(group_id))
        by_topic: dict[str, list[apis.OffsetFetchPartitionResponse]] = {}
        for topic, partition, offset, epoch, metadata, row_code in rows:
            by_topic.setdefault(topic, []).append(
                apis.OffsetFetchPartitionResponse(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=epoch,
                    metadata=metadata,
                    error_code=row_code,
                )
            )
        return tuple(
            apis.OffsetFetchTopicResponse(name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ), top


def _unstable(
    rows: Sequence[tuple[str, int, int, int, str | None, int]],
    pending: AbstractSet[tuple[str, int]],
) -> Sequence[tuple[str, int, int, int, str | None, int]]:
    """``require_stable``: a partition whose transactional commit is still open answers
    UNSTABLE_OFFSET_COMMIT (the client retries) rather than an offset the transaction
    is about to replace; rows that already carry an error keep it."""
    if not pending:
        return rows
    return [
        (t, p, -1, -1, "", int(ErrorCode.UNSTABLE_OFFSET_COMMIT))
        if not code and (t, p) in pending
        else (t, p, offset, epoch, metadata, code)
        for t, p, offset, epoch, metadata, code in rows
    ]


# -- ACL rules (brokerd.kafka.server.authorize) ----------------------------------------


def _group_gate(op: Operation, response: Callable[[], Any]) -> Rule:
    def rule(access: Access, req: Request) -> Gate:
        if access.group(op, req.body.group_id):
            return Gate(req)
        return answer_now(req, response())

    return rule


join_group_rule = _group_gate(
    Operation.READ, lambda: apis.JoinGroupResponse(error_code=GROUP_DENIED)
)


sync_group_rule = _group_gate(
    Operation.READ, lambda: apis.SyncGroupResponse(error_code=GROUP_DENIED)
)


heartbeat_rule = _group_gate(
    Operation.READ, lambda: apis.HeartbeatResponse(error_code=GROUP_DENIED)
)


leave_group_rule = _group_gate(
    Operation.READ, lambda: apis.LeaveGroupResponse(error_code=GROUP_DENIED)
)


def find_coordinator_rule(access: Access, req: Request) -> Gate:
    body: apis.FindCoordinatorRequest = req.body
    if body.key_type == _COORDINATOR_TRANSACTION:
        ok, code = access.txn(Operation.DESCRIBE, body.key), TXN_DENIED
    else:
        ok, code = access.group(Operation.DESCRIBE, body.key), GROUP_DENIED
    if ok:
        return Gate(req)
    return answer_now(req, apis.FindCoordinatorResponse(
        error_code=code, error_message=DENIED_TEXT, node_id=-1, host="", port=-1
    ))


def offset_commit_rule(access: Access, req: Request) -> Gate:
    body: apis.OffsetCommitRequest = req.body
    topic_cls, part_cls = apis.OffsetCommitTopicResponse, apis.OffsetCommitPartitionResponse
    if not access.group(Operation.READ, body.group_id):
        return answer_now(req, apis.OffsetCommitResponse(
            topics=commit_topics_denied(GROUP_DENIED, body.topics, topic_cls, part_cls)
        ))
    return split_entries(
        req, body.topics, by_name, topic_op(Operation.READ, access),
        lambda t, code: commit_topics_denied(code, (t,), topic_cls, part_cls)[0],
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )


def _fetch_topics_denied(
    topics: Sequence[apis.OffsetFetchTopic], code: ErrorCode
) -> tuple[apis.OffsetFetchTopicResponse, ...]:
    return tuple(
        apis.OffsetFetchTopicResponse(name=t.name, partitions=tuple(
            apis.OffsetFetchPartitionResponse(partition_index=i, error_code=code)
            for i in t.partition_indexes
        ))
        for t in topics
    )


def offset_fetch_groups_rule(access: Access, req: Request) -> Gate:
    """OffsetFetch v8+: each group needs DESCRIBE on itself (a refused group is answered
    GROUP_AUTHORIZATION_FAILED with no topics); within an allowed group each topic needs
    DESCRIBE, as in the one-group form."""
    body: apis.OffsetFetchRequest = req.body
    kept: list[apis.OffsetFetchRequestGroup] = []
    refused_groups: list[apis.OffsetFetchResponseGroup] = []
    refused_topics: dict[str, tuple[apis.OffsetFetchTopicResponse, ...]] = {}
    every_topic: set[str] = set()
    for group in body.groups:
        if not access.group(Operation.DESCRIBE, group.group_id):
            refused_groups.append(apis.OffsetFetchResponseGroup(
                group_id=group.group_id, error_code=GROUP_DENIED
            ))
        elif group.topics is None:
            every_topic.add(group.group_id)
            kept.append(group)
        else:
            allowed: list[apis.OffsetFetchTopic] = []
            denied: list[apis.OffsetFetchTopic] = []
            for t in group.topics:
                (allowed if access.topic(Operation.DESCRIBE, t.name) else denied).append(t)
            if denied:
                refused_topics[group.group_id] = _fetch_topics_denied(denied, TOPIC_DENIED)
            kept.append(attrs.evolve(group, topics=tuple(allowed)))
    if not (refused_groups or refused_topics or every_topic):
        return Gate(req)

    def finish(response: Any) -> Any:
        if isinstance(response, Outcome):
            return response
        answered = []
        for group in response.groups:
            topics = group.topics
            if group.group_id in every_topic:
                topics = tuple(t for t in topics if access.topic(Operation.DESCRIBE, t.name))
            topics = (*topics, *refused_topics.get(group.group_id, ()))
            answered.append(attrs.evolve(group, topics=topics))
        return attrs.evolve(response, groups=(*answered, *refused_groups))

    narrowed = Request(req.header, attrs.evolve(body, groups=tuple(kept)))
    return Gate(narrowed, finish=finish)


def offset_fetch_rule(access: Access, req: Request) -> Gate:
    body: apis.OffsetFetchRequest = req.body
    if req.api_version >= _OFFSET_FETCH_GROUPS_FROM:
        return offset_fetch_groups_rule(access, req)
    if not access.group(Operation.DESCRIBE, body.group_id):
        # v1 has no top-level error code: every asked partition carries it.
        return answer_now(req, apis.OffsetFetchResponse(
            error_code=GROUP_DENIED,
            topics=tuple(
                apis.OffsetFetchTopicResponse(name=t.name, partitions=tuple(
                    apis.OffsetFetchPartitionResponse(partition_index=i, error_code=GROUP_DENIED)
                    for i in t.partition_indexes
                ))
                for t in body.topics or ()
            ),
        ))
    if body.topics is None:
        return Gate(req, finish=keep_only(
            lambda r: r.topics,
            lambda r, kept: attrs.evolve(r, topics=kept),
            lambda t: access.topic(Operation.DESCRIBE, t.name),
        ))

    def denied(t: apis.OffsetFetchTopic, code: ErrorCode) -> apis.OffsetFetchTopicResponse:
        return apis.OffsetFetchTopicResponse(name=t.name, partitions=tuple(
            apis.OffsetFetchPartitionResponse(partition_index=i, error_code=code)
            for i in t.partition_indexes
        ))

    return split_entries(
        req, body.topics, by_name, topic_op(Operation.DESCRIBE, access), denied,
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )
