# -*- test-case-name: tests.registry -*-
"""What the registry's layers share: schema types, schemas, subject versions, the
compatibility levels and modes, the seams to the schema formats and to the registry
itself, and the registry's errors with Confluent's error codes.

Sans-IO: nothing here touches the broker, the network or the reactor.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs


class SchemaType(enum.Enum):
    """A schema's language, spelled as Confluent's ``schemaType``."""

    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"


class Compatibility(enum.Enum):
    """What a new version of a subject must keep (Confluent's ``compatibilityLevel``)."""

    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"


class Mode(enum.Enum):
    """Whether the registry (or a subject) takes writes; IMPORT takes schemas with
    their ids given."""

    READWRITE = "READWRITE"
    READONLY = "READONLY"
    IMPORT = "IMPORT"


@attrs.frozen
class SchemaReference:
    """An import of another subject's version, under the name the schema uses for it
    (an Avro full name, a JSON Schema ``$ref`` URL, a ``.proto`` import path)."""

    name: str
    subject: str
    version: int


@attrs.frozen
class Schema:
    """A schema as registered: its type, its text, and what it imports."""

    schema_type: SchemaType
    text: str
    references: tuple[SchemaReference, ...] = ()


@attrs.frozen
class RegisteredSchema:
    """One version of one subject."""

    subject: str
    version: int
    schema_id: int
    schema: Schema
    deleted: bool = False


class RegistryError(Exception):
    """A failure answered to a REST client: the HTTP status, Confluent's error code and
    a message (``{"error_code": ..., "message": ...}``)."""

    def __init__(self, http_status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.error_code = error_code
        self.message = message


class InvalidSchema(ValueError):
    """A schema text its format refuses; the message says why (answered as 42201)."""


class ParsedSchema(Protocol):
    """A schema its format has parsed, with every reference resolved."""

    @property
    def schema_type(self) -> SchemaType: ...

    def canonical(self) -> str:
        """The text stored and compared to find an already registered schema (as
        Confluent: Avro's parsed form printed back, the others as given)."""
        ...

    def normalized(self) -> str:
        """The text of ``?normalize=true``: a form in which equivalent schemas are
        equal strings."""
        ...

    def incompatibilities(self, writer: ParsedSchema) -> list[str]:
        """Why this schema, as reader, cannot read data written with ``writer``; empty
        when it can. Messages name the path and the rule broken."""
        ...

    def decode(self, payload: bytes) -> object:
        """A serialized record's body (after Confluent's framing: magic byte and id,
        and for Protobuf the message indexes, which ``payload`` still starts with) as a
        JSON-able value. Raises ``ValueError`` when it does not decode."""
        ...

    def encode(self, value: object) -> bytes:
        """A JSON-able value as a record body (the inverse of :meth:`decode`, with
        Protobuf's message indexes first). Raises ``ValueError`` when the value does
        not fit the schema."""
        ...


class SchemaFormat(Protocol):
    """One schema type's language (``brokerd.registry.formats``)."""

    @property
    def schema_type(self) -> SchemaType: ...

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedSchema:
        """Parse ``text``; ``references`` maps every name it imports, transitively, to
        that schema's text. Raises :class:`InvalidSchema`."""
        ...


def framed(schema_id: int, body: bytes) -> bytes:
    """Confluent's wire framing: magic byte 0, the schema id (4 bytes, big-endian),
    then the body."""
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def unframe(value: bytes) -> tuple[int, bytes] | None:
    """``(schema id, body)`` of a framed value, or None when it is not framed."""
    if len(value) < 5 or value[0] != 0:
        return None
    return int.from_bytes(value[1:5], "big"), value[5:]


__all__: Sequence[str] = [
    "Compatibility",
    "InvalidSchema",
    "Mode",
    "ParsedSchema",
    "RegisteredSchema",
    "RegistryError",
    "Schema",
    "SchemaFormat",
    "SchemaReference",
    "SchemaType",
    "framed",
    "unframe",
]
