# -*- test-case-name: tests.kafka.server.handlers.test_share_clients -*-
"""Kafka share group APIs (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch
and ShareAcknowledge, each handler next to its ACL rule.

Membership and share sessions are the share group coordinator's
(:mod:`brokerd.kafka.groups.share.coordinator`); records are the core's share engine's
(:class:`~brokerd.core.share.service.ShareService`): a ShareFetch applies the
acknowledgements it carries, then acquires records from every partition of the member's
share session (long-polling up to MaxWaitMs when none is available) and answers the
acquired ranges with the batches holding them; each acquisition and acknowledgement is
durable before the answer. ACLs as Kafka: READ on the group (DESCRIBE for the describe),
READ on each topic (DESCRIBE on subscribed topics for the heartbeat).

It does not parse bytes or keep state.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

import attrs
from twisted.internet import defer

from brokerd.clock import Clock
from brokerd.core.api import CoreTopics
from brokerd.core.share.partition import AckBatch, InvalidAcknowledgement
from brokerd.core.share.service import AcquireResult
from brokerd.core.share.states import AckType
from brokerd.kafka.errors import ErrorCode, error_code_for
from brokerd.kafka.groups.share.coordinator import (
    ASSIGNOR_NAME,
    HeartbeatError,
    SessionError,
)
from brokerd.kafka.groups.share.state_service import ShareGroups
from brokerd.kafka.server.acl_gate import (
    GROUP_DENIED,
    TOPIC_DENIED,
    Access,
    Gate,
    answer_now,
    refuse_groups_with_denied_topics,
    split_entries,
)
from brokerd.kafka.server.handler_base import (
    NO_RESPONSE,
    BrokerIdentity,
    Outcome,
    RequestContext,
)
from brokerd.kafka.server.operations_fields import AuthorizedOperations
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.messages import consumer_groups as cg
from brokerd.kafka.wire.messages import share as m
from brokerd.kafka.wire.messages.share import (
    SHARE_ACKNOWLEDGE,
    SHARE_FETCH,
    SHARE_GROUP_DESCRIBE,
    SHARE_GROUP_HEARTBEAT,
)
from brokerd.kafka.wire.requests.apis import Request
from brokerd.kafka.wire.schema import AUTHORIZED_OPERATIONS_OMITTED
from brokerd.security.acl import Operation
from brokerd.storage.types import TopicInfo

__all__ = ["ShareHandlers"]

TopicPartition = tuple[str, int]
_HEARTBEAT_ERRORS = {
    HeartbeatError.UNKNOWN_MEMBER: ErrorCode.UNKNOWN_MEMBER_ID,
    HeartbeatError.FENCED: ErrorCode.FENCED_MEMBER_EPOCH,
    HeartbeatError.INVALID: ErrorCode.INVALID_REQUEST,
    HeartbeatError.GROUP_FULL: ErrorCode.GROUP_MAX_SIZE_REACHED,
}
_SESSION_ERRORS = {
    SessionError.NOT_FOUND: ErrorCode.SHARE_SESSION_NOT_FOUND,
    SessionError.INVALID_EPOCH: ErrorCode.INVALID_SHARE_SESSION_EPOCH,
    SessionError.UNKNOWN_MEMBER: ErrorCode.UNKNOWN_MEMBER_ID,
    SessionError.LIMIT_REACHED: ErrorCode.SHARE_SESSION_LIMIT_REACHED,
}
#: Most records one ShareFetch asks for when its MaxRecords is not positive.
_DEFAULT_MAX_RECORDS = 500
#: ShareFetch v2's ShareAcquireMode (KIP-1206): batch-optimized (also what earlier
#: versions get) acquires whole batches, MaxRecords a soft limit; record-limit (1) never
#: acquires more than MaxRecords.
_BATCH_OPTIMIZED = 0

_Partition = TypeVar("_Partition")
_Topic = TypeVar("_Topic")


class ShareHandlers:
    def __init__(
        self,
        core: CoreTopics,
        shares: ShareGroups | None,
        identity: BrokerIdentity,
        *,
        clock: Clock,
        operations: AuthorizedOperations | None = None,
        classic_group: Callable[[str], bool] | None = None,
    ) -> None:
        self._core = core
        self._shares = shares
        #: Whether the classic coordinator holds a group of that id (Kafka keeps one
        #: type of group per id: a share heartbeat for it is refused).
        self._classic_group = classic_group
        self._identity = identity
        self._clock = clock
        self._operations = operations if operations is not None else AuthorizedOperations()

    def routes(self) -> tuple[AnyRoute, ...]:
        # Without share groups (a listener built without them) each API answers
        # UNSUPPORTED_VERSION, as Kafka does with share groups disabled.
        return (
            route(SHARE_GROUP_HEARTBEAT, self.heartbeat, heartbeat_rule),
            route(SHARE_GROUP_DESCRIBE, self.describe, describe_rule),
            route(SHARE_FETCH, self.share_fetch, share_fetch_rule),
            route(SHARE_ACKNOWLEDGE, self.share_acknowledge, share_acknowledge_rule),
        )

    @property
    def _s(self) -> ShareGroups:
        assert self._shares is not None
        return self._shares

    def _ids(self) -> dict[str, uuid.UUID]:
        return {name: info.topic_id for name, info in self._core.topics().items()}

    # -- ShareGroupHeartbeat -------------------------------------------------------------

    async def heartbeat(
        self, conn: RequestContext, req: Request[m.ShareGroupHeartbeatRequest]
    ) -> m.ShareGroupHeartbeatResponse:
        if self._shares is None:
            return m.ShareGroupHeartbeatResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        body = req.body
        if not body.group_id:
            return m.ShareGroupHeartbeatResponse(
                error_code=ErrorCode.INVALID_GROUP_ID, error_message="GroupId can't be empty."
            )
        coordinator = self._s.coordinator
        if (
            body.group_id not in coordinator.groups
            and self._classic_group is not None
            and self._classic_group(body.group_id)
        ):
            return m.ShareGroupHeartbeatResponse(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {body.group_id} is not a share group.",
            )
        result = coordinator.heartbeat(
            body.group_id,
            body.member_id,
            body.member_epoch,
            body.subscribed_topic_names,
            rack_id=body.rack_id,
            client_id=req.header.client_id or "",
            client_host=conn.client_host,
        )
        if result.error is not HeartbeatError.NONE:
            return m.ShareGroupHeartbeatResponse(
                error_code=_HEARTBEAT_ERRORS[result.error],
                error_message=result.message or result.error.value,
            )
        assignment = None
        if result.assignment is not None:
            ids = self._ids()
            by_topic: dict[str, list[int]] = {}
            for topic, p in result.assignment:
                by_topic.setdefault(topic, []).append(p)
            assignment = cg.HeartbeatAssignment(
                topic_partitions=tuple(
                    cg.HeartbeatTopicPartitions(topic_id=ids[t], partitions=tuple(sorted(ps)))
                    for t, ps in sorted(by_topic.items())
                    if t in ids
                )
            )
        return m.ShareGroupHeartbeatResponse(
            member_id=body.member_id,
            member_epoch=result.member_epoch,
            heartbeat_interval_ms=coordinator.heartbeat_interval_ms(body.group_id),
            assignment=assignment if body.member_epoch != -1 else None,
        )

    # -- ShareGroupDescribe --------------------------------------------------------------

    async def describe(
        self, conn: RequestContext, req: Request[m.ShareGroupDescribeRequest]
    ) -> m.ShareGroupDescribeResponse:
        if self._shares is None:
            return m.ShareGroupDescribeResponse(
                groups=tuple(
                    m.ShareDescribedGroup(group_id=g, error_code=ErrorCode.UNSUPPORTED_VERSION)
                    for g in dict.fromkeys(req.body.group_ids)
                )
            )
        body = req.body
        ids = self._ids()
        out = []
        for group_id in dict.fromkeys(body.group_ids):  # one answer per group id
            group = self._s.coordinator.groups.get(group_id)
            if group is None and group_id not in self._s.service.engine.groups():
                out.append(
                    m.ShareDescribedGroup(
                        group_id=group_id,
                        error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                        error_message=f"Group {group_id} not found.",
                    )
                )
                continue
            members = []
            for member in group.members.values() if group is not None else ():
                by_topic: dict[str, list[int]] = {}
                for topic, p in member.assigned:
                    by_topic.setdefault(topic, []).append(p)
                members.append(
                    m.ShareGroupMember(
                        member_id=member.member_id,
                        rack_id=member.rack_id,
                        member_epoch=member.epoch,
                        client_id=member.client_id,
                        client_host=member.client_host,
                        subscribed_topic_names=member.topics,
                        assignment=cg.DescribedAssignment(
                            topic_partitions=tuple(
                                cg.DescribedTopicPartitions(
                                    topic_id=ids[t], topic_name=t, partitions=tuple(sorted(ps))
                                )
                                for t, ps in sorted(by_topic.items())
                                if t in ids
                            )
                        ),
                    )
                )
            ops = (
                self._operations.group(conn, group_id) if body.include_authorized_operations
                else AUTHORIZED_OPERATIONS_OMITTED
            )
            out.append(
                m.ShareDescribedGroup(
                    group_id=group_id,
                    group_state=group.state if group is not None else "Empty",
                    group_epoch=group.epoch if group is not None else 0,
                    assignment_epoch=group.assignment_epoch if group is not None else 0,
                    assignor_name=ASSIGNOR_NAME,
                    members=tuple(members),
                    authorized_operations=ops,
                )
            )
        return m.ShareGroupDescribeResponse(groups=tuple(out))

    # -- ShareFetch and ShareAcknowledge -------------------------------------------------

    async def share_fetch(
        self, conn: RequestContext, req: Request[m.ShareFetchRequest]
    ) -> m.ShareFetchResponse | Outcome:
        if self._shares is None:
            return m.ShareFetchResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        body = req.body
        group, member = body.group_id or "", body.member_id or ""
        s = self._s
        service = s.service
        lock_ms = service.engine.config(group).lock_duration_ms
        if not group or not member:
            return m.ShareFetchResponse(error_code=ErrorCode.INVALID_REQUEST)
        if not s.coordinator.is_member(group, member) and body.share_session_epoch != -1:
            return m.ShareFetchResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
        named, unknown = self._resolve(body.topics)
        forgotten: list[TopicPartition] = []
        for t in body.forgotten_topics_data:
            info = self._core.topic_by_id(t.topic_id)
            if info is not None:
                forgotten.extend((info.name, p) for p in t.partitions)
        session = s.coordinator.session(
            group,
            member,
            body.share_session_epoch,
            [(info.name, p.partition_index) for info, p in named],
            forgotten,
        )
        if isinstance(session, SessionError):
            return m.ShareFetchResponse(
                error_code=_SESSION_ERRORS[session], error_message=session.value
            )
        fetched: dict[TopicPartition, AcquireResult] = {}
        if body.share_session_epoch == -1 or body.is_renew_ack:
            # Closing, or (v2) a renewing request: it only acknowledges.
            ack_errors = await self._acknowledge_all(group, member, named)
            if body.share_session_epoch == -1:
                await self._close(group, member)
        else:
            keys, acks, ack_errors = _acknowledgements(named)
            try:
                outcome = await conn.track(
                    service.fetch(
                        group,
                        member,
                        acks,
                        sorted(session),
                        max_records=(
                            body.max_records if body.max_records > 0 else _DEFAULT_MAX_RECORDS
                        ),
                        max_bytes=body.max_bytes,
                        min_bytes=body.min_bytes,
                        max_wait_ms=body.max_wait_ms,
                        cancelled=lambda: conn.closed,
                        whole_batches=body.share_acquire_mode == _BATCH_OPTIMIZED,
                    )
                )
            except defer.CancelledError:
                # The connection went away: nobody to answer; what the last read acquired
                # comes back when its locks expire.
                return NO_RESPONSE
            # Refused by the waiter limit: answered now, nothing acquired (responsive).
            fetched = {(r.topic, r.partition): r for r in outcome.results}
            ack_errors.update(_ack_codes(keys, outcome.acknowledged))
        answers = []
        for topic, p in sorted(set(fetched) | set(ack_errors)):
            r = fetched.get((topic, p))
            answers.append((topic, m.ShareFetchPartitionData(
                partition_index=p,
                error_code=0 if r is None or r.error is None else int(error_code_for(r.error)),
                acknowledge_error_code=ack_errors.get((topic, p), 0),
                current_leader=self._leader(),
                records=r.records if r is not None else b"",
                acquired_records=tuple(
                    m.AcquiredRecords(
                        first_offset=a.first, last_offset=a.last, delivery_count=a.delivery_count
                    )
                    for a in (r.ranges if r is not None else ())
                ),
            )))
        responses = self._by_topic_id(
            answers, unknown,
            lambda p: m.ShareFetchPartitionData(
                partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_ID
            ),
            lambda tid, ps: m.ShareFetchTopicResponse(topic_id=tid, partitions=ps),
        )
        return m.ShareFetchResponse(acquisition_lock_timeout_ms=lock_ms, responses=responses)

    async def share_acknowledge(
        self, conn: RequestContext, req: Request[m.ShareAcknowledgeRequest]
    ) -> m.ShareAcknowledgeResponse:
        if self._shares is None:
            return m.ShareAcknowledgeResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        body = req.body
        group, member = body.group_id or "", body.member_id or ""
        s = self._s
        if not group or not member:
            return m.ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_REQUEST)
        if body.share_session_epoch == 0:
            return m.ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        named, unknown = self._resolve(body.topics)
        session = s.coordinator.session(group, member, body.share_session_epoch, (), ())
        if isinstance(session, SessionError):
            return m.ShareAcknowledgeResponse(
                error_code=_SESSION_ERRORS[session], error_message=session.value
            )
        ack_errors = await self._acknowledge_all(group, member, named)
        if body.share_session_epoch == -1:
            await self._close(group, member)
        responses = self._by_topic_id(
            [
                (topic, m.ShareAcknowledgePartitionData(
                    partition_index=p, error_code=code, current_leader=self._leader()
                ))
                for (topic, p), code in sorted(ack_errors.items())
            ],
            unknown,
            lambda p: m.ShareAcknowledgePartitionData(
                partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_ID
            ),
            lambda tid, ps: m.ShareAcknowledgeTopicResponse(topic_id=tid, partitions=ps),
        )
        return m.ShareAcknowledgeResponse(
            acquisition_lock_timeout_ms=s.service.engine.config(group).lock_duration_ms,
            responses=responses,
        )

    # -- helpers -------------------------------------------------------------------------

    async def _close(self, group: str, member: str) -> None:
        """A closing request (epoch -1) after its acknowledgements: the session ends and
        what the member still holds goes back to the group."""
        self._s.coordinator.close_session(group, member)
        await self._s.service.release_member(group, member)

    def _leader(self) -> m.LeaderIdAndEpoch:
        return m.LeaderIdAndEpoch(leader_id=self._identity.node_id, leader_epoch=0)

    def _by_topic_id(
        self,
        answers: Iterable[tuple[str, _Partition]],
        unknown: Mapping[uuid.UUID, list[int]],
        unknown_partition: Callable[[int], _Partition],
        topic: Callable[[uuid.UUID, tuple[_Partition, ...]], _Topic],
    ) -> tuple[_Topic, ...]:
        """ShareFetch's and ShareAcknowledge's answer: the partitions' answers grouped
        under their topic's ID (a topic deleted meanwhile is left out), then
        UNKNOWN_TOPIC_ID for each partition of an ID no topic has."""
        ids = self._ids()
        by_topic: dict[str, list[_Partition]] = {}
        for name, answer in answers:
            by_topic.setdefault(name, []).append(answer)
        known = [topic(ids[t], tuple(ps)) for t, ps in by_topic.items() if t in ids]
        missing = [
            topic(tid, tuple(unknown_partition(p) for p in parts))
            for tid, parts in unknown.items()
        ]
        return (*known, *missing)

    def _resolve(
        self, topics: tuple[m.ShareFetchTopic, ...]
    ) -> tuple[list[tuple[TopicInfo, m.ShareFetchPartition]], dict[uuid.UUID, list[int]]]:
        named: list[tuple[TopicInfo, m.ShareFetchPartition]] = []
        unknown: dict[uuid.UUID, list[int]] = {}
        for t in topics:
            info = self._core.topic_by_id(t.topic_id)
            for p in t.partitions:
                if info is None or not 0 <= p.partition_index < info.partitions:
                    unknown.setdefault(t.topic_id, []).append(p.partition_index)
                else:
                    named.append((info, p))
        return named, unknown

    async def _acknowledge_all(
        self,
        group: str,
        member: str,
        named: list[tuple[TopicInfo, m.ShareFetchPartition]],
    ) -> dict[TopicPartition, int]:
        """Apply each partition's acknowledgement batches, all partitions with one
        journal write: each one's error code (0 = done)."""
        keys, acks, out = _acknowledgements(named)
        out.update(_ack_codes(keys, await self._s.service.acknowledge_many(group, member, acks)))
        return out


