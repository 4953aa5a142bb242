# -*- test-case-name: tests.proxy.test_embedded -*-
"""The embedded formats of REST Proxy v2 (``application/vnd.kafka.FORMAT.v2+json``):
how a record's key and value are written in JSON and what bytes they are in the log.

* ``json``: any JSON value, stored as its compact UTF-8 text;
* ``binary``: base64 text, stored as the bytes it decodes to;
* ``avro``, ``protobuf``, ``jsonschema``: a JSON value of a schema the registry holds,
  stored in Confluent's framing (magic byte, schema id, the schema format's encoding);
  consumed records are decoded through the registry by the id they carry.

``null`` is a null key or value in every format. Sans-IO: the registry is asked through
the :class:`~brokerd.registry.service.SchemaRegistry`'s lookups, whose schema parsing and codecs
are imported only when a schema format is used.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
from typing import TYPE_CHECKING

from brokerd.proxy.errors import SERIALIZATION, UNSUPPORTED_CONTENT_TYPE, ProxyError
from brokerd.registry.model import ParsedSchema, SchemaType, framed, unframe

if TYPE_CHECKING:
    from brokerd.registry.service import SchemaRegistry


class EmbeddedFormat(enum.Enum):
    """A v2 embedded format, by the name its content types and consumers use."""

    JSON = "json"
    BINARY = "binary"
    AVRO = "avro"
    PROTOBUF = "protobuf"
    JSONSCHEMA = "jsonschema"

    @property
    def schema_type(self) -> SchemaType | None:
        """The registry's schema type of a schema format (None: json, binary)."""
        return _SCHEMA_TYPES.get(self)

    @property
    def content_type(self) -> str:
        return f"application/vnd.kafka.{self.value}.v2+json"


_SCHEMA_TYPES = {
    EmbeddedFormat.AVRO: SchemaType.AVRO,
    EmbeddedFormat.PROTOBUF: SchemaType.PROTOBUF,
    EmbeddedFormat.JSONSCHEMA: SchemaType.JSON,
}

#: v2's plain content types (no embedded format: metadata, consumer management).
V2_TYPES = frozenset({"application/vnd.kafka.v2+json", "application/vnd.kafka+json",
                      "application/json", "application/octet-stream"})
V2_CONTENT_TYPE = "application/vnd.kafka.v2+json"


def media_type(header: str | None) -> str:
    """A Content-Type or one Accept entry without its parameters, lower case."""
    return (header or "").split(";", 1)[0].strip().lower()


def embedded_of(content_type: str) -> EmbeddedFormat | None:
    """The embedded format a content type names (``application/vnd.kafka.json.v2+json``),
    or None when it names none."""
    prefix, suffix = "application/vnd.kafka.", ".v2+json"
    if content_type.startswith(prefix) and content_type.endswith(suffix):
        name = content_type[len(prefix):-len(suffix)]
        for fmt in EmbeddedFormat:
            if fmt.value == name:
                return fmt
    return None


def produce_format(content_type_header: str | None) -> EmbeddedFormat:
    """The embedded format of a v2 produce request; an unknown one is 415 (40601)."""
    fmt = embedded_of(media_type(content_type_header))
    if fmt is None:
        raise ProxyError(
            415, UNSUPPORTED_CONTENT_TYPE,
            f"HTTP 415 Unsupported Media Type: a produce needs an embedded format "
            f"(application/vnd.kafka.{{json,binary,avro,protobuf,jsonschema}}.v2+json), "
            f"not {media_type(content_type_header) or 'none'}",
        )
    return fmt


def accepted_formats(accept_header: str | None) -> list[EmbeddedFormat | None]:
    """The embedded formats an Accept header names, in its order (None for a plain v2
    or wildcard type)."""
    formats: list[EmbeddedFormat | None] = []
    for entry in (accept_header or "*/*").split(",")[:32]:
        kind = media_type(entry)
        fmt = embedded_of(kind)
        if fmt is not None:
            formats.append(fmt)
        elif kind in V2_TYPES or kind in ("*/*", "application/*", ""):
            formats.append(None)
    return formats


def encode_plain(fmt: EmbeddedFormat, value: object) -> bytes | None:
    """A json or binary key or value as the bytes stored."""
    if value is None:
        return None
    if fmt is EmbeddedFormat.JSON:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return decode_base64(value, 422, "a binary key or value is a base64 string")


def decode_base64(value: object, http_status: int, not_string: str) -> bytes:
    """The bytes of a base64 string; otherwise a SERIALIZATION error with ``http_status``
    (v2 answers 422, v3 400) and ``not_string`` when it is no string at all."""
    if not isinstance(value, str):
        raise ProxyError(http_status, SERIALIZATION, not_string)
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as e:
        raise ProxyError(http_status, SERIALIZATION, f"not base64: {e}") from None


def encode_with(schema_id: int, parsed: ParsedSchema, value: object) -> bytes | None:
    """A schema format's key or value, encoded and framed with ``schema_id``."""
    if value is None:
        return None
    try:
        return framed(schema_id, parsed.encode(value))
    except (ValueError, TypeError) as e:
        raise ProxyError(422, SERIALIZATION, f"does not fit schema {schema_id}: {e}") from None


def decode(
    fmt: EmbeddedFormat, data: bytes | None, registry: SchemaRegistry | None
) -> object:
    """A stored key or value as JSON in ``fmt`` (a consumer's format)."""
    if data is None:
        return None
    if fmt is EmbeddedFormat.BINARY:
        return base64.b64encode(data).decode("ascii")
    if fmt is EmbeddedFormat.JSON:
        try:
            return json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise ProxyError(500, 50002, f"a record is not JSON ({e}): read it as binary") from None
    found = unframe(data)
    if found is None:
        raise ProxyError(500, 50002, f"a record is not framed with a schema id: read it "
                                     f"as binary, not {fmt.value}")
    schema_id, body = found
    parsed = registry.parsed_by_id(schema_id) if registry is not None else None
    if parsed is None:
        raise ProxyError(500, 50002, f"schema {schema_id} of a record is not in the registry")
    if parsed.schema_type is not fmt.schema_type:
        raise ProxyError(500, 50002, f"a record's schema {schema_id} is "
                                     f"{parsed.schema_type.value}, not {fmt.value}")
    try:
        return parsed.decode(body)
    except ValueError as e:
        raise ProxyError(
            500, 50002, f"a record does not decode with schema {schema_id}: {e}"
        ) from None
