# -*- test-case-name: tests.registry.formats.test_protobuf -*-
"""Protobuf schemas (``schemaType`` PROTOBUF), as Confluent's registry treats them.

* A schema is ``.proto`` text (proto2 or proto3), or the base64 of a serialized
  ``FileDescriptorProto`` (what confluent-kafka's ProtobufSerializer registers). Its
  imports are its references, by import path (``import "other.proto";`` names the
  reference ``other.proto``); Google's well-known types (``google/protobuf/*.proto``)
  are known without one. Text is compiled by protoc (``grpcio-tools``, in process, from
  files in a temporary directory): its error messages are the refusals.
* :meth:`ParsedProtobuf.canonical` is the text as given, or for a descriptor the
  ``.proto`` text printed from it (Confluent too stores a descriptor as text).
  :meth:`ParsedProtobuf.normalized` prints the descriptor with fields in number order,
  oneofs by their first field, enum values by number, imports and options sorted and
  every type name fully qualified. :meth:`ParsedProtobuf.serialized` is the base64
  descriptor that ``GET /schemas/ids/{id}?format=serialized`` answers.
* Compatibility follows Confluent's Protobuf rules (the difference types of their
  schema diff): a package change, a removed message, a field whose number now has
  another kind of type (scalar group, message type, map), a numeric field turned
  repeated, a required field added or removed, a oneof member removed, and fields made
  mutually exclusive (moved into a oneof together) are incompatible; adding or removing
  optional fields, renaming fields, messages or enum values, moving messages and
  adding oneofs are compatible. The rules are symmetric, so FORWARD asks the same of the
  swapped pair.
* :meth:`ParsedProtobuf.decode` reads Confluent's message indexes first (a zigzag
  varint count, then that many zigzag indexes: the path to the message type through the
  file's messages and their nested messages, a lone ``0`` byte meaning the first
  message), then the message, and answers it as protobuf's JSON mapping with the
  ``.proto`` field names. :meth:`ParsedProtobuf.encode` writes the file's first message
  from such JSON, behind the ``0`` index byte. Nested messages are counted as the
  descriptor lists them, with the entries protoc generates for ``map`` fields, as
  confluent-kafka's serializers count them.

This module is imported on first use of a Protobuf schema (``formats.for_type``): it
loads ``google.protobuf`` and protoc's compiler from ``grpcio-tools``.
"""

from __future__ import annotations

import ast
import base64
import binascii
import os
import re
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as _F
from google.protobuf.descriptor_pb2 import FileDescriptorProto as FDP
from google.protobuf.message import DecodeError, EncodeError

from brokerd.registry.model import InvalidSchema, ParsedSchema, SchemaType

__all__ = ["FORMAT", "MAX_MESSAGE_INDEXES", "ParsedProtobuf", "ProtobufFormat"]

#: The most message indexes a payload may give (the nesting depth of its message type).
MAX_MESSAGE_INDEXES = 64

_MAIN_NAME = "default.proto"
_BASE64 = re.compile(r"^[A-Za-z0-9+/\s]+={0,2}\s*$")



class ProtobufFormat:
    """The PROTOBUF schema type."""

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.PROTOBUF

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedProtobuf:
        main_name = _MAIN_NAME
        while main_name in references:
            main_name = "_" + main_name
        sources: dict[str, str] = {}
        for name, ref_text in references.items():
            given = _descriptor_of(ref_text)
            sources[name] = _Printer(given).text() if given is not None else ref_text
        descriptor = _descriptor_of(text)
        sources[main_name] = _Printer(descriptor).text() if descriptor is not None else text
        files = _compile(main_name, sources)
        main = files[main_name]
        if descriptor is not None:
            # Keep the descriptor's own file name, which its readers know it by.
            main.name = descriptor.name or main_name
        canonical = text if descriptor is None else sources[main_name]
        return ParsedProtobuf(main, files, canonical)


FORMAT = ProtobufFormat()