def _acknowledgements(
    named: list[tuple[TopicInfo, m.ShareFetchPartition]],
) -> tuple[list[TopicPartition], list[tuple[str, int, list[AckBatch]]], dict[TopicPartition, int]]:
    """The partitions carrying acknowledgements, their batches, and the error code of
    each partition whose batches do not parse."""
    keys: list[TopicPartition] = []
    acks: list[tuple[str, int, list[AckBatch]]] = []
    refused: dict[TopicPartition, int] = {}
    for info, p in named:
        if not p.acknowledgement_batches:
            continue
        key = (info.name, p.partition_index)
        try:
            batches = [
                AckBatch(
                    b.first_offset, b.last_offset, tuple(AckType(t) for t in b.acknowledge_types)
                )
                for b in p.acknowledgement_batches
            ]
        except ValueError:
            refused[key] = ErrorCode.INVALID_RECORD_STATE
            continue
        keys.append(key)
        acks.append((key[0], key[1], batches))
    return keys, acks, refused


def _ack_codes(
    keys: list[TopicPartition], outcomes: Sequence[BaseException | None]
) -> dict[TopicPartition, int]:
    """Each acknowledged partition's error code (0 = durable)."""
    out: dict[TopicPartition, int] = {}
    for key, error in zip(keys, outcomes, strict=True):
        if error is None:
            out[key] = 0
        elif isinstance(error, (InvalidAcknowledgement, KeyError, ValueError)):
            out[key] = ErrorCode.INVALID_RECORD_STATE
        else:
            out[key] = int(error_code_for(error))
    return out


