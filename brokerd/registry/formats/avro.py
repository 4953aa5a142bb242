# -*- test-case-name: tests.registry.formats.test_avro -*-
"""Avro schemas (``schemaType`` AVRO, the registry's default), as Confluent's registry
treats them.

* Parsing: Apache Avro's own Python package decides what is a valid schema (names,
  namespaces, enum symbols, unions), then every field default is checked against its
  field's type (Confluent checks defaults of every new schema). A schema's references
  are named types defined by other subjects' schemas, each known under the full name of
  the type it defines; their texts are parsed first, into the same name space.
* :meth:`ParsedAvro.canonical` is the schema printed back as Avro's Java
  ``Schema.toString()`` prints it (what Confluent stores and compares): compact JSON,
  attributes in Avro's order, a namespace only where it changes, a named type spelled
  out where it first appears and named afterwards, referenced types named.
* :meth:`ParsedAvro.normalized` is Confluent's ``normalize=true`` form printed the same
  way: custom properties sorted by name (a logical type's own attributes first),
  aliases sorted, empty documentation of named types dropped.
* Compatibility is Avro's schema resolution (the specification's "Schema Resolution",
  with Avro's ``ReaderWriterCompatibilityChecker``): a reader field missing from the
  writer needs a default; int→long→float→double and string↔bytes promote; a writer's
  enum symbol must be in the reader (or the reader has a default symbol); every writer
  union branch must be readable; names match by name or by the reader's aliases.
* :meth:`ParsedAvro.decode` and :meth:`ParsedAvro.encode` convert between Avro's binary
  encoding and Avro's JSON encoding, which Confluent's console consumer and REST Proxy
  show: records as objects, ``bytes`` and ``fixed`` as strings of code points 0-255, a
  union's non-null value wrapped as ``{"branch name": value}`` (a named type's full name,
  else the type's name), logical types as their underlying values, NaN and infinities
  of floats as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``. ``encode`` also
  takes a union's value unwrapped when a branch takes it as it is (the first such
  branch), so a hand-written value need not spell the branch.

Decoding bounds every length and count by the bytes left in the payload before it
allocates, and items that take no bytes (``null``, empty records) by
:data:`MAX_EMPTY_ITEMS`.

This module is imported on first use of an Avro schema (``formats.for_type``): it loads
the ``avro`` package.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import attrs
import avro.compatibility
import avro.errors
import avro.name
import avro.schema

from brokerd.registry.model import InvalidSchema, ParsedSchema, SchemaType

__all__ = ["FORMAT", "MAX_EMPTY_ITEMS", "AvroFormat", "ParsedAvro"]

#: How many array or map items that occupy no bytes (``null``, an empty record) one
#: payload may decode to: such items are not bounded by the payload's size.
MAX_EMPTY_ITEMS = 65536

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED_KINDS = frozenset({"record", "error", "enum", "fixed"})
#: Attributes that are Avro's own; every other attribute of a schema is a custom
#: property, kept and printed back.
_RESERVED = frozenset(
    {"type", "name", "namespace", "doc", "fields", "items", "values", "size", "symbols",
     "aliases"}
)
_ENUM_RESERVED = _RESERVED | {"default"}
_FIELD_RESERVED = frozenset({"name", "type", "doc", "default", "order", "aliases"})

_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
_NO_DEFAULT = object()

Props = tuple[tuple[str, Any], ...]


@attrs.frozen
class _Primitive:
    name: str
    props: Props = ()


@attrs.frozen(eq=False)
class _Ref:
    """A named type, by its full name (resolved in the schema's table)."""

    fullname: str


@attrs.frozen(eq=False)
class _Array:
    items: _Type
    props: Props


@attrs.frozen(eq=False)
class _Map:
    values: _Type
    props: Props


@attrs.frozen(eq=False)
class _Union:
    branches: tuple[_Type, ...]


_Type: TypeAlias = _Primitive | _Ref | _Array | _Map | _Union


@attrs.frozen(eq=False)
class _Field:
    name: str
    type: _Type
    doc: str | None
    default: Any
    order: str
    aliases: tuple[str, ...]
    props: Props


@attrs.frozen(eq=False)
class _Named:
    """A record (``kind`` record or error), enum or fixed."""

    kind: str
    name: str
    space: str | None
    doc: str | None
    aliases: tuple[str, ...]  # full names
    props: Props
    fields: tuple[_Field, ...] = ()
    symbols: tuple[str, ...] = ()
    enum_default: str | None = None
    size: int = 0

    @property
    def fullname(self) -> str:
        return f"{self.space}.{self.name}" if self.space else self.name


class AvroFormat:
    """The AVRO schema type."""

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.AVRO

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedAvro:
        main = _load_json(text, "schema")
        names = avro.name.Names(validate_names=True)
        ordered = _parse_references_in_order(references, names)
        _checked_avro(main, names)
        table: dict[str, _Named] = {}
        builder = _Builder(table)
        reference_roots = tuple(builder.type_of(data, None) for data in ordered)
        referenced = frozenset(table)
        root = builder.type_of(main, None)
        parsed = ParsedAvro(root, table, referenced, reference_roots)
        parsed.check_defaults()
        return parsed


FORMAT = AvroFormat()


class ParsedAvro:
    """One parsed Avro schema with its references' named types."""

    def __init__(
        self,
        root: _Type,
        table: dict[str, _Named],
        referenced: frozenset[str],
        reference_roots: tuple[_Type, ...],
    ) -> None:
        self._root = root
        self._table = table
        self._referenced = referenced
        self._reference_roots = reference_roots
        self._canonical: str | None = None
        self._avro: avro.schema.Schema | None = None
        self._min_sizes: dict[str, int] = {}

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.AVRO

    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = _dumps(_Printer(self._table, self._referenced).print(self._root))
        return self._canonical

    def normalized(self) -> str:
        printer = _Printer(self._table, self._referenced, normalize=True)
        return _dumps(printer.print(self._root))

    def incompatibilities(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ParsedAvro):
            return ["Incompatible because of different schema type"]
        checker = avro.compatibility.ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
        result = checker.get_compatibility(self._avro_schema(), writer._avro_schema())
        if result.compatibility is not avro.compatibility.SchemaCompatibilityType.incompatible:
            return []
        return _describe(result)

    def decode(self, payload: bytes) -> object:
        reader = _Reader(self, payload)
        try:
            value = reader.read(self._root)
        except RecursionError:
            raise ValueError("Avro value nested too deeply") from None
        if reader.pos != len(payload):
            raise ValueError(
                f"{len(payload) - reader.pos} bytes left after the Avro value "
                f"(a payload of {len(payload)} bytes)"
            )
        return value

    def encode(self, value: object) -> bytes:
        out = bytearray()
        try:
            _Writer(self, plain_unions=False).write(self._root, value, out, "$")
        except RecursionError:
            raise ValueError("value nested too deeply") from None
        return bytes(out)

    # -- internals ---------------------------------------------------------------------

    def named(self, fullname: str) -> _Named:
        return self._table[fullname]

    def check_defaults(self) -> None:
        """Every field default must be a value of its field's type (Avro: of the first
        branch of a union), as Confluent checks every new schema."""
        writer = _Writer(self, plain_unions=True)
        for named in self._table.values():
            if named.fullname in self._referenced:
                continue
            for field in named.fields:
                if field.default is _NO_DEFAULT:
                    continue
                try:
                    writer.write(field.type, field.default, bytearray(), field.name)
                except ValueError as e:
                    raise InvalidSchema(
                        f"Invalid default for field {field.name} of {named.fullname}: {e}"
                    ) from None
            if named.enum_default is not None and named.enum_default not in named.symbols:
                raise InvalidSchema(
                    f"The default {named.enum_default!r} of enum {named.fullname} is not "
                    "one of its symbols"
                )

    def min_size(self, t: _Type) -> int:
        """The fewest bytes a value of ``t`` takes (bounds decoded counts)."""
        if isinstance(t, _Primitive):
            return {"null": 0, "float": 4, "double": 8}.get(t.name, 1)
        if isinstance(t, (_Array, _Map, _Union)):
            return 1
        known = self._min_sizes.get(t.fullname)
        if known is not None:
            return known
        self._min_sizes[t.fullname] = 0  # a record that holds itself
        named = self._table[t.fullname]
        if named.kind == "enum":
            size = 1
        elif named.kind == "fixed":
            size = named.size
        else:
            size = sum(self.min_size(f.type) for f in named.fields)
        self._min_sizes[t.fullname] = size
        return size

    def _avro_schema(self) -> avro.schema.Schema:
        """The schema as Avro's package holds it, for its compatibility checker; printed
        from the parsed form with aliases as full names (the package compares a writer's
        full name with the reader's aliases as written)."""
        if self._avro is None:
            names = avro.name.Names(validate_names=False)
            printer = _Printer(self._table, frozenset(), full_aliases=True)
            for reference in self._reference_roots:
                data = printer.print(reference)
                avro.schema.make_avsc_object(data, names, validate_names=False)
            self._avro = avro.schema.make_avsc_object(
                printer.print(self._root), names, validate_names=False
            )
        return self._avro


# -- parsing ---------------------------------------------------------------------------


def _load_json(text: str, what: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InvalidSchema(f"Invalid Avro {what}: not JSON ({e})") from None


def _checked_avro(data: object, names: avro.name.Names) -> None:
    """Avro's package parses ``data`` into ``names``, or says why it cannot."""
    try:
        avro.schema.make_avsc_object(data, names)
    except RecursionError:
        raise InvalidSchema("Invalid Avro schema: nested too deeply") from None
    except (avro.errors.AvroException, TypeError, ValueError, KeyError, AttributeError) as e:
        raise InvalidSchema(f"Invalid Avro schema: {e}") from None


def _parse_references_in_order(
    references: Mapping[str, str], names: avro.name.Names
) -> list[object]:
    """The references' schemas, each after those it uses (the mapping need not be in that
    order), parsed into ``names``."""
    pending = [(name, _load_json(text, f"reference {name}")) for name, text in references.items()]
    ordered: list[object] = []
    while pending:
        progressed: list[tuple[str, object]] = []
        failures: list[str] = []
        for entry in pending:
            name, data = entry
            scratch = avro.name.Names(validate_names=True)
            scratch.names = dict(names.names)
            try:
                _checked_avro(data, scratch)
            except InvalidSchema as e:
                failures.append(f"{name}: {e}")
                continue
            names.names = scratch.names
            ordered.append(data)
            progressed.append(entry)
        if not progressed:
            raise InvalidSchema("; ".join(failures))
        pending = [p for p in pending if all(p is not q for q in progressed)]
    return ordered


def _qualify(name: str, space: str | None) -> str:
    if "." in name or not space:
        return name
    return f"{space}.{name}"


class _Builder:
    """Builds the parsed form of JSON that Avro's package has accepted."""

    def __init__(self, table: dict[str, _Named]) -> None:
        self._table = table
        self._defined: set[str] = set(table)

    def type_of(self, data: object, space: str | None) -> _Type:
        if isinstance(data, str):
            if data in _PRIMITIVES:
                return _Primitive(data)
            return _Ref(self._resolve(data, space))
        if isinstance(data, list):
            return _Union(tuple(self.type_of(b, space) for b in data))
        if not isinstance(data, dict):
            raise InvalidSchema(f"Invalid Avro schema: {data!r} is no schema")
        kind = data.get("type")
        if kind in _NAMED_KINDS:
            return _Ref(self._define(data, space))
        props = tuple((k, v) for k, v in data.items() if k not in _RESERVED)
        if kind in _PRIMITIVES:
            return _Primitive(str(kind), props)
        if kind == "array":
            return _Array(self.type_of(data.get("items"), space), props)
        if kind == "map":
            return _Map(self.type_of(data.get("values"), space), props)
        raise InvalidSchema(f"Invalid Avro schema: unknown type {kind!r}")

    def _resolve(self, name: str, space: str | None) -> str:
        for candidate in (_qualify(name, space), name):
            if candidate in self._defined:
                return candidate
        raise InvalidSchema(f"Invalid Avro schema: unknown type {name!r}")

    def _define(self, data: dict[str, Any], space: str | None) -> str:
        kind = str(data["type"])
        name = str(data["name"])
        if "." in name:
            own_space: str | None
            own_space, _, name = name.rpartition(".")
        else:
            own_space = data.get("namespace", space) or None
        fullname = _qualify(name, own_space)
        if fullname in self._defined:
            raise InvalidSchema(f"Invalid Avro schema: {fullname} is defined twice")
        self._defined.add(fullname)
        reserved = _ENUM_RESERVED if kind == "enum" else _RESERVED
        common: dict[str, Any] = {
            "kind": kind,
            "name": name,
            "space": own_space,
            "doc": data.get("doc"),
            "aliases": tuple(_qualify(str(a), own_space) for a in data.get("aliases") or ()),
            "props": tuple((k, v) for k, v in data.items() if k not in reserved),
        }
        if kind == "enum":
            named = _Named(
                symbols=tuple(data["symbols"]), enum_default=data.get("default"), **common
            )
        elif kind == "fixed":
            named = _Named(size=int(data["size"]), **common)
        else:
            named = _Named(
                fields=tuple(self._field(f, own_space) for f in data["fields"]), **common
            )
        self._table[fullname] = named
        return fullname

    def _field(self, data: dict[str, Any], space: str | None) -> _Field:
        return _Field(
            name=str(data["name"]),
            type=self.type_of(data["type"], space),
            doc=data.get("doc"),
            default=data.get("default", _NO_DEFAULT),
            order=str(data.get("order", "ascending")),
            aliases=tuple(dict.fromkeys(str(a) for a in data.get("aliases") or ())),
            props=tuple((k, v) for k, v in data.items() if k not in _FIELD_RESERVED),
        )


# -- printing --------------------------------------------------------------------------


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_LONG_LOGICAL = frozenset(
    {"time-micros", "timestamp-millis", "timestamp-micros", "timestamp-nanos",
     "local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos"}
)


def _is_logical(base: str, props: Mapping[str, Any], size: int = 0) -> bool:
    """Whether ``props`` give ``base`` a logical type Avro knows (whose attributes
    normalization prints first)."""
    logical = props.get("logicalType")
    if logical == "decimal":
        precision = props.get("precision")
        return base in ("bytes", "fixed") and isinstance(precision, int) and precision > 0
    if logical == "uuid":
        return base == "string" or (base == "fixed" and size == 16)
    if logical in ("date", "time-millis"):
        return base == "int"
    if logical in _LONG_LOGICAL:
        return base == "long"
    if logical == "duration":
        return base == "fixed" and size == 12
    return False


class _Printer:
    """Prints the parsed form as Java's ``Schema.toString()`` (or normalized)."""

    def __init__(
        self,
        table: Mapping[str, _Named],
        referenced: Iterable[str],
        *,
        normalize: bool = False,
        full_aliases: bool = False,
    ) -> None:
        self._table = table
        self.seen: set[str] = set(referenced)
        self._normalize = normalize
        self._full_aliases = full_aliases

    def print(self, t: _Type, space: str | None = None) -> Any:
        if isinstance(t, _Primitive):
            if not t.props:
                return t.name
            return {"type": t.name, **self._props(t.props, t.name)}
        if isinstance(t, _Union):
            return [self.print(b, space) for b in t.branches]
        if isinstance(t, _Array):
            return {"type": "array", "items": self.print(t.items, space), **self._props(t.props)}
        if isinstance(t, _Map):
            return {"type": "map", "values": self.print(t.values, space), **self._props(t.props)}
        return self._named(self._table[t.fullname], space)

    def _named(self, named: _Named, space: str | None) -> Any:
        fullname = named.fullname
        if fullname in self.seen:
            return named.name if named.space == space else fullname
        self.seen.add(fullname)
        out: dict[str, Any] = {"type": named.kind, "name": named.name}
        if named.space is not None:
            if named.space != space:
                out["namespace"] = named.space
        elif space is not None:
            out["namespace"] = ""
        if named.doc is not None and not (self._normalize and named.doc == ""):
            out["doc"] = named.doc
        if named.kind == "enum":
            out["symbols"] = list(named.symbols)
            if named.enum_default is not None:
                out["default"] = named.enum_default
        elif named.kind == "fixed":
            out["size"] = named.size
        else:
            out["fields"] = [self._field(f, named.space) for f in named.fields]
        out.update(self._props(named.props, named.kind, named.size))
        if named.aliases:
            aliases = sorted(set(named.aliases)) if self._normalize else named.aliases
            out["aliases"] = [
                a if self._full_aliases or _qualify(a.rpartition(".")[2], named.space) != a
                else a.rpartition(".")[2]
                for a in dict.fromkeys(aliases)
            ]
        return out

    def _field(self, field: _Field, space: str | None) -> Any:
        out: dict[str, Any] = {"name": field.name, "type": self.print(field.type, space)}
        if field.doc is not None:
            out["doc"] = field.doc
        if field.default is not _NO_DEFAULT:
            out["default"] = field.default
        if field.order != "ascending":
            out["order"] = field.order
        if field.aliases:
            out["aliases"] = sorted(field.aliases) if self._normalize else list(field.aliases)
        out.update(self._props(field.props))
        return out

    def _props(self, props: Props, base: str = "", size: int = 0) -> dict[str, Any]:
        if not self._normalize:
            return dict(props)
        given = dict(props)
        out: dict[str, Any] = {}
        if _is_logical(base, given, size):
            out["logicalType"] = given["logicalType"]
            if given["logicalType"] == "decimal":
                out["precision"] = given["precision"]
                if given.get("scale"):
                    out["scale"] = given["scale"]
        for key in sorted(given):
            out.setdefault(key, given[key])
        return out


# -- compatibility ---------------------------------------------------------------------


#: What each kind of finding of Avro's checker means, said of the new schema (the
#: reader) and the old one (the writer).
_FINDINGS = {
    "READER_FIELD_MISSING_DEFAULT_VALUE":
        "the new schema's field {detail} has no default and the old schema lacks it",
    "TYPE_MISMATCH": "the type changed ({detail})",
    "NAME_MISMATCH": "the type's name changed ({detail}) and no alias names the old one",
    "MISSING_ENUM_SYMBOLS": "the new enum lacks the old symbols {detail} and has no default",
    "MISSING_UNION_BRANCH": "the new union cannot read the old value ({detail})",
    "FIXED_SIZE_MISMATCH": "the fixed size changed ({detail})",
}


def _describe(result: avro.compatibility.SchemaCompatibilityResult) -> list[str]:
    """Confluent-style messages from the checker's result. The checker keeps the kinds,
    the paths and the details of its findings as separate sets: one finding is described
    exactly, several in one message naming them all."""
    kinds = list(dict.fromkeys(k.name.upper() for k in result.incompatibilities))
    # "/" is the root's place holder, merged in beside the real paths.
    paths = sorted(result.locations - {"/"}) or ["/"]
    details = sorted(result.messages)
    if len(kinds) == 1 and len(paths) == 1 and len(details) == 1:
        description = _FINDINGS.get(kinds[0], "{detail}").format(detail=details[0])
        return [
            f"{{errorType:'{kinds[0]}', description:'At path {paths[0]}: {description}', "
            f"additionalInfo:'{details[0]}'}}"
        ]
    return [
        f"{{errorType:'{', '.join(kinds)}', description:'The new schema cannot read data "
        f"written with the old schema at paths {', '.join(paths)}', "
        f"additionalInfo:'{'; '.join(details)}'}}"
    ]


# -- the binary codec ------------------------------------------------------------------


def _branch_name(parsed: ParsedAvro, t: _Type) -> str:
    if isinstance(t, _Primitive):
        return t.name
    if isinstance(t, _Array):
        return "array"
    if isinstance(t, _Map):
        return "map"
    if isinstance(t, _Ref):
        return t.fullname
    return "union"


def _float32(value: float) -> object:
    """A float's value as the shortest decimal that reads back to the same float32."""
    if math.isnan(value) or math.isinf(value):
        return _non_finite(value)
    packed = struct.pack("<f", value)
    for digits in range(6, 10):
        shorter = float(f"{value:.{digits}g}")
        if struct.pack("<f", shorter) == packed:
            return shorter
    return value


def _non_finite(value: float) -> object:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


class _Reader:
    def __init__(self, parsed: ParsedAvro, data: bytes) -> None:
        self._parsed = parsed
        self._data = data
        self.pos = 0
        self._empty_items = 0

    def _long(self) -> int:
        shift = 0
        result = 0
        for _ in range(10):
            if self.pos >= len(self._data):
                raise ValueError("Avro payload ends inside a number")
            byte = self._data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
        raise ValueError("Avro varint longer than 10 bytes")

    def _take(self, n: int) -> bytes:
        if n < 0 or n > len(self._data) - self.pos:
            raise ValueError(
                f"Avro length {n} at byte {self.pos} exceeds the "
                f"{len(self._data) - self.pos} bytes left"
            )
        chunk = self._data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def _count(self, item: _Type) -> int:
        """The next block's item count, bounded by the bytes left."""
        count = self._long()
        if count < 0:
            count = -count
            self._long()  # the block's size in bytes
        least = self._parsed.min_size(item)
        if least:
            if count * least > len(self._data) - self.pos:
                raise ValueError(f"Avro block of {count} items exceeds the bytes left")
        else:
            self._empty_items += count
            if self._empty_items > MAX_EMPTY_ITEMS:
                raise ValueError(f"more than {MAX_EMPTY_ITEMS} empty Avro items")
        return count

    def read(self, t: _Type) -> object:
        if isinstance(t, _Primitive):
            return self._primitive(t.name)
        if isinstance(t, _Union):
            index = self._long()
            if not 0 <= index < len(t.branches):
                raise ValueError(f"Avro union branch {index} of {len(t.branches)}")
            branch = t.branches[index]
            value = self.read(branch)
            if isinstance(branch, _Primitive) and branch.name == "null":
                return None
            return {_branch_name(self._parsed, branch): value}
        if isinstance(t, _Array):
            items: list[object] = []
            while count := self._count(t.items):
                items.extend(self.read(t.items) for _ in range(count))
            return items
        if isinstance(t, _Map):
            entries: dict[str, object] = {}
            while count := self._count(t.values):
                for _ in range(count):
                    key = self._string()
                    entries[key] = self.read(t.values)
            return entries
        named = self._parsed.named(t.fullname)
        if named.kind == "enum":
            index = self._long()
            if not 0 <= index < len(named.symbols):
                raise ValueError(f"Avro enum {named.fullname} has no symbol {index}")
            return named.symbols[index]
        if named.kind == "fixed":
            return self._take(named.size).decode("latin-1")
        return {f.name: self.read(f.type) for f in named.fields}

    def _string(self) -> str:
        try:
            return self._take(self._long()).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"Avro string is not UTF-8: {e}") from None

    def _primitive(self, name: str) -> object:
        if name == "null":
            return None
        if name == "boolean":
            flag = self._take(1)[0]
            if flag > 1:
                raise ValueError(f"Avro boolean byte {flag}")
            return flag == 1
        if name in ("int", "long"):
            value = self._long()
            low, high = _INT_RANGE if name == "int" else _LONG_RANGE
            if not low <= value <= high:
                raise ValueError(f"Avro {name} {value} out of range")
            return value
        if name == "float":
            return _float32(struct.unpack("<f", self._take(4))[0])
        if name == "double":
            return _non_finite(struct.unpack("<d", self._take(8))[0])
        if name == "bytes":
            return self._take(self._long()).decode("latin-1")
        return self._string()


_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class _Writer:
    """Avro's binary encoding of a JSON value. ``plain_unions``: a union's value is its
    first branch's (the form of field defaults)."""

    def __init__(self, parsed: ParsedAvro, *, plain_unions: bool) -> None:
        self._parsed = parsed
        self._plain_unions = plain_unions

    def write(self, t: _Type, value: object, out: bytearray, path: str) -> None:
        if isinstance(t, _Primitive):
            self._primitive(t.name, value, out, path)
        elif isinstance(t, _Union):
            self._union(t, value, out, path)
        elif isinstance(t, _Array):
            if not isinstance(value, list):
                raise ValueError(f"{path}: expected an array, got {_kind(value)}")
            if value:
                _write_long(out, len(value))
                for i, item in enumerate(value):
                    self.write(t.items, item, out, f"{path}[{i}]")
            out.append(0)
        elif isinstance(t, _Map):
            if not isinstance(value, dict):
                raise ValueError(f"{path}: expected a map (an object), got {_kind(value)}")
            if value:
                _write_long(out, len(value))
                for key, item in value.items():
                    _write_bytes(out, str(key).encode("utf-8"))
                    self.write(t.values, item, out, f"{path}.{key}")
            out.append(0)
        else:
            self._named(self._parsed.named(t.fullname), value, out, path)

    def _named(self, named: _Named, value: object, out: bytearray, path: str) -> None:
        if named.kind == "enum":
            if not isinstance(value, str) or value not in named.symbols:
                raise ValueError(f"{path}: {value!r} is no symbol of enum {named.fullname}")
            _write_long(out, named.symbols.index(value))
        elif named.kind == "fixed":
            raw = _latin1(value, path)
            if len(raw) != named.size:
                raise ValueError(
                    f"{path}: fixed {named.fullname} takes {named.size} bytes, got {len(raw)}"
                )
            out += raw
        else:
            if not isinstance(value, dict):
                raise ValueError(
                    f"{path}: expected record {named.fullname} (an object), got {_kind(value)}"
                )
            unknown = set(value) - {f.name for f in named.fields}
            if unknown:
                raise ValueError(
                    f"{path}: record {named.fullname} has no field {sorted(unknown)[0]!r}"
                )
            for field in named.fields:
                if field.name in value:
                    self.write(field.type, value[field.name], out, f"{path}.{field.name}")
                elif field.default is not _NO_DEFAULT:
                    _Writer(self._parsed, plain_unions=True).write(
                        field.type, field.default, out, f"{path}.{field.name}"
                    )
                else:
                    raise ValueError(f"{path}: missing field {field.name!r} (it has no default)")

    def _union(self, t: _Union, value: object, out: bytearray, path: str) -> None:
        if self._plain_unions:
            _write_long(out, 0)
            self.write(t.branches[0], value, out, path)
            return
        names = [_branch_name(self._parsed, b) for b in t.branches]
        if value is None and "null" in names:
            _write_long(out, names.index("null"))
            return
        if isinstance(value, dict) and len(value) == 1:
            ((key, inner),) = value.items()
            for i, name in enumerate(names):
                if key in (name, name.rpartition(".")[2]):
                    _write_long(out, i)
                    self.write(t.branches[i], inner, out, f"{path}.{key}")
                    return
        errors = []
        for i, branch in enumerate(t.branches):
            attempt = bytearray()
            _write_long(attempt, i)
            try:
                self.write(branch, value, attempt, path)
            except ValueError as e:
                errors.append(str(e))
                continue
            out += attempt
            return
        raise ValueError(
            f"{path}: {_kind(value)} fits no branch of the union {names} "
            f"({'; '.join(errors)})"
        )

    def _primitive(self, name: str, value: object, out: bytearray, path: str) -> None:
        if name == "null":
            if value is not None:
                raise ValueError(f"{path}: expected null, got {_kind(value)}")
        elif name == "boolean":
            if not isinstance(value, bool):
                raise ValueError(f"{path}: expected a boolean, got {_kind(value)}")
            out.append(1 if value else 0)
        elif name in ("int", "long"):
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{path}: expected an {name}, got {_kind(value)}")
            low, high = _INT_RANGE if name == "int" else _LONG_RANGE
            if not low <= value <= high:
                raise ValueError(f"{path}: {value} is out of the range of an Avro {name}")
            _write_long(out, value)
        elif name in ("float", "double"):
            if isinstance(value, str) and value in _NON_FINITE:
                number = _NON_FINITE[value]
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                number = float(value)
            else:
                raise ValueError(f"{path}: expected a number, got {_kind(value)}")
            try:
                out += struct.pack("<f" if name == "float" else "<d", number)
            except OverflowError:
                raise ValueError(f"{path}: {value} is out of the range of a {name}") from None
        elif name == "bytes":
            _write_bytes(out, _latin1(value, path))
        else:
            if not isinstance(value, str):
                raise ValueError(f"{path}: expected a string, got {_kind(value)}")
            _write_bytes(out, value.encode("utf-8", "surrogatepass"))


def _latin1(value: object, path: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{path}: expected bytes as a string, got {_kind(value)}")
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(
            f"{path}: bytes are written as a string of code points 0-255 (\\u0000-\\u00ff)"
        ) from None


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _write_long(out: bytearray, value: int) -> None:
    encoded = (value << 1) ^ (value >> 63)
    while encoded > 0x7F:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)


def _write_bytes(out: bytearray, raw: bytes) -> None:
    _write_long(out, len(raw))
    out += raw
