# -*- test-case-name: tests.registry.formats.test_json_schema -*-
"""JSON Schema schemas (``schemaType`` JSON), as Confluent's registry treats them.

* Parsing: the text is JSON, an object or a boolean, and a valid schema of its draft
  (``$schema``: draft-04, -06, -07, 2019-09 or 2020-12; draft-07 when it names none),
  checked against the draft's meta-schema with ``jsonschema``. A reference is a
  schema another subject holds, known by its name: ``{"$ref": "address.json"}`` (also
  resolved against the schema's ``$id``). Every ``$ref`` must resolve: nothing is
  fetched from the network.
* :meth:`ParsedJsonSchema.canonical` is the JSON printed compact with its keys in the
  order given; :meth:`ParsedJsonSchema.normalized` sorts every object's keys (both as
  Confluent's registry prints them).
* Compatibility follows Confluent's JSON Schema rules (their "JSON Schema compatibility
  rules" and the difference types of their schema diff), in their strict policy: the
  old schema and the new are compared as their validator's model would see them (a
  ``type`` list is an ``anyOf`` of types; ``enum``, ``const``, combinations and a type
  together are an ``allOf``), each difference has a type, and the new schema can read
  the old one's documents when every difference is of a compatible type. Notably: in an
  open content model (no ``additionalProperties``, or ``true``) a property may be
  removed but not added (an old document may hold any value under a new name); in a
  closed one (``additionalProperties: false``) a property may be added but not removed;
  where ``additionalProperties`` is a schema, a property comes or goes when that schema
  covers it. Constraints may widen (``maxLength`` up, ``minimum`` down or removed, an
  enum extended, ``integer`` to ``number``, an ``anyOf`` branch added), not narrow.
* :meth:`ParsedJsonSchema.decode` reads a record body as UTF-8 JSON;
  :meth:`ParsedJsonSchema.encode` validates a value against the schema and writes it as
  compact UTF-8 JSON.

This module is imported on first use of a JSON schema (``formats.for_type``): it loads
``jsonschema`` and ``referencing``.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import referencing
import referencing.exceptions
import referencing.jsonschema

from brokerd.registry.model import InvalidSchema, ParsedSchema, SchemaType

__all__ = ["FORMAT", "JsonSchemaFormat", "ParsedJsonSchema"]

_DRAFT7 = "http://json-schema.org/draft-07/schema#"
#: How many pairs of sub-schemas one comparison may compare before it answers that the
#: schemas are too large to compare (a cycle of references is cut earlier; this bounds
#: a large graph of references and combinations).
MAX_COMPARED_PAIRS = 100_000


class JsonSchemaFormat:
    """The JSON schema type."""

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.JSON

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedJsonSchema:
        root = _load(text, "schema")
        registry: referencing.Registry[Any] = referencing.Registry()
        for name, ref_text in references.items():
            contents = _load(ref_text, f"reference {name}")
            resource = _resource(contents)
            registry = registry.with_resource(name, resource)
            own_id = resource.id()
            if own_id and own_id != name:
                registry = registry.with_resource(own_id, resource)
        resource = _resource(root)
        base = resource.id() or ""
        registry = registry.with_resource(base, resource)
        base_name = base.rpartition("/")[0]
        if base_name:
            for name in references:
                if "://" not in name:
                    registry = registry.with_resource(
                        f"{base_name}/{name}", registry[name]
                    )
        validator_class = jsonschema.validators.validator_for(
            root, default=jsonschema.Draft7Validator
        )
        try:
            validator_class.check_schema(root)
        except jsonschema.exceptions.SchemaError as e:
            where = "/".join(str(p) for p in e.absolute_path) or "(root)"
            raise InvalidSchema(f"Invalid JSON schema at {where}: {e.message}") from None
        parsed = ParsedJsonSchema(root, validator_class(root, registry=registry), registry, base)
        parsed.check_references()
        return parsed


FORMAT = JsonSchemaFormat()


def _load(text: str, what: str) -> Any:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InvalidSchema(f"Invalid JSON {what}: not JSON ({e})") from None
    if not isinstance(value, (dict, bool)):
        raise InvalidSchema(f"Invalid JSON {what}: expected an object or a boolean at the root")
    return value


def _resource(contents: Any) -> referencing.Resource[Any]:
    dialect = contents.get("$schema", _DRAFT7) if isinstance(contents, dict) else _DRAFT7
    spec = referencing.jsonschema.specification_with(
        dialect, default=referencing.jsonschema.DRAFT7
    )
    return spec.create_resource(contents)


class ParsedJsonSchema:
    """One parsed JSON schema with its references."""

    def __init__(
        self,
        root: Any,
        validator: Any,
        registry: referencing.Registry[Any],
        base: str,
    ) -> None:
        self._root = root
        self._validator = validator
        self._registry = registry
        self._base = base
        self._canonical: str | None = None

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.JSON

    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = json.dumps(self._root, separators=(",", ":"), ensure_ascii=False)
        return self._canonical

    def normalized(self) -> str:
        return json.dumps(self._root, separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    def incompatibilities(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ParsedJsonSchema):
            return ["Incompatible because of different schema type"]
        try:
            differences = _Diff().compare(writer.model(), self.model())
        except _TooLarge:
            return [
                f"{{errorType:'TOO_LARGE', description:'the schemas need more than "
                f"{MAX_COMPARED_PAIRS} comparisons of sub-schemas'}}"
            ]
        return [d.message() for d in differences if d.kind not in _COMPATIBLE]

    def decode(self, payload: bytes) -> object:
        try:
            return json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ValueError(f"not UTF-8 JSON: {e}") from None
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None

    def encode(self, value: object) -> bytes:
        try:
            error = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
        except RecursionError:
            raise ValueError("value nested too deeply") from None
        except referencing.exceptions.Unresolvable as e:
            raise ValueError(f"the schema's {e} does not resolve") from None
        if error is not None:
            where = "".join(f"[{p!r}]" for p in error.absolute_path) or "the value"
            raise ValueError(f"{where} does not match the schema: {error.message}")
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    # -- internals ---------------------------------------------------------------------

    def model(self) -> _Node:
        return _Loader(self._registry).load(self._root, self._registry.resolver(self._base))

    def check_references(self) -> None:
        """Every ``$ref`` resolves (to the schema itself, a reference, or within them)."""
        loader = _Loader(self._registry)
        pending = [loader.load(self._root, self._registry.resolver(self._base))]
        seen: set[int] = set()
        while pending:
            node = pending.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node.kind is _Kind.REF:
                pending.append(node.target())
            pending.extend(node.children())


# -- the validator's model of a schema ---------------------------------------------------


class _Kind(enum.Enum):
    FALSE = "false"
    EMPTY = "empty"
    REF = "reference"
    COMBINED = "combined"
    STRING = "string"
    NUMBER = "number"
    BOOLEAN = "boolean"
    NULL = "null"
    CONST = "const"
    ENUM = "enum"
    OBJECT = "object"
    ARRAY = "array"
    NOT = "not"
    CONDITIONAL = "conditional"


_TYPE_KINDS = {
    "string": _Kind.STRING,
    "number": _Kind.NUMBER,
    "integer": _Kind.NUMBER,
    "boolean": _Kind.BOOLEAN,
    "null": _Kind.NULL,
    "object": _Kind.OBJECT,
    "array": _Kind.ARRAY,
}
_KEYWORDS_OF = {
    "object": ("properties", "required", "additionalProperties", "patternProperties",
               "dependencies", "dependentRequired", "dependentSchemas", "minProperties",
               "maxProperties", "propertyNames", "unevaluatedProperties"),
    "array": ("items", "prefixItems", "additionalItems", "minItems", "maxItems",
              "uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}
_COMBINERS = ("allOf", "anyOf", "oneOf")


@attrs.define(eq=False)
class _Node:
    """A schema as the validator sees it: its kind, the JSON object it came from, and how
    to load its sub-schemas (``$ref`` targets are loaded when first compared)."""

    kind: _Kind
    data: Mapping[str, Any]
    loader: _Loader
    resolver: Any
    criterion: str = ""
    subschemas: tuple[_Node, ...] = ()
    integer: bool = False
    _target: _Node | None = None

    def sub(self, schema: Any) -> _Node:
        return self.loader.load(schema, self.resolver)

    def target(self) -> _Node:
        if self._target is None:
            ref = self.data["$ref"]
            try:
                resolved = self.resolver.lookup(ref)
            except referencing.exceptions.Unresolvable:
                raise InvalidSchema(f"Invalid JSON schema: unresolved $ref {ref!r}") from None
            self._target = self.loader.load(resolved.contents, resolved.resolver)
        return self._target

    def children(self) -> Iterator[_Node]:
        yield from self.subschemas
        if self.kind is _Kind.NOT:
            yield self.sub(self.data["not"])
        for key in ("properties", "patternProperties", "dependentSchemas", "dependencies",
                    "$defs", "definitions"):
            for value in (self.data.get(key) or {}).values():
                if isinstance(value, (dict, bool)):
                    yield self.sub(value)
        for key in ("additionalProperties", "additionalItems", "contains", "propertyNames",
                    "unevaluatedProperties", "unevaluatedItems", "if", "then", "else"):
            if isinstance(self.data.get(key), (dict, bool)):
                yield self.sub(self.data[key])
        for key in ("items", "prefixItems"):
            value = self.data.get(key)
            for item in value if isinstance(value, list) else [value] if value else []:
                yield self.sub(item)


class _Loader:
    """Turns JSON schemas into :class:`_Node` as Confluent's validator library reads
    them, one node per JSON object (so a cycle of references meets the same node)."""

    def __init__(self, registry: referencing.Registry[Any]) -> None:
        self._registry = registry
        self._nodes: dict[int, _Node] = {}
        self._keep: list[Any] = []

    def load(self, schema: Any, resolver: Any) -> _Node:
        key = id(schema)
        found = self._nodes.get(key)
        if found is not None:
            return found
        self._keep.append(schema)  # ids stay unique while the loader lives
        node = self._build(schema, resolver)
        self._nodes[key] = node
        return node

    def _build(self, schema: Any, resolver: Any) -> _Node:
        if schema is False:
            return _Node(_Kind.FALSE, {}, self, resolver)
        if schema is True or not isinstance(schema, dict):
            return _Node(_Kind.EMPTY, {}, self, resolver)
        if "$id" in schema and isinstance(schema["$id"], str):
            resolver = resolver.in_subresource(_resource(schema))
        if "$ref" in schema:
            return _Node(_Kind.REF, schema, self, resolver)
        parts: list[_Node] = []
        if "enum" in schema:
            parts.append(_Node(_Kind.ENUM, schema, self, resolver))
        if "const" in schema:
            parts.append(_Node(_Kind.CONST, schema, self, resolver))
        for combiner in _COMBINERS:
            if isinstance(schema.get(combiner), list):
                subs = tuple(self.load(s, resolver) for s in schema[combiner])
                parts.append(
                    _Node(_Kind.COMBINED, schema, self, resolver, criterion=combiner,
                          subschemas=subs)
                )
        if "not" in schema:
            parts.append(_Node(_Kind.NOT, schema, self, resolver))
        if "if" in schema:
            parts.append(_Node(_Kind.CONDITIONAL, schema, self, resolver))
        declared = schema.get("type")
        if isinstance(declared, str):
            parts.append(self._typed(declared, schema, resolver))
        elif isinstance(declared, list):
            typed = tuple(self._typed(str(t), schema, resolver) for t in declared)
            parts.append(
                _Node(_Kind.COMBINED, schema, self, resolver, criterion="anyOf",
                      subschemas=typed)
            )
        else:
            inferred = [t for t, keys in _KEYWORDS_OF.items() if any(k in schema for k in keys)]
            if len(inferred) == 1:
                parts.append(self._typed(inferred[0], schema, resolver))
            elif inferred:
                typed = tuple(self._typed(t, schema, resolver) for t in inferred)
                parts.append(
                    _Node(_Kind.COMBINED, schema, self, resolver, criterion="anyOf",
                          subschemas=typed)
                )
        if not parts:
            return _Node(_Kind.EMPTY, schema, self, resolver)
        if len(parts) == 1:
            return parts[0]
        return _Node(_Kind.COMBINED, schema, self, resolver, criterion="allOf",
                     subschemas=tuple(parts))

    def _typed(self, name: str, schema: Mapping[str, Any], resolver: Any) -> _Node:
        kind = _TYPE_KINDS.get(name)
        if kind is None:
            raise InvalidSchema(f"Invalid JSON schema: unknown type {name!r}")
        return _Node(kind, schema, self, resolver, integer=name == "integer")


# -- the comparison ----------------------------------------------------------------------


class _D(enum.Enum):
    """Confluent's difference types (the subset these rules produce)."""

    ID_CHANGED = 1
    DESCRIPTION_CHANGED = 2
    TITLE_CHANGED = 3
    DEFAULT_CHANGED = 4
    SCHEMA_ADDED = 5
    SCHEMA_REMOVED = 6
    TYPE_EXTENDED = 7
    TYPE_NARROWED = 8
    TYPE_CHANGED = 9
    MAX_LENGTH_ADDED = 10
    MAX_LENGTH_REMOVED = 11
    MAX_LENGTH_INCREASED = 12
    MAX_LENGTH_DECREASED = 13
    MIN_LENGTH_ADDED = 14
    MIN_LENGTH_REMOVED = 15
    MIN_LENGTH_INCREASED = 16
    MIN_LENGTH_DECREASED = 17
    PATTERN_ADDED = 18
    PATTERN_REMOVED = 19
    PATTERN_CHANGED = 20
    MAXIMUM_ADDED = 21
    MAXIMUM_REMOVED = 22
    MAXIMUM_INCREASED = 23
    MAXIMUM_DECREASED = 24
    MINIMUM_ADDED = 25
    MINIMUM_REMOVED = 26
    MINIMUM_INCREASED = 27
    MINIMUM_DECREASED = 28
    EXCLUSIVE_MAXIMUM_ADDED = 29
    EXCLUSIVE_MAXIMUM_REMOVED = 30
    EXCLUSIVE_MAXIMUM_INCREASED = 31
    EXCLUSIVE_MAXIMUM_DECREASED = 32
    EXCLUSIVE_MINIMUM_ADDED = 33
    EXCLUSIVE_MINIMUM_REMOVED = 34
    EXCLUSIVE_MINIMUM_INCREASED = 35
    EXCLUSIVE_MINIMUM_DECREASED = 36
    MULTIPLE_OF_ADDED = 37
    MULTIPLE_OF_REMOVED = 38
    MULTIPLE_OF_EXPANDED = 39
    MULTIPLE_OF_REDUCED = 40
    MULTIPLE_OF_CHANGED = 41
    REQUIRED_ATTRIBUTE_ADDED = 42
    REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED = 43
    REQUIRED_ATTRIBUTE_REMOVED = 44
    DEPENDENCY_ARRAY_ADDED = 45
    DEPENDENCY_ARRAY_REMOVED = 46
    DEPENDENCY_ARRAY_EXTENDED = 47
    DEPENDENCY_ARRAY_NARROWED = 48
    DEPENDENCY_ARRAY_CHANGED = 49
    DEPENDENCY_SCHEMA_ADDED = 50
    DEPENDENCY_SCHEMA_REMOVED = 51
    MAX_PROPERTIES_ADDED = 52
    MAX_PROPERTIES_REMOVED = 53
    MAX_PROPERTIES_INCREASED = 54
    MAX_PROPERTIES_DECREASED = 55
    MIN_PROPERTIES_ADDED = 56
    MIN_PROPERTIES_REMOVED = 57
    MIN_PROPERTIES_INCREASED = 58
    MIN_PROPERTIES_DECREASED = 59
    ADDITIONAL_PROPERTIES_ADDED = 60
    ADDITIONAL_PROPERTIES_REMOVED = 61
    ADDITIONAL_PROPERTIES_EXTENDED = 62
    ADDITIONAL_PROPERTIES_NARROWED = 63
    PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL = 64
    REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL = 65
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL = 66
    OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL = 67
    REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL = 68
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL = 69
    OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL = 70
    PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL = 71
    PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL = 72
    PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL = 73
    PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = 74
    PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = 75
    PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = 76
    PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = 77
    MAX_ITEMS_ADDED = 78
    MAX_ITEMS_REMOVED = 79
    MAX_ITEMS_INCREASED = 80
    MAX_ITEMS_DECREASED = 81
    MIN_ITEMS_ADDED = 82
    MIN_ITEMS_REMOVED = 83
    MIN_ITEMS_INCREASED = 84
    MIN_ITEMS_DECREASED = 85
    UNIQUE_ITEMS_ADDED = 86
    UNIQUE_ITEMS_REMOVED = 87
    ADDITIONAL_ITEMS_ADDED = 88
    ADDITIONAL_ITEMS_REMOVED = 89
    ADDITIONAL_ITEMS_EXTENDED = 90
    ADDITIONAL_ITEMS_NARROWED = 91
    ITEM_ADDED_TO_OPEN_CONTENT_MODEL = 92
    ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL = 93
    ITEM_ADDED_TO_CLOSED_CONTENT_MODEL = 94
    ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL = 95
    ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL = 96
    ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL = 97
    ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = 98
    ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = 99
    ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = 100
    ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL = 101
    ENUM_ARRAY_EXTENDED = 102
    ENUM_ARRAY_NARROWED = 103
    ENUM_ARRAY_CHANGED = 104
    COMBINED_TYPE_EXTENDED = 105
    COMBINED_TYPE_CHANGED = 106
    PRODUCT_TYPE_EXTENDED = 107
    PRODUCT_TYPE_NARROWED = 108
    SUM_TYPE_EXTENDED = 109
    SUM_TYPE_NARROWED = 110
    COMBINED_TYPE_SUBSCHEMAS_CHANGED = 111
    NOT_TYPE_EXTENDED = 112
    NOT_TYPE_NARROWED = 113


#: The differences a new schema may have from the old one and still read every
#: document the old one accepted (Confluent's strict policy, its default).
_COMPATIBLE = frozenset(
    {
        _D.ID_CHANGED, _D.DESCRIPTION_CHANGED, _D.TITLE_CHANGED, _D.DEFAULT_CHANGED,
        _D.SCHEMA_REMOVED, _D.TYPE_EXTENDED,
        _D.MAX_LENGTH_INCREASED, _D.MAX_LENGTH_REMOVED, _D.MIN_LENGTH_DECREASED,
        _D.MIN_LENGTH_REMOVED, _D.PATTERN_REMOVED,
        _D.MAXIMUM_INCREASED, _D.MAXIMUM_REMOVED, _D.MINIMUM_DECREASED, _D.MINIMUM_REMOVED,
        _D.EXCLUSIVE_MAXIMUM_INCREASED, _D.EXCLUSIVE_MAXIMUM_REMOVED,
        _D.EXCLUSIVE_MINIMUM_DECREASED, _D.EXCLUSIVE_MINIMUM_REMOVED,
        _D.MULTIPLE_OF_REDUCED, _D.MULTIPLE_OF_REMOVED,
        _D.REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED, _D.REQUIRED_ATTRIBUTE_REMOVED,
        _D.DEPENDENCY_ARRAY_NARROWED, _D.DEPENDENCY_ARRAY_REMOVED,
        _D.DEPENDENCY_SCHEMA_REMOVED,
        _D.MAX_PROPERTIES_INCREASED, _D.MAX_PROPERTIES_REMOVED,
        _D.MIN_PROPERTIES_DECREASED, _D.MIN_PROPERTIES_REMOVED,
        _D.ADDITIONAL_PROPERTIES_ADDED, _D.ADDITIONAL_PROPERTIES_EXTENDED,
        _D.PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL,
        _D.REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL,
        _D.OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL,
        _D.PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL,
        _D.PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL,
        _D.PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        _D.PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        _D.MAX_ITEMS_INCREASED, _D.MAX_ITEMS_REMOVED, _D.MIN_ITEMS_DECREASED,
        _D.MIN_ITEMS_REMOVED, _D.UNIQUE_ITEMS_REMOVED,
        _D.ADDITIONAL_ITEMS_ADDED, _D.ADDITIONAL_ITEMS_EXTENDED,
        _D.ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL,
        _D.ITEM_ADDED_TO_CLOSED_CONTENT_MODEL,
        _D.ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL,
        _D.ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL,
        _D.ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        _D.ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
        _D.ENUM_ARRAY_EXTENDED,
        _D.COMBINED_TYPE_EXTENDED, _D.PRODUCT_TYPE_NARROWED, _D.SUM_TYPE_EXTENDED,
        _D.NOT_TYPE_NARROWED,
    }
)


@attrs.frozen
class _Difference:
    kind: _D
    path: str

    def message(self) -> str:
        words = self.kind.name.lower().replace("_", " ")
        return f"{{errorType:'{self.kind.name}', description:'{words} at path '{self.path}''}}"


class _TooLarge(Exception):
    """The comparison took more than :data:`MAX_COMPARED_PAIRS` steps."""


class _Diff:
    """Differences from an old schema to a new one, each with its path (``#/...``)."""

    def __init__(self) -> None:
        self._in_progress: set[tuple[int, int]] = set()
        self._pairs = 0

    def compare(self, old: _Node | None, new: _Node | None, path: str = "#") -> list[_Difference]:
        if old is None and new is None:
            return []
        if old is None:
            return [_Difference(_D.SCHEMA_ADDED, path)]
        if new is None:
            return [_Difference(_D.SCHEMA_REMOVED, path)]
        old = _deref(old)
        new = _deref(new)
        key = (id(old), id(new))
        if key in self._in_progress:
            return []  # a cycle: the pair is being compared further up
        self._pairs += 1
        if self._pairs > MAX_COMPARED_PAIRS:
            raise _TooLarge
        self._in_progress.add(key)
        try:
            return self._compare(old, new, path)
        finally:
            self._in_progress.discard(key)

    def _compatible(
        self, old: _Node | None, new: _Node | None, path: str
    ) -> list[_Difference] | None:
        found = self.compare(old, new, path)
        return found if all(d.kind in _COMPATIBLE for d in found) else None

    def _compare(self, old: _Node, new: _Node, path: str) -> list[_Difference]:
        out: list[_Difference] = []

        def add(kind: _D, where: str = "") -> None:
            out.append(_Difference(kind, f"{path}/{where}" if where else path))

        if old.kind is not _Kind.COMBINED and new.kind is _Kind.COMBINED:
            if len(new.subschemas) == 1:
                found = self._compatible(old, new.subschemas[0], path)
                if found is not None:
                    return found
            elif new.criterion in ("anyOf", "oneOf"):
                for sub in new.subschemas:
                    found = self._compatible(old, sub, path)
                    if found is not None:
                        return [*found, _Difference(_D.SUM_TYPE_EXTENDED, path)]
        elif old.kind is _Kind.COMBINED and new.kind is not _Kind.COMBINED:
            if len(old.subschemas) == 1:
                found = self._compatible(old.subschemas[0], new, path)
                if found is not None:
                    return found
            elif old.criterion == "allOf":
                for sub in old.subschemas:
                    found = self._compatible(sub, new, path)
                    if found is not None:
                        return [*found, _Difference(_D.PRODUCT_TYPE_NARROWED, path)]

        if old.kind is not new.kind:
            if old.kind is _Kind.FALSE or new.kind is _Kind.EMPTY:
                return out
            if _connect_bytes(old) and _connect_bytes(new):
                return out
            add(_D.TYPE_CHANGED)
            return out

        for keyword, kind in (("$id", _D.ID_CHANGED), ("title", _D.TITLE_CHANGED),
                              ("description", _D.DESCRIPTION_CHANGED),
                              ("default", _D.DEFAULT_CHANGED)):
            if old.data.get(keyword) != new.data.get(keyword):
                add(kind)

        compare_kind: dict[_Kind, Callable[[_Node, _Node, str, list[_Difference]], None]] = {
            _Kind.STRING: self._strings,
            _Kind.NUMBER: self._numbers,
            _Kind.ENUM: self._enums,
            _Kind.CONST: self._consts,
            _Kind.COMBINED: self._combined,
            _Kind.NOT: self._nots,
            _Kind.OBJECT: self._objects,
            _Kind.ARRAY: self._arrays,
        }
        comparer = compare_kind.get(old.kind)
        if comparer is not None:
            comparer(old, new, path, out)
        return out

    # -- per kind ----------------------------------------------------------------------

    def _strings(self, old: _Node, new: _Node, path: str, out: list[_Difference]) -> None:
        _bound(old, new, "maxLength", path, out, up=_D.MAX_LENGTH_INCREASED,
               down=_D.MAX_LENGTH_DECREASED, added=_D.MAX_LENGTH_ADDED,
               removed=_D.MAX_LENGTH_REMOVED)
        _bound(old, new, "minLength", path, out, up=_D.MIN_LENGTH_INCREASED,
               down=_D.MIN_LENGTH_DECREASED, added=_D.MIN_LENGTH_ADDED,
               removed=_D.MIN_LENGTH_REMOVED)
        before, after = old.data.get("pattern"), new.data.get("pattern")
        if before is None and after is not None:
            out.append(_Difference(_D.PATTERN_ADDED, f"{path}/pattern"))
        elif before is not None and after is None:
            out.append(_Difference(_D.PATTERN_REMOVED, f"{path}/pattern"))
        elif before != after:
            out.append(_Difference(_D.PATTERN_CHANGED, f"{path}/pattern"))

    def _numbers(self, old: _Node, new: _Node, path: str, out: list[_Difference]) -> None:
        _bound(old, new, "maximum", path, out, up=_D.MAXIMUM_INCREASED,
               down=_D.MAXIMUM_DECREASED, added=_D.MAXIMUM_ADDED, removed=_D.MAXIMUM_REMOVED)
        _bound(old, new, "minimum", path, out, up=_D.MINIMUM_INCREASED,
               down=_D.MINIMUM_DECREASED, added=_D.MINIMUM_ADDED, removed=_D.MINIMUM_REMOVED)
        _bound(old, new, "exclusiveMaximum", path, out, up=_D.EXCLUSIVE_MAXIMUM_INCREASED,
               down=_D.EXCLUSIVE_MAXIMUM_DECREASED, added=_D.EXCLUSIVE_MAXIMUM_ADDED,
               removed=_D.EXCLUSIVE_MAXIMUM_REMOVED, numeric_only=True)
        _bound(old, new, "exclusiveMinimum", path, out, up=_D.EXCLUSIVE_MINIMUM_INCREASED,
               down=_D.EXCLUSIVE_MINIMUM_DECREASED, added=_D.EXCLUSIVE_MINIMUM_ADDED,
               removed=_D.EXCLUSIVE_MINIMUM_REMOVED, numeric_only=True)
        before, after = old.data.get("multipleOf"), new.data.get("multipleOf")
        if before != after:
            where = f"{path}/multipleOf"
            if before is None:
                out.append(_Difference(_D.MULTIPLE_OF_ADDED, where))
            elif after is None:
                out.append(_Difference(_D.MULTIPLE_OF_REMOVED, where))
            elif _divides(before, after):
                out.append(_Difference(_D.MULTIPLE_OF_EXPANDED, where))
            elif _divides(after, before):
                out.append(_Difference(_D.MULTIPLE_OF_REDUCED, where))
            else:
                out.append(_Difference(_D.MULTIPLE_OF_CHANGED, where))
        if old.integer != new.integer:
            out.append(_Difference(_D.TYPE_EXTENDED if old.integer else _D.TYPE_NARROWED, path))

    def _enums(self, old: _Node, new: _Node, path: str, out: list[_Difference]) -> None:
        before = [_key(v) for v in old.data["enum"]]
        after = [_key(v) for v in new.data["enum"]]
        if set(before) != set(after):
            if set(before) <= set(after):
                kind = _D.ENUM_ARRAY_EXTENDED
            elif set(after) <= set(before):
                kind = _D.ENUM_ARRAY_NARROWED
            else:
                kind = _D.ENUM_ARRAY_CHANGED
            out.append(_Difference(kind, f"{path}/enum"))

    def _consts(self, old: _Node, new: _Node, path: str, out: list[_Difference]) -> None:
        if _key(old.data["const"]) != _key(new.data["const"]):
            out.append(_Difference(_D.ENUM_ARRAY_CHANGED, f"{path}/const"))

    def _nots(self, old: _Node, new: _Node, path: str, out: list[_Difference]) -> None:
        found = self._compatible(new.sub(new.data["not"]), old.sub(old.data["not"]),
                                 f"{path}/not")
        kind = _D.NOT_TYPE_NARROWED if found is not None else _D.NOT_TYPE_EXTENDED
        out.append(_Difference(kind, f"{path}/not"))

    def _combined(self, old: _Node, new: _Node, path: str, out: list[_Difference]) -> None:
        old_single, new_single = len(old.subschemas) == 1, len(new.subschemas) == 1
        if old.criterion != new.criterion:
            if (new.criterion == "anyOf" or (old_single and new_single)
                    or (old_single and new.criterion == "oneOf")
                    or (new_single and old.criterion == "allOf")):
                out.append(_Difference(_D.COMBINED_TYPE_EXTENDED, path))
            else:
                out.append(_Difference(_D.COMBINED_TYPE_CHANGED, path))
                return
        olds = _distinct(old.subschemas)
        news = _distinct(new.subschemas)
        if len(olds) < len(news):
            kind = _D.PRODUCT_TYPE_EXTENDED if new.criterion == "allOf" else _D.SUM_TYPE_EXTENDED
            out.append(_Difference(kind, path))
        elif len(olds) > len(news):
            kind = _D.PRODUCT_TYPE_NARROWED if old.criterion == "allOf" else _D.SUM_TYPE_NARROWED
            out.append(_Difference(kind, path))
        edges: dict[int, dict[int, list[_Difference]]] = {}
        for i, before in enumerate(olds):
            for j, after in enumerate(news):
                found = self._compatible(before, after, f"{path}/{old.criterion}/{i}")
                if found is not None:
                    edges.setdefault(i, {})[j] = found
        matching = _maximum_matching(edges)
        for i, j in matching.items():
            out.extend(edges[i][j])
        if len(matching) < min(len(olds), len(news)):
            out.append(_Difference(_D.COMBINED_TYPE_SUBSCHEMAS_CHANGED, path))

    def _objects(self, old: _Node, new: _Node, path: str, out: list[_Difference]) -> None:
        old_props = _mapping(old.data.get("properties"))
        new_props = _mapping(new.data.get("properties"))
        old_required = set(old.data.get("required") or ())
        new_required = set(new.data.get("required") or ())
        for name in old_props:
            if name in new_props:
                was, now = name in old_required, name in new_required
                where = f"{path}/required/{name}"
                if was and not now:
                    out.append(_Difference(_D.REQUIRED_ATTRIBUTE_REMOVED, where))
                elif now and not was:
                    kind = (_D.REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED
                            if _has_default(new_props[name])
                            else _D.REQUIRED_ATTRIBUTE_ADDED)
                    out.append(_Difference(kind, where))
        for name in sorted(set(old_props) | set(new_props)):
            where = f"{path}/properties/{name}"
            if name not in new_props:
                self._property_removed(old, new, name, old_props[name], where, out)
            elif name not in old_props:
                self._property_added(old, new, name, new_props[name], new_required, where, out)
            else:
                out.extend(self.compare(old.sub(old_props[name]), new.sub(new_props[name]), where))
        self._dependencies(old, new, path, out)
        self._additional(old, new, "additionalProperties", path, out,
                         added=_D.ADDITIONAL_PROPERTIES_ADDED,
                         removed=_D.ADDITIONAL_PROPERTIES_REMOVED,
                         narrowed=_D.ADDITIONAL_PROPERTIES_NARROWED,
                         extended=_D.ADDITIONAL_PROPERTIES_EXTENDED)
        _bound(old, new, "maxProperties", path, out, up=_D.MAX_PROPERTIES_INCREASED,
               down=_D.MAX_PROPERTIES_DECREASED, added=_D.MAX_PROPERTIES_ADDED,
               removed=_D.MAX_PROPERTIES_REMOVED)
        _bound(old, new, "minProperties", path, out, up=_D.MIN_PROPERTIES_INCREASED,
               down=_D.MIN_PROPERTIES_DECREASED, added=_D.MIN_PROPERTIES_ADDED,
               removed=_D.MIN_PROPERTIES_REMOVED)

    def _covered(self, old: _Node, new: _Node, where: str, out: list[_Difference],
                 covered: _D, not_covered: _D) -> None:
        """A property (or an item) on one side only, read on the other through a partially open
        content model (``patternProperties``/``additionalProperties`` schemas): the two
        schemas compared, and whether everything found is compatible."""
        found = self.compare(old, new, where)
        out.extend(found)
        ok = all(d.kind in _COMPATIBLE for d in found)
        out.append(_Difference(covered if ok else not_covered, where))

    def _property_removed(self, old: _Node, new: _Node, name: str, schema: Any, where: str,
                          out: list[_Difference]) -> None:
        # Whether the new schema still reads an old document holding the property
        # depends on the new schema's content model only.
        if _open_content(new.data):
            out.append(_Difference(_D.PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL, where))
        elif not self._partly_open(old, schema, new, name, where, out, _REMOVED_COVERED):
            out.append(_Difference(
                _D.PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL if schema is False
                else _D.PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL, where))

    def _property_added(self, old: _Node, new: _Node, name: str, schema: Any,
                        required: set[str], where: str, out: list[_Difference]) -> None:
        # An old document may hold any value under the new name unless the old schema's
        # content model said what (or that nothing) could be there.
        if _open_content(old.data):
            kind = (_D.PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
                    if new.sub(schema).kind is _Kind.EMPTY
                    else _added(name, required, schema, _ADDED_TO_OPEN))
        else:
            self._partly_open(new, schema, old, name, where, out, _ADDED_COVERED,
                              old_side=False)
            kind = _added(name, required, schema, _ADDED_TO_UNOPEN)
        out.append(_Difference(kind, where))

    def _partly_open(self, side: _Node, schema: Any, other: _Node, name: str, where: str,
                     out: list[_Difference], kinds: tuple[_D, _D], *,
                     old_side: bool = True) -> bool:
        """Property ``name`` of ``side`` only (``schema``: its schema there; the old side
        unless ``old_side`` is False) that the other side's partially open content model
        reads: the two compared (``kinds``: covered, not covered). False when nothing
        there reads it."""
        covering = _partial_content(other.data, name)
        if covering is None:
            return False
        sides = (side.sub(schema), other.sub(covering))
        old, new = sides if old_side else sides[::-1]
        self._covered(old, new, where, out, *kinds)
        return True

    def _dependencies(self, old: _Node, new: _Node, path: str, out: list[_Difference]) -> None:
        old_arrays, old_schemas = _dependencies(old.data)
        new_arrays, new_schemas = _dependencies(new.data)
        for name in sorted(set(old_arrays) | set(new_arrays)):
            where = f"{path}/dependencies/{name}"
            before, after = old_arrays.get(name), new_arrays.get(name)
            if after is None:
                out.append(_Difference(_D.DEPENDENCY_ARRAY_REMOVED, where))
            elif before is None:
                out.append(_Difference(_D.DEPENDENCY_ARRAY_ADDED, where))
            elif before != after:
                kind = (_D.DEPENDENCY_ARRAY_EXTENDED if before <= after
                        else _D.DEPENDENCY_ARRAY_NARROWED if after <= before
                        else _D.DEPENDENCY_ARRAY_CHANGED)
                out.append(_Difference(kind, where))
        for name in sorted(set(old_schemas) | set(new_schemas)):
            where = f"{path}/dependencies/{name}"
            if name not in new_schemas:
                out.append(_Difference(_D.DEPENDENCY_SCHEMA_REMOVED, where))
            elif name not in old_schemas:
                out.append(_Difference(_D.DEPENDENCY_SCHEMA_ADDED, where))
            else:
                out.extend(self.compare(old.sub(old_schemas[name]), new.sub(new_schemas[name]),
                                        where))

    def _additional(self, old: _Node, new: _Node, keyword: str, path: str,
                    out: list[_Difference], *, added: _D, removed: _D, narrowed: _D,
                    extended: _D) -> None:
        where = f"{path}/{keyword}"
        before, after = old.data.get(keyword, True), new.data.get(keyword, True)
        if (before is not False) != (after is not False):
            out.append(_Difference(added if after is not False else removed, where))
        elif isinstance(before, bool) and isinstance(after, dict):
            out.append(_Difference(narrowed, where))
        elif isinstance(before, dict) and isinstance(after, bool):
            out.append(_Difference(extended, where))
        elif isinstance(before, dict) and isinstance(after, dict):
            out.extend(self.compare(old.sub(before), new.sub(after), where))

    def _arrays(self, old: _Node, new: _Node, path: str, out: list[_Difference]) -> None:
        old_all, old_tuple, old_more = _items(old.data)
        new_all, new_tuple, new_more = _items(new.data)
        out.extend(self.compare(
            old.sub(old_all) if old_all is not None else None,
            new.sub(new_all) if new_all is not None else None,
            f"{path}/items"))
        for index in range(max(len(old_tuple), len(new_tuple))):
            where = f"{path}/items/{index}"
            if index < len(old_tuple) and index < len(new_tuple):
                out.extend(self.compare(old.sub(old_tuple[index]), new.sub(new_tuple[index]),
                                        where))
            elif index < len(old_tuple):
                self._item_removed(old, new, old_tuple[index], new_more, where, out)
            else:
                self._item_added(old, new, new_tuple[index], old_more, where, out)
        before = old_more if old_more is not None else True
        after = new_more if new_more is not None else True
        where = f"{path}/additionalItems"
        if (before is not False) != (after is not False):
            out.append(_Difference(
                _D.ADDITIONAL_ITEMS_REMOVED if before is not False
                else _D.ADDITIONAL_ITEMS_ADDED, where))
        elif isinstance(before, bool) and isinstance(after, dict):
            out.append(_Difference(_D.ADDITIONAL_ITEMS_NARROWED, where))
        elif isinstance(before, dict) and isinstance(after, bool):
            out.append(_Difference(_D.ADDITIONAL_ITEMS_EXTENDED, where))
        elif isinstance(before, dict) and isinstance(after, dict):
            out.extend(self.compare(old.sub(before), new.sub(after), where))
        _bound(old, new, "maxItems", path, out, up=_D.MAX_ITEMS_INCREASED,
               down=_D.MAX_ITEMS_DECREASED, added=_D.MAX_ITEMS_ADDED,
               removed=_D.MAX_ITEMS_REMOVED)
        _bound(old, new, "minItems", path, out, up=_D.MIN_ITEMS_INCREASED,
               down=_D.MIN_ITEMS_DECREASED, added=_D.MIN_ITEMS_ADDED,
               removed=_D.MIN_ITEMS_REMOVED)
        was, now = bool(old.data.get("uniqueItems")), bool(new.data.get("uniqueItems"))
        if was != now:
            out.append(_Difference(_D.UNIQUE_ITEMS_REMOVED if was else _D.UNIQUE_ITEMS_ADDED,
                                   f"{path}/uniqueItems"))

    def _item_removed(self, old: _Node, new: _Node, schema: Any, new_more: Any, where: str,
                      out: list[_Difference]) -> None:
        if new_more is None or new_more is True:
            out.append(_Difference(_D.ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL, where))
        elif isinstance(new_more, dict):
            self._covered(old.sub(schema), new.sub(new_more), where, out,
                          _D.ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
                          _D.ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL)
        elif schema is False:
            out.append(_Difference(_D.ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL, where))
        else:
            out.append(_Difference(_D.ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL, where))

    def _item_added(self, old: _Node, new: _Node, schema: Any, old_more: Any, where: str,
                    out: list[_Difference]) -> None:
        if old_more is None or old_more is True:
            out.append(_Difference(
                _D.ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
                if new.sub(schema).kind is _Kind.EMPTY
                else _D.ITEM_ADDED_TO_OPEN_CONTENT_MODEL, where))
        elif isinstance(old_more, dict):
            self._covered(old.sub(old_more), new.sub(schema), where, out,
                          _D.ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
                          _D.ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL)
        else:
            out.append(_Difference(_D.ITEM_ADDED_TO_CLOSED_CONTENT_MODEL, where))


