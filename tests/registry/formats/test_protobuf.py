"""Protobuf schemas: .proto text compiled by protoc and descriptors given as base64,
references by import path, the printed and normalized texts, Confluent's message
indexes, and the clear refusals."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from brokerd.registry.formats import for_type
from brokerd.registry.formats.protobuf import ParsedProtobuf, message_indexes
from brokerd.registry.model import InvalidSchema, SchemaType

PROTOBUF = for_type(SchemaType.PROTOBUF)

ORDER = """\
syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";
import "money.proto";

// An order, as the tests write it.
message Order {
  string id = 1;
  repeated Line lines = 2;
  map<string, string> labels = 3;
  google.protobuf.Timestamp at = 4;
  oneof pay { string card = 5; string iban = 6; }
  Status status = 7;
  optional int64 points = 8;
  message Line { string sku = 1; Money price = 2; uint32 quantity = 3; }
}
enum Status { NEW = 0; PAID = 1; }
message Refund { string order_id = 1; }
"""
MONEY = (
    'syntax = "proto3";\npackage shop;\nmessage Money { int64 cents = 1; string currency = 2; }\n'
)


def parsed_order() -> ParsedProtobuf:
    parsed = PROTOBUF.parse(ORDER, {"money.proto": MONEY})
    assert isinstance(parsed, ParsedProtobuf)
    return parsed


def test_text_compiles_with_its_references_and_well_known_imports() -> None:
    parsed = parsed_order()
    assert parsed.canonical() == ORDER
    value = {
        "id": "o-1",
        "lines": [{"sku": "s", "price": {"cents": "250", "currency": "EUR"}, "quantity": 2}],
        "labels": {"gift": "yes"},
        "at": "2026-01-02T03:04:05Z",
        "iban": "FR76",
        "status": "PAID",
        "points": "0",
    }
    body = parsed.encode(value)
    assert body[:1] == b"\x00"  # message indexes [0]: the first message, Order
    assert parsed.decode(body) == value


def test_message_indexes_pick_nested_and_later_messages() -> None:
    parsed = parsed_order()
    refund = message_indexes([1]) + b"\x0a\x02o9"
    assert refund[:2] == b"\x02\x02"
    assert parsed.decode(refund) == {"order_id": "o9"}
    # Order's nested messages as its descriptor lists them: protoc's LabelsEntry, Line.
    line = message_indexes([0, 1]) + b"\x0a\x01x\x18\x05"
    assert parsed.decode(line) == {"sku": "x", "quantity": 5}
    with pytest.raises(ValueError, match="message index 2 at depth 0: there are 2"):
        parsed.decode(message_indexes([2]) + b"")
    with pytest.raises(ValueError, match="at most 64"):
        parsed.decode(b"\xfe\x01")
    with pytest.raises(ValueError, match=r"not a shop\.Order"):
        parsed.decode(b"\x00\x0a\x09abc")


def test_a_base64_descriptor_is_printed_as_text_and_serialized_back() -> None:
    parsed = parsed_order()
    serialized = parsed.serialized()
    again = PROTOBUF.parse(serialized, {"money.proto": MONEY})
    assert isinstance(again, ParsedProtobuf)
    assert again.serialized() == serialized
    text = again.canonical()
    assert "map<string, string> labels = 3;" in text
    assert "oneof pay {" in text and "optional int64 points = 8;" in text
    # The printed text compiles to the same descriptor.
    printed = PROTOBUF.parse(text, {"money.proto": MONEY})
    assert isinstance(printed, ParsedProtobuf)
    assert printed.normalized() == parsed.normalized()
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert [m.name for m in descriptor.message_type] == ["Order", "Refund"]


def test_normalized_is_the_same_for_reordered_equivalent_text() -> None:
    shuffled = ORDER.replace(
        "  string id = 1;\n  repeated Line lines = 2;\n",
        "  repeated Line lines = 2;\n  string id = 1;\n",
    ).replace('import "google/protobuf/timestamp.proto";\nimport "money.proto";',
              'import "money.proto";\nimport "google/protobuf/timestamp.proto";')
    assert shuffled != ORDER
    assert PROTOBUF.parse(shuffled, {"money.proto": MONEY}).normalized() == (
        parsed_order().normalized()
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('syntax = "proto3";\nmessage A { strin s = 1; }\n', r'1:12 error: "strin" is not defined'),
        ('syntax = "proto3";\nmessage A { string s = 1 }\n', "Expected \";\""),
        ('syntax = "proto3";\nimport "nope.proto";\nmessage A {}\n', "nope.proto"),
        ('syntax = "proto3";\nmessage A { int32 a = 1; int32 b = 1; }\n', "has already been used"),
    ],
)
def test_invalid_schemas_are_refused_with_protocs_message(text: str, message: str) -> None:
    with pytest.raises(InvalidSchema, match=message):
        PROTOBUF.parse(text, {})


PROTO2 = """\
syntax = "proto2";
package legacy;
option java_package = "com.example.legacy";
message A {
  optional int32 a = 1 [default = 5];
  required string s = 2 [default = "q\\"x"];
  repeated int32 p = 3 [packed = true];
  enum E { option allow_alias = true; Z = 0; Y = 0; }
  extensions 100 to max;
  reserved 8, 9 to 11;
  reserved "foo";
}
extend A { optional int32 ext = 100; }
service S { rpc Call(A) returns (stream A); }
"""


def test_proto2_descriptors_print_back_to_the_same_descriptor() -> None:
    parsed = PROTOBUF.parse(PROTO2, {})
    assert isinstance(parsed, ParsedProtobuf)
    printed = PROTOBUF.parse(parsed.serialized(), {})
    assert printed.canonical().startswith('syntax = "proto2";\npackage legacy;\n')
    again = PROTOBUF.parse(printed.canonical(), {})
    assert isinstance(again, ParsedProtobuf)
    assert again.serialized() == parsed.serialized()
    normalized = PROTOBUF.parse(parsed.normalized(), {})
    assert normalized.normalized() == parsed.normalized()
