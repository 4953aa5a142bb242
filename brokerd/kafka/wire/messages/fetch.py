# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of Fetch (1), and the version range brokerd answers of each
(:data:`APIS`, collected by :mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.

Versions 12+ are flexible: the records become compact (an unsigned varint of length + 1
before the stored bytes, written by the codec's Writer in front of a spliced part as
well). The schemas' tagged fields are not modelled: the request's (ClusterId,
ReplicaState, a partition's ReplicaDirectoryId and HighWatermark) are skipped when read,
and the response's (a partition's DivergingEpoch, CurrentLeader and SnapshotId, the
response's NodeEndpoints) are left out, which Kafka's readers take as their defaults.
From version 13 on, topics are named by topic ID, in the request and in the answer.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    ZERO_UUID,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message
from brokerd.storage.types import Records

# -- Fetch (1) -----------------------------------------------------------------------

#: First flexible version of Fetch (compact encodings, tagged fields).
FETCH_FLEXIBLE_FROM = 12
#: First version that names topics by ID (request and response).
FETCH_TOPIC_IDS_FROM = 13


@wire_message
@attrs.frozen(kw_only=True)
class FetchPartition:
    partition: Annotated[int, Wire(INT32)]
    current_leader_epoch: Annotated[int, Wire(INT32, 9)] = -1
    fetch_offset: Annotated[int, Wire(INT64)]
    #: The epoch of the last record the fetcher has (a follower's divergence check).
    last_fetched_epoch: Annotated[int, Wire(INT32, 12)] = -1
    log_start_offset: Annotated[int, Wire(INT64, 5)] = -1
    partition_max_bytes: Annotated[int, Wire(INT32)]


@wire_message
@attrs.frozen(kw_only=True)
class FetchTopic:
    topic: Annotated[str, Wire(STRING, 0, 12)] = ""
    topic_id: Annotated[uuid.UUID, Wire(UUID, 13)] = ZERO_UUID
    partitions: Annotated[tuple[FetchPartition, ...], Wire(Array(Struct(FetchPartition)))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class ForgottenTopic:
    topic: Annotated[str, Wire(STRING, 7, 12)] = ""
    topic_id: Annotated[uuid.UUID, Wire(UUID, 13)] = ZERO_UUID
    partitions: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class FetchRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = FETCH_FLEXIBLE_FROM

    #: A follower's broker ID, -1 for a consumer (from version 15 in the tagged
    #: ReplicaState, which is not modelled).
    replica_id: Annotated[int, Wire(INT32, 0, 14)] = -1
    max_wait_ms: Annotated[int, Wire(INT32)]
    min_bytes: Annotated[int, Wire(INT32)]
    max_bytes: Annotated[int, Wire(INT32, 3)] = 0x7FFFFFFF
    isolation_level: Annotated[int, Wire(INT8, 4)] = 0
    session_id: Annotated[int, Wire(INT32, 7)] = 0
    session_epoch: Annotated[int, Wire(INT32, 7)] = -1
    topics: Annotated[tuple[FetchTopic, ...], Wire(Array(Struct(FetchTopic)))] = array()
    forgotten_topics_data: Annotated[
        tuple[ForgottenTopic, ...],
        Wire(Array(Struct(ForgottenTopic)), 7),
    ] = array()
    rack_id: Annotated[str, Wire(STRING, 11)] = ""


@wire_message
@attrs.frozen(kw_only=True)
class AbortedTransaction:
    producer_id: Annotated[int, Wire(INT64)]
    first_offset: Annotated[int, Wire(INT64)]


@wire_message
@attrs.frozen(kw_only=True)
class FetchPartitionResponse:
    partition_index: Annotated[int, Wire(INT32)]
    error_code: Annotated[int, Wire(INT16)] = 0
    high_watermark: Annotated[int, Wire(INT64)] = -1
    last_stable_offset: Annotated[int, Wire(INT64, 4)] = -1
    log_start_offset: Annotated[int, Wire(INT64, 5)] = -1
    aborted_transactions: Annotated[
        tuple[AbortedTransaction, ...] | None,
        Wire(Array(Struct(AbortedTransaction)), 4, nullable_from=4),
    ] = array(None)
    preferred_read_replica: Annotated[int, Wire(INT32, 11)] = -1
    #: Stored batches: bytes, or :class:`~brokerd.net.frames.StoredRecords` (sent
    #: without being joined into the frame).
    records: Annotated[Records | None, Wire(BYTES, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class FetchTopicResponse:
    #: The topic's name: on the wire up to version 12; later the handler still fills
    #: it (the metrics count bytes out per topic name).
    topic: Annotated[str, Wire(STRING, 0, 12)] = ""
    topic_id: Annotated[uuid.UUID, Wire(UUID, 13)] = ZERO_UUID
    partitions: Annotated[
        tuple[FetchPartitionResponse, ...],
        Wire(Array(Struct(FetchPartitionResponse))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class FetchResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = FETCH_FLEXIBLE_FROM

    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    error_code: Annotated[int, Wire(INT16, 7)] = 0
    session_id: Annotated[int, Wire(INT32, 7)] = 0
    responses: Annotated[
        tuple[FetchTopicResponse, ...],
        Wire(Array(Struct(FetchTopicResponse))),
    ] = array()


FETCH = ApiSpec(ApiKey.FETCH, FetchRequest, FetchResponse, 4, 18)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (FETCH,)