def _deref(node: _Node) -> _Node:
    hops = 0
    while node.kind is _Kind.REF:
        node = node.target()
        hops += 1
        if hops > 64:
            raise InvalidSchema("Invalid JSON schema: a $ref cycle refers to nothing")
    return node


def _connect_bytes(node: _Node) -> bool:
    """Kafka Connect's JSON converter marks bytes so; two such are the same type."""
    return node.data.get("connect.type") == "bytes"


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


#: What a property added to a content model is, by content model: (required with a
#: default, required, optional).
_ADDED_TO_OPEN = (
    _D.REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL,
    _D.REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL,
    _D.OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL,
)
_ADDED_TO_UNOPEN = (
    _D.REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL,
    _D.REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL,
    _D.OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL,
)
#: A property on one side read by the other's partially open content model: (covered,
#: not covered).
_ADDED_COVERED = (
    _D.PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
    _D.PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
)
_REMOVED_COVERED = (
    _D.PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
    _D.PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
)


def _added(name: str, required: set[str], schema: Any, kinds: tuple[_D, _D, _D]) -> _D:
    with_default, required_kind, optional = kinds
    if name not in required:
        return optional
    return with_default if _has_default(schema) else required_kind


def _has_default(schema: Any) -> bool:
    return isinstance(schema, dict) and "default" in schema


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _distinct(nodes: tuple[_Node, ...]) -> list[_Node]:
    seen: dict[str, _Node] = {}
    for node in nodes:
        seen.setdefault(_key(dict(node.data)) + node.kind.value + str(node.integer), node)
    return list(seen.values())


