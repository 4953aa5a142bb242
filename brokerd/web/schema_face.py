"""What the console asks of the schema registry, declared here so the web package does not
import the registry (whose REST listener imports the web package's authentication):
the service wiring passes the broker's ``brokerd.registry.service.SchemaRegistry``,
which has all of it, and tests pass an in-memory one.

Also the two rules the console shares with the registry, restated where the console
needs them: Confluent's wire framing of a serialized value (magic byte 0, a 4-byte
big-endian schema id, the body), and which topic a subject stands for under the ACLs
(Confluent's TopicNameStrategy: ``T-key`` and ``T-value`` are topic ``T``, any other
subject the topic of its own name). ``tests/web/test_schema_face.py`` checks that both
agree with the registry's own.

Only declarations and those two rules; no behaviour of the registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = [
    "Named",
    "SchemaSource",
    "SchemaText",
    "SchemaVersion",
    "Serializer",
    "framed",
    "subject_topic",
    "unframe",
]


class Named(Protocol):
    """An enum member of the registry's: a :class:`~brokerd.registry.model.SchemaType` or a
    compatibility level (see the module docstring for why the web package declares it)."""

    @property
    def value(self) -> str: ...


class Reference(Protocol):
    """A schema's reference to another: a :class:`~brokerd.registry.model.SchemaReference`."""

    @property
    def name(self) -> str: ...
    @property
    def subject(self) -> str: ...
    @property
    def version(self) -> int: ...


class SchemaText(Protocol):
    """A schema's text, type and references: a :class:`~brokerd.registry.model.Schema`."""

    @property
    def schema_type(self) -> Named: ...
    @property
    def text(self) -> str: ...
    @property
    def references(self) -> Sequence[Reference]: ...


class SchemaVersion(Protocol):
    """One version of one subject: a :class:`~brokerd.registry.model.RegisteredSchema`."""

    @property
    def subject(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def schema_id(self) -> int: ...
    @property
    def schema(self) -> SchemaText: ...


class Serializer(Protocol):
    """A parsed schema: its type, and record bodies to and from JSON-able values
    (``ValueError`` when they do not fit)."""

    @property
    def schema_type(self) -> Named: ...
    def decode(self, payload: bytes) -> object: ...
    def encode(self, value: object) -> bytes: ...


class SchemaSource(Protocol):
    """The registry as the console reads it (reactor thread, answers from memory): the
    :class:`~brokerd.registry.service.SchemaRegistry`."""

    def parsed_by_id(self, schema_id: int) -> Serializer | None: ...
    def subjects(self, *, deleted: bool = False) -> list[str]: ...
    def versions(self, subject: str, *, deleted: bool = False) -> Sequence[SchemaVersion]: ...
    def latest(self, subject: str) -> SchemaVersion | None: ...
    def compatibility_of(self, subject: str) -> Named: ...


def framed(schema_id: int, body: bytes) -> bytes:
    """``body`` framed as Confluent's serializers frame it."""
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def unframe(value: bytes) -> tuple[int, bytes] | None:
    """``(schema id, body)`` of a framed value, or None when it is not framed."""
    if len(value) < 5 or value[0] != 0:
        return None
    return int.from_bytes(value[1:5], "big"), value[5:]


def subject_topic(subject: str) -> str:
    """The topic whose ACLs govern ``subject``."""
    for suffix in ("-value", "-key"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject
