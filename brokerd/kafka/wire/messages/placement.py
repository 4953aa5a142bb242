# -*- test-case-name: tests.kafka.server.handlers.test_leadership -*-
"""Request and response bodies of ElectLeaders (43), AlterPartitionReassignments (45) and
ListPartitionReassignments (46), and the version ranges brokerd answers (:data:`APIS`,
collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. ElectLeaders is flexible from v2, the reassignment
APIs at every version. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message

#: ElectLeaders' election types (v1+; v0 is always preferred).
PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1

# -- ElectLeaders (43) ---------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class ElectionTopicPartitions:
    topic: Annotated[str, Wire(STRING)]
    partitions: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ElectLeadersRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 2

    election_type: Annotated[int, Wire(INT8, 1)] = PREFERRED_ELECTION
    #: None: every partition.
    topic_partitions: Annotated[
        tuple[ElectionTopicPartitions, ...] | None,
        Wire(Array(Struct(ElectionTopicPartitions)), nullable_from=0),
    ] = array(None)
    timeout_ms: Annotated[int, Wire(INT32)] = 60000


@wire_message
@attrs.frozen(kw_only=True)
class ElectionPartitionResult:
    partition_id: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class ReplicaElectionResult:
    topic: Annotated[str, Wire(STRING)]
    partition_result: Annotated[
        tuple[ElectionPartitionResult, ...], Wire(Array(Struct(ElectionPartitionResult)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ElectLeadersResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 2

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    #: v1+: an error for the whole request.
    error_code: Annotated[int, Wire(INT16, 1)] = 0
    replica_election_results: Annotated[
        tuple[ReplicaElectionResult, ...], Wire(Array(Struct(ReplicaElectionResult)))
    ] = array()


# -- AlterPartitionReassignments (45) ------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class ReassignablePartition:
    partition_index: Annotated[int, Wire(INT32)]
    #: The replicas to move to; None cancels an ongoing reassignment.
    replicas: Annotated[tuple[int, ...] | None, Wire(Array(INT32), nullable_from=0)] = array(
        None
    )


@wire_message
@attrs.frozen(kw_only=True)
class ReassignableTopic:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[ReassignablePartition, ...], Wire(Array(Struct(ReassignablePartition)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class AlterPartitionReassignmentsRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    timeout_ms: Annotated[int, Wire(INT32)] = 60000
    #: v1+: whether a reassignment may change a partition's replica count.
    allow_replication_factor_change: Annotated[bool, Wire(BOOL, 1)] = True
    topics: Annotated[
        tuple[ReassignableTopic, ...], Wire(Array(Struct(ReassignableTopic)))
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ReassignablePartitionResponse:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class ReassignableTopicResponse:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[ReassignablePartitionResponse, ...],
        Wire(Array(Struct(ReassignablePartitionResponse))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class AlterPartitionReassignmentsResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    allow_replication_factor_change: Annotated[bool, Wire(BOOL, 1)] = True
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    responses: Annotated[
        tuple[ReassignableTopicResponse, ...], Wire(Array(Struct(ReassignableTopicResponse)))
    ] = array()


# -- ListPartitionReassignments (46) -------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class ListPartitionReassignmentsTopics:
    name: Annotated[str, Wire(STRING)]
    partition_indexes: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ListPartitionReassignmentsRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    timeout_ms: Annotated[int, Wire(INT32)] = 60000
    #: None: every partition.
    topics: Annotated[
        tuple[ListPartitionReassignmentsTopics, ...] | None,
        Wire(Array(Struct(ListPartitionReassignmentsTopics)), nullable_from=0),
    ] = array(None)


@wire_message
@attrs.frozen(kw_only=True)
class OngoingPartitionReassignment:
    partition_index: Annotated[int, Wire(INT32)]
    replicas: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()
    adding_replicas: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()
    removing_replicas: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class OngoingTopicReassignment:
    name: Annotated[str, Wire(STRING)]
    partitions: Annotated[
        tuple[OngoingPartitionReassignment, ...],
        Wire(Array(Struct(OngoingPartitionReassignment))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ListPartitionReassignmentsResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 0

    throttle_time_ms: Annotated[int, Wire(INT32)] = 0
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    topics: Annotated[
        tuple[OngoingTopicReassignment, ...], Wire(Array(Struct(OngoingTopicReassignment)))
    ] = array()


ELECT_LEADERS = ApiSpec(ApiKey.ELECT_LEADERS, ElectLeadersRequest, ElectLeadersResponse, 0, 2)
ALTER_PARTITION_REASSIGNMENTS = ApiSpec(
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    0,
    1,
)
LIST_PARTITION_REASSIGNMENTS = ApiSpec(
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    0,
    0,
)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (
    ELECT_LEADERS,
    ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS,
)
