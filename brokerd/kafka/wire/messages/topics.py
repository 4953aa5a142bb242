# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""Request and response bodies of CreateTopics (19) and DeleteTopics (20), and the version
range brokerd answers of each (:data:`APIS`, collected by
:mod:`brokerd.kafka.wire.requests.registry`).

Transcribed from Kafka's JSON message schemas
(``clients/src/main/resources/common/message/*.json``); the layout rules are
:mod:`brokerd.kafka.wire.schema`'s. Pure: no I/O, no Twisted, no broker logic.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, ClassVar

import attrs

from brokerd.kafka.wire.codec import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    UUID,
    ZERO_UUID,
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
    FLEXIBLE_FROM: ClassVar[int | None] = 5

    topics: Annotated[tuple[CreatableTopic, ...], Wire(Array(Struct(CreatableTopic)))] = array()
    timeout_ms: Annotated[int, Wire(INT32)] = 60_000
    validate_only: Annotated[bool, Wire(BOOL, 1)] = False


@wire_message
@attrs.frozen(kw_only=True)
class CreatableTopicConfigs:
    """One config of a created topic (v5+), as DescribeConfigs would describe it."""

    name: Annotated[str, Wire(STRING)]
    value: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    read_only: Annotated[bool, Wire(BOOL)] = False
    config_source: Annotated[int, Wire(INT8)] = -1
    is_sensitive: Annotated[bool, Wire(BOOL)] = False


@wire_message
@attrs.frozen(kw_only=True)
class CreatableTopicResult:
    name: Annotated[str, Wire(STRING)]
    #: v7+: the created topic's ID (zero when nothing was created).
    topic_id: Annotated[uuid.UUID, Wire(UUID, 7)] = ZERO_UUID
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, 1, nullable_from=1)] = None
    # v5+ also has TopicConfigErrorCode, a tagged field (tag 0) for configs that could
    # not be described; brokerd always describes them, so it is never written.
    num_partitions: Annotated[int, Wire(INT32, 5)] = -1
    replication_factor: Annotated[int, Wire(INT16, 5)] = -1
    #: v5+; null when the topic was not created.
    configs: Annotated[
        tuple[CreatableTopicConfigs, ...] | None,
        Wire(Array(Struct(CreatableTopicConfigs)), 5, nullable_from=5),
    ] = array()


@wire_message
@attrs.frozen(kw_only=True)
class CreateTopicsResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 5

    throttle_time_ms: Annotated[int, Wire(INT32, 2)] = 0
    topics: Annotated[
        tuple[CreatableTopicResult, ...],
        Wire(Array(Struct(CreatableTopicResult))),
    ] = array()


# -- DeleteTopics (20) ---------------------------------------------------------------


@wire_message
@attrs.frozen(kw_only=True)
class DeleteTopicState:
    """A topic to delete (v6+): by name, or by ID when the name is null."""

    name: Annotated[str | None, Wire(STRING, nullable_from=0)] = None
    topic_id: Annotated[uuid.UUID, Wire(UUID)] = ZERO_UUID


@wire_message
@attrs.frozen(kw_only=True)
class DeleteTopicsRequest:
    FLEXIBLE_FROM: ClassVar[int | None] = 4

    #: v6+ (names or IDs); v1-5 have ``topic_names``.
    topics: Annotated[
        tuple[DeleteTopicState, ...], Wire(Array(Struct(DeleteTopicState)), 6)
    ] = array()
    topic_names: Annotated[tuple[str, ...], Wire(Array(STRING), 0, 5)] = array()
    timeout_ms: Annotated[int, Wire(INT32)] = 60_000


@wire_message
@attrs.frozen(kw_only=True)
class DeletableTopicResult:
    #: Null (v6+) for an ID no topic has.
    name: Annotated[str | None, Wire(STRING, nullable_from=6)]
    topic_id: Annotated[uuid.UUID, Wire(UUID, 6)] = ZERO_UUID
    error_code: Annotated[int, Wire(INT16)] = 0
    error_message: Annotated[str | None, Wire(STRING, 5, nullable_from=5)] = None


@wire_message
@attrs.frozen(kw_only=True)
class DeleteTopicsResponse:
    FLEXIBLE_FROM: ClassVar[int | None] = 4

    throttle_time_ms: Annotated[int, Wire(INT32, 1)] = 0
    responses: Annotated[
        tuple[DeletableTopicResult, ...],
        Wire(Array(Struct(DeletableTopicResult))),
    ] = array()


CREATE_TOPICS = ApiSpec(ApiKey.CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse, 2, 7)
DELETE_TOPICS = ApiSpec(ApiKey.DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse, 1, 6)
#: The APIs of this module and the versions brokerd answers (ApiVersions advertises them).
APIS: tuple[ApiSpec[Any, Any], ...] = (CREATE_TOPICS, DELETE_TOPICS)
