# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of Produce (0), and the version range brokerd answers of each
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

# -- Produce (0) ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ProducePartitionData:
    index: int
    records: bytes | None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("index", INT32),
        Field("records", BYTES, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class ProduceTopicData:
    name: str
    partition_data: tuple[ProducePartitionData, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partition_data", Array(Struct(ProducePartitionData))),
    )


@attrs.frozen(kw_only=True)
class ProduceRequest:
    transactional_id: str | None = None
    acks: int
    timeout_ms: int
    topic_data: tuple[ProduceTopicData, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("transactional_id", STRING, 3, nullable_from=3),
        Field("acks", INT16),
        Field("timeout_ms", INT32),
        Field("topic_data", Array(Struct(ProduceTopicData))),
    )


@attrs.frozen(kw_only=True)
class BatchIndexAndErrorMessage:
    batch_index: int
    batch_index_error_message: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("batch_index", INT32),
        Field("batch_index_error_message", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class ProducePartitionResponse:
    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: tuple[BatchIndexAndErrorMessage, ...] = array()
    error_message: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("index", INT32),
        Field("error_code", INT16),
        Field("base_offset", INT64),
        Field("log_append_time_ms", INT64, 2),
        Field("log_start_offset", INT64, 5),
        Field("record_errors", Array(Struct(BatchIndexAndErrorMessage)), 8),
        Field("error_message", STRING, 8, nullable_from=8),
    )


@attrs.frozen(kw_only=True)
class ProduceTopicResponse:
    name: str
    partition_responses: tuple[ProducePartitionResponse, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("partition_responses", Array(Struct(ProducePartitionResponse))),
    )


@attrs.frozen(kw_only=True)
class ProduceResponse:
    responses: tuple[ProduceTopicResponse, ...] = array()
    throttle_time_ms: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("responses", Array(Struct(ProduceTopicResponse))),
        Field("throttle_time_ms", INT32, 1),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    # From 0 only so that librdkafka < 2.11.1 enables compression (it probes Produce
    # v0 for that); versions 0-2 are answered UNSUPPORTED_VERSION per partition.
    ApiSpec(ApiKey.PRODUCE, ProduceRequest, ProduceResponse, 0, 8),
)
