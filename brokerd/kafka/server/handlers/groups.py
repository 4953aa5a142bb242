# -*- test-case-name: tests.kafka.listener.test_protocol -*-
"""Kafka consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit and OffsetFetch.

Each handler turns a decoded request body (:mod:`brokerd.kafka.wire.requests.apis`) into a response
message by calling the classic group coordinator
(:class:`~brokerd.kafka.groups.coordinator.GroupCoordinator`). This node coordinates every group
and every transactional id; it keeps its share groups' state itself and has no share
coordinator to find, so a share-partition key (FindCoordinator key type 2) is refused as
Kafka refuses it without a share coordinator. A JoinGroup for the id of a share group is
INCONSISTENT_GROUP_PROTOCOL, as Kafka answers it. A JoinGroup or
SyncGroup held for a rebalance is tracked on the connection and answered with nothing if
the client goes away. OffsetCommit v10 and OffsetFetch v10 name topics by ID: the IDs are
looked up in the core (an unknown one is UNKNOWN_TOPIC_ID, before any ACL check, as Kafka
answers it), and the ACL rules see the names.

It does not parse or build bytes, keep group state, or dispatch:
:class:`~brokerd.kafka.listener.dispatch.KafkaHandlers` routes requests here.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Protocol, TypeVar

import attrs
from twisted.internet import defer
from twisted.logger import Logger

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.acl_gate import (
    CLUSTER_DENIED,
    DENIED_TEXT,
    GROUP_DENIED,
    TOPIC_DENIED,
    TXN_DENIED,
    Access,
    Gate,
    Rule,
    answer_now,
    itself,
    keep_only,
    split_entries,
)
from brokerd.kafka.server.handler_base import (
    NO_RESPONSE,
    BrokerIdentity,
    Outcome,
    RequestContext,
    topic_name_now,
    unexpected_code,
)
from brokerd.kafka.server.internal_topics import InternalTopics
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.codec import ZERO_UUID
from brokerd.kafka.wire.messages import groups as group_apis
from brokerd.kafka.wire.messages.groups import (
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    SYNC_GROUP,
)
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import Operation
from brokerd.storage.topic_ids import parse_topic_id

if TYPE_CHECKING:
    from brokerd.core.api import CoreApi, CoreTopics
    from brokerd.kafka.groups.coordinator import GroupCoordinator
    from brokerd.kafka.groups.state import JoinResult, SyncResult

#: FindCoordinator's key types: a group, a transactional id, a share-group partition.
_COORDINATOR_GROUP = 0
_COORDINATOR_TRANSACTION = 1
_COORDINATOR_SHARE = 2
#: FindCoordinator's first version with ``coordinator_keys`` (several keys per request),
#: and its first version that may ask for a share coordinator.
_FIND_COORDINATOR_BATCHED_FROM = 4
_FIND_COORDINATOR_SHARE_FROM = 6

#: JoinGroup's first version whose answer may carry a null protocol name, and its first
#: with ``skip_assignment``.
_JOIN_NULLABLE_PROTOCOL_FROM = 7
_JOIN_SKIP_ASSIGNMENT_FROM = 9
#: SyncGroup's first version that must name the protocol type and name.
_SYNC_PROTOCOL_FROM = 5
#: LeaveGroup's first version with ``members`` (several members per request).
_LEAVE_BATCHED_FROM = 3
#: OffsetCommit's first version answering GROUP_ID_NOT_FOUND for a group that does not
#: exist, and OffsetCommit's and OffsetFetch's first version naming topics by ID.
_COMMIT_GROUP_NOT_FOUND_FROM = 9
_TOPIC_IDS_FROM = 10

#: OffsetFetch's first version with the ``groups`` form (several groups per request).
_OFFSET_FETCH_GROUPS_FROM = 8

#: Errors that concern the whole coordinator, repeated at the top of OffsetFetch v2+.
_COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)

#: A share-partition key's partition: what Java's Integer.parseInt takes.
_INT32_TEXT = re.compile(r"[+-]?[0-9]+")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

PendingOffsets = Callable[[str], AbstractSet[tuple[str, int]]]


class GroupHandlers:
    """Answers the consumer-group APIs.

    :param core: the broker core (topic existence for OffsetCommit, topic IDs).
    :param coordinator: the group coordinator (:class:`GroupCoordinator`).
    :param identity: where clients are told the coordinator is (read live).
    :param pending_offsets: a group's partitions with a transactional offset commit not
        yet complete (the transaction coordinator's); None = transactions disabled.
    :param is_share_group: whether a share group has an id: such an id is no classic
        group (JoinGroup INCONSISTENT_GROUP_PROTOCOL, offsets GROUP_ID_NOT_FOUND, Kafka's
        answers).
    """

    _log = Logger()

    def __init__(
        self,
        core: CoreApi,
        coordinator: GroupCoordinator,
        identity: BrokerIdentity,
        *,
        pending_offsets: PendingOffsets | None = None,
        is_share_group: Callable[[str], bool],
        internal_topics: InternalTopics | None = None,
    ) -> None:
        self._core = core
        self._groups = coordinator
        self._id = identity
        self._internal = internal_topics
        self._pending = pending_offsets
        self._is_share_group = is_share_group

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(FIND_COORDINATOR, self.find_coordinator, find_coordinator_rule),
            route(JOIN_GROUP, self.join_group, join_group_rule),
            route(SYNC_GROUP, self.sync_group, sync_group_rule),
            route(HEARTBEAT, self.heartbeat, heartbeat_rule),
            route(LEAVE_GROUP, self.leave_group, leave_group_rule),
            route(OFFSET_COMMIT, self.offset_commit, self.offset_commit_rule),
            route(OFFSET_FETCH, self.offset_fetch, self.offset_fetch_rule),
        )

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        return unexpected_code(self._log, what, exc)

    # -- FindCoordinator ----------------------------------------------------------------

    async def find_coordinator(
        self, conn: RequestContext, req: Request[apis.FindCoordinatorRequest]
    ) -> apis.FindCoordinatorResponse:
        body = req.body
        if req.api_version >= _FIND_COORDINATOR_BATCHED_FROM:
            return apis.FindCoordinatorResponse(coordinators=tuple(
                self._coordinator_for(body.key_type, key, req.api_version)
                for key in body.coordinator_keys
            ))
        found = self._coordinator_for(body.key_type, body.key, req.api_version)
        return apis.FindCoordinatorResponse(
            error_code=found.error_code, error_message=found.error_message,
            node_id=found.node_id, host=found.host, port=found.port,
        )

    def _coordinator_for(self, key_type: int, key: str, version: int) -> group_apis.Coordinator:
        """One key's answer. Groups and (key type 1) transactional ids: this node
        coordinates both (the transaction APIs are answered by
        brokerd.kafka.server.handlers.txn)."""
        if key_type in (_COORDINATOR_GROUP, _COORDINATOR_TRANSACTION):
            if self._internal is not None:
                # Kafka creates the coordinator's internal topic at its first lookup.
                self._internal.coordinator_looked_up(key_type)
            ident = self._id
            return group_apis.Coordinator(
                key=key, node_id=ident.node_id, host=ident.advertised_host,
                port=ident.advertised_port,
            )
        if key_type != _COORDINATOR_SHARE:
            why = f"unknown coordinator key type {key_type}"
        elif version < _FIND_COORDINATOR_SHARE_FROM:
            why = f"a share coordinator needs FindCoordinator v{_FIND_COORDINATOR_SHARE_FROM}+"
        else:
            # Kafka refuses a share key it cannot parse, and every share key when it has
            # no share coordinator; brokerd has no share groups.
            why = share_key_problem(key) or "this broker has no share groups"
        return group_apis.Coordinator(
            key=key, error_code=ErrorCode.INVALID_REQUEST, error_message=why
        )

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ------------------------------------

    async def join_group(
        self, conn: RequestContext, req: Request[apis.JoinGroupRequest]
    ) -> apis.JoinGroupResponse | Outcome:
        body = req.body
        if self._is_share_group(body.group_id):
            return apis.JoinGroupResponse(
                error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=""
            )
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
            skip_assignment_supported=req.api_version >= _JOIN_SKIP_ASSIGNMENT_FROM,
            reason=body.reason,
        ))
        try:
            result: JoinResult = await joining
        except defer.CancelledError:
            return NO_RESPONSE
        return apis.JoinGroupResponse(
            error_code=result.error_code,
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=_join_protocol_name(result.protocol_name or "", req.api_version),
            leader=result.leader_id,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=tuple(
                apis.JoinGroupMember(member_id=m, group_instance_id=g, metadata=md)
                for m, g, md in result.members
            ),
        )

    async def sync_group(
        self, conn: RequestContext, req: Request[apis.SyncGroupRequest]
    ) -> apis.SyncGroupResponse | Outcome:
        body = req.body
        refused = sync_protocol_missing(req)
        if refused is not None:
            return refused
        syncing = conn.track(self._groups.sync(
            body.group_id,
            body.generation_id,
            body.member_id,
            [(a.member_id, a.assignment) for a in body.assignments],
            group_instance_id=body.group_instance_id,
            protocol_type=body.protocol_type,
            protocol_name=body.protocol_name,
        ))
        try:
            result: SyncResult = await syncing
        except defer.CancelledError:
            return NO_RESPONSE
        return apis.SyncGroupResponse(
            error_code=result.error_code,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment or b"",
        )

    async def heartbeat(
        self, conn: RequestContext, req: Request[apis.HeartbeatRequest]
    ) -> apis.HeartbeatResponse:
        body = req.body
        code = self._groups.heartbeat(
            body.group_id, body.generation_id, body.member_id,
            group_instance_id=body.group_instance_id,
        )
        return apis.HeartbeatResponse(error_code=code)

    async def leave_group(
        self, conn: RequestContext, req: Request[apis.LeaveGroupRequest]
    ) -> apis.LeaveGroupResponse:
        body = req.body
        if req.api_version < _LEAVE_BATCHED_FROM:
            # Answered once the group's record is durable, as Kafka answers it.
            return apis.LeaveGroupResponse(
                error_code=await self._groups.leave(body.group_id, body.member_id)
            )
        code, codes = await self._groups.leave_members(
            body.group_id,
            [(m.member_id, m.group_instance_id, m.reason) for m in body.members],
        )
        if code:
            return apis.LeaveGroupResponse(error_code=code)
        return apis.LeaveGroupResponse(members=tuple(
            group_apis.LeftMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=c
            )
            for m, c in zip(body.members, codes, strict=True)
        ))

    # -- OffsetCommit -------------------------------------------------------------------

    async def offset_commit(
        self, conn: RequestContext, req: Request[apis.OffsetCommitRequest]
    ) -> apis.OffsetCommitResponse:
        by_id = req.api_version >= _TOPIC_IDS_FROM
        body: apis.OffsetCommitRequest = (
            with_commit_names(req.body, self._core.topic_registry) if by_id else req.body
        )
        codes: dict[tuple[str, int], int] = {}
        # Group ids and membership are the coordinator's to judge; topic existence is
        # the core's (Kafka refuses commits for partitions that do not exist).
        known = self._core.topic_registry.topics()
        offsets: list[tuple[str, int, int, int, str | None]] = []
        for t in body.topics:
            if by_id and not t.name:
                continue  # an unknown topic ID: answered below
            info = known.get(t.name)
            for p in t.partitions:
                if info is None or not 0 <= p.partition_index < info.partitions:
                    codes[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    offsets.append(
                        (t.name, p.partition_index, p.committed_offset,
                         p.committed_leader_epoch, p.committed_metadata)
                    )
        if offsets and self._is_share_group(body.group_id):
            codes.update({(o[0], o[1]): ErrorCode.GROUP_ID_NOT_FOUND for o in offsets})
        elif offsets:
            try:
                stored: Mapping[tuple[str, int], int] = await self._groups.commit_offsets(
                    body.group_id, body.generation_id, body.member_id, offsets,
                    group_instance_id=body.group_instance_id,
                    missing_group_not_found=req.api_version >= _COMMIT_GROUP_NOT_FOUND_FROM,
                )
            except Exception as e:
                code = self._unexpected("offset commit", e)
                stored = {(o[0], o[1]): code for o in offsets}
            for o in offsets:
                # A partition the coordinator did not answer for was not stored.
                codes[(o[0], o[1])] = stored.get((o[0], o[1]), ErrorCode.UNKNOWN_SERVER_ERROR)

        def code_of(t: apis.OffsetCommitTopic, partition: int) -> int:
            if by_id and not t.name:
                return ErrorCode.UNKNOWN_TOPIC_ID
            return codes[(t.name, partition)]

        return apis.OffsetCommitResponse(
            topics=tuple(
                apis.OffsetCommitTopicResponse(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=tuple(
                        apis.OffsetCommitPartitionResponse(
                            partition_index=p.partition_index,
                            error_code=code_of(t, p.partition_index),
                        )
                        for p in t.partitions
                    ),
                )
                for t in body.topics
            )
        )

    def offset_commit_rule(
        self, access: Access, req: Request[apis.OffsetCommitRequest]
    ) -> Gate[apis.OffsetCommitRequest, apis.OffsetCommitResponse]:
        """OffsetCommit's ACL rule (v10+: on the names of the topics' IDs)."""
        if req.api_version >= _TOPIC_IDS_FROM:
            req = Request(req.header, with_commit_names(req.body, self._core.topic_registry))
        return offset_commit_rule(access, req)

    # -- OffsetFetch --------------------------------------------------------------------

    async def offset_fetch(
        self, conn: RequestContext, req: Request[apis.OffsetFetchRequest]
    ) -> apis.OffsetFetchResponse:
        body = req.body
        if req.api_version >= _OFFSET_FETCH_GROUPS_FROM:
            by_id = req.api_version >= _TOPIC_IDS_FROM
            if by_id:
                body = with_fetch_names(body, self._core.topic_registry)
            answers = []
            for group in body.groups:
                # v9+ (KIP-848): a consumer group's member fetches with its epoch.
                member_code = ErrorCode.GROUP_ID_NOT_FOUND if self._is_share_group(
                    group.group_id
                ) else self._groups.fetch_member_error(
                    group.group_id, group.member_id, group.member_epoch
                )
                if member_code:
                    answers.append(apis.OffsetFetchResponseGroup(
                        group_id=group.group_id, error_code=member_code
                    ))
                    continue
                topics, top = self._fetch_group(
                    group.group_id, group.topics, body.require_stable, by_id=by_id
                )
                answers.append(apis.OffsetFetchResponseGroup(
                    group_id=group.group_id, topics=topics, error_code=top
                ))
            return apis.OffsetFetchResponse(groups=tuple(answers))
        if self._is_share_group(body.group_id):
            return apis.OffsetFetchResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND)
        topics, top = self._fetch_group(body.group_id, body.topics, body.require_stable)
        return apis.OffsetFetchResponse(topics=topics, error_code=top)

    def offset_fetch_rule(
        self, access: Access, req: Request[apis.OffsetFetchRequest]
    ) -> Gate[apis.OffsetFetchRequest, apis.OffsetFetchResponse]:
        """OffsetFetch's ACL rule (v10+: on the names of the topics' IDs)."""
        if req.api_version >= _TOPIC_IDS_FROM:
            req = Request(req.header, with_fetch_names(req.body, self._core.topic_registry))
        return offset_fetch_rule(access, req)

    def _fetch_group(
        self,
        group_id: str,
        topics: Sequence[apis.OffsetFetchTopic] | None,
        require_stable: bool,
        *,
        by_id: bool = False,
    ) -> tuple[tuple[apis.OffsetFetchTopicResponse, ...], int]:
        """One group's answer: its topics and its group-level error. ``by_id`` (v10+):
        the topics are answered with their IDs; an asked ID no topic has is
        UNKNOWN_TOPIC_ID, and a committed topic that no longer exists is left out of an
        every-partition answer (it has no ID to be named by), as Kafka does."""
        unknown_ids: list[apis.OffsetFetchTopic] = []
        if by_id and topics is not None:
            unknown_ids = [t for t in topics if not t.name]
            topics = [t for t in topics if t.name]
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
        ids: Mapping[str, uuid.UUID] = {}
        if by_id:
            ids = {name: info.topic_id for name, info in self._core.topic_registry.topics().items()}
        answered = tuple(
            apis.OffsetFetchTopicResponse(
                name=name, topic_id=ids.get(name, ZERO_UUID), partitions=tuple(parts)
            )
            for name, parts in by_topic.items()
            if not by_id or name in ids
        )
        return (*answered, *_fetch_topics_denied(unknown_ids, ErrorCode.UNKNOWN_TOPIC_ID)), top


def _join_protocol_name(name: str, version: int) -> str | None:
    """JoinGroup v7+ answers "no protocol" (an error answer) as null, as Kafka does."""
    if version >= _JOIN_NULLABLE_PROTOCOL_FROM and not name:
        return None
    return name


def sync_protocol_missing(req: Request[apis.SyncGroupRequest]) -> apis.SyncGroupResponse | None:
    """SyncGroup v5+ must name the protocol type and name: without them Kafka answers
    INCONSISTENT_GROUP_PROTOCOL, before any ACL check. None when the request is fine."""
    body = req.body
    if req.api_version >= _SYNC_PROTOCOL_FROM and (
        body.protocol_type is None or body.protocol_name is None
    ):
        return apis.SyncGroupResponse(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    return None


def share_key_problem(key: str) -> str | None:
    """What is wrong with a share-partition coordinator key (``groupId:topicId:partition``,
    as Kafka's SharePartitionKey parses it), or None."""
    if not key:
        return "the share coordinator key is empty"
    tokens = key.split(":")
    while tokens and not tokens[-1]:
        tokens.pop()  # Java's String.split drops trailing empty strings
    if len(tokens) != 3:
        return f"share coordinator key {key!r} is not groupId:topicId:partition"
    group_id, topic_id, partition = tokens
    if not group_id.strip():
        return f"share coordinator key {key!r} has an empty group id"
    try:
        parse_topic_id(topic_id)
    except ValueError:
        return f"share coordinator key {key!r} has an invalid topic ID"
    if not _INT32_TEXT.fullmatch(partition) or not _INT32_MIN <= int(partition) <= _INT32_MAX:
        return f"share coordinator key {key!r} has an invalid partition"
    return None


def with_commit_names(body: apis.OffsetCommitRequest, core: CoreTopics) -> apis.OffsetCommitRequest:
    """An OffsetCommit v10+ request with each topic's ``name`` that of its ID ("" for an
    ID no topic has)."""
    return attrs.evolve(body, topics=tuple(
        attrs.evolve(t, name=topic_name_now(core, t.topic_id)) for t in body.topics
    ))


def with_fetch_names(body: apis.OffsetFetchRequest, core: CoreTopics) -> apis.OffsetFetchRequest:
    """An OffsetFetch v10+ request with each asked topic's ``name`` that of its ID ("" for
    an ID no topic has)."""
    return attrs.evolve(body, groups=tuple(
        g if g.topics is None else attrs.evolve(g, topics=tuple(
            attrs.evolve(t, name=topic_name_now(core, t.topic_id)) for t in g.topics
        ))
        for g in body.groups
    ))


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


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


class _NamesGroup(Protocol):
    """A request of one group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)."""

    @property
    def group_id(self) -> str: ...


#: The request and response classes of a one-group API.
GQ = TypeVar("GQ", bound=_NamesGroup)
GP = TypeVar("GP")
Q = TypeVar("Q")


def _group_gate(op: Operation, response: Callable[[Request[GQ]], GP]) -> Rule[GQ, GP]:
    def rule(access: Access, req: Request[GQ]) -> Gate[GQ, GP]:
        if access.group(op, req.body.group_id):
            return Gate(req)
        return answer_now(req, response(req))

    return rule


join_group_rule: Rule[apis.JoinGroupRequest, apis.JoinGroupResponse] = _group_gate(
    Operation.READ,
    lambda req: apis.JoinGroupResponse(
        error_code=GROUP_DENIED, protocol_name=_join_protocol_name("", req.api_version)
    ),
)


_sync_group_gate: Rule[apis.SyncGroupRequest, apis.SyncGroupResponse] = _group_gate(
    Operation.READ, lambda req: apis.SyncGroupResponse(error_code=GROUP_DENIED)
)


def sync_group_rule(
    access: Access, req: Request[apis.SyncGroupRequest]
) -> Gate[apis.SyncGroupRequest, apis.SyncGroupResponse]:
    # Kafka refuses a v5+ SyncGroup without its protocol before looking at ACLs.
    refused = sync_protocol_missing(req)
    if refused is not None:
        return answer_now(req, refused)
    return _sync_group_gate(access, req)


heartbeat_rule: Rule[apis.HeartbeatRequest, apis.HeartbeatResponse] = _group_gate(
    Operation.READ, lambda req: apis.HeartbeatResponse(error_code=GROUP_DENIED)
)


leave_group_rule: Rule[apis.LeaveGroupRequest, apis.LeaveGroupResponse] = _group_gate(
    Operation.READ, lambda req: apis.LeaveGroupResponse(error_code=GROUP_DENIED)
)


def find_coordinator_rule(
    access: Access, req: Request[apis.FindCoordinatorRequest]
) -> Gate[apis.FindCoordinatorRequest, apis.FindCoordinatorResponse]:
    """DESCRIBE on the group or transactional id of each key (v4+: each key on its own);
    a share key (v6+) needs CLUSTER_ACTION on the cluster, for the whole request, as
    Kafka checks it. Other key types are the handler's to refuse."""
    body = req.body
    batched = req.api_version >= _FIND_COORDINATOR_BATCHED_FROM
    if body.key_type == _COORDINATOR_SHARE:
        if req.api_version < _FIND_COORDINATOR_SHARE_FROM or access.cluster(
            Operation.CLUSTER_ACTION
        ):
            return Gate(req)
        if batched:
            return answer_now(req, apis.FindCoordinatorResponse(coordinators=tuple(
                group_apis.Coordinator(
                    key=k, error_code=CLUSTER_DENIED, error_message=DENIED_TEXT
                )
                for k in body.coordinator_keys
            )))
        return answer_now(req, apis.FindCoordinatorResponse(
            error_code=CLUSTER_DENIED, error_message=DENIED_TEXT
        ))
    if body.key_type not in (_COORDINATOR_GROUP, _COORDINATOR_TRANSACTION):
        return Gate(req)
    txn = body.key_type == _COORDINATOR_TRANSACTION
    code = TXN_DENIED if txn else GROUP_DENIED

    def allowed(key: str) -> bool:
        return access.txn(Operation.DESCRIBE, key) if txn else access.group(
            Operation.DESCRIBE, key
        )

    if batched:
        return split_entries(
            req, body.coordinator_keys, itself,
            lambda k: None if allowed(k) else code,
            lambda k, c: group_apis.Coordinator(key=k, error_code=c, error_message=DENIED_TEXT),
            narrow=lambda kept: attrs.evolve(body, coordinator_keys=kept),
            widen=lambda r, denied: attrs.evolve(r, coordinators=(*r.coordinators, *denied)),
        )
    if allowed(body.key):
        return Gate(req)
    return answer_now(req, apis.FindCoordinatorResponse(error_code=code, error_message=DENIED_TEXT))


def _commit_topics_denied(
    code: ErrorCode, topics: Sequence[apis.OffsetCommitTopic]
) -> tuple[apis.OffsetCommitTopicResponse, ...]:
    return tuple(
        apis.OffsetCommitTopicResponse(name=t.name, topic_id=t.topic_id, partitions=tuple(
            apis.OffsetCommitPartitionResponse(partition_index=p.partition_index, error_code=code)
            for p in t.partitions
        ))
        for t in topics
    )


class _NamedTopic(Protocol):
    """An OffsetCommit or OffsetFetch topic entry (v10+: "" when named by an ID)."""

    @property
    def name(self) -> str: ...


def _unknown_id_or(
    access: Access, op: Operation, req: Request[Q]
) -> Callable[[_NamedTopic], ErrorCode | None]:
    """A topic entry's ACL check; a v10+ entry without a name (an ID no topic has) passes,
    for the handler to answer UNKNOWN_TOPIC_ID as Kafka does before any ACL check."""
    by_id = req.api_version >= _TOPIC_IDS_FROM

    def error_of(entry: _NamedTopic) -> ErrorCode | None:
        if by_id and not entry.name:
            return None
        return None if access.topic(op, entry.name) else TOPIC_DENIED

    return error_of


def offset_commit_rule(
    access: Access, req: Request[apis.OffsetCommitRequest]
) -> Gate[apis.OffsetCommitRequest, apis.OffsetCommitResponse]:
    """READ on the group, then READ on each topic (v10+: ``req`` has the IDs' names,
    :meth:`GroupHandlers.offset_commit_rule`)."""
    body = req.body
    if not access.group(Operation.READ, body.group_id):
        return answer_now(req, apis.OffsetCommitResponse(
            topics=_commit_topics_denied(GROUP_DENIED, body.topics)
        ))
    return split_entries(
        req, body.topics, lambda t: t, _unknown_id_or(access, Operation.READ, req),
        lambda t, code: _commit_topics_denied(code, (t,))[0],
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )


def _fetch_topics_denied(
    topics: Sequence[apis.OffsetFetchTopic], code: ErrorCode
) -> tuple[apis.OffsetFetchTopicResponse, ...]:
    return tuple(
        apis.OffsetFetchTopicResponse(name=t.name, topic_id=t.topic_id, partitions=tuple(
            apis.OffsetFetchPartitionResponse(partition_index=i, error_code=code)
            for i in t.partition_indexes
        ))
        for t in topics
    )


def offset_fetch_groups_rule(
    access: Access, req: Request[apis.OffsetFetchRequest]
) -> Gate[apis.OffsetFetchRequest, apis.OffsetFetchResponse]:
    """OffsetFetch v8+: each group needs DESCRIBE on itself (a refused group is answered
    GROUP_AUTHORIZATION_FAILED with no topics); within an allowed group each topic needs
    DESCRIBE, as in the one-group form (v10+: on the names of the topics' IDs; an ID no
    topic has is the handler's)."""
    body = req.body
    topic_error = _unknown_id_or(access, Operation.DESCRIBE, req)
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
                (denied if topic_error(t) else allowed).append(t)
            if denied:
                refused_topics[group.group_id] = _fetch_topics_denied(denied, TOPIC_DENIED)
            kept.append(attrs.evolve(group, topics=tuple(allowed)))
    if not (refused_groups or refused_topics or every_topic):
        return Gate(req)

    def finish(
        response: apis.OffsetFetchResponse | Outcome,
    ) -> apis.OffsetFetchResponse | Outcome:
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


def offset_fetch_rule(
    access: Access, req: Request[apis.OffsetFetchRequest]
) -> Gate[apis.OffsetFetchRequest, apis.OffsetFetchResponse]:
    body = req.body
    if req.api_version >= _OFFSET_FETCH_GROUPS_FROM:
        return offset_fetch_groups_rule(access, req)
    if not access.group(Operation.DESCRIBE, body.group_id):
        # v1 has no top-level error code: every asked partition carries it.
        return answer_now(req, apis.OffsetFetchResponse(
            error_code=GROUP_DENIED,
            topics=_fetch_topics_denied(body.topics or (), GROUP_DENIED),
        ))
    if body.topics is None:
        return Gate(req, finish=keep_only(
            lambda r: r.topics,
            lambda r, kept: attrs.evolve(r, topics=kept),
            lambda t: access.topic(Operation.DESCRIBE, t.name),
        ))
    return split_entries(
        req, body.topics, lambda t: t, _unknown_id_or(access, Operation.DESCRIBE, req),
        lambda t, code: _fetch_topics_denied((t,), code)[0],
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )
