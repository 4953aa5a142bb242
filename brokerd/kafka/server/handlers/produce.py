# -*- test-case-name: tests.kafka.listener.test_protocol -*-
"""Produce (0): record batches to the core, per partition at once, with the acks=all
timeout; and its ACL rule. From v13 a request names each topic by its topic ID: the
topic with that ID now is written to (an unknown ID is answered UNKNOWN_TOPIC_ID, never
auto-created), and the answer carries the ID back.

A handler returns a response message, :data:`NO_RESPONSE` (acks=0) or
:data:`CLOSE_CONNECTION` (acks=0 that failed: Kafka closes the connection, since it cannot
answer). Errors from the core arrive as ``brokerd.errors`` exceptions and become
per-partition Kafka error codes. It does not validate batches (the core does, with
``storage/record/header.py``'s parser); Produce v3-6's zstd rule reads each batch's codec
with that module's lenient :func:`~brokerd.storage.record.header.batch_codecs`.
"""

from __future__ import annotations

from typing import TypeVar

import attrs
from twisted.internet import defer
from twisted.logger import Logger

from brokerd.clock import Clock
from brokerd.core.api import CoreApi
from brokerd.errors import InvalidRecord
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.acl_gate import (
    TXN_DENIED,
    Access,
    Gate,
    answer_now,
    by_name,
    split_entries,
)
from brokerd.kafka.server.deadline import DeadlinePassed, within
from brokerd.kafka.server.handler_base import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    Outcome,
    RequestContext,
    unexpected_code,
)
from brokerd.kafka.server.handler_base import gather as _gather
from brokerd.kafka.server.handler_base import message as _message
from brokerd.kafka.server.handlers.compaction import invalid_record_response
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.messages.produce import PRODUCE
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import Request
from brokerd.names import INTERNAL_TOPICS
from brokerd.security.acl import Operation
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.header import batch_codecs
from brokerd.storage.types import AppendInfo

T = TypeVar("T")

#: First Produce version allowed to carry zstd batches (KIP-110); Kafka refuses older.
ZSTD_MIN_PRODUCE_VERSION = 7
#: First Produce version that carries RecordBatch v2; 0-2 are only advertised so that
#: librdkafka older than 2.11.1 enables compression (it probes Produce v0 for that), and
#: are refused, as Kafka 4 does.
MIN_IMPLEMENTED_PRODUCE_VERSION = 3
#: First Produce version that names topics by ID (KIP-516) instead of by name.
TOPIC_ID_PRODUCE_VERSION = 13

