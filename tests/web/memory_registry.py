"""A small, real, in-memory stand-in for the lookups of
:class:`~brokerd.registry.service.SchemaRegistry`, for the console's tests: subjects,
versions, global ids, a compatibility level per subject; Avro schemas parsed and their
records written and read by ``fastavro``, JSON Schema ones as plain JSON. No
compatibility checking and no ``_schemas`` topic: that is the registry's own job."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping

from twisted.internet import defer
from twisted.internet.defer import Deferred

from brokerd.registry.model import (
    Compatibility,
    ParsedSchema,
    RegisteredSchema,
    Schema,
    SchemaType,
)


class AvroParsed:
    schema_type = SchemaType.AVRO

    def __init__(self, text: str) -> None:
        import fastavro

        self.text = text
        self._schema = fastavro.parse_schema(json.loads(text))

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> str:
        return self.text

    def incompatibilities(self, writer: ParsedSchema) -> list[str]:
        return []

    def decode(self, payload: bytes) -> object:
        import fastavro

        try:
            return fastavro.schemaless_reader(io.BytesIO(payload), self._schema, None)
        except (EOFError, IndexError, ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"not Avro of this schema: {e}") from e

    def encode(self, value: object) -> bytes:
        import fastavro

        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, self._schema, value)
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise ValueError(str(e)) from e
        return out.getvalue()


class JsonParsed:
    schema_type = SchemaType.JSON

    def __init__(self, text: str) -> None:
        self.text = text

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> str:
        return self.text

    def incompatibilities(self, writer: ParsedSchema) -> list[str]:
        return []

    def decode(self, payload: bytes) -> object:
        return json.loads(payload)

    def encode(self, value: object) -> bytes:
        return json.dumps(value).encode()


class MemoryRegistry:
    """Subjects and their versions in dictionaries; ids count from 1."""

    def __init__(self) -> None:
        self._by_id: dict[int, Schema] = {}
        self._versions: dict[str, list[RegisteredSchema]] = {}
        self._levels: dict[str, Compatibility] = {}

    def add(self, subject: str, schema: Schema,
            level: Compatibility | None = None) -> RegisteredSchema:
        schema_id = next((i for i, s in self._by_id.items() if s == schema),
                         len(self._by_id) + 1)
        self._by_id[schema_id] = schema
        versions = self._versions.setdefault(subject, [])
        registered = RegisteredSchema(subject, len(versions) + 1, schema_id, schema)
        versions.append(registered)
        if level is not None:
            self._levels[subject] = level
        return registered

    def schema_by_id(self, schema_id: int) -> Schema | None:
        return self._by_id.get(schema_id)

    def parsed_by_id(self, schema_id: int) -> ParsedSchema | None:
        schema = self._by_id.get(schema_id)
        if schema is None:
            return None
        if schema.schema_type is SchemaType.AVRO:
            return AvroParsed(schema.text)
        return JsonParsed(schema.text)

    def subjects(self, *, deleted: bool = False) -> list[str]:
        return sorted(self._versions)

    def versions(self, subject: str, *, deleted: bool = False) -> list[RegisteredSchema]:
        return list(self._versions.get(subject, []))

    def latest(self, subject: str) -> RegisteredSchema | None:
        versions = self._versions.get(subject)
        return versions[-1] if versions else None

    def subject_has_id(self, subject: str, schema_id: int) -> bool:
        return any(v.schema_id == schema_id for v in self._versions.get(subject, []))

    def compatibility_of(self, subject: str) -> Compatibility:
        return self._levels.get(subject, Compatibility.BACKWARD)

    def register(
        self, subject: str, schema: Schema, *, normalize: bool = False
    ) -> Deferred[RegisteredSchema]:
        return defer.succeed(self.add(subject, schema))


def avro(fields: Mapping[str, str], name: str = "Order") -> Schema:
    record = {"type": "record", "name": name,
              "fields": [{"name": k, "type": t} for k, t in fields.items()]}
    return Schema(SchemaType.AVRO, json.dumps(record))
