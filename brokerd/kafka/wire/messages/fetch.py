# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of Fetch (1), and the version range brokerd answers of each
(:data:`APIS`, collected by :mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    ApiKey,
    Array,
    Field,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, array
from brokerd.net.frames import Records

# -- Fetch (1) -----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FetchPartition:
    partition: int
    current_leader_epoch: int = -1
    fetch_offset: int
    log_start_offset: int = -1
    partition_max_bytes: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition", INT32),
        Field("current_leader_epoch", INT32, 9),
        Field("fetch_offset", INT64),
        Field("log_start_offset", INT64, 5),
        Field("partition_max_bytes", INT32),
    )


@attrs.frozen(kw_only=True)
class FetchTopic:
    topic: str
    partitions: tuple[FetchPartition, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topic", STRING),
        Field("partitions", Array(Struct(FetchPartition))),
    )


@attrs.frozen(kw_only=True)
class ForgottenTopic:
    topic: str
    partitions: tuple[int, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topic", STRING),
        Field("partitions", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class FetchRequest:
    replica_id: int = -1
    max_wait_ms: int
    min_bytes: int
    max_bytes: int = 0x7FFFFFFF
    isolation_level: int = 0
    session_id: int = 0
    session_epoch: int = -1
    topics: tuple[FetchTopic, ...] = array()
    forgotten_topics_data: tuple[ForgottenTopic, ...] = array()
    rack_id: str = ""
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("replica_id", INT32),
        Field("max_wait_ms", INT32),
        Field("min_bytes", INT32),
        Field("max_bytes", INT32, 3),
        Field("isolation_level", INT8, 4),
        Field("session_id", INT32, 7),
        Field("session_epoch", INT32, 7),
        Field("topics", Array(Struct(FetchTopic))),
        Field("forgotten_topics_data", Array(Struct(ForgottenTopic)), 7),
        Field("rack_id", STRING, 11),
    )


@attrs.frozen(kw_only=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("producer_id", INT64),
        Field("first_offset", INT64),
    )


@attrs.frozen(kw_only=True)
class FetchPartitionResponse:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: tuple[AbortedTransaction, ...] | None = array(None)
    preferred_read_replica: int = -1
    #: Stored batches: bytes, or :class:`~brokerd.net.frames.StoredRecords` (sent
    #: without being joined into the frame).
    records: Records | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("error_code", INT16),
        Field("high_watermark", INT64),
        Field("last_stable_offset", INT64, 4),
        Field("log_start_offset", INT64, 5),
        Field("aborted_transactions", Array(Struct(AbortedTransaction)), 4, nullable_from=4),
        Field("preferred_read_replica", INT32, 11),
        Field("records", BYTES, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class FetchTopicResponse:
    topic: str
    partitions: tuple[FetchPartitionResponse, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topic", STRING),
        Field("partitions", Array(Struct(FetchPartitionResponse))),
    )


@attrs.frozen(kw_only=True)
class FetchResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    session_id: int = 0
    responses: tuple[FetchTopicResponse, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("error_code", INT16, 7),
        Field("session_id", INT32, 7),
        Field("responses", Array(Struct(FetchTopicResponse))),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.FETCH, FetchRequest, FetchResponse, 4, 11),
)