class ProduceHandler:
    """Answers Produce. One instance per listener.

    :param core: the broker core.
    :param clock: for the acks=all produce timeout.
    """

    _log = Logger()

    def __init__(self, core: CoreApi, *, clock: Clock) -> None:
        self._core = core
        self._clock = clock

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's API, with its ACL rule."""
        return (route(PRODUCE, self.produce, produce_rule),)

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        """Map ``exc``; log it when it is not one of brokerd's own errors."""
        return unexpected_code(self._log, what, exc)

    def produce(
        self, conn: RequestContext, req: Request[apis.ProduceRequest]
    ) -> defer.Deferred[apis.ProduceResponse | Outcome]:
        """Answer a Produce. The common one (librdkafka at ``linger.ms=0``: acks 1 or
        all, one topic, one partition, appended at once in the reactor thread) is
        answered without a coroutine: its answer is built from the append's fired
        Deferred and returned fired. Every other one (and that one's append still
        running or failed) goes through :meth:`_produce`, with the same checks in the
        same order."""
        body = req.body
        version = req.api_version
        topics = body.topic_data
        if (
            len(topics) == 1
            and len(topics[0].partition_data) == 1
            and version >= MIN_IMPLEMENTED_PRODUCE_VERSION
            and body.acks in (-1, 1)
        ):
            t = topics[0]
            part = t.partition_data[0]
            name = self._topic_name(t, version)
            records = _checked(name, part, version)
            if isinstance(records, apis.ProducePartitionResponse):
                return defer.succeed(_one_topic(t, records))
            assert name is not None  # _checked refused it
            try:
                d = self._core.produce_batches(name, part.index, records, acks=body.acks)
            except Exception as e:
                return defer.succeed(_one_topic(t, self._append_failed(part, version, e)))
            result = d.result if d.called else None
            if isinstance(result, AppendInfo):
                return defer.succeed(_one_topic(t, _appended(part, result)))
            timeout = _timeout(body)
            return defer.Deferred.fromCoroutine(
                self._answer_one(t, part, version, d, timeout))
        return defer.Deferred.fromCoroutine(self._produce(req))

    async def _answer_one(
        self, t: apis.ProduceTopicData, part: apis.ProducePartitionData, version: int,
        d: defer.Deferred[AppendInfo], timeout: float | None,
    ) -> apis.ProduceResponse | Outcome:
        return _one_topic(t, await self._await_append(part, version, d, timeout))

    async def _produce(
        self, req: Request[apis.ProduceRequest]
    ) -> apis.ProduceResponse | Outcome:
        body = req.body
        version = req.api_version
        acks = body.acks
        refusal: tuple[ErrorCode, str] | None = None
        # A transactional produce (transactional_id set) is admitted like any other: the
        # core checks its batches against the transaction coordinator's verifier.
        if version < MIN_IMPLEMENTED_PRODUCE_VERSION:
            refusal = (ErrorCode.UNSUPPORTED_VERSION, "Produce v0-2 (message format 0/1) is "
                       "not supported; use v3+")
        elif acks not in (-1, 0, 1):
            refusal = (ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, not {acks}")
        if refusal is not None:
            if acks == 0:
                self._log.info("kafka: acks=0 produce refused ({why}); closing", why=refusal[1])
                return CLOSE_CONNECTION
            code, text = refusal
            return apis.ProduceResponse(
                responses=tuple(
                    _topic_refused(t, code, text) for t in body.topic_data
                )
            )
        timeout = _timeout(body)
        names = [self._topic_name(t, version) for t in body.topic_data]
        # Every partition at once: each has its own append queue and sync.
        produces = [
            self._produce_one(name, p, acks, version, timeout)
            for t, name in zip(body.topic_data, names, strict=True)
            for p in t.partition_data
        ]
        # One partition (a librdkafka producer at linger.ms=0): awaited as it is.
        flat = [await produces[0]] if len(produces) == 1 else await _gather(produces)
        per_topic: list[list[apis.ProducePartitionResponse]] = []
        for t in body.topic_data:
            per_topic.append(flat[: len(t.partition_data)])
            del flat[: len(t.partition_data)]
        if acks == 0:
            failed = [
                r for rs in per_topic for r in rs if r.error_code != ErrorCode.NONE
            ]
            if failed:
                self._log.info(
                    "kafka: acks=0 produce failed (error {code}: {text}); closing",
                    code=failed[0].error_code, text=failed[0].error_message,
                )
                return CLOSE_CONNECTION
            return NO_RESPONSE
        return apis.ProduceResponse(
            responses=tuple(
                apis.ProduceTopicResponse(
                    name=t.name, topic_id=t.topic_id, partition_responses=tuple(rs)
                )
                for t, rs in zip(body.topic_data, per_topic, strict=True)
            )
        )

    def _topic_name(self, t: apis.ProduceTopicData, version: int) -> str | None:
        """The topic ``t`` names: by name before v13, by ID from v13 (None: no topic has
        that ID, the zero ID included)."""
        if version < TOPIC_ID_PRODUCE_VERSION:
            return t.name
        info = self._core.topic_registry.topic_by_id(t.topic_id)
        return None if info is None else info.name

    async def _produce_one(
        self,
        topic: str | None,
        part: apis.ProducePartitionData,
        acks: int,
        version: int,
        timeout: float | None,
    ) -> apis.ProducePartitionResponse:
        records = _checked(topic, part, version)
        if isinstance(records, apis.ProducePartitionResponse):
            return records
        assert topic is not None  # _checked refused it
        try:
            d = self._core.produce_batches(topic, part.index, records, acks=acks)
        except Exception as e:
            return self._append_failed(part, version, e)
        return await self._await_append(part, version, d, timeout)

    async def _await_append(
        self, part: apis.ProducePartitionData, version: int,
        d: defer.Deferred[AppendInfo], timeout: float | None,
    ) -> apis.ProducePartitionResponse:
        try:
            if timeout is not None and not d.called:
                # (A small append without a sync is done already: nothing to time.) The
                # append is not cancelled: an idempotent retry of it is then answered
                # from the producer state.
                d = within(d, timeout, self._clock, f"not durable within {timeout:.3f}s")
            info = await d
        except Exception as e:
            return self._append_failed(part, version, e)
        return _appended(part, info)

    def _append_failed(
        self, part: apis.ProducePartitionData, version: int, e: Exception
    ) -> apis.ProducePartitionResponse:
        """The partition's answer to an append that raised ``e``."""
        if isinstance(e, DeadlinePassed):
            return _refused(part, ErrorCode.REQUEST_TIMED_OUT, str(e))
        if isinstance(e, InvalidRecord):  # keyless record, compacted topic
            return invalid_record_response(part.index, version, e)
        return _refused(part, self._unexpected("produce", e), _message(e))


def _timeout(body: apis.ProduceRequest) -> float | None:
    """The acks=all timeout, seconds (None: none to keep)."""
    return body.timeout_ms / 1000.0 if body.acks == -1 and body.timeout_ms > 0 else None


def _refused(
    part: apis.ProducePartitionData, code: ErrorCode, text: str
) -> apis.ProducePartitionResponse:
    return apis.ProducePartitionResponse(index=part.index, error_code=code, error_message=text)


def _checked(
    topic: str | None, part: apis.ProducePartitionData, version: int
) -> bytes | apis.ProducePartitionResponse:
    """The partition's records to append, or its answer when it is refused before any
    append."""
    if topic is None:  # v13+: an ID no topic has (never auto-created)
        return _refused(part, ErrorCode.UNKNOWN_TOPIC_ID, "no topic has this topic ID")
    if topic in INTERNAL_TOPICS:
        # Kafka's answer to a client writing to its internal topics.
        return _refused(
            part, ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}"
        )
    records = part.records
    if not records:
        return _refused(part, ErrorCode.CORRUPT_MESSAGE, "a produce must carry a record batch")
    if version < ZSTD_MIN_PRODUCE_VERSION and Compression.ZSTD in batch_codecs(records):
        return _refused(
            part, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later"
        )
    return records