def _divides(divisor: Any, number: Any) -> bool:
    """Whether ``number`` is a multiple of ``divisor`` (decimal arithmetic)."""
    from decimal import Decimal, InvalidOperation

    try:
        d, n = Decimal(str(divisor)), Decimal(str(number))
        return d != 0 and n % d == 0
    except InvalidOperation:
        return False


def _bound(old: _Node, new: _Node, keyword: str, path: str, out: list[_Difference], *,
           up: _D, down: _D, added: _D, removed: _D, numeric_only: bool = False) -> None:
    before, after = old.data.get(keyword), new.data.get(keyword)
    if numeric_only:  # draft-04's boolean exclusiveMaximum is no limit of its own
        before = None if isinstance(before, bool) else before
        after = None if isinstance(after, bool) else after
    if before == after:
        return
    where = f"{path}/{keyword}"
    if before is None:
        out.append(_Difference(added, where))
    elif after is None:
        out.append(_Difference(removed, where))
    elif before < after:
        out.append(_Difference(up, where))
    elif before > after:
        out.append(_Difference(down, where))


def _open_content(data: Mapping[str, Any]) -> bool:
    """Any property may appear, of any value: no ``additionalProperties`` (or ``true``),
    no pattern properties, and no narrowing ``unevaluatedProperties``."""
    additional = data.get("additionalProperties", True)
    if additional is not True:
        return False
    if data.get("patternProperties"):
        return False
    return data.get("unevaluatedProperties", True) in (True, {})


def _partial_content(data: Mapping[str, Any], name: str) -> Any:
    """The schema an undeclared property ``name`` takes, when one says so."""
    for pattern, schema in _mapping(data.get("patternProperties")).items():
        try:
            if re.search(pattern, name):
                return schema
        except re.error:
            continue
    additional = data.get("additionalProperties", True)
    if isinstance(additional, dict):
        return additional
    if additional is True:
        unevaluated = data.get("unevaluatedProperties")
        if isinstance(unevaluated, dict) and unevaluated:
            return unevaluated
    return None


def _dependencies(data: Mapping[str, Any]) -> tuple[dict[str, set[str]], dict[str, Any]]:
    arrays: dict[str, set[str]] = {}
    schemas: dict[str, Any] = {}
    for name, value in _mapping(data.get("dependencies")).items():
        if isinstance(value, list):
            arrays[name] = {str(v) for v in value}
        else:
            schemas[name] = value
    for name, value in _mapping(data.get("dependentRequired")).items():
        arrays[name] = {str(v) for v in value}
    schemas.update(_mapping(data.get("dependentSchemas")))
    return arrays, schemas


def _items(data: Mapping[str, Any]) -> tuple[Any, list[Any], Any]:
    """An array schema's (schema of every item, schemas by position, schema of the items
    after them), across drafts (2020-12's ``prefixItems`` and ``items``)."""
    if "prefixItems" in data:
        return None, list(data["prefixItems"]), data.get("items")
    items = data.get("items")
    if isinstance(items, list):
        return None, items, data.get("additionalItems")
    return items, [], None


def _maximum_matching(edges: Mapping[int, Mapping[int, object]]) -> dict[int, int]:
    """A maximum matching of old sub-schemas to compatible new ones (augmenting paths;
    the lists are a schema's ``anyOf`` branches, so small)."""
    owner: dict[int, int] = {}

    def augment(i: int, visited: set[int]) -> bool:
        for j in edges.get(i, {}):
            if j in visited:
                continue
            visited.add(j)
            if j not in owner or augment(owner[j], visited):
                owner[j] = i
                return True
        return False

    for i in edges:
        augment(i, set())
    return {i: j for j, i in owner.items()}
