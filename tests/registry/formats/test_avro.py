"""Avro schemas: parsing and the clear refusals, the stored (canonical) and normalized
texts as Confluent prints them, references, and the binary codec against fastavro's
bytes (what confluent-kafka's AvroSerializer writes after its 5-byte framing)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokerd.registry.formats import for_type
from brokerd.registry.model import InvalidSchema, SchemaType

AVRO = for_type(SchemaType.AVRO)

USER = {
    "type": "record",
    "name": "User",
    "namespace": "com.example",
    "doc": "a user",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": ["null", "int"], "default": None},
        {"name": "score", "type": "double", "default": 0.5},
        {"name": "ratio", "type": "float"},
        {"name": "id", "type": "long"},
        {"name": "raw", "type": "bytes"},
        {"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 2}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "friend", "type": ["null", "User"], "default": None},
        {"name": "either", "type": ["string", "long", "Kind"]},
        {"name": "ok", "type": "boolean"},
    ],
}


def fastavro_bytes(schema: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def test_decodes_what_fastavro_writes_and_encodes_it_back_byte_for_byte() -> None:
    parsed = AVRO.parse(json.dumps(USER), {})
    record = {
        "name": "ann", "age": 41, "score": 2.25, "ratio": 1.1, "id": -(2**40),
        "raw": b"\x00\xff", "tag": b"ab", "kind": "B", "tags": ["x", "y"],
        "attrs": {"k": 7}, "when": 1700000000000,
        "friend": {
            "name": "bo", "age": None, "score": 0.5, "ratio": 0.0, "id": 1, "raw": b"",
            "tag": b"zz", "kind": "A", "tags": [], "attrs": {}, "when": 0,
            "friend": None, "either": "s", "ok": False,
        },
        "either": ("com.example.Kind", "A"), "ok": True,
    }
    body = fastavro_bytes(USER, record)
    value = parsed.decode(body)
    assert value == {
        "name": "ann", "age": {"int": 41}, "score": 2.25, "ratio": 1.1, "id": -(2**40),
        "raw": "\u0000\u00ff", "tag": "ab", "kind": "B", "tags": ["x", "y"],
        "attrs": {"k": 7}, "when": 1700000000000,
        "friend": {"com.example.User": {
            "name": "bo", "age": None, "score": 0.5, "ratio": 0.0, "id": 1, "raw": "",
            "tag": "zz", "kind": "A", "tags": [], "attrs": {}, "when": 0,
            "friend": None, "either": {"string": "s"}, "ok": False,
        }},
        "either": {"com.example.Kind": "A"}, "ok": True,
    }
    assert parsed.encode(value) == body
    # A hand-written value may leave a union's branch unsaid and a defaulted field out.
    loose = dict(value, age=41, either="A")
    del loose["score"]
    assert parsed.encode(loose) == fastavro_bytes(USER, dict(record, age=41, score=0.5, either="A"))


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"name": 3}, "$.name: expected a string, got the number 3"),
        ({"name": "a", "nope": 1}, "has no field 'nope'"),
        ({"name": "a"}, "missing field 'ratio'"),
    ],
)
def test_encode_refuses_values_that_do_not_fit(value: dict[str, Any], error: str) -> None:
    parsed = AVRO.parse(json.dumps(USER), {})
    with pytest.raises(ValueError, match=None) as caught:
        parsed.encode(value)
    assert error in str(caught.value)


def test_decode_refuses_truncated_oversized_and_trailing_payloads() -> None:
    parsed = AVRO.parse('{"type":"array","items":"long"}', {})
    with pytest.raises(ValueError, match="exceeds the bytes left"):
        parsed.decode(b"\xfe\xff\xff\xff\x0f")  # a block of 2^31 items in 5 bytes
    with pytest.raises(ValueError, match="ends inside a number"):
        parsed.decode(b"\x02\x80")
    with pytest.raises(ValueError, match="1 bytes left after"):
        parsed.decode(b"\x00\x00")
    nulls = AVRO.parse('{"type":"array","items":"null"}', {})
    with pytest.raises(ValueError, match="empty Avro items"):
        nulls.decode(b"\xfe\xff\xff\xff\x0f\x00")
    text = AVRO.parse('"string"', {})
    with pytest.raises(ValueError, match="exceeds"):
        text.decode(b"\x80\x80\x80\x80\x08abc")


def test_canonical_is_javas_to_string() -> None:
    # Confluent's AvroSchemaTest: the stored text of a schema with escaped docs.
    given = (
        '{"type":"record","name":"myrecord","doc":"hi\\"there","fields":'
        '[{"type":"string","name":"f1","doc":"bye\\"now"}]}'
    )
    expected = (
        '{"type":"record","name":"myrecord","doc":"hi\\"there","fields":'
        '[{"name":"f1","type":"string","doc":"bye\\"now"}]}'
    )
    assert AVRO.parse(given, {}).canonical() == expected
    assert AVRO.parse(given, {}).normalized() == expected
    nested = {
        "type": "record", "name": "a.b.Outer", "fields": [
            {"name": "in", "type": {"type": "record", "name": "Inner", "fields": [
                {"name": "x", "type": {"type": "string"}, "order": "descending"}]}},
            {"name": "again", "type": "a.b.Inner"},
            {"name": "other", "type": {"type": "enum", "name": "c.E", "symbols": ["X"],
                                       "default": "X"}},
        ],
    }
    assert AVRO.parse(json.dumps(nested), {}).canonical() == (
        '{"type":"record","name":"Outer","namespace":"a.b","fields":['
        '{"name":"in","type":{"type":"record","name":"Inner","fields":['
        '{"name":"x","type":"string","order":"descending"}]}},'
        '{"name":"again","type":"Inner"},'
        '{"name":"other","type":{"type":"enum","name":"E","namespace":"c",'
        '"symbols":["X"],"default":"X"}}]}'
    )


def test_normalized_sorts_properties_and_aliases() -> None:
    given = {
        "type": "record", "name": "R", "namespace": "n", "doc": "", "aliases": ["Z", "A"],
        "zeta": 1, "alpha": 2,
        "fields": [{"name": "d", "aliases": ["y", "b"], "type": {
            "type": "bytes", "x.y": True, "scale": 2, "precision": 4,
            "logicalType": "decimal"}}],
    }
    parsed = AVRO.parse(json.dumps(given), {})
    assert parsed.normalized() == (
        '{"type":"record","name":"R","namespace":"n","fields":[{"name":"d","type":'
        '{"type":"bytes","logicalType":"decimal","precision":4,"scale":2,"x.y":true},'
        '"aliases":["b","y"]}],"alpha":2,"zeta":1,"aliases":["A","Z"]}'
    )
    assert parsed.canonical().startswith('{"type":"record","name":"R","namespace":"n","doc":""')


def test_references_are_named_types_of_other_schemas() -> None:
    address = {"type": "record", "name": "Address", "namespace": "geo",
               "fields": [{"name": "city", "type": "string"}]}
    country = {"type": "enum", "name": "geo.Country", "symbols": ["FR", "NZ"]}
    located = {"type": "record", "name": "geo.Located", "fields": [
        {"name": "at", "type": "Address"}, {"name": "in", "type": "Country"}]}
    person = {"type": "record", "name": "Person", "fields": [
        {"name": "home", "type": "geo.Located"}]}
    # Given in any order: a reference is parsed after those it uses.
    refs = {"geo.Located": json.dumps(located), "geo.Address": json.dumps(address),
            "geo.Country": json.dumps(country)}
    parsed = AVRO.parse(json.dumps(person), refs)
    assert parsed.canonical() == (
        '{"type":"record","name":"Person","fields":[{"name":"home","type":"geo.Located"}]}'
    )
    body = parsed.encode({"home": {"at": {"city": "Paris"}, "in": "FR"}})
    assert parsed.decode(body) == {"home": {"at": {"city": "Paris"}, "in": "FR"}}
    with pytest.raises(InvalidSchema, match=r"geo\.Located"):
        AVRO.parse(json.dumps(person), {})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        ('{"type":"record","name":"R"}', "Invalid Avro schema"),
        ('{"type":"record","name":"1R","fields":[]}', "Invalid Avro schema"),
        ('{"type":"enum","name":"E","symbols":["A","A"]}', "Invalid Avro schema"),
        ('{"type":"recrod","name":"R","fields":[]}', "Invalid Avro schema"),
        ('["int","int"]', "Invalid Avro schema"),
        ('{"type":"record","name":"R","fields":[{"name":"f","type":"Nope"}]}',
         "Invalid Avro schema"),
        ('{"type":"record","name":"R","fields":[{"name":"f","type":"int","default":"x"}]}',
         "Invalid default for field f of R"),
        ('{"type":"record","name":"R","fields":[{"name":"f","type":["string","null"],'
         '"default":null}]}', "Invalid default for field f of R"),
    ],
)
def test_invalid_schemas_are_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(InvalidSchema, match=message):
        AVRO.parse(text, {})


def test_importing_the_formats_package_loads_no_schema_library() -> None:
    code = (
        "import sys, brokerd.registry.formats;"
        "print([m for m in ('avro', 'fastavro', 'jsonschema', 'google.protobuf',"
        " 'grpc_tools') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


SMALL = {
    "type": "record", "name": "Small", "fields": [
        {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
        {"name": "d", "type": "double"}, {"name": "s", "type": "string"},
        {"name": "b", "type": "bytes"},
        {"name": "u", "type": ["null", "long", "string"]},
        {"name": "a", "type": {"type": "array", "items": "int"}},
        {"name": "m", "type": {"type": "map", "values": "boolean"}},
    ],
}


@settings(max_examples=60, deadline=None)
@given(
    i=st.integers(-(2**31), 2**31 - 1), l=st.integers(-(2**63), 2**63 - 1),
    d=st.floats(allow_nan=False), s=st.text(), b=st.binary(),
    u=st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    a=st.lists(st.integers(-(2**31), 2**31 - 1)),
    m=st.dictionaries(st.text(), st.booleans()),
)
def test_any_record_fastavro_writes_reads_and_writes_back_the_same(
    i: int, l: int, d: float, s: str, b: bytes, u: Any, a: list[int], m: dict[str, bool],  # noqa: E741
) -> None:
    parsed = AVRO.parse(json.dumps(SMALL), {})
    body = fastavro_bytes(SMALL, {"i": i, "l": l, "d": d, "s": s, "b": b, "u": u, "a": a, "m": m})
    value = parsed.decode(body)
    assert isinstance(value, dict) and value["b"] == b.decode("latin-1")
    assert parsed.encode(value) == body
