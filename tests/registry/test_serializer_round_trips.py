"""Record bodies written by confluent-kafka's own serializers (Avro, JSON Schema and
Protobuf, given an in-process schema registry client) decode to the JSON a Confluent
console shows, and what the formats encode, those serializers' deserializers read back.
For Protobuf the schema parsed is the one the serializer registered: a base64
descriptor and its references."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
    MockSchemaRegistryClient,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from brokerd.registry.formats import for_type
from brokerd.registry.model import SchemaType, framed, unframe

CONTEXT = SerializationContext("t", MessageField.VALUE)


def registry() -> MockSchemaRegistryClient:
    return MockSchemaRegistryClient({"url": "mock://formats"})


def body_of(value: bytes) -> tuple[int, bytes]:
    found = unframe(value)
    assert found is not None
    return found


def test_avro_serializer_bytes_round_trip() -> None:
    schema = json.dumps({
        "type": "record", "name": "Reading", "namespace": "iot", "fields": [
            {"name": "sensor", "type": "string"},
            {"name": "value", "type": ["null", "double"], "default": None},
            {"name": "raw", "type": "bytes"},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "unit", "type": {"type": "enum", "name": "Unit", "symbols": ["C", "F"]}},
        ]})
    client = registry()
    written = AvroSerializer(client, schema)(
        {"sensor": "s1", "value": 21.5, "raw": b"\x01\xfe", "at": 1700000000123, "unit": "F"},
        CONTEXT)
    schema_id, body = body_of(written)
    parsed = for_type(SchemaType.AVRO).parse(client.get_schema(schema_id).schema_str, {})
    value = parsed.decode(body)
    assert value == {"sensor": "s1", "value": {"double": 21.5}, "raw": "\u0001\u00fe",
                     "at": 1700000000123, "unit": "F"}
    read = AvroDeserializer(client)(framed(schema_id, parsed.encode(value)), CONTEXT)
    assert read["value"] == 21.5 and read["raw"] == b"\x01\xfe" and read["unit"] == "F"
    assert parsed.encode(value) == body


def test_json_serializer_bytes_round_trip() -> None:
    schema = json.dumps({
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "Ping",
        "type": "object", "properties": {"n": {"type": "integer"}, "tags": {
            "type": "array", "items": {"type": "string"}}}, "required": ["n"]})
    client = registry()
    written = JSONSerializer(schema, client)({"n": 3, "tags": ["a", "é"]}, CONTEXT)
    schema_id, body = body_of(written)
    parsed = for_type(SchemaType.JSON).parse(client.get_schema(schema_id).schema_str, {})
    assert parsed.decode(body) == {"n": 3, "tags": ["a", "é"]}
    encoded = parsed.encode({"n": 4, "tags": []})
    assert JSONDeserializer(schema)(framed(schema_id, encoded), CONTEXT) == {"n": 4, "tags": []}


ORDER_PROTO = """\
syntax = "proto3";
package roundtrip;
import "google/protobuf/timestamp.proto";
import "roundtrip_money.proto";
message Order {
  string id = 1;
  repeated Line lines = 2;
  map<string, int64> counts = 3;
  google.protobuf.Timestamp at = 4;
  oneof pay { string card = 5; string iban = 6; }
  message Line { string sku = 1; Money price = 2; }
}
"""
MONEY_PROTO = 'syntax = "proto3";\npackage roundtrip;\nmessage Money { int64 cents = 1; }\n'


@pytest.fixture(scope="module")
def order_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The generated Python classes of ``ORDER_PROTO``, as an application has them."""
    out = tmp_path_factory.mktemp("pb2")
    (out / "roundtrip_order.proto").write_text(ORDER_PROTO)
    (out / "roundtrip_money.proto").write_text(MONEY_PROTO)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{out}", f"--python_out={out}",
         "roundtrip_order.proto", "roundtrip_money.proto"],
        check=True,
    )
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("roundtrip_order_pb2")
    finally:
        sys.path.remove(str(out))


def registered_protobuf(client: MockSchemaRegistryClient, schema_id: int) -> Any:
    schema = client.get_schema(schema_id)
    references = {
        ref.name: client.get_version(ref.subject, ref.version).schema.schema_str
        for ref in schema.references
    }
    return for_type(SchemaType.PROTOBUF).parse(schema.schema_str, references)


def test_protobuf_serializer_bytes_round_trip(order_module: ModuleType) -> None:
    client = registry()
    order = order_module.Order(id="o1", iban="FR76")
    order.lines.add(sku="s", price={"cents": 250})
    order.counts["a"] = 2
    order.at.FromSeconds(1700000000)
    serializer = ProtobufSerializer(order_module.Order, client, {"use.deprecated.format": False})
    schema_id, body = body_of(serializer(order, CONTEXT))
    parsed = registered_protobuf(client, schema_id)
    value = parsed.decode(body)
    assert value == {"id": "o1", "lines": [{"sku": "s", "price": {"cents": "250"}}],
                     "counts": {"a": "2"}, "at": "2023-11-14T22:13:20Z", "iban": "FR76"}
    deserializer = ProtobufDeserializer(order_module.Order, {"use.deprecated.format": False})
    assert deserializer(framed(schema_id, parsed.encode(value)), CONTEXT) == order
    assert "message Order {" in parsed.canonical()


def test_protobuf_nested_message_indexes_from_the_serializer(order_module: ModuleType) -> None:
    client = registry()
    line = order_module.Order.Line(sku="x", price={"cents": 5})
    serializer = ProtobufSerializer(order_module.Order.Line, client,
                                    {"use.deprecated.format": False})
    schema_id, body = body_of(serializer(line, CONTEXT))
    # Two indexes: Order, then Line, its second nested message after protoc's CountsEntry.
    assert body[:3] == b"\x04\x00\x02"
    assert registered_protobuf(client, schema_id).decode(body) == {
        "sku": "x", "price": {"cents": "5"}}
