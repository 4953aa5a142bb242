# -*- test-case-name: tests.registry.test_records -*-
"""The records of ``_schemas``, as Confluent's Schema Registry writes them, both ways.

Every record's key is a JSON object naming what it is about: ``keytype`` (``SCHEMA``,
``CONFIG``, ``MODE``, ``DELETE_SUBJECT``, ``CLEAR_SUBJECT``, ``NOOP``), ``subject``
(null for the global config and mode), ``version`` (schema records only) and ``magic``
(1 for schema records, 0 for the others), written in that order with no spaces, as
Confluent's Jackson does; compaction keeps the last value of each distinct key, so two
writers that spell one key differently would each leave a live copy. Karapace's older
releases wrote the same fields in another order: keys are read in any order, written
in Confluent's.

Values are JSON objects:

* ``SCHEMA``: ``subject``, ``version``, ``id``, ``schemaType`` (absent for Avro),
  ``references`` (``name``/``subject``/``version``), ``schema`` (the text) and
  ``deleted`` (a soft delete writes the version again with ``true``). A null value (a
  tombstone) is a permanent delete of that version.
* ``CONFIG``: ``compatibilityLevel``; a tombstone removes the subject's level.
* ``MODE``: ``mode``; a tombstone removes the subject's mode.
* ``DELETE_SUBJECT``: ``subject`` and ``version``: every version up to it is soft-deleted.
* ``CLEAR_SUBJECT``: ``subject``: its soft-deleted versions are gone for good.
* ``NOOP``: nothing (a writer's marker; read and ignored).

Fields newer registries add (``metadata``, ``ruleSet``, ``alias``, ``normalize``, ...)
are ignored on reading; a key or value that is not such an object is reported as
:class:`UnreadableRecord` so the reader can skip it and say so. Sans-IO: bytes in,
bytes out.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

from brokerd.registry.model import (
    Compatibility,
    Mode,
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaType,
)

__all__ = [
    "ClearSubject",
    "ConfigRecord",
    "DeleteSubject",
    "KeyType",
    "ModeRecord",
    "Noop",
    "SchemaRecord",
    "SchemaTombstone",
    "StoreRecord",
    "UnreadableRecord",
    "decode_record",
    "encode_record",
]


_E = TypeVar("_E", bound=enum.Enum)


class KeyType(enum.Enum):
    SCHEMA = "SCHEMA"
    CONFIG = "CONFIG"
    MODE = "MODE"
    DELETE_SUBJECT = "DELETE_SUBJECT"
    CLEAR_SUBJECT = "CLEAR_SUBJECT"
    NOOP = "NOOP"


class UnreadableRecord(ValueError):
    """A ``_schemas`` record that is not one of Confluent's (the message says why)."""


@attrs.frozen
class SchemaRecord:
    """A version of a subject, registered or (``deleted``) soft-deleted."""

    registered: RegisteredSchema


@attrs.frozen
class SchemaTombstone:
    """A version permanently deleted."""

    subject: str
    version: int


@attrs.frozen
class ConfigRecord:
    """A compatibility level; ``subject`` None is the global one, ``level`` None removes
    the subject's own (a tombstone)."""

    subject: str | None
    level: Compatibility | None


@attrs.frozen
class ModeRecord:
    """A mode; ``subject`` None is the global one, ``mode`` None removes the subject's."""

    subject: str | None
    mode: Mode | None


@attrs.frozen
class DeleteSubject:
    """Every version of ``subject`` up to ``version`` soft-deleted."""

    subject: str
    version: int


@attrs.frozen
class ClearSubject:
    """The soft-deleted versions of ``subject`` gone for good."""

    subject: str


@attrs.frozen
class Noop:
    """A record that changes nothing."""


StoreRecord = (
    SchemaRecord | SchemaTombstone | ConfigRecord | ModeRecord | DeleteSubject | ClearSubject
    | Noop
)


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def _subject_key(keytype: KeyType, subject: str | None) -> bytes:
    return _dumps({"keytype": keytype.value, "subject": subject, "magic": 0})