def _appended(
    part: apis.ProducePartitionData, info: AppendInfo
) -> apis.ProducePartitionResponse:
    return apis.ProducePartitionResponse(
        index=part.index,
        error_code=0,
        base_offset=info.base_offset,
        log_append_time_ms=info.log_append_time,  # -1 unless a LogAppendTime topic
        log_start_offset=info.log_start_offset,
    )


def _one_topic(
    t: apis.ProduceTopicData, answer: apis.ProducePartitionResponse
) -> apis.ProduceResponse:
    return apis.ProduceResponse(responses=(apis.ProduceTopicResponse(
        name=t.name, topic_id=t.topic_id, partition_responses=(answer,)),))


def _topic_refused(
    t: apis.ProduceTopicData, code: ErrorCode, text: str | None = None
) -> apis.ProduceTopicResponse:
    """Every partition of ``t`` answered ``code``; the topic answered as the request
    named it (by name before v13, by ID from v13: the encoder writes the one the version
    has)."""
    return apis.ProduceTopicResponse(
        name=t.name,
        topic_id=t.topic_id,
        partition_responses=tuple(
            apis.ProducePartitionResponse(index=p.index, error_code=code, error_message=text)
            for p in t.partition_data
        ),
    )


# -- ACL rule (brokerd.kafka.server.acl_gate) ------------------------------------------


def _produce_denied(t: apis.ProduceTopicData, code: ErrorCode) -> apis.ProduceTopicResponse:
    return _topic_refused(t, code)


def produce_rule(
    access: Access, req: Request[apis.ProduceRequest]
) -> Gate[apis.ProduceRequest, apis.ProduceResponse]:
    body = req.body
    txn_id = body.transactional_id
    if txn_id is not None and not access.txn(Operation.WRITE, txn_id):
        if body.acks == 0:
            return answer_now(req, CLOSE_CONNECTION)
        return answer_now(req, apis.ProduceResponse(
            responses=tuple(_produce_denied(t, TXN_DENIED) for t in body.topic_data)
        ))
    by_id = req.api_version >= TOPIC_ID_PRODUCE_VERSION

    def key_of(t: apis.ProduceTopicData) -> str | None:
        # From v13, WRITE on the topic the ID names now; an ID no topic has passes on,
        # to be answered UNKNOWN_TOPIC_ID (there is no name to check, nor to reveal).
        return access.topic_name(t.topic_id) if by_id else by_name(t)

    def error_of(name: str | None) -> ErrorCode | None:
        return None if name is None else access.topic_error(Operation.WRITE, name)

    gate: Gate[apis.ProduceRequest, apis.ProduceResponse] = split_entries(
        req, body.topic_data, key_of, error_of,
        _produce_denied,
        narrow=lambda kept: attrs.evolve(body, topic_data=kept),
        widen=lambda r, denied: attrs.evolve(r, responses=(*r.responses, *denied)),
    )
    if body.acks == 0 and gate.changed:
        # Nothing can be answered to acks=0: Kafka closes the connection.
        return answer_now(req, CLOSE_CONNECTION)
    return gate


__all__ = ["ProduceHandler", "produce_rule"]
