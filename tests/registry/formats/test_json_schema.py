"""JSON Schema schemas: drafts checked against their meta-schemas, references by name,
the stored and normalized texts, and the codec (validated on encode)."""

from __future__ import annotations

import json

import pytest

from brokerd.registry.formats import for_type
from brokerd.registry.model import InvalidSchema, SchemaType

JSON = for_type(SchemaType.JSON)

PERSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Person",
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0},
        "home": {"$ref": "address.json"},
    },
    "required": ["name"],
    "additionalProperties": False,
}
ADDRESS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_decodes_what_a_json_serializer_writes_and_encodes_validated_values() -> None:
    parsed = JSON.parse(json.dumps(PERSON), {"address.json": json.dumps(ADDRESS)})
    value = {"name": "Zoë", "age": 7, "home": {"city": "Lyon"}}
    # confluent-kafka's JSONSerializer writes json.dumps() of the value after its framing.
    assert parsed.decode(json.dumps(value).encode()) == value
    assert parsed.encode(value) == '{"name":"Zoë","age":7,"home":{"city":"Lyon"}}'.encode()
    with pytest.raises(ValueError, match=r"\['age'\] does not match the schema: -1 is less"):
        parsed.encode({"name": "a", "age": -1})
    with pytest.raises(ValueError, match=r"\['home'\] does not match.*'city' is a required"):
        parsed.encode({"name": "a", "home": {}})
    with pytest.raises(ValueError, match="Additional properties"):
        parsed.encode({"name": "a", "x": 1})
    with pytest.raises(ValueError, match="not UTF-8 JSON"):
        parsed.decode(b"{nope")


@pytest.mark.parametrize(
    "draft",
    [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ],
)
def test_every_draft_parses_and_is_checked_against_its_meta_schema(draft: str) -> None:
    good = {"$schema": draft, "type": "object", "properties": {"n": {"type": "number"}}}
    assert JSON.parse(json.dumps(good), {}).encode({"n": 1.5}) == b'{"n":1.5}'
    with pytest.raises(InvalidSchema, match="Invalid JSON schema at properties/n/type"):
        JSON.parse(json.dumps({**good, "properties": {"n": {"type": "numbr"}}}), {})


def test_canonical_keeps_the_order_and_normalized_sorts_it() -> None:
    text = '{ "type": "object",\n "properties": {"b": {"type": "string"}, "a": {}} }'
    parsed = JSON.parse(text, {})
    assert parsed.canonical() == '{"type":"object","properties":{"b":{"type":"string"},"a":{}}}'
    assert parsed.normalized() == '{"properties":{"a":{},"b":{"type":"string"}},"type":"object"}'


def test_references_resolve_by_name_and_against_the_schemas_id() -> None:
    main = {"$id": "https://example.com/schemas/order.json", "type": "object",
            "properties": {"item": {"$ref": "item.json"}}}
    item = {"type": "object", "properties": {"sku": {"type": "string"}}}
    parsed = JSON.parse(json.dumps(main), {"item.json": json.dumps(item)})
    with pytest.raises(ValueError, match="'sku'"):
        parsed.encode({"item": {"sku": 5}})
    with pytest.raises(InvalidSchema, match=r"unresolved \$ref 'item\.json'"):
        JSON.parse(json.dumps(main), {})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{nope", "not JSON"),
        ("[1, 2]", "expected an object or a boolean at the root"),
        ('{"type": 5}', "Invalid JSON schema at type"),
        ('{"type": "string", "minLength": -1}', "Invalid JSON schema at minLength"),
        ('{"properties": {"a": {"$ref": "#/definitions/missing"}}}', "unresolved \\$ref"),
    ],
)
def test_invalid_schemas_are_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(InvalidSchema, match=message):
        JSON.parse(text, {})


def test_boolean_schemas_are_schemas() -> None:
    assert JSON.parse("true", {}).encode([1]) == b"[1]"
    with pytest.raises(ValueError, match="does not match"):
        JSON.parse("false", {}).encode(1)


def tree(leaf: str) -> str:
    return json.dumps({
        "$ref": "#/definitions/node",
        "definitions": {"node": {"type": "object", "properties": {
            "v": {"type": leaf},
            "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}},
        }}},
    })


def test_recursive_schemas_compare_and_validate() -> None:
    integers = JSON.parse(tree("integer"), {})
    assert JSON.parse(tree("number"), {}).incompatibilities(integers) == []
    (message,) = JSON.parse(tree("string"), {}).incompatibilities(integers)
    assert "TYPE_CHANGED" in message and "#/properties/v" in message
    assert integers.encode({"v": 1, "kids": [{"v": 2, "kids": []}]}) == (
        b'{"v":1,"kids":[{"v":2,"kids":[]}]}'
    )
    with pytest.raises(ValueError, match=r"\['kids'\]\[0\]\['v'\]"):
        integers.encode({"v": 1, "kids": [{"v": "two"}]})