def encode_record(record: StoreRecord) -> tuple[bytes, bytes | None]:
    """``(key, value)`` of ``record`` in Confluent's format (value None: a tombstone)."""
    if isinstance(record, SchemaRecord):
        r = record.registered
        value: dict[str, Any] = {"subject": r.subject, "version": r.version, "id": r.schema_id}
        if r.schema.schema_type is not SchemaType.AVRO:
            value["schemaType"] = r.schema.schema_type.value
        value["references"] = [
            {"name": ref.name, "subject": ref.subject, "version": ref.version}
            for ref in r.schema.references
        ]
        value["schema"] = r.schema.text
        value["deleted"] = r.deleted
        return _schema_key(r.subject, r.version), _dumps(value)
    if isinstance(record, SchemaTombstone):
        return _schema_key(record.subject, record.version), None
    if isinstance(record, ConfigRecord):
        key = _subject_key(KeyType.CONFIG, record.subject)
        if record.level is None:
            return key, None
        return key, _dumps({"compatibilityLevel": record.level.value})
    if isinstance(record, ModeRecord):
        key = _subject_key(KeyType.MODE, record.subject)
        return key, None if record.mode is None else _dumps({"mode": record.mode.value})
    if isinstance(record, DeleteSubject):
        return (
            _subject_key(KeyType.DELETE_SUBJECT, record.subject),
            _dumps({"subject": record.subject, "version": record.version}),
        )
    if isinstance(record, ClearSubject):
        return (
            _subject_key(KeyType.CLEAR_SUBJECT, record.subject),
            _dumps({"subject": record.subject}),
        )
    return _dumps({"keytype": "NOOP", "magic": 0}), None


def _object(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise UnreadableRecord(f"{what} is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise UnreadableRecord(f"{what} is not a JSON object")
    return obj


def _text(obj: Mapping[str, Any], name: str, what: str, *, null: bool = False) -> Any:
    value = obj.get(name)
    if value is None and null:
        return None
    if not isinstance(value, str):
        raise UnreadableRecord(f"{what} has no string {name!r}")
    return value


def _int(obj: Mapping[str, Any], name: str, what: str) -> int:
    value = obj.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise UnreadableRecord(f"{what} has no integer {name!r}")
    return value


def _enum_of(cls: type[_E], value: Any, what: str) -> _E:
    try:
        return cls(value)
    except ValueError:
        raise UnreadableRecord(f"{what}: unknown {cls.__name__} {value!r}") from None


def decode_record(key: bytes | None, value: bytes | None) -> StoreRecord:
    """The record of a ``_schemas`` key and value (value None: a tombstone).

    :raises UnreadableRecord: not a record of Confluent's format.
    """
    if key is None:
        raise UnreadableRecord("record without a key")
    k = _object(key, "key")
    keytype = _enum_of(KeyType, k.get("keytype"), "key")
    if keytype is KeyType.NOOP:
        return Noop()
    subject = _text(k, "subject", "key", null=keytype in (KeyType.CONFIG, KeyType.MODE))
    if keytype is KeyType.SCHEMA:
        version = _int(k, "version", "key")
        if value is None:
            return SchemaTombstone(subject, version)
        return SchemaRecord(_registered(_object(value, "schema value"), subject, version))
    if keytype is KeyType.CONFIG:
        if value is None:
            return ConfigRecord(subject, None)
        v = _object(value, "config value")
        return ConfigRecord(
            subject, _enum_of(Compatibility, v.get("compatibilityLevel"), "config value")
        )
    if keytype is KeyType.MODE:
        if value is None:
            return ModeRecord(subject, None)
        return ModeRecord(subject, _enum_of(Mode, _object(value, "mode value").get("mode"),
                                            "mode value"))
    if value is None:
        return Noop()
    v = _object(value, "subject value")
    if keytype is KeyType.DELETE_SUBJECT:
        return DeleteSubject(subject, _int(v, "version", "delete-subject value"))
    return ClearSubject(subject)


def _registered(v: Mapping[str, Any], subject: str, version: int) -> RegisteredSchema:
    what = f"schema value of {subject!r} version {version}"
    text = _text(v, "schema", what)
    schema_type = _enum_of(SchemaType, v.get("schemaType") or "AVRO", what)
    refs = v.get("references") or []
    if not isinstance(refs, list):
        raise UnreadableRecord(f"{what}: references is not a list")
    references = []
    for ref in refs:
        if not isinstance(ref, dict):
            raise UnreadableRecord(f"{what}: a reference is not an object")
        references.append(SchemaReference(
            _text(ref, "name", what), _text(ref, "subject", what), _int(ref, "version", what)
        ))
    deleted = v.get("deleted", False)
    return RegisteredSchema(
        subject=subject,
        version=version,
        schema_id=_int(v, "id", what),
        schema=Schema(schema_type, text, tuple(references)),
        deleted=deleted is True,
    )
