"""The registry's compatibility answers on a table of cases from Confluent's
documentation and Avro's specification: each row is a format, a level, an old and a new
schema, what Confluent's registry answers, and where the case comes from.

A level is checked as the registry checks it against one earlier version: BACKWARD
asks whether the new schema reads data written with the old one, FORWARD the reverse,
FULL both.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from brokerd.registry.formats import for_type
from brokerd.registry.model import Compatibility, SchemaType

AVRO_SPEC = "Avro specification, Schema Resolution"
CONFLUENT_AVRO = "Confluent docs, Schema Evolution and Compatibility: Avro"
CONFLUENT_TYPES = "Confluent docs, Schema Evolution and Compatibility: compatibility types"
CONFLUENT_JSON = "Confluent docs, JSON Schema compatibility rules (content models)"
CONFLUENT_JSON_DIFF = "Confluent JSON Schema difference types"
CONFLUENT_PROTO = "Confluent docs, Schema Evolution and Compatibility: Protobuf"
CONFLUENT_PROTO_DIFF = "Confluent Protobuf difference types"
PROTO_GUIDE = "protobuf language guide, Updating A Message Type"

B, F, FULL = Compatibility.BACKWARD, Compatibility.FORWARD, Compatibility.FULL


def record(*fields: dict[str, Any], name: str = "User", **extra: Any) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields), **extra})


def field(name: str, kind: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


def enum(*symbols: str, **extra: Any) -> str:
    return record(field("e", {"type": "enum", "name": "E", "symbols": list(symbols), **extra}))


def obj(properties: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"type": "object", "properties": properties, **extra})


def proto(body: str, *, package: str = "shop", syntax: str = "proto3") -> str:
    return f'syntax = "{syntax}";\npackage {package};\n{body}\n'


NAME = field("name", "string")
STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}

CASES: list[tuple[SchemaType, Compatibility, str, str, bool, str]] = [
    # -- Avro ---------------------------------------------------------------------------
    (SchemaType.AVRO, B, record(NAME), record(NAME, field("age", "int", default=0)), True,
     CONFLUENT_TYPES + ": BACKWARD, add optional fields"),
    (SchemaType.AVRO, B, record(NAME), record(NAME, field("age", "int")), False,
     AVRO_SPEC + ": reader field without default missing from writer"),
    (SchemaType.AVRO, B, record(NAME, field("age", "int")), record(NAME), True,
     CONFLUENT_TYPES + ": BACKWARD, delete fields"),
    (SchemaType.AVRO, F, record(NAME, field("age", "int")), record(NAME), False,
     CONFLUENT_TYPES + ": FORWARD, delete optional fields only"),
    (SchemaType.AVRO, F, record(NAME, field("age", "int", default=0)), record(NAME), True,
     CONFLUENT_TYPES + ": FORWARD, delete optional fields"),
    (SchemaType.AVRO, F, record(NAME), record(NAME, field("age", "int")), True,
     CONFLUENT_TYPES + ": FORWARD, add fields"),
    (SchemaType.AVRO, FULL, record(NAME), record(NAME, field("age", "int", default=0)), True,
     CONFLUENT_TYPES + ": FULL, add optional fields"),
    (SchemaType.AVRO, FULL, record(NAME), record(NAME, field("age", "int")), False,
     CONFLUENT_TYPES + ": FULL, only optional fields"),
    (SchemaType.AVRO, B, record(field("n", "int")), record(field("n", "long")), True,
     AVRO_SPEC + ": int is promotable to long, float or double"),
    (SchemaType.AVRO, B, record(field("n", "long")), record(field("n", "int")), False,
     AVRO_SPEC + ": no promotion from long to int"),
    (SchemaType.AVRO, FULL, record(field("n", "int")), record(field("n", "long")), False,
     AVRO_SPEC + ": promotions go one way only"),
    (SchemaType.AVRO, B, record(field("n", "float")), record(field("n", "double")), True,
     AVRO_SPEC + ": float is promotable to double"),
    (SchemaType.AVRO, B, record(field("s", "string")), record(field("s", "bytes")), True,
     AVRO_SPEC + ": string is promotable to bytes"),
    (SchemaType.AVRO, B, record(field("s", "string")), record(field("s", "int")), False,
     AVRO_SPEC + ": the schemas do not match"),
    (SchemaType.AVRO, B, enum("A", "B"), enum("A", "B", "C"), True,
     AVRO_SPEC + ": enum, the writer's symbols are in the reader's"),
    (SchemaType.AVRO, B, enum("A", "B"), enum("A"), False,
     AVRO_SPEC + ": enum, a writer's symbol the reader lacks is an error"),
    (SchemaType.AVRO, B, enum("A", "B"), enum("A", default="A"), True,
     AVRO_SPEC + ": enum, ...unless the reader has a default symbol"),
    (SchemaType.AVRO, F, enum("A", "B"), enum("A", "B", "C"), False,
     AVRO_SPEC + ": enum, the old reader lacks the new symbol"),
    (SchemaType.AVRO, B, record(field("s", "string")),
     record(field("s", ["null", "string"], default=None)), True,
     AVRO_SPEC + ": reader union, the first matching branch"),
    (SchemaType.AVRO, B, record(field("s", ["null", "string"], default=None)),
     record(field("s", "string")), False,
     AVRO_SPEC + ": writer union, every branch must resolve"),
    (SchemaType.AVRO, B, record(NAME), record(NAME, name="Person"), False,
     AVRO_SPEC + ": both schemas are records with the same (unqualified) name"),
    (SchemaType.AVRO, B, record(NAME, name="User", namespace="com.acme"),
     record(NAME, name="User", namespace="org.other"), True,
     AVRO_SPEC + ": names match unqualified, so a namespace change alone is compatible"),
    (SchemaType.AVRO, B, record(NAME, name="User", namespace="com.acme"),
     record(NAME, name="Person", namespace="com.acme", aliases=["User"]), True,
     "Avro specification, Aliases: a reader's alias names the writer's type"),
    (SchemaType.AVRO, B, record(field("old", "string")),
     record(field("new", "string", aliases=["old"])), True,
     "Avro specification, Aliases: a reader field's alias names the writer's field"),
    (SchemaType.AVRO, B, record(field("f", {"type": "fixed", "name": "F", "size": 4})),
     record(field("f", {"type": "fixed", "name": "F", "size": 8})), False,
     AVRO_SPEC + ": fixed, both schemas have the same size"),
    # -- JSON Schema --------------------------------------------------------------------
    (SchemaType.JSON, B, obj({"a": STR}), obj({"a": STR, "b": STR}), False,
     CONFLUENT_JSON + ": open content model, adding a property is incompatible"),
    (SchemaType.JSON, B, obj({"a": STR, "b": STR}), obj({"a": STR}), True,
     CONFLUENT_JSON + ": open content model, removing a property is compatible"),
    (SchemaType.JSON, B, obj({"a": STR}, additionalProperties=False),
     obj({"a": STR, "b": STR}, additionalProperties=False), True,
     CONFLUENT_JSON + ": closed content model, adding a property is compatible"),
    (SchemaType.JSON, B, obj({"a": STR, "b": STR}, additionalProperties=False),
     obj({"a": STR}, additionalProperties=False), False,
     CONFLUENT_JSON + ": closed content model, removing a property is incompatible"),
    (SchemaType.JSON, FULL, obj({"a": STR}, additionalProperties=False),
     obj({"a": STR, "b": STR}, additionalProperties=False), False,
     CONFLUENT_JSON + ": no change of properties is both ways in a closed model"),
    (SchemaType.JSON, B, obj({"a": STR}, additionalProperties=STR),
     obj({"a": STR, "b": STR}, additionalProperties=STR), True,
     CONFLUENT_JSON + ": partially open model, the added property is covered"),
    (SchemaType.JSON, B, obj({"a": STR}, additionalProperties=STR),
     obj({"a": STR, "b": INT}, additionalProperties=STR), False,
     CONFLUENT_JSON + ": partially open model, the added property is not covered"),
    (SchemaType.JSON, B, json.dumps(INT), json.dumps(NUM), True,
     CONFLUENT_JSON_DIFF + ": TYPE_EXTENDED (integer to number)"),
    (SchemaType.JSON, B, json.dumps(NUM), json.dumps(INT), False,
     CONFLUENT_JSON_DIFF + ": TYPE_NARROWED (number to integer)"),
    (SchemaType.JSON, B, json.dumps({"type": "string", "maxLength": 5}),
     json.dumps({"type": "string", "maxLength": 9}), True,
     CONFLUENT_JSON_DIFF + ": MAX_LENGTH_INCREASED"),
    (SchemaType.JSON, B, json.dumps({"type": "string", "maxLength": 9}),
     json.dumps({"type": "string", "maxLength": 5}), False,
     CONFLUENT_JSON_DIFF + ": MAX_LENGTH_DECREASED"),
    (SchemaType.JSON, B, json.dumps(INT), json.dumps({"type": "integer", "minimum": 0}), False,
     CONFLUENT_JSON_DIFF + ": MINIMUM_ADDED"),
    (SchemaType.JSON, B, json.dumps({"enum": ["a"]}), json.dumps({"enum": ["a", "b"]}), True,
     CONFLUENT_JSON_DIFF + ": ENUM_ARRAY_EXTENDED"),
    (SchemaType.JSON, B, json.dumps({"enum": ["a", "b"]}), json.dumps({"enum": ["a"]}), False,
     CONFLUENT_JSON_DIFF + ": ENUM_ARRAY_NARROWED"),
    (SchemaType.JSON, B, obj({"a": STR}), obj({"a": STR}, required=["a"]), False,
     CONFLUENT_JSON_DIFF + ": REQUIRED_ATTRIBUTE_ADDED"),
    (SchemaType.JSON, B, obj({"a": STR}, required=["a"]), obj({"a": STR}), True,
     CONFLUENT_JSON_DIFF + ": REQUIRED_ATTRIBUTE_REMOVED"),
    (SchemaType.JSON, B, json.dumps(STR), json.dumps({"type": ["string", "null"]}), True,
     CONFLUENT_JSON_DIFF + ": SUM_TYPE_EXTENDED (a type list is an anyOf)"),
    (SchemaType.JSON, F, json.dumps(STR), json.dumps({"type": ["string", "null"]}), False,
     CONFLUENT_JSON_DIFF + ": the old schema reads no null"),
    (SchemaType.JSON, B, json.dumps({"oneOf": [STR, INT]}), json.dumps({"oneOf": [STR]}), False,
     CONFLUENT_JSON_DIFF + ": SUM_TYPE_NARROWED"),
    (SchemaType.JSON, B, json.dumps({"type": "array", "items": STR}),
     json.dumps({"type": "array", "items": INT}), False,
     CONFLUENT_JSON_DIFF + ": TYPE_CHANGED of the items"),
    # -- Protobuf -----------------------------------------------------------------------
    (SchemaType.PROTOBUF, B, proto("message M { string a = 1; }"),
     proto("message M { string a = 1; int32 b = 2; }"), True,
     CONFLUENT_PROTO_DIFF + ": FIELD_ADDED"),
    (SchemaType.PROTOBUF, B, proto("message M { string a = 1; int32 b = 2; }"),
     proto("message M { string a = 1; }"), True,
     CONFLUENT_PROTO_DIFF + ": FIELD_REMOVED (unknown fields are skipped)"),
    (SchemaType.PROTOBUF, FULL, proto("message M { string a = 1; }"),
     proto("message M { string a = 1; int32 b = 2; }"), True,
     PROTO_GUIDE + ": new fields are ignored by old code, defaults fill them in new code"),
    (SchemaType.PROTOBUF, B, proto("message M { string a = 1; }"),
     proto("message M { int32 a = 1; }"), False,
     CONFLUENT_PROTO_DIFF + ": FIELD_SCALAR_KIND_CHANGED"),
    (SchemaType.PROTOBUF, B, proto("message M { int32 a = 1; }"),
     proto("message M { int64 a = 1; }"), True,
     PROTO_GUIDE + ": int32, uint32, int64, uint64 and bool are compatible"),
    (SchemaType.PROTOBUF, B, proto("message M { int32 a = 1; }"),
     proto("message M { sint32 a = 1; }"), False,
     PROTO_GUIDE + ": sint32 and sint64 are not compatible with the other integer types"),
    (SchemaType.PROTOBUF, B, proto("message M { string a = 1; }"),
     proto("message M { string renamed = 1; }"), True,
     CONFLUENT_PROTO_DIFF + ": FIELD_NAME_CHANGED (the wire carries numbers)"),
    (SchemaType.PROTOBUF, B, proto("message M { string a = 1; }"),
     proto("message M { string a = 1; }\nmessage N { string b = 1; }"), True,
     CONFLUENT_PROTO_DIFF + ": MESSAGE_ADDED"),
    (SchemaType.PROTOBUF, F, proto("message M { string a = 1; }"),
     proto("message M { string a = 1; }\nmessage N { string b = 1; }"), False,
     CONFLUENT_PROTO + ": adding message types is not forward compatible"),
    (SchemaType.PROTOBUF, B, proto("message M { string a = 1; }"),
     proto("message M { string a = 1; }", package="other"), False,
     CONFLUENT_PROTO_DIFF + ": PACKAGE_CHANGED"),
    (SchemaType.PROTOBUF, B, proto("message M { optional string a = 1; }", syntax="proto2"),
     proto("message M { optional string a = 1; required int32 b = 2; }", syntax="proto2"),
     False, CONFLUENT_PROTO_DIFF + ": REQUIRED_FIELD_ADDED"),
    (SchemaType.PROTOBUF, B, proto("message M { string a = 1; }"),
     proto("message M { repeated string a = 1; }"), True,
     CONFLUENT_PROTO_DIFF + ": FIELD_STRING_OR_BYTES_LABEL_CHANGED"),
    (SchemaType.PROTOBUF, B, proto("message M { optional int32 a = 1; }", syntax="proto2"),
     proto("message M { repeated int32 a = 1; }", syntax="proto2"), False,
     CONFLUENT_PROTO_DIFF + ": FIELD_NUMERIC_LABEL_CHANGED"),
    (SchemaType.PROTOBUF, B, proto("message M { string a = 1; string b = 2; }"),
     proto("message M { oneof ab { string a = 1; string b = 2; } }"), False,
     CONFLUENT_PROTO_DIFF + ": MULTIPLE_FIELDS_MOVED_TO_ONEOF"),
    (SchemaType.PROTOBUF, B, proto("message M { string a = 1; }"),
     proto("message M { string a = 1; oneof cd { string c = 3; string d = 4; } }"), True,
     CONFLUENT_PROTO_DIFF + ": ONEOF_ADDED with new fields"),
    (SchemaType.PROTOBUF, B, proto("message M { oneof ab { string a = 1; string b = 2; } }"),
     proto("message M { oneof ab { string a = 1; } }"), False,
     CONFLUENT_PROTO_DIFF + ": ONEOF_FIELD_REMOVED"),
    (SchemaType.PROTOBUF, B,
     proto("message M { Money m = 1; }\nmessage Money { int64 c = 1; }\n"
           "message Price { int64 c = 1; }"),
     proto("message M { Price m = 1; }\nmessage Money { int64 c = 1; }\n"
           "message Price { int64 c = 1; }"), False,
     CONFLUENT_PROTO_DIFF + ": FIELD_NAMED_TYPE_CHANGED"),
    (SchemaType.PROTOBUF, B, proto("message M { string a = 1; }"),
     proto("message M { Inner a = 1; message Inner { string s = 1; } }"), False,
     CONFLUENT_PROTO_DIFF + ": FIELD_KIND_CHANGED (scalar to message)"),
    (SchemaType.PROTOBUF, B, proto("message M { E e = 1; }\nenum E { A = 0; }"),
     proto("message M { E e = 1; }\nenum E { A = 0; B = 1; }"), True,
     CONFLUENT_PROTO_DIFF + ": ENUM_CONST_ADDED"),
]


def compatible(schema_type: SchemaType, level: Compatibility, old: str, new: str) -> bool:
    fmt = for_type(schema_type)
    before, after = fmt.parse(old, {}), fmt.parse(new, {})
    backward = not after.incompatibilities(before)
    forward = not before.incompatibilities(after)
    return {B: backward, F: forward, FULL: backward and forward}[level]


@pytest.mark.parametrize(
    ("schema_type", "level", "old", "new", "expected", "source"),
    CASES,
    ids=[f"{c[0].value}-{c[1].value}-{i}" for i, c in enumerate(CASES)],
)
def test_compatibility_as_confluent_answers(
    schema_type: SchemaType, level: Compatibility, old: str, new: str, expected: bool,
    source: str,
) -> None:
    assert compatible(schema_type, level, old, new) is expected, source


def test_the_table_covers_every_format_and_level() -> None:
    counts = {t: sum(1 for c in CASES if c[0] is t) for t in SchemaType}
    assert counts[SchemaType.AVRO] >= 12 and counts[SchemaType.JSON] >= 9
    assert counts[SchemaType.PROTOBUF] >= 9
    for t in SchemaType:
        assert {c[1] for c in CASES if c[0] is t} == {B, F, FULL}


def test_an_incompatibility_says_what_and_where() -> None:
    avro = for_type(SchemaType.AVRO)
    old, new = avro.parse(record(NAME), {}), avro.parse(record(NAME, field("age", "int")), {})
    (message,) = new.incompatibilities(old)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in message and "/fields/1" in message
    json_schema = for_type(SchemaType.JSON)
    (message,) = json_schema.parse(obj({"a": STR, "b": STR}), {}).incompatibilities(
        json_schema.parse(obj({"a": STR}), {}))
    assert "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in message
    assert "#/properties/b" in message
    protobuf = for_type(SchemaType.PROTOBUF)
    (message,) = protobuf.parse(proto("message M { int32 a = 1; }"), {}).incompatibilities(
        protobuf.parse(proto("message M { string a = 1; }"), {}))
    assert "FIELD_SCALAR_KIND_CHANGED" in message and "#/M/1" in message
    assert avro.parse('"int"', {}).incompatibilities(json_schema.parse("{}", {})) == [
        "Incompatible because of different schema type"
    ]
