# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of CreateTopics (19) and DeleteTopics (20), and the version
range brokerd answers of each (:data:`APIS`, collected by
:mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    INT16,
    INT32,
    STRING,
    ApiKey,
    Array,
    Field,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, array

# -- CreateTopics (19) ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CreatableReplicaAssignment:
    partition_index: int
    broker_ids: tuple[int, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_index", INT32),
        Field("broker_ids", Array(INT32)),
    )


@attrs.frozen(kw_only=True)
class CreatableTopicConfig:
    name: str
    value: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("value", STRING, nullable_from=0),
    )


@attrs.frozen(kw_only=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[CreatableReplicaAssignment, ...] = array()
    configs: tuple[CreatableTopicConfig, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("num_partitions", INT32),
        Field("replication_factor", INT16),
        Field("assignments", Array(Struct(CreatableReplicaAssignment))),
        Field("configs", Array(Struct(CreatableTopicConfig))),
    )


@attrs.frozen(kw_only=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...] = array()
    timeout_ms: int = 60_000
    validate_only: bool = False
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topics", Array(Struct(CreatableTopic))),
        Field("timeout_ms", INT32),
        Field("validate_only", BOOL, 1),
    )


@attrs.frozen(kw_only=True)
class CreatableTopicResult:
    name: str
    error_code: int = 0
    error_message: str | None = None
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("error_code", INT16),
        Field("error_message", STRING, 1, nullable_from=1),
    )


@attrs.frozen(kw_only=True)
class CreateTopicsResponse:
    throttle_time_ms: int = 0
    topics: tuple[CreatableTopicResult, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 2),
        Field("topics", Array(Struct(CreatableTopicResult))),
    )


# -- DeleteTopics (20) ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DeleteTopicsRequest:
    topic_names: tuple[str, ...] = array()
    timeout_ms: int = 60_000
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("topic_names", Array(STRING)),
        Field("timeout_ms", INT32),
    )


@attrs.frozen(kw_only=True)
class DeletableTopicResult:
    name: str
    error_code: int = 0
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", STRING),
        Field("error_code", INT16),
    )


@attrs.frozen(kw_only=True)
class DeleteTopicsResponse:
    throttle_time_ms: int = 0
    responses: tuple[DeletableTopicResult, ...] = array()
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("throttle_time_ms", INT32, 1),
        Field("responses", Array(Struct(DeletableTopicResult))),
    )


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse, 2, 4),
    ApiSpec(ApiKey.DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse, 1, 3),
)