def _descriptor_of(text: str) -> FDP | None:
    """The ``FileDescriptorProto`` that ``text`` is the base64 of, or None when it is
    ``.proto`` text."""
    # .proto text always holds characters base64 has not (";", "{", quotes, spaces
    # between words): base64 is tried only on text of its alphabet.
    if not text.strip() or not _BASE64.match(text):
        return None
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
        descriptor = FDP.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return descriptor


def _well_known_dir() -> str:
    import grpc_tools

    return os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")


def _compile(main_name: str, sources: Mapping[str, str]) -> dict[str, FDP]:
    """protoc's descriptors of ``main_name`` and every file it imports, by file name."""
    from grpc_tools import _protoc_compiler

    with tempfile.TemporaryDirectory(prefix="brokerd-proto-") as tmp:
        for name, source in sources.items():
            path = os.path.normpath(os.path.join(tmp, name))
            if not path.startswith(tmp + os.sep):
                raise InvalidSchema(f"Invalid Protobuf reference name {name!r}")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(source)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                generated = _protoc_compiler.get_protos(
                    main_name.encode(), [tmp.encode(), _well_known_dir().encode()]
                )
        except Exception as e:  # protoc's ProtocErrors: the compiler's messages
            raise InvalidSchema(f"Invalid Protobuf schema: {_protoc_message(e)}") from None
    files: dict[str, FDP] = {}
    for _module, code in generated:
        descriptor = FDP.FromString(_serialized_file(code))
        files[descriptor.name] = descriptor
    return files


def _protoc_message(error: Exception) -> str:
    return str(error).replace("b'", "").replace("'", "").replace('b"', "").strip()


def _serialized_file(code: bytes) -> bytes:
    """The descriptor bytes that protoc's generated Python module registers."""
    for node in ast.walk(ast.parse(code)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AddSerializedFile"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, bytes)
        ):
            return node.args[0].value
    raise InvalidSchema("Invalid Protobuf schema: protoc gave no descriptor")


class ParsedProtobuf:
    """One compiled Protobuf schema with the files it imports."""

    def __init__(self, main: FDP, files: Mapping[str, FDP], canonical: str) -> None:
        self._main = main
        self._files = dict(files)
        self._canonical = canonical
        self._types = _Types(self._files.values())
        self._pool: descriptor_pool.DescriptorPool | None = None

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.PROTOBUF

    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> str:
        return _Printer(self._main, normalize=True).text()

    def serialized(self) -> str:
        """The base64 of the schema's ``FileDescriptorProto`` (``format=serialized``)."""
        return base64.b64encode(self._main.SerializeToString()).decode("ascii")

    def descriptor(self) -> FDP:
        return self._main

    def incompatibilities(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ParsedProtobuf):
            return ["Incompatible because of different schema type"]
        diff = _Diff(writer._types, self._types)
        diff.files(writer._main, self._main)
        return [d.message() for d in diff.out if d.kind not in _COMPATIBLE]

    def decode(self, payload: bytes) -> object:
        indexes, pos = _read_indexes(payload)
        cls = self._message_class(indexes)
        message = cls()
        try:
            message.ParseFromString(payload[pos:])
        except (DecodeError, RecursionError) as e:
            raise ValueError(f"not a {cls.DESCRIPTOR.full_name}: {e}") from None
        try:
            return json_format.MessageToDict(message, preserving_proto_field_name=True)
        except (json_format.Error, TypeError, KeyError, ValueError) as e:
            # e.g. a google.protobuf.Any naming a type the schema does not import
            raise ValueError(f"{cls.DESCRIPTOR.full_name} has no JSON form: {e}") from None

    def encode(self, value: object) -> bytes:
        if not isinstance(value, dict):
            raise ValueError("a Protobuf message is written from a JSON object")
        cls = self._message_class([0])
        message = cls()
        try:
            json_format.ParseDict(value, message)
            body = message.SerializeToString()
        except (json_format.ParseError, EncodeError, RecursionError) as e:
            raise ValueError(f"not a {cls.DESCRIPTOR.full_name}: {e}") from None
        return b"\x00" + bytes(body)

    # -- internals ---------------------------------------------------------------------

    def _message_class(self, indexes: Sequence[int]) -> Any:
        name = self._types.by_indexes(self._main, indexes)
        if self._pool is None:
            pool = descriptor_pool.DescriptorPool()
            for descriptor in _dependency_order(self._files):
                pool.Add(descriptor)
            self._pool = pool
        return message_factory.GetMessageClass(self._pool.FindMessageTypeByName(name))


