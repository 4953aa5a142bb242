"""The registry as Python clients use it, on a real broker: confluent-kafka's
SchemaRegistryClient with its Avro, JSON Schema and Protobuf serializers and a real
Producer/Consumer on the Kafka port (auto-register, evolution, a refused incompatible
change); python-schema-registry-client; and the broker-side validation of
``confluent.value.schema.validation`` refusing with INVALID_RECORD."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from brokerd.registry.model import framed

from tests.brokerproc import BrokerProcess
from tests.registry.rest_helpers import Rest

pytestmark = [pytest.mark.clients, pytest.mark.broker]


USER_V1 = json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "name", "type": "string"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]})
USER_BAD = json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "name", "type": "string"}, {"name": "email", "type": "string"}]})


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("registry-clients") / "data").start()
    try:
        Rest(proc.schema_registry_url).wait_ready()
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def registry(broker: BrokerProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.schema_registry_url})


def produce(broker: BrokerProcess, topic: str, values: list[bytes],
            keys: list[bytes | None] | None = None) -> list[KafkaError | None]:
    producer = Producer({"bootstrap.servers": broker.kafka_bootstrap, "linger.ms": 0,
                         "enable.idempotence": False, "retries": 0})
    outcomes: list[KafkaError | None] = []
    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=(keys or [None] * len(values))[i],
                         on_delivery=lambda err, _msg: outcomes.append(err))
        producer.flush(10)
    assert len(outcomes) == len(values)
    return outcomes


def consume(broker: BrokerProcess, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.kafka_bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out: list[bytes] = []
    try:
        for _ in range(200):
            if len(out) >= count:
                break
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
    finally:
        consumer.close()
    return out


def roundtrip(broker: BrokerProcess, topic: str, serializer: Any, deserializer: Any,
              objects: list[Any]) -> list[Any]:
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = [serializer(o, ctx) for o in objects]
    assert produce(broker, topic, values) == [None] * len(values)
    return [deserializer(v, ctx) for v in consume(broker, topic, len(values))]


def test_avro_serializers_register_evolve_and_refuse(
    broker: BrokerProcess, registry: SchemaRegistryClient
) -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    v1 = AvroSerializer(registry, USER_V1)
    v2 = AvroSerializer(registry, USER_V2)
    reader = AvroDeserializer(registry)
    ctx = SerializationContext("avro-users", MessageField.VALUE)
    values = [v1({"name": "ann"}, ctx), v2({"name": "bob", "age": 7}, ctx)]
    assert produce(broker, "avro-users", values) == [None, None]
    got = [reader(v, ctx) for v in consume(broker, "avro-users", 2)]
    assert got == [{"name": "ann"}, {"name": "bob", "age": 7}]
    latest = registry.get_latest_version("avro-users-value")
    assert (latest.version, latest.schema.schema_type) == (2, "AVRO")
    assert registry.get_versions("avro-users-value") == [1, 2]
    with pytest.raises(SchemaRegistryError) as refused:
        AvroSerializer(registry, USER_BAD)({"name": "x", "email": "y"}, ctx)
    assert refused.value.http_status_code == 409
    assert not registry.test_compatibility("avro-users-value", Schema(USER_BAD, "AVRO"))
    # Reading with the latest schema (v2) what v1 wrote fills the default.
    evolved = AvroDeserializer(registry, USER_V2)
    assert evolved(values[0], ctx) == {"name": "ann", "age": 0}
    # The client's other calls.
    registered = registry.lookup_schema("avro-users-value", Schema(USER_V1, "AVRO"))
    assert registered.version == 1
    registry.set_compatibility("avro-users-value", "FULL")
    assert registry.get_compatibility("avro-users-value") == "FULL"
    assert "avro-users-value" in registry.get_subjects()
    assert registry.get_schema(registered.schema_id).schema_type == "AVRO"


def test_json_schema_serializers(broker: BrokerProcess, registry: SchemaRegistryClient) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    def order(**properties: Any) -> str:
        return json.dumps({"$schema": "http://json-schema.org/draft-07/schema#",
                           "title": "Order", "type": "object", "properties": properties,
                           "required": ["id"], "additionalProperties": False})

    v1 = order(id={"type": "integer"})
    v2 = order(id={"type": "integer"}, note={"type": "string"})  # closed model: optional add
    reader = JSONDeserializer(None, schema_registry_client=registry)
    ctx = SerializationContext("json-orders", MessageField.VALUE)
    values = [JSONSerializer(v1, registry)({"id": 1}, ctx),
              JSONSerializer(v2, registry)({"id": 2, "note": "x"}, ctx)]
    assert produce(broker, "json-orders", values) == [None, None]
    got = [reader(v, ctx) for v in consume(broker, "json-orders", 2)]
    assert got == [{"id": 1}, {"id": 2, "note": "x"}]
    assert registry.get_versions("json-orders-value") == [1, 2]
    assert registry.get_latest_version("json-orders-value").schema.schema_type == "JSON"
    narrower = order(id={"type": "string"}, note={"type": "string"})
    with pytest.raises(SchemaRegistryError) as refused:
        JSONSerializer(narrower, registry)({"id": "a"}, ctx)
    assert refused.value.http_status_code == 409


PROTO = """syntax = "proto3";
package shop;
message Item {
  string name = 1;
  int32 count = 2;
}
"""


def test_protobuf_serializers(broker: BrokerProcess, registry: SchemaRegistryClient,
                              tmp_path: Path) -> None:
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer,
        ProtobufSerializer,
    )

    (tmp_path / "item.proto").write_text(PROTO)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path}",
                    f"--python_out={tmp_path}", "item.proto"], check=True)
    sys.path.insert(0, str(tmp_path))
    try:
        import item_pb2  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    serializer = ProtobufSerializer(item_pb2.Item, registry, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(item_pb2.Item, {"use.deprecated.format": False})
    got = roundtrip(broker, "proto-items", serializer, deserializer,
                    [item_pb2.Item(name="pen", count=3)])
    assert (got[0].name, got[0].count) == ("pen", 3)
    assert registry.get_latest_version("proto-items-value").schema.schema_type == "PROTOBUF"
    # Evolution: a new field is compatible; a field's type changed is refused.
    added = PROTO.replace("int32 count = 2;", "int32 count = 2;\n  string colour = 3;")
    registry.register_schema("proto-items-value", Schema(added, "PROTOBUF"))
    assert registry.get_versions("proto-items-value") == [1, 2]
    changed = added.replace("int32 count = 2;", "string count = 2;")
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema("proto-items-value", Schema(changed, "PROTOBUF"))
    assert refused.value.http_status_code == 409


ORDER_PROTO = """syntax = "proto3";
package shop;
import "item.proto";
message Order {
  repeated Item items = 1;
}
"""


def test_protobuf_with_an_import_and_the_latest_version(
    broker: BrokerProcess, registry: SchemaRegistryClient, tmp_path: Path
) -> None:
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer,
        ProtobufSerializer,
    )

    (tmp_path / "item.proto").write_text(PROTO)
    (tmp_path / "order.proto").write_text(ORDER_PROTO)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path}",
                    f"--python_out={tmp_path}", "item.proto", "order.proto"], check=True)
    sys.path.insert(0, str(tmp_path))
    try:
        import order_pb2  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    # The serializer registers item.proto as a subject of its own (a reference), then
    # the order schema; the deserializer fetches both as serialized descriptors.
    serializer = ProtobufSerializer(order_pb2.Order, registry, {"use.deprecated.format": False})
    ctx = SerializationContext("proto-orders", MessageField.VALUE)
    value = serializer(order_pb2.Order(items=[{"name": "pen", "count": 2}]), ctx)
    latest = registry.get_latest_version("proto-orders-value")
    assert [r.name for r in latest.schema.references] == ["item.proto"]
    # A client of its own: the client caches the latest version by subject whatever the
    # format asked, and the one above asked for the text.
    fresh = SchemaRegistryClient({"url": broker.schema_registry_url})
    reader = ProtobufDeserializer(order_pb2.Order, {"use.latest.version": True},
                                  schema_registry_client=fresh)
    got = reader(value, ctx)
    assert [(i.name, i.count) for i in got.items] == [("pen", 2)]


def test_python_schema_registry_client(broker: BrokerProcess) -> None:
    from schema_registry.client import SchemaRegistryClient as OtherClient
    from schema_registry.client import schema as other_schema

    client = OtherClient(url=broker.schema_registry_url)
    first = client.register("psrc-value", other_schema.AvroSchema(USER_V1))
    assert first == client.register("psrc-value", other_schema.AvroSchema(USER_V1))
    assert client.test_compatibility("psrc-value", other_schema.AvroSchema(USER_V2))
    assert not client.test_compatibility("psrc-value", other_schema.AvroSchema(USER_BAD))
    second = client.register("psrc-value", other_schema.AvroSchema(USER_V2))
    assert second != first
    assert client.get_schema("psrc-value").version == 2
    assert client.get_by_id(first).raw_schema["name"] == "User"
    assert client.get_compatibility() == "BACKWARD"


def test_produce_validation_refuses_what_no_schema_describes(
    broker: BrokerProcess, registry: SchemaRegistryClient
) -> None:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    topic = "validated"
    futures = admin.create_topics([NewTopic(topic, 1, config={
        "confluent.value.schema.validation": "true"})])
    futures[topic].result(10)
    described = admin.describe_configs([ConfigResource("topic", topic)])
    (configs,) = [f.result(10) for f in described.values()]
    assert configs["confluent.value.schema.validation"].value == "true"
    assert configs["confluent.key.schema.validation"].value == "false"
    ctx = SerializationContext(topic, MessageField.VALUE)
    good = AvroSerializer(registry, USER_V1)({"name": "ann"}, ctx)
    foreign_id = registry.register_schema("someone-else-value", Schema(json.dumps(
        {"type": "record", "name": "Other", "fields": [{"name": "z", "type": "long"}]}), "AVRO"))
    foreign = framed(foreign_id, b"\x02")
    outcomes = produce(broker, topic, [good, b"plain text", foreign, framed(99999, b"")])
    assert outcomes[0] is None
    for err in outcomes[1:]:
        assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    # librdkafka reports the code only: the broker's message, by hand (Produce v9).
    from brokerd.kafka.wire.codec import ApiKey
    from brokerd.kafka.wire.requests import apis
    from brokerd.storage.record.encode import encode_batch

    from tests.kafka_helpers import RawKafka

    batch = encode_batch([good, b"plain text", foreign], timestamp_ms=1)
    with RawKafka(broker) as kafka:
        answer = kafka.call(ApiKey.PRODUCE, 9, apis.ProduceRequest(
            acks=1, timeout_ms=10000, topic_data=(apis.ProduceTopicData(
                name=topic, partition_data=(apis.ProducePartitionData(index=0, records=batch),)
            ),)))
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == KafkaError.INVALID_RECORD
    assert [e.batch_index for e in part.record_errors] == [1, 2]
    assert "not framed with a schema id" in part.record_errors[0].batch_index_error_message
    assert (f"schema id {foreign_id} is not registered under subject 'validated-value'"
            in part.record_errors[1].batch_index_error_message)
    assert part.error_message.startswith("schema validation of topic 'validated' refused")
    # A tombstone carries no value to describe: it passes.
    assert produce(broker, topic, [None], keys=[b"k"]) == [None]  # type: ignore[list-item]
    with pytest.raises(KafkaException):
        # A bad value of the config is refused like any topic config's.
        admin.create_topics([NewTopic("bad-validation", 1, config={
            "confluent.value.schema.validation": "maybe"})])["bad-validation"].result(10)
