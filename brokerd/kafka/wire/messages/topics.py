# -*- test-case-name: tests.test_kafka_codec -*-
"""Request and response bodies of CreateTopics (19) and DeleteTopics (20), and the version
range brokerd answers of each (:data:`APIS`, collected by
:mod:`brokerd.kafka.wire.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

from typing import Annotated

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    INT16,
    INT32,
    STRING,
    ApiKey,
    Array,
    Struct,
)
from brokerd.kafka.wire.schema import ApiSpec, Wire, array, wire_message

# -- CreateTopics (19) ---------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class CreatableReplicaAssignment:
    partition_index: Annotated[int, Wire(INT32)]
    broker_ids: Annotated[tuple[int, ...], Wire(Array(INT32))] = array()


@wire_message
@attrs.frozen(kw_only=True)
class CreatableTopicConfig:
    name: Annotated[str, Wire(STRING)]
    value: Annotated[str | None, Wire(STRING, nullable_from=0)] = None


@wire_message
@attrs.frozen(kw_only=True)
class CreatableTopic:
    name: Annotated[str, Wire(STRING)]
    num_partitions: Annotated[int, Wire(INT32)] = -1
    replication_factor: Annotated[int, Wire(INT16)] = -1
    assignments: Annotated[
        tuple[CreatableReplicaAssignment, ...],
        Wire(Array(Struct(CreatableReplicaAssignment))),
    ] = array()
    configs: Annotated[
        tuple[CreatableTopicConfig, ...],
        Wire(Array(Struct(CreatableTopicConfig))),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class CreateTopicsRequest:
    topics: Annotated[tuple[CreatableTopic, ...], Wire(Array(Struct(CreatableTopic)))] = array()
    timeout_ms: Annotated[int, Wire(INT32)] = 60_000
    validate_only: Annotated[bool, Wire(BOOL, 1)] = False


@wire_message
@attrs.frozen(kw_only=True)
class CreatableTopicResult:
    name: Annotated[str, Wire(STRING)]
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, 1, nullable_from=1)] = None


@wire_message
@attrs.frozen(kw_only=True)
class CreateTopicsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 2)] = 0
    topics: Annotated[
        tuple[CreatableTopicResult, ...],
        Wire(Array(Struct(CreatableTopicResult))),
    ] = array()


# -- DeleteTopics (20) ---------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class DeleteTopicsRequest:
    topic_names: Annotated[tuple[str, ...], Wire(Array(STRING))] = array()
    timeout_ms: Annotated[int, Wire(INT32)] = 60_000


@wire_message
@attrs.frozen(kw_only=True)
class DeletableTopicResult:
    name: Annotated[str, Wire(STRING)]
    error_code: Annotated[int, Wire(INT16)] = 0


@wire_message
@attrs.frozen(kw_only=True)
class DeleteTopicsResponse:
    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    responses: Annotated[
        tuple[DeletableTopicResult, ...],
        Wire(Array(Struct(DeletableTopicResult))),
    ] = array()


#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec, ...] = (
    ApiSpec(ApiKey.CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse, 2, 4),
    ApiSpec(ApiKey.DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse, 1, 3),
)