def _dependency_order(files: Mapping[str, FDP]) -> Iterator[FDP]:
    done: set[str] = set()

    def visit(name: str) -> Iterator[FDP]:
        if name in done or name not in files:
            return
        done.add(name)
        for dependency in files[name].dependency:
            yield from visit(dependency)
        yield files[name]

    for name in files:
        yield from visit(name)


def _zigzag(payload: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    for _ in range(10):
        if pos >= len(payload):
            raise ValueError("payload ends inside its message indexes")
        byte = payload[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise ValueError("message index varint longer than 10 bytes")


def _read_indexes(payload: bytes) -> tuple[list[int], int]:
    count, pos = _zigzag(payload, 0)
    if count == 0:
        return [0], pos
    if not 0 < count <= MAX_MESSAGE_INDEXES:
        raise ValueError(f"{count} message indexes (at most {MAX_MESSAGE_INDEXES})")
    indexes = []
    for _ in range(count):
        index, pos = _zigzag(payload, pos)
        indexes.append(index)
    return indexes, pos


def message_indexes(indexes: Sequence[int]) -> bytes:
    """Confluent's encoding of a message's indexes (``[0]`` as the single byte 0)."""
    if list(indexes) == [0]:
        return b"\x00"
    out = bytearray()
    for value in (len(indexes), *indexes):
        encoded = (value << 1) ^ (value >> 63)
        while encoded > 0x7F:
            out.append((encoded & 0x7F) | 0x80)
            encoded >>= 7
        out.append(encoded)
    return bytes(out)


# -- the types of a file and its imports ---------------------------------------------------


def _is_map_entry(message: descriptor_pb2.DescriptorProto) -> bool:
    return bool(message.options.map_entry)


def _messages(container: Any) -> list[descriptor_pb2.DescriptorProto]:
    """A file's or message's message types as written (not protoc's map entries)."""
    found = container.message_type if isinstance(container, FDP) else container.nested_type
    return [m for m in found if not _is_map_entry(m)]


@attrs.frozen
class _TypeInfo:
    proto: Any  # DescriptorProto or EnumDescriptorProto
    package: str
    is_enum: bool


class _Types:
    """Every message and enum of a set of files, by full name (without a leading dot)."""

    def __init__(self, files: Iterable[FDP]) -> None:
        self._by_name: dict[str, _TypeInfo] = {}
        self._syntax: dict[int, str] = {}
        for file in files:
            self._file_syntax = file.syntax or "proto2"
            self._collect(file.package, file.package, file.message_type, file.enum_type)

    def syntax_of(self, message: Any) -> str:
        """``proto2``, ``proto3`` or ``editions``: the syntax of the message's file."""
        return self._syntax.get(id(message), "proto2")

    def _collect(self, package: str, scope: str, messages: Iterable[Any],
                 enums: Iterable[Any]) -> None:
        for message in messages:
            name = f"{scope}.{message.name}" if scope else message.name
            self._by_name[name] = _TypeInfo(message, package, False)
            self._syntax[id(message)] = self._file_syntax
            self._collect(package, name, message.nested_type, message.enum_type)
        for enum in enums:
            name = f"{scope}.{enum.name}" if scope else enum.name
            self._by_name[name] = _TypeInfo(enum, package, True)

    def get(self, type_name: str) -> _TypeInfo | None:
        return self._by_name.get(type_name.lstrip("."))

    def by_indexes(self, file: FDP, indexes: Sequence[int]) -> str:
        """The full name of the message that Confluent's indexes point to in ``file``."""
        container: Any = file
        name = str(file.package)
        for depth, index in enumerate(indexes):
            # protoc's map entries count: confluent-kafka's serializers (Python's, and
            # Java's from a descriptor) number nested messages as the descriptor lists them.
            candidates = list(
                container.message_type if isinstance(container, FDP) else container.nested_type
            )
            if not 0 <= index < len(candidates):
                raise ValueError(
                    f"message index {index} at depth {depth}: there are {len(candidates)}"
                )
            container = candidates[index]
            name = f"{name}.{container.name}" if name else str(container.name)
        return name


# -- the comparison ----------------------------------------------------------------------


_COMPATIBLE = frozenset(
    {
        "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED",
        "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED",
        "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED",
        "ONEOF_REMOVED", "ONEOF_FIELD_ADDED", "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
    }
)

#: Scalar types that read each other's wire values (protobuf's "Updating A Message Type").
_SCALAR_GROUPS = {
    _F.TYPE_INT32: "GENERAL_NUMBER", _F.TYPE_INT64: "GENERAL_NUMBER",
    _F.TYPE_UINT32: "GENERAL_NUMBER", _F.TYPE_UINT64: "GENERAL_NUMBER",
    _F.TYPE_BOOL: "GENERAL_NUMBER", _F.TYPE_ENUM: "GENERAL_NUMBER",
    _F.TYPE_SINT32: "SIGNED_NUMBER", _F.TYPE_SINT64: "SIGNED_NUMBER",
    _F.TYPE_STRING: "STRING_OR_BYTES", _F.TYPE_BYTES: "STRING_OR_BYTES",
    _F.TYPE_FIXED32: "FIXED32", _F.TYPE_SFIXED32: "FIXED32",
    _F.TYPE_FIXED64: "FIXED64", _F.TYPE_SFIXED64: "FIXED64",
    _F.TYPE_FLOAT: "FLOAT", _F.TYPE_DOUBLE: "DOUBLE",
}


@attrs.frozen
class _Difference:
    kind: str
    path: str

    def message(self) -> str:
        words = self.kind.lower().replace("_", " ")
        return f"{{errorType:'{self.kind}', description:'{words} at path '{self.path}''}}"


class _Diff:
    """Differences from an old file to a new one, with their paths (``#/Message/3``)."""

    def __init__(self, old_types: _Types, new_types: _Types) -> None:
        self._old = old_types
        self._new = new_types
        self.out: list[_Difference] = []
        self._compared: set[tuple[str, str]] = set()

    def files(self, old: FDP, new: FDP) -> None:
        if old.package != new.package:
            self.out.append(_Difference("PACKAGE_CHANGED", "#/"))
        self._types(old, new, old.package, new.package, "#")

    def _types(self, old: Any, new: Any, old_scope: str, new_scope: str, path: str) -> None:
        old_messages = {m.name: (i, m) for i, m in enumerate(_messages(old))}
        new_messages = {m.name: (i, m) for i, m in enumerate(_messages(new))}
        for name in sorted(set(old_messages) | set(new_messages)):
            where = f"{path}/{name}"
            if name not in new_messages:
                self.out.append(_Difference("MESSAGE_REMOVED", where))
            elif name not in old_messages:
                self.out.append(_Difference("MESSAGE_ADDED", where))
            else:
                (old_index, before), (new_index, after) = old_messages[name], new_messages[name]
                self._message(before, after, _join(old_scope, name), _join(new_scope, name),
                              where)
                if old_index != new_index:
                    self.out.append(_Difference("MESSAGE_MOVED", where))
        old_enums = {e.name: e for e in old.enum_type}
        new_enums = {e.name: e for e in new.enum_type}
        for name in sorted(set(old_enums) | set(new_enums)):
            where = f"{path}/{name}"
            if name not in new_enums:
                self.out.append(_Difference("ENUM_REMOVED", where))
            elif name not in old_enums:
                self.out.append(_Difference("ENUM_ADDED", where))
            else:
                self._enum(old_enums[name], new_enums[name], where)

    def _enum(self, old: Any, new: Any, path: str) -> None:
        before = {v.number: v.name for v in old.value}
        after = {v.number: v.name for v in new.value}
        for number in sorted(set(before) | set(after)):
            where = f"{path}/{number}"
            if number not in after:
                self.out.append(_Difference("ENUM_CONST_REMOVED", where))
            elif number not in before:
                self.out.append(_Difference("ENUM_CONST_ADDED", where))
            elif before[number] != after[number]:
                self.out.append(_Difference("ENUM_CONST_CHANGED", where))

    def _message(self, old: Any, new: Any, old_name: str, new_name: str, path: str) -> None:
        if (old_name, new_name) not in self._compared:
            self._compared.add((old_name, new_name))
            self._fields(old, new, path)
        self._types(old, new, old_name, new_name, path)

    def _fields(self, old: Any, new: Any, path: str) -> None:
        old_fields, old_oneof_of, old_oneofs = _fields(old)
        new_fields, new_oneof_of, new_oneofs = _fields(new)
        deleted_oneofs = {
            name for name, members in old_oneofs.items()
            if name not in new_oneofs and not any(n in new_fields for n in members)
        }
        for name, members in new_oneofs.items():
            origins = set()
            moved_in = 0
            for number in members:
                if number in old_oneof_of:
                    origins.add(f"oneof:{old_oneof_of[number]}")
                elif number in old_fields:
                    origins.add(f"field:{number}")
                    moved_in += 1
            if len(origins) > 1:
                kind = ("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1
                        else "FIELD_MOVED_TO_EXISTING_ONEOF")
                self.out.append(_Difference(kind, f"{path}/{name}"))
        for name in sorted(set(old_oneofs) | set(new_oneofs)):
            if name not in new_oneofs:
                self.out.append(_Difference("ONEOF_REMOVED", f"{path}/{name}"))
            elif name not in old_oneofs:
                self.out.append(_Difference("ONEOF_ADDED", f"{path}/{name}"))
        for number in sorted(set(old_fields) | set(new_fields)):
            before, after = old_fields.get(number), new_fields.get(number)
            old_oneof, new_oneof = old_oneof_of.get(number), new_oneof_of.get(number)
            if after is None:
                if old_oneof is not None:
                    if old_oneof not in deleted_oneofs:
                        self.out.append(
                            _Difference("ONEOF_FIELD_REMOVED", f"{path}/{old_oneof}/{number}"))
                else:
                    kind = ("REQUIRED_FIELD_REMOVED"
                            if before is not None and before.label == _F.LABEL_REQUIRED
                            else "FIELD_REMOVED")
                    self.out.append(_Difference(kind, f"{path}/{number}"))
            elif before is None:
                if new_oneof is not None:
                    self.out.append(
                        _Difference("ONEOF_FIELD_ADDED", f"{path}/{new_oneof}/{number}"))
                else:
                    kind = ("REQUIRED_FIELD_ADDED" if after.label == _F.LABEL_REQUIRED
                            else "FIELD_ADDED")
                    self.out.append(_Difference(kind, f"{path}/{number}"))
            else:
                if old_oneof is not None and new_oneof is None:
                    self.out.append(
                        _Difference("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", f"{path}/{number}"))
                where = (f"{path}/{new_oneof}/{number}" if new_oneof is not None
                         else f"{path}/{number}")
                if before.name != after.name:
                    self.out.append(_Difference("FIELD_NAME_CHANGED", where))
                self._field_types(_label(self._old, old, before), _label(self._new, new, after),
                                  before, after,
                                  where)

    def _field_types(self, old_label: str | None, new_label: str | None, before: Any,
                     after: Any, path: str) -> None:
        old_kind, new_kind = self._kind(before, self._old), self._kind(after, self._new)
        if old_kind != new_kind:
            self.out.append(_Difference("FIELD_KIND_CHANGED", path))
        elif old_kind == "SCALAR":
            old_group = _SCALAR_GROUPS[before.type]
            if old_group != _SCALAR_GROUPS[after.type]:
                self.out.append(_Difference("FIELD_SCALAR_KIND_CHANGED", path))
            elif old_label is not None and new_label is not None and old_label != new_label:
                self.out.append(_Difference(
                    "FIELD_STRING_OR_BYTES_LABEL_CHANGED" if old_group == "STRING_OR_BYTES"
                    else "FIELD_NUMERIC_LABEL_CHANGED", path))
        elif old_kind == "MAP":
            old_entry = self._old.get(before.type_name)
            new_entry = self._new.get(after.type_name)
            assert old_entry is not None and new_entry is not None
            for index in (0, 1):  # key, then value
                self._field_types(None, None, old_entry.proto.field[index],
                                  new_entry.proto.field[index], path)
        elif old_kind == "MESSAGE":
            self._message_types(before.type_name, after.type_name, path)

    def _message_types(self, old_type: str, new_type: str, path: str) -> None:
        old_info, new_info = self._old.get(old_type), self._new.get(new_type)
        old_name, new_name = old_type.lstrip("."), new_type.lstrip(".")
        if old_info is None or new_info is None:
            if old_name != new_name:
                self.out.append(_Difference("FIELD_NAMED_TYPE_CHANGED", path))
            return
        old_local = _local(old_name, old_info.package)
        if old_local != _local(new_name, new_info.package):
            self.out.append(_Difference("FIELD_NAMED_TYPE_CHANGED", path))
            return
        if (old_name, new_name) in self._compared:
            return
        inner = _Diff(self._old, self._new)
        inner._compared = self._compared
        inner._message(old_info.proto, new_info.proto, old_name, new_name, f"#/{old_local}")
        self.out.extend(inner.out)
        if any(d.kind not in _COMPATIBLE for d in inner.out):
            self.out.append(_Difference("FIELD_NAMED_TYPE_CHANGED", path))

    @staticmethod
    def _kind(field: Any, types: _Types) -> str:
        if field.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
            info = types.get(field.type_name)
            if info is not None and not info.is_enum and _is_map_entry(info.proto):
                return "MAP"
            return "MESSAGE"
        return "SCALAR"


def _join(scope: str, name: str) -> str:
    return f"{scope}.{name}" if scope else name


def _local(full_name: str, package: str) -> str:
    return full_name[len(package) + 1:] if package and full_name.startswith(package + ".") \
        else full_name


def _fields(message: Any) -> tuple[dict[int, Any], dict[int, str], dict[str, list[int]]]:
    """A message's fields by number, the oneof of each oneof member, and each oneof's
    members (proto3 ``optional`` makes no oneof)."""
    by_number: dict[int, Any] = {}
    oneof_of: dict[int, str] = {}
    oneofs: dict[str, list[int]] = {}
    for field in message.field:
        by_number[field.number] = field
        if field.HasField("oneof_index") and not field.proto3_optional:
            name = message.oneof_decl[field.oneof_index].name
            oneof_of[field.number] = name
            oneofs.setdefault(name, []).append(field.number)
    return by_number, oneof_of, oneofs


def _label(types: _Types, message: Any, field: Any) -> str | None:
    """The field's label as written in ``.proto`` text (proto3's implicit one is None)."""
    if field.HasField("oneof_index") and not field.proto3_optional:
        return "oneof"
    if field.label == _F.LABEL_REPEATED:
        return "repeated"
    if field.label == _F.LABEL_REQUIRED:
        return "required"
    if field.proto3_optional:
        return "optional"
    return None if types.syntax_of(message) == "proto3" else "optional"


# -- printing ------------------------------------------------------------------------------


_SCALAR_NAMES = {
    _F.TYPE_DOUBLE: "double", _F.TYPE_FLOAT: "float", _F.TYPE_INT64: "int64",
    _F.TYPE_UINT64: "uint64", _F.TYPE_INT32: "int32", _F.TYPE_FIXED64: "fixed64",
    _F.TYPE_FIXED32: "fixed32", _F.TYPE_BOOL: "bool", _F.TYPE_STRING: "string",
    _F.TYPE_BYTES: "bytes", _F.TYPE_UINT32: "uint32", _F.TYPE_SFIXED32: "sfixed32",
    _F.TYPE_SFIXED64: "sfixed64", _F.TYPE_SINT32: "sint32", _F.TYPE_SINT64: "sint64",
}


class _Printer:
    """``.proto`` text of a ``FileDescriptorProto``."""

    def __init__(self, file: FDP, *, normalize: bool = False) -> None:
        self._file = file
        self._normalize = normalize
        self._lines: list[str] = []
        syntax = file.syntax or "proto2"
        self._proto3 = syntax == "proto3"
        self._syntax = syntax

    def text(self) -> str:
        file = self._file
        if file.syntax == "editions":
            self._lines.append(f'edition = "{_edition(file)}";')
        else:  # a descriptor leaves proto2 unsaid; protoc warns when the text does
            self._lines.append(f'syntax = "{file.syntax or "proto2"}";')
        if file.package:
            self._lines.append(f"package {file.package};")
        imports = list(file.dependency)
        public = {file.dependency[i] for i in file.public_dependency}
        if self._normalize:
            imports = sorted(set(imports))
        if imports:
            self._lines.append("")
            for name in imports:
                self._lines.append(f'import {"public " if name in public else ""}"{name}";')
        options = self._options(file.options)
        if options:
            self._lines.append("")
            self._lines.extend(f"option {o};" for o in options)
        if file.message_type or file.enum_type:
            self._lines.append("")
        for message in file.message_type:
            self._message(message, 0)
        for enum in file.enum_type:
            self._enum(enum, 0)
        self._extensions(file.extension, 0)
        for service in file.service:
            self._lines.append("")
            self._lines.append(f"service {service.name} {{")
            for option in self._options(service.options):
                self._lines.append(f"  option {option};")
            for rpc in service.method:
                request = ("stream " if rpc.client_streaming else "") + rpc.input_type
                response = ("stream " if rpc.server_streaming else "") + rpc.output_type
                options = self._options(rpc.options)
                body = " {" + "".join(f" option {o};" for o in options) + " }" if options else ";"
                self._lines.append(f"  rpc {rpc.name}({request}) returns ({response}){body}")
            self._lines.append("}")
        return "\n".join(self._lines) + "\n"

    def _put(self, depth: int, line: str) -> None:
        self._lines.append("  " * depth + line)

    def _message(self, message: Any, depth: int) -> None:
        self._put(depth, f"message {message.name} {{")
        for option in self._options(message.options):
            self._put(depth + 1, f"option {option};")
        entries = {m.name: m for m in message.nested_type if _is_map_entry(m)}
        fields = list(message.field)
        if self._normalize:
            fields.sort(key=lambda f: f.number)
        oneofs: dict[int, list[Any]] = {}
        for field in fields:
            if field.HasField("oneof_index") and not field.proto3_optional:
                oneofs.setdefault(field.oneof_index, []).append(field)
        printed: set[int] = set()
        for field in fields:
            if field.HasField("oneof_index") and not field.proto3_optional:
                index = field.oneof_index
                if index in printed:
                    continue
                printed.add(index)
                self._put(depth + 1, f"oneof {message.oneof_decl[index].name} {{")
                for member in oneofs[index]:
                    self._put(depth + 2, self._field(member, entries, in_oneof=True))
                self._put(depth + 1, "}")
            else:
                self._put(depth + 1, self._field(field, entries, in_oneof=False))
        for nested in message.nested_type:
            if not _is_map_entry(nested):
                self._message(nested, depth + 1)
        for enum in message.enum_type:
            self._enum(enum, depth + 1)
        self._extensions(message.extension, depth + 1)
        for extension_range in message.extension_range:
            end = "max" if extension_range.end >= 536870912 else str(extension_range.end - 1)
            self._put(depth + 1, f"extensions {extension_range.start} to {end};")
        ranges = [_range(r.start, r.end - 1) for r in message.reserved_range]
        if ranges:
            self._put(depth + 1, f"reserved {', '.join(ranges)};")
        if message.reserved_name:
            names = sorted(message.reserved_name) if self._normalize else message.reserved_name
            self._put(depth + 1, "reserved " + ", ".join(f'"{n}"' for n in names) + ";")
        self._put(depth, "}")

    def _field(self, field: Any, entries: Mapping[str, Any], *, in_oneof: bool) -> str:
        entry = entries.get(field.type_name.rpartition(".")[2]) if field.type_name else None
        if entry is not None and field.label == _F.LABEL_REPEATED:
            key, value = entry.field[0], entry.field[1]
            kind = f"map<{self._type(key)}, {self._type(value)}>"
            label = ""
        else:
            kind = self._type(field)
            label = ""
            if not in_oneof:
                if field.label == _F.LABEL_REPEATED:
                    label = "repeated "
                elif field.label == _F.LABEL_REQUIRED:
                    label = "required "
                elif field.proto3_optional or (not self._proto3 and self._syntax != "editions"):
                    label = "optional "
        options = []
        if field.HasField("default_value"):
            default = field.default_value
            if field.type == _F.TYPE_STRING or field.type == _F.TYPE_BYTES:
                default = '"' + default.replace("\\", "\\\\").replace('"', '\\"') + '"'
            options.append(f"default = {default}")
        if field.HasField("json_name") and field.json_name != _json_name(field.name):
            options.append(f'json_name = "{field.json_name}"')
        options.extend(self._options(field.options))
        suffix = f" [{', '.join(options)}]" if options else ""
        return f"{label}{kind} {field.name} = {field.number}{suffix};"

    def _type(self, field: Any) -> str:
        if field.type in _SCALAR_NAMES:
            return _SCALAR_NAMES[field.type]
        return str(field.type_name)

    def _enum(self, enum: Any, depth: int) -> None:
        self._put(depth, f"enum {enum.name} {{")
        for option in self._options(enum.options):
            self._put(depth + 1, f"option {option};")
        values = list(enum.value)
        if self._normalize:
            values.sort(key=lambda v: v.number)
        for value in values:
            options = self._options(value.options)
            suffix = f" [{', '.join(options)}]" if options else ""
            self._put(depth + 1, f"{value.name} = {value.number}{suffix};")
        ranges = [_range(r.start, r.end) for r in enum.reserved_range]
        if ranges:
            self._put(depth + 1, f"reserved {', '.join(ranges)};")
        if enum.reserved_name:
            self._put(depth + 1, "reserved " + ", ".join(f'"{n}"' for n in enum.reserved_name)
                      + ";")
        self._put(depth, "}")

    def _extensions(self, extensions: Iterable[Any], depth: int) -> None:
        by_extendee: dict[str, list[Any]] = {}
        for field in extensions:
            by_extendee.setdefault(field.extendee, []).append(field)
        for extendee, fields in by_extendee.items():
            self._put(depth, f"extend {extendee} {{")
            for field in fields:
                self._put(depth + 1, self._field(field, {}, in_oneof=False))
            self._put(depth, "}")

    def _options(self, options: Any) -> list[str]:
        found = []
        for descriptor, value in options.ListFields():
            name = f"({descriptor.full_name})" if descriptor.is_extension else descriptor.name
            found.append(f"{name} = {_option_value(descriptor, value)}")
        return sorted(found) if self._normalize else found


def _option_value(descriptor: Any, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bytes):
        return '"' + "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:03o}"
                             for b in value) + '"'
    if descriptor.enum_type is not None and isinstance(value, int):
        return str(descriptor.enum_type.values_by_number[value].name)
    if isinstance(value, (int, float)):
        return repr(value)
    return "{ " + str(value).replace("\n", " ").strip() + " }"


def _range(start: int, end: int) -> str:
    if end >= 536870911:
        return f"{start} to max"
    return str(start) if start == end else f"{start} to {end}"


def _json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _edition(file: FDP) -> str:
    edition = descriptor_pb2.Edition.Name(file.edition)
    return str(edition).removeprefix("EDITION_")
