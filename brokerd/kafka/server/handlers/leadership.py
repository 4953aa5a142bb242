# -*- test-case-name: tests.kafka.server.handlers.test_leadership -*-
"""What one node answers about leadership and replica placement: OffsetForLeaderEpoch
(23), DescribeQuorum (55), ElectLeaders (43), AlterPartitionReassignments (45) and
ListPartitionReassignments (46), and their ACL rules.

brokerd is its own leader for every partition, in one leader epoch
(:data:`~brokerd.kafka.server.handler_base.LEADER_EPOCH`) that starts at the log start
offset; it stamps that epoch on every batch it stores. So a partition's epoch history has
one entry, and OffsetForLeaderEpoch answers as Kafka's leader epoch cache answers with
one entry (:func:`epoch_end_offset`): the current epoch ends at the log end, an epoch
before it ends where the current one starts, a later or undefined epoch is unknown (-1,
-1). A client's ``current_leader_epoch`` is checked as Kafka checks it (older: fenced,
newer: unknown). The end a consumer may see is the high watermark.

DescribeQuorum describes the KRaft quorum of a single combined node: one voter, itself,
the leader, in the same epoch; no observers. brokerd keeps its metadata in its own
stores, not in a replicated ``__cluster_metadata`` log, so that log is empty: its high
watermark and the voter's log end offset are 0. The request must name
``__cluster_metadata`` partition 0 alone, as Kafka requires (else
UNKNOWN_TOPIC_OR_PARTITION per named partition); v2's node list gives the voter's one
listener, the Kafka listener clients reach it on.

Every partition has one replica, this node, which is its preferred leader and leads it:
ElectLeaders finds no election needed (ELECTION_NOT_NEEDED for each partition named, an
empty answer for "every partition", as Kafka leaves those out), no reassignment is ever
in progress (ListPartitionReassignments lists none), and a reassignment can only name
the replicas a partition already has, this node alone (done at once); any other broker
id is INVALID_REPLICA_ASSIGNMENT, as Kafka answers for a broker that is not registered,
and cancelling is NO_REASSIGNMENT_IN_PROGRESS. The cluster rights are Kafka's: ALTER on
the cluster to elect or reassign, DESCRIBE to list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import attrs
from twisted.logger import Logger

from brokerd.clock import Seconds
from brokerd.core.api import CoreApi
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.acl_gate import (
    CLUSTER_DENIED,
    TOPIC_DENIED,
    Access,
    Gate,
    Rule,
    answer_now,
    split_entries,
)
from brokerd.kafka.server.handler_base import (
    LEADER_EPOCH,
    BrokerIdentity,
    RequestContext,
    unexpected_code,
)
from brokerd.kafka.server.handler_base import gather as _gather
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.messages.leadership import (
    DESCRIBE_QUORUM,
    OFFSET_FOR_LEADER_EPOCH,
    DescribeQuorumPartitionData,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeQuorumTopicData,
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
    OffsetForLeaderTopicResult,
    QuorumListener,
    QuorumNode,
    ReplicaState,
)
from brokerd.kafka.wire.messages.placement import (
    ALTER_PARTITION_REASSIGNMENTS,
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
    PREFERRED_ELECTION,
    UNCLEAN_ELECTION,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectionPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
    ReplicaElectionResult,
)
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import Operation
from brokerd.storage.types import TopicInfo

#: Kafka's "no epoch" and "no offset" in an OffsetForLeaderEpoch answer.
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
#: The KRaft metadata log's topic and partition, the only one DescribeQuorum describes.
METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
#: The name DescribeQuorum v2 gives the voter's listener (the Kafka listener clients use).
QUORUM_LISTENER = "BROKER"
#: The metadata log's end: brokerd replicates no metadata log (see the module docstring).
METADATA_LOG_END = 0

#: The request and response classes of an API behind :func:`cluster_rule`.
Q = TypeVar("Q")
P = TypeVar("P")


def epoch_end_offset(requested: int, log_start: int, log_end: int) -> tuple[int, int]:
    """``(epoch, end offset)`` for ``requested`` in a log whose only epoch,
    :data:`LEADER_EPOCH`, starts at ``log_start`` and is still current at ``log_end``:
    Kafka's leader epoch cache lookup over that one entry."""
    if requested == UNDEFINED_EPOCH or requested > LEADER_EPOCH:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if requested == LEADER_EPOCH:
        return LEADER_EPOCH, log_end
    # An epoch before the first one known ends where the first one starts.
    return requested, log_start