# -- ACL rules -----------------------------------------------------------------------


def heartbeat_rule(
    access: Access, req: Request[m.ShareGroupHeartbeatRequest]
) -> Gate[m.ShareGroupHeartbeatRequest, m.ShareGroupHeartbeatResponse]:
    body = req.body
    if not access.group(Operation.READ, body.group_id):
        return answer_now(req, m.ShareGroupHeartbeatResponse(error_code=GROUP_DENIED))
    for topic in body.subscribed_topic_names or ():
        if not access.topic(Operation.DESCRIBE, topic):
            return answer_now(req, m.ShareGroupHeartbeatResponse(error_code=TOPIC_DENIED))
    return Gate(req)


def describe_rule(
    access: Access, req: Request[m.ShareGroupDescribeRequest]
) -> Gate[m.ShareGroupDescribeRequest, m.ShareGroupDescribeResponse]:
    """DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED once per group id otherwise);
    a group whose members use a topic the principal may not DESCRIBE is answered
    TOPIC_AUTHORIZATION_FAILED without its members."""
    body = req.body
    distinct = tuple(dict.fromkeys(body.group_ids))
    allowed = tuple(g for g in distinct if access.group(Operation.DESCRIBE, g))
    denied = tuple(g for g in distinct if g not in allowed)
    refuse = refuse_groups_with_denied_topics(access, _topics_used, _topics_refusal)

    def finish(
        r: m.ShareGroupDescribeResponse | Outcome,
    ) -> m.ShareGroupDescribeResponse | Outcome:
        if isinstance(r, Outcome):
            return r
        return attrs.evolve(
            r,
            groups=(
                *refuse(r.groups),
                *(m.ShareDescribedGroup(group_id=g, error_code=GROUP_DENIED) for g in denied),
            ),
        )

    return Gate(attrs.evolve(req, body=attrs.evolve(body, group_ids=allowed)), finish=finish)


