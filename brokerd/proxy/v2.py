# -*- test-case-name: tests.proxy.test_site_broker -*-
"""Confluent REST Proxy v2: topics and partitions (metadata, produce), brokers, and
consumer instances (``/consumers/...``), answered in ``application/vnd.kafka.v2+json``
with Confluent's shapes and error codes.

Produce bodies are bounded (:data:`~brokerd.proxy.limits.MAX_RECORDS_PER_PRODUCE`
records; the body by the HTTP layer). In the schema formats a record batch's schema is
``value_schema_id`` (a registered id) or ``value_schema`` (the text, registered under
``TOPIC-value`` first, as Confluent's TopicNameStrategy), likewise for keys; the answer
names the ids used. Explicit commits take the offset of the last record consumed and
commit the next one (as Confluent's v2 does); a commit without a body commits every
position the instance's records calls reached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from brokerd.proxy import consume
from brokerd.proxy.context import ProxyContext
from brokerd.proxy.embedded import (
    V2_CONTENT_TYPE,
    EmbeddedFormat,
    accepted_formats,
    decode,
    encode_plain,
    encode_with,
    produce_format,
)
from brokerd.proxy.errors import (
    CONSUMER_INSTANCE_NOT_FOUND,
    INVALID_SCHEMA,
    KEY_SCHEMA_MISSING,
    NO_REGISTRY,
    NOT_ACCEPTABLE,
    UNSUPPORTED_CONTENT_TYPE,
    VALUE_SCHEMA_MISSING,
    ProxyError,
    bad_request,
    partition_not_found,
)
from brokerd.proxy.group_face import TopicPartition
from brokerd.proxy.http import Answer, Call, Route
from brokerd.proxy.instances import ConsumerInstance, parse_config
from brokerd.proxy.limits import (
    DEFAULT_RECORDS_BYTES,
    MAX_PARTITIONS_PER_REQUEST,
    MAX_SUBSCRIPTION_TOPICS,
)
from brokerd.proxy.produce import OutRecord
from brokerd.registry.model import ParsedSchema, RegistryError, Schema
from brokerd.security.acl import Operation

_INSTANCE = "/consumers/{group}/instances/{name}"


def _object(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise bad_request(f"{what} must be a JSON object")
    return value


def _list(value: object, what: str, most: int) -> list[Any]:
    if not isinstance(value, list):
        raise bad_request(f"{what} must be a JSON array")
    if len(value) > most:
        raise bad_request(f"{what} holds {len(value)} entries; at most {most} are taken")
    return value


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"{what} must be an integer")
    return value


def _str(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise bad_request(f"{what} must be a non-empty string")
    return value


def partition_json(ctx: ProxyContext, partition: int) -> dict[str, object]:
    return {
        "partition": partition,
        "leader": ctx.node_id,
        "replicas": [{"broker": ctx.node_id, "leader": True, "in_sync": True}],
    }


class V2Api:
    """The v2 endpoints over ``ctx``."""

    def __init__(self, ctx: ProxyContext) -> None:
        self._ctx = ctx

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/topics", self.list_topics),
            Route("GET", "/topics/{topic}", self.get_topic),
            Route("POST", "/topics/{topic}", self.produce),
            Route("GET", "/topics/{topic}/partitions", self.list_partitions),
            Route("GET", "/topics/{topic}/partitions/{partition}", self.get_partition),
            Route("POST", "/topics/{topic}/partitions/{partition}", self.produce_partition),
            Route("GET", "/topics/{topic}/partitions/{partition}/offsets", self.offsets),
            Route("GET", "/brokers", self.brokers),
            Route("POST", "/consumers/{group}", self.create),
            Route("DELETE", _INSTANCE, self.delete),
            Route("POST", _INSTANCE + "/subscription", self.subscribe),
            Route("GET", _INSTANCE + "/subscription", self.subscription),
            Route("DELETE", _INSTANCE + "/subscription", self.unsubscribe),
            Route("POST", _INSTANCE + "/assignments", self.assign),
            Route("GET", _INSTANCE + "/assignments", self.assignments),
            Route("POST", _INSTANCE + "/positions", self.seek),
            Route("POST", _INSTANCE + "/positions/beginning", self.seek_beginning),
            Route("POST", _INSTANCE + "/positions/end", self.seek_end),
            Route("GET", _INSTANCE + "/records", self.records),
            Route("POST", _INSTANCE + "/offsets", self.commit),
            Route("GET", _INSTANCE + "/offsets", self.committed),
        ]

    # -- metadata -----------------------------------------------------------------------

    async def list_topics(self, call: Call) -> Answer:
        names = sorted(self._ctx.core.topic_registry.topics())
        return Answer([n for n in names if call.access.may_describe_topic(n)])

    async def get_topic(self, call: Call, topic: str) -> Answer:
        count = self._ctx.visible_partitions(call.access, topic)
        view = self._ctx.inspector.topic(topic)
        configs = dict(view.configs) if view is not None and call.access.may_topic(
            Operation.DESCRIBE_CONFIGS, topic) else {}
        return Answer({
            "name": topic,
            "configs": configs,
            "partitions": [partition_json(self._ctx, p) for p in range(count)],
        })

    async def list_partitions(self, call: Call, topic: str) -> Answer:
        count = self._ctx.visible_partitions(call.access, topic)
        return Answer([partition_json(self._ctx, p) for p in range(count)])

    def _partition(self, call: Call, topic: str, text: str) -> int:
        count = self._ctx.visible_partitions(call.access, topic)
        try:
            partition = int(text)
        except ValueError:
            raise partition_not_found(topic, -1) from None
        if not 0 <= partition < count:
            raise partition_not_found(topic, partition)
        return partition

    async def get_partition(self, call: Call, topic: str, partition: str) -> Answer:
        return Answer(partition_json(self._ctx, self._partition(call, topic, partition)))

    async def offsets(self, call: Call, topic: str, partition: str) -> Answer:
        p = self._partition(call, topic, partition)
        start, end = await self._ctx.core.reads.list_offsets(topic, p)
        return Answer({"beginning_offset": start, "end_offset": end})

    async def brokers(self, call: Call) -> Answer:
        return Answer({"brokers": [self._ctx.node_id]})

    # -- produce ------------------------------------------------------------------------

    async def produce(self, call: Call, topic: str) -> Answer:
        return await self._produce(call, topic, None)

    async def produce_partition(self, call: Call, topic: str, partition: str) -> Answer:
        try:
            p = int(partition)
        except ValueError:
            raise partition_not_found(topic, -1) from None
        return await self._produce(call, topic, p)

    async def _produce(self, call: Call, topic: str, partition: int | None) -> Answer:
        fmt = produce_format(call.content_type)
        call.access.topic(Operation.WRITE, topic)
        body = _object(call.json(), "the body")
        records = _list(body.get("records"), "records", self._ctx.limits.max_records_per_produce)
        key_schema = value_schema = None
        key_id = value_id = None
        if fmt.schema_type is not None:
            has_keys = any(isinstance(r, dict) and r.get("key") is not None for r in records)
            if has_keys:
                key_id, key_schema = await self._schema(topic, "key", fmt, body)
            value_id, value_schema = await self._schema(topic, "value", fmt, body)
        out: list[OutRecord] = []
        for index, raw in enumerate(records):
            record = _object(raw, f"records[{index}]")
            if key_schema is not None and key_id is not None:
                key = encode_with(key_id, key_schema, record.get("key"))
            else:
                key = encode_plain(_plain(fmt), record.get("key"))
            if value_schema is not None and value_id is not None:
                value = encode_with(value_id, value_schema, record.get("value"))
            else:
                value = encode_plain(_plain(fmt), record.get("value"))
            p = record.get("partition")
            out.append(OutRecord(key, value, None if p is None else _int(p, "partition")))
        placed = await self._ctx.appender.append(topic, out, partition=partition)
        return Answer({
            "key_schema_id": key_id,
            "value_schema_id": value_id,
            "offsets": [
                {
                    "partition": r.partition,
                    "offset": r.offset,
                    "error_code": None if r.error is None else r.error.error_code,
                    "error": None if r.error is None else r.error.message,
                }
                for r in placed
            ],
        })

    async def _schema(
        self, topic: str, part: str, fmt: EmbeddedFormat, body: Mapping[str, Any]
    ) -> tuple[int, ParsedSchema]:
        """The schema id and parsed schema of a produce's keys or values."""
        registry = self._ctx.registry
        if registry is None:
            raise ProxyError(422, NO_REGISTRY, "the schema formats need the Schema Registry "
                                         "(--schema-registry)")
        given_id = body.get(f"{part}_schema_id")
        text = body.get(f"{part}_schema")
        code = KEY_SCHEMA_MISSING if part == "key" else VALUE_SCHEMA_MISSING
        if given_id is not None:
            schema_id = _int(given_id, f"{part}_schema_id")
        elif isinstance(text, str) and text:
            assert fmt.schema_type is not None
            try:
                registered = await registry.register(
                    f"{topic}-{part}", Schema(fmt.schema_type, text))
            except RegistryError as e:
                raise ProxyError(e.http_status, e.error_code, e.message) from None
            schema_id = registered.schema_id
        else:
            raise ProxyError(422, code, f"Request includes {part}s but does not include "
                                        f"{part} schema")
        parsed = registry.parsed_by_id(schema_id)
        if parsed is None:
            raise ProxyError(422, INVALID_SCHEMA, f"Schema {schema_id} not found")
        if parsed.schema_type is not fmt.schema_type:
            raise ProxyError(422, code, f"schema {schema_id} is "
                                        f"{parsed.schema_type.value}, not {fmt.value}")
        return schema_id, parsed

    # -- consumer instances -------------------------------------------------------------

    def _instance(self, call: Call, group: str, name: str) -> ConsumerInstance:
        instance = self._ctx.instances.get(group, name)
        if instance.principal != call.access.principal:
            # Another principal's instance is not told to exist.
            raise ProxyError(404, CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found.")
        return instance

    async def create(self, call: Call, group: str) -> Answer:
        call.access.group(Operation.READ, group)
        body = _object(call.json(), "the body")
        name = body.get("name")
        config = parse_config(body)
        instance = self._ctx.instances.create(
            group, None if name is None else _str(name, "name"),
            address=call.address, principal=call.access.principal, config=config,
        )
        return Answer({
            "instance_id": instance.name,
            "base_uri": f"{call.base_url}/consumers/{group}/instances/{instance.name}",
        })

    async def delete(self, call: Call, group: str, name: str) -> Answer:
        instance = self._instance(call, group, name)
        await self._ctx.instances.delete(instance)
        return Answer(status=204)

    async def subscribe(self, call: Call, group: str, name: str) -> Answer:
        instance = self._instance(call, group, name)
        body = _object(call.json(), "the body")
        pattern = body.get("topic_pattern")
        topics: tuple[str, ...] = ()
        if pattern is not None:
            pattern = _str(pattern, "topic_pattern")
        else:
            topics = tuple(
                _str(t, "a topic") for t in
                _list(body.get("topics"), "topics", MAX_SUBSCRIPTION_TOPICS)
            )
            if not topics:
                raise bad_request("topics or topic_pattern is needed")
            for topic in topics:
                call.access.topic(Operation.READ, topic)
        await self._ctx.instances.subscribe(
            instance, topics=topics, pattern=pattern,
            may_describe=call.access.may_describe_topic,
        )
        return Answer(status=204)

    async def subscription(self, call: Call, group: str, name: str) -> Answer:
        instance = self._instance(call, group, name)
        topics = list(instance.topics)
        if instance.topic_pattern is not None:
            topics = sorted({t for t, _p in instance.assignment})
        return Answer({"topics": topics})

    async def unsubscribe(self, call: Call, group: str, name: str) -> Answer:
        instance = self._instance(call, group, name)
        await self._ctx.instances.unsubscribe(instance)
        return Answer(status=204)

    def _partitions(self, call: Call, body: Mapping[str, Any], key: str) -> list[TopicPartition]:
        found: list[TopicPartition] = []
        for index, raw in enumerate(_list(body.get(key), key, MAX_PARTITIONS_PER_REQUEST)):
            entry = _object(raw, f"{key}[{index}]")
            found.append((_str(entry.get("topic"), "topic"),
                          _int(entry.get("partition"), "partition")))
        return found

    async def assign(self, call: Call, group: str, name: str) -> Answer:
        instance = self._instance(call, group, name)
        partitions = self._partitions(call, _object(call.json(), "the body"), "partitions")
        for topic, _p in partitions:
            call.access.topic(Operation.READ, topic)
        self._ctx.instances.assign(instance, frozenset(partitions))
        return Answer(status=204)

    async def assignments(self, call: Call, group: str, name: str) -> Answer:
        instance = self._instance(call, group, name)
        return Answer({"partitions": [
            {"topic": t, "partition": p} for t, p in sorted(instance.assignment)
        ]})

    def _owned(self, instance: ConsumerInstance, tp: TopicPartition) -> None:
        if tp not in instance.assignment:
            raise ProxyError(409, 40903, f"{tp[0]}-{tp[1]} is not assigned to this consumer")

    async def seek(self, call: Call, group: str, name: str) -> Answer:
        instance = self._instance(call, group, name)
        body = _object(call.json(), "the body")
        moves: list[tuple[TopicPartition, int]] = []
        for index, raw in enumerate(_list(body.get("offsets"), "offsets",
                                          MAX_PARTITIONS_PER_REQUEST)):
            entry = _object(raw, f"offsets[{index}]")
            tp = (_str(entry.get("topic"), "topic"), _int(entry.get("partition"), "partition"))
            self._owned(instance, tp)
            moves.append((tp, _int(entry.get("offset"), "offset")))
        for tp, offset in moves:
            instance.positions[tp] = offset
        return Answer(status=204)

    async def _seek_to(self, call: Call, group: str, name: str, *, end: bool) -> Answer:
        instance = self._instance(call, group, name)
        partitions = self._partitions(call, _object(call.json(), "the body"), "partitions")
        for tp in partitions:
            self._owned(instance, tp)
        for tp in partitions:
            start, high = await self._ctx.core.reads.list_offsets(*tp, read_committed=True)
            instance.positions[tp] = high if end else start
        return Answer(status=204)

    async def seek_beginning(self, call: Call, group: str, name: str) -> Answer:
        return await self._seek_to(call, group, name, end=False)

    async def seek_end(self, call: Call, group: str, name: str) -> Answer:
        return await self._seek_to(call, group, name, end=True)

    async def records(self, call: Call, group: str, name: str) -> Answer:
        instance = self._instance(call, group, name)
        fmt = instance.config.format
        wanted = accepted_formats(call.accept)
        if wanted and fmt not in wanted and None not in wanted:
            raise ProxyError(NOT_ACCEPTABLE, UNSUPPORTED_CONTENT_TYPE,
                             f"the consumer's format is {fmt.value}: accept {fmt.content_type}")
        limits = self._ctx.limits
        max_bytes = _query_int(call, "max_bytes", DEFAULT_RECORDS_BYTES)
        max_bytes = max(1, min(max_bytes, limits.max_records_bytes))
        wait_ms = _query_int(call, "timeout", instance.config.request_timeout_ms)
        wait_ms = max(0, min(wait_ms, instance.config.request_timeout_ms,
                             limits.max_records_wait_ms))
        call.access.group(Operation.READ, group)
        if instance.reading:
            raise ProxyError(409, 40903, "a records call of this consumer is in progress")
        instance.reading = True
        try:
            if instance.config.auto_commit:
                await self._ctx.instances.auto_commit(instance)
            self._ctx.instances.poll_membership(instance)
            for topic in {t for t, _p in instance.assignment}:
                call.access.topic(Operation.READ, topic)
            positions, uncommitted = dict(instance.positions), dict(instance.uncommitted)
            fetched = await consume.read_records(
                self._ctx.core, self._ctx.instances, instance,
                max_bytes=max_bytes, wait_ms=wait_ms,
                min_bytes=instance.config.fetch_min_bytes,
            )
            registry = self._ctx.registry
            try:
                answer = [
                    {
                        "topic": topic,
                        "key": decode(fmt, record.key, registry),
                        "value": decode(fmt, record.value, registry),
                        "partition": partition,
                        "offset": record.offset,
                    }
                    for topic, partition, record in fetched
                ]
            except ProxyError:
                # A record the format cannot decode: nothing is skipped, the positions
                # stay where they were (a consumer of another format can read it).
                kept = instance.assignment
                instance.positions = {tp: o for tp, o in positions.items() if tp in kept}
                instance.uncommitted = {tp: o for tp, o in uncommitted.items() if tp in kept}
                raise
        finally:
            instance.reading = False
        return Answer(answer, content_type=fmt.content_type)

    async def commit(self, call: Call, group: str, name: str) -> Answer:
        instance = self._instance(call, group, name)
        call.access.group(Operation.READ, group)
        body = _object(call.json(), "the body")
        offsets: dict[TopicPartition, tuple[int, str]] = {}
        if body.get("offsets") is None:
            offsets = {tp: (o, "") for tp, o in instance.positions.items()}
        else:
            for index, raw in enumerate(_list(body.get("offsets"), "offsets",
                                              MAX_PARTITIONS_PER_REQUEST)):
                entry = _object(raw, f"offsets[{index}]")
                tp = (_str(entry.get("topic"), "topic"),
                      _int(entry.get("partition"), "partition"))
                metadata = entry.get("metadata")
                offsets[tp] = (_int(entry.get("offset"), "offset") + 1,
                               metadata if isinstance(metadata, str) else "")
        for topic in {t for t, _p in offsets}:
            call.access.topic(Operation.READ, topic)
        if offsets:
            await self._ctx.instances.commit(instance, offsets)
        return Answer(status=200, raw=b"")

    async def committed(self, call: Call, group: str, name: str) -> Answer:
        instance = self._instance(call, group, name)
        call.access.group(Operation.READ, group)
        body = _object(call.json(), "the body")
        partitions = (self._partitions(call, body, "partitions")
                      if body.get("partitions") is not None else sorted(instance.assignment))
        found = self._ctx.instances.committed(instance, partitions)
        return Answer({"offsets": [
            {"topic": t, "partition": p, "offset": found[(t, p)][0],
             "metadata": found[(t, p)][1]}
            for t, p in partitions if (t, p) in found and call.access.may_describe_topic(t)
        ]})


def _plain(fmt: EmbeddedFormat) -> EmbeddedFormat:
    return fmt if fmt in (EmbeddedFormat.JSON, EmbeddedFormat.BINARY) else EmbeddedFormat.JSON


def _query_int(call: Call, name: str, default: int) -> int:
    text = call.query.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise bad_request(f"{name} must be an integer") from None


__all__: Sequence[str] = ["V2_CONTENT_TYPE", "V2Api"]