def epoch_fence(current_leader_epoch: int) -> ErrorCode | None:
    """The error for a client that believes the leader is in ``current_leader_epoch``
    (-1: it does not say), or None."""
    if current_leader_epoch in (UNDEFINED_EPOCH, LEADER_EPOCH):
        return None
    if current_leader_epoch < LEADER_EPOCH:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


class LeadershipHandlers:
    """Answers OffsetForLeaderEpoch and DescribeQuorum.

    :param core: the broker core (partition existence and offsets).
    :param identity: the node id and the advertised listener (read on every request).
    :param clock: wall time, for the voter's last caught-up timestamp (it is the leader:
        always caught up).
    """

    _log = Logger()

    def __init__(self, core: CoreApi, identity: BrokerIdentity, *, clock: Seconds) -> None:
        self._core = core
        self._id = identity
        self._clock = clock

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(
                OFFSET_FOR_LEADER_EPOCH,
                self.offset_for_leader_epoch,
                offset_for_leader_epoch_rule,
            ),
            route(DESCRIBE_QUORUM, self.describe_quorum, describe_quorum_rule),
            route(
                ELECT_LEADERS, self.elect_leaders,
                cluster_rule(Operation.ALTER, _elect_leaders_denied),
            ),
            route(
                ALTER_PARTITION_REASSIGNMENTS,
                self.alter_partition_reassignments,
                cluster_rule(Operation.ALTER, _alter_reassignments_denied),
            ),
            route(
                LIST_PARTITION_REASSIGNMENTS,
                self.list_partition_reassignments,
                cluster_rule(Operation.DESCRIBE, _list_reassignments_denied),
            ),
        )

    # -- OffsetForLeaderEpoch -----------------------------------------------------------

    async def offset_for_leader_epoch(
        self, conn: RequestContext, req: Request[OffsetForLeaderEpochRequest]
    ) -> OffsetForLeaderEpochResponse:
        body = req.body
        topics = []
        for t in body.topics:
            parts = await _gather([self._epoch_end(t.topic, p) for p in t.partitions])
            topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=tuple(parts)))
        return OffsetForLeaderEpochResponse(topics=tuple(topics))

    async def _epoch_end(self, topic: str, p: OffsetForLeaderPartition) -> EpochEndOffset:
        try:
            # Also the partition's existence check (UNKNOWN_TOPIC_OR_PARTITION).
            log_start, log_end = await self._core.reads.list_offsets(topic, p.partition)
        except Exception as e:
            return EpochEndOffset(
                partition=p.partition,
                error_code=unexpected_code(self._log, "offset for leader epoch", e),
            )
        fenced = epoch_fence(p.current_leader_epoch)
        if fenced is not None:
            return EpochEndOffset(partition=p.partition, error_code=fenced)
        epoch, end = epoch_end_offset(p.leader_epoch, log_start, log_end)
        return EpochEndOffset(partition=p.partition, leader_epoch=epoch, end_offset=end)

    # -- DescribeQuorum -----------------------------------------------------------------

    async def describe_quorum(
        self, conn: RequestContext, req: Request[DescribeQuorumRequest]
    ) -> DescribeQuorumResponse:
        body = req.body
        if not _names_metadata_partition(body):
            return _quorum_refused(body, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        node = self._id.node_id
        now_ms = int(self._clock.seconds() * 1000)
        voter = ReplicaState(
            replica_id=node,
            log_end_offset=METADATA_LOG_END,
            # Kafka's leader reports no fetch of its own and "caught up now".
            last_fetch_timestamp=-1,
            last_caught_up_timestamp=now_ms,
        )
        return DescribeQuorumResponse(
            topics=(
                DescribeQuorumTopicData(
                    topic_name=METADATA_TOPIC,
                    partitions=(
                        DescribeQuorumPartitionData(
                            partition_index=METADATA_PARTITION,
                            leader_id=node,
                            leader_epoch=LEADER_EPOCH,
                            high_watermark=METADATA_LOG_END,
                            current_voters=(voter,),
                            observers=(),
                        ),
                    ),
                ),
            ),
            nodes=(
                QuorumNode(
                    node_id=node,
                    listeners=(
                        QuorumListener(
                            name=QUORUM_LISTENER,
                            host=self._id.advertised_host,
                            port=self._id.advertised_port,
                        ),
                    ),
                ),
            ),
        )


    # -- ElectLeaders ---------------------------------------------------------------------

    async def elect_leaders(
        self, conn: RequestContext, req: Request[ElectLeadersRequest]
    ) -> ElectLeadersResponse:
        body = req.body
        if body.election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            return ElectLeadersResponse(error_code=ErrorCode.INVALID_REQUEST)
        if body.topic_partitions is None:
            # Every partition: Kafka answers only those it elected a leader for; none.
            return ElectLeadersResponse()
        known = self._core.topic_registry.topics()
        return ElectLeadersResponse(
            replica_election_results=tuple(
                ReplicaElectionResult(
                    topic=t.topic,
                    partition_result=tuple(
                        _election(known.get(t.topic), t.topic, p) for p in t.partitions
                    ),
                )
                for t in body.topic_partitions
            )
        )

    # -- AlterPartitionReassignments and ListPartitionReassignments ---------------------

    async def alter_partition_reassignments(
        self, conn: RequestContext, req: Request[AlterPartitionReassignmentsRequest]
    ) -> AlterPartitionReassignmentsResponse:
        body = req.body
        known = self._core.topic_registry.topics()
        node = self._id.node_id
        return AlterPartitionReassignmentsResponse(
            allow_replication_factor_change=body.allow_replication_factor_change,
            responses=tuple(
                ReassignableTopicResponse(
                    name=t.name,
                    partitions=tuple(
                        _reassignment(
                            known.get(t.name), p, node, body.allow_replication_factor_change
                        )
                        for p in t.partitions
                    ),
                )
                for t in body.topics
            ),
        )

    async def list_partition_reassignments(
        self, conn: RequestContext, req: Request[ListPartitionReassignmentsRequest]
    ) -> ListPartitionReassignmentsResponse:
        # Reassignments complete as they are asked for (see the module docstring).
        return ListPartitionReassignmentsResponse()


#: Kafka's text for a partition whose preferred leader already leads it.
_ELECTION_NOT_NEEDED_TEXT = "Leader election not needed for topic partition."


def _election(info: TopicInfo | None, topic: str, partition: int) -> ElectionPartitionResult:
    if info is None or not 0 <= partition < info.partitions:
        return ElectionPartitionResult(
            partition_id=partition,
            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            error_message=f"No such topic or partition: {topic}-{partition}",
        )
    return ElectionPartitionResult(
        partition_id=partition,
        error_code=ErrorCode.ELECTION_NOT_NEEDED,
        error_message=_ELECTION_NOT_NEEDED_TEXT,
    )


def _reassignment(
    info: TopicInfo | None, p: ReassignablePartition, node: int, allow_rf_change: bool
) -> ReassignablePartitionResponse:
    def refuse(code: ErrorCode, text: str) -> ReassignablePartitionResponse:
        return ReassignablePartitionResponse(
            partition_index=p.partition_index, error_code=code, error_message=text
        )

    if info is None or not 0 <= p.partition_index < info.partitions:
        return refuse(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition.")
    if p.replicas is None:
        return refuse(
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No ongoing reassignment to cancel."
        )
    if not p.replicas:
        return refuse(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    if len(set(p.replicas)) != len(p.replicas):
        return refuse(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes duplicate replicas.",
        )
    other = next((r for r in p.replicas if r != node), None)
    if other is not None:
        if not allow_rf_change and len(p.replicas) != 1:
            return refuse(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "The replication factor is changed from 1 to "
                f"{len(p.replicas)} but allowReplicationFactorChange is false.",
            )
        return refuse(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes broker {other}, but no such "
            "broker is registered.",
        )
    # The replicas the partition already has: nothing to move.
    return ReassignablePartitionResponse(partition_index=p.partition_index)


def _names_metadata_partition(body: DescribeQuorumRequest) -> bool:
    """Whether the request names the metadata log's partition and nothing else."""
    if len(body.topics) != 1:
        return False
    (topic,) = body.topics
    return (
        topic.topic_name == METADATA_TOPIC
        and len(topic.partitions) == 1
        and topic.partitions[0].partition_index == METADATA_PARTITION
    )


def _quorum_refused(body: DescribeQuorumRequest, code: ErrorCode) -> DescribeQuorumResponse:
    """``code`` for every partition the request names (Kafka's partition-level refusal)."""
    return DescribeQuorumResponse(
        topics=tuple(
            DescribeQuorumTopicData(
                topic_name=t.topic_name,
                partitions=tuple(
                    DescribeQuorumPartitionData(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        )
    )


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


def _epoch_topics_denied(
    topics: Sequence[OffsetForLeaderTopic], code: ErrorCode
) -> tuple[OffsetForLeaderTopicResult, ...]:
    return tuple(
        OffsetForLeaderTopicResult(
            topic=t.topic,
            partitions=tuple(
                EpochEndOffset(partition=p.partition, error_code=code) for p in t.partitions
            ),
        )
        for t in topics
    )


def offset_for_leader_epoch_rule(
    access: Access, req: Request[OffsetForLeaderEpochRequest]
) -> Gate[OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse]:
    """Kafka's: a principal with CLUSTER_ACTION (a follower) may ask for every topic;
    any other needs DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED for the rest)."""
    body = req.body
    if access.cluster(Operation.CLUSTER_ACTION):
        return Gate(req)
    return split_entries(
        req, body.topics,
        lambda t: t.topic,
        lambda name: None if access.topic(Operation.DESCRIBE, name) else TOPIC_DENIED,
        lambda t, code: _epoch_topics_denied((t,), code)[0],
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )


def cluster_rule(op: Operation, denied: Callable[[Q], P]) -> Rule[Q, P]:
    """A rule needing ``op`` on the cluster: otherwise the API's answer with the
    top-level CLUSTER_AUTHORIZATION_FAILED (``denied`` builds it from the request)."""

    def rule(access: Access, req: Request[Q]) -> Gate[Q, P]:
        if access.cluster(op):
            return Gate(req)
        return answer_now(req, denied(req.body))

    return rule


def _elect_leaders_denied(body: ElectLeadersRequest) -> ElectLeadersResponse:
    """ElectLeaders v0 has no top-level error code: each partition gets it too."""
    return ElectLeadersResponse(
        error_code=CLUSTER_DENIED,
        replica_election_results=tuple(
            ReplicaElectionResult(topic=t.topic, partition_result=tuple(
                ElectionPartitionResult(partition_id=p, error_code=CLUSTER_DENIED)
                for p in t.partitions
            ))
            for t in body.topic_partitions or ()
        ),
    )


def _alter_reassignments_denied(
    body: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(error_code=CLUSTER_DENIED)


def _list_reassignments_denied(
    body: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(error_code=CLUSTER_DENIED)


def describe_quorum_rule(
    access: Access, req: Request[DescribeQuorumRequest]
) -> Gate[DescribeQuorumRequest, DescribeQuorumResponse]:
    """Kafka's: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED for all."""
    if access.cluster(Operation.DESCRIBE):
        return Gate(req)
    return answer_now(req, DescribeQuorumResponse(error_code=CLUSTER_DENIED))


__all__ = [
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "LeadershipHandlers",
    "describe_quorum_rule",
    "epoch_end_offset",
    "epoch_fence",
    "offset_for_leader_epoch_rule",
]