def _topics_used(group: m.ShareDescribedGroup) -> Iterator[str]:
    # Subscriptions too, not only assignments as Kafka (see docs/security.md).
    for member in group.members:
        yield from member.subscribed_topic_names
        for tp in member.assignment.topic_partitions:
            yield tp.topic_name


def _topics_refusal(group: m.ShareDescribedGroup, message: str) -> m.ShareDescribedGroup:
    return m.ShareDescribedGroup(
        group_id=group.group_id, error_code=TOPIC_DENIED, error_message=message
    )


def _topic_read_error(access: Access) -> Callable[[m.ShareFetchTopic], ErrorCode | None]:
    """READ on a topic named by ID; an ID no topic has passes (the handler answers it)."""

    def error_of(t: m.ShareFetchTopic) -> ErrorCode | None:
        name = access.topic_name(t.topic_id)
        if name is None or access.topic(Operation.READ, name):
            return None
        return TOPIC_DENIED

    return error_of


def share_fetch_rule(
    access: Access, req: Request[m.ShareFetchRequest]
) -> Gate[m.ShareFetchRequest, m.ShareFetchResponse]:
    """READ on the group (else GROUP_AUTHORIZATION_FAILED for all), then on each topic."""
    body = req.body
    if not access.group(Operation.READ, body.group_id or ""):
        return answer_now(req, m.ShareFetchResponse(error_code=GROUP_DENIED))
    return split_entries(
        req, body.topics, lambda t: t, _topic_read_error(access),
        lambda t, code: m.ShareFetchTopicResponse(topic_id=t.topic_id, partitions=tuple(
            m.ShareFetchPartitionData(partition_index=p.partition_index, error_code=code)
            for p in t.partitions
        )),
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, responses=(*r.responses, *denied)),
    )


def share_acknowledge_rule(
    access: Access, req: Request[m.ShareAcknowledgeRequest]
) -> Gate[m.ShareAcknowledgeRequest, m.ShareAcknowledgeResponse]:
    """As :func:`share_fetch_rule`, for the acknowledgements."""
    body = req.body
    if not access.group(Operation.READ, body.group_id or ""):
        return answer_now(req, m.ShareAcknowledgeResponse(error_code=GROUP_DENIED))
    return split_entries(
        req, body.topics, lambda t: t, _topic_read_error(access),
        lambda t, code: m.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=tuple(
            m.ShareAcknowledgePartitionData(partition_index=p.partition_index, error_code=code)
            for p in t.partitions
        )),
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, responses=(*r.responses, *denied)),
    )
