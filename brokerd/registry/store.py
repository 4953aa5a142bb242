# -*- test-case-name: tests.registry.test_store -*-
"""The registry's state: what the records of ``_schemas`` say, applied in log order.

:class:`RegistryState` is built only by :meth:`RegistryState.apply`: the start-up replay
and the live tail apply the same records the same way, so the state after a restart is
the state before it, and records another writer appended (a MirrorMaker 2 import, a
second registry) count exactly as the registry's own.

It holds every subject's versions (soft-deleted ones flagged), the schema of every id
still carried by some version, the reverse index that keeps ids stable (one schema
text, type and references under any subject is one id, as Confluent's), the next id,
and the global and per-subject compatibility levels and modes. A record that
contradicts the state (a version under an id another schema holds) is applied as
written: the log is the truth, and Confluent's reader does the same.

Memory is what the log holds: one entry per live version and per id. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from brokerd.registry.model import (
    Compatibility,
    Mode,
    RegisteredSchema,
    Schema,
)
from brokerd.registry.records import (
    ClearSubject,
    ConfigRecord,
    DeleteSubject,
    ModeRecord,
    Noop,
    SchemaRecord,
    SchemaTombstone,
    StoreRecord,
)

__all__ = ["DEFAULT_COMPATIBILITY", "DEFAULT_MODE", "RegistryState"]

#: Confluent's defaults when no CONFIG or MODE record says otherwise.
DEFAULT_COMPATIBILITY = Compatibility.BACKWARD
DEFAULT_MODE = Mode.READWRITE


_V = TypeVar("_V")


def _set_or_remove(settings: dict[str, _V], subject: str, value: _V | None) -> None:
    """A subject's own setting: ``value``, or none (the global one applies) for None."""
    if value is None:
        settings.pop(subject, None)
    else:
        settings[subject] = value


class RegistryState:
    """Subjects, versions, ids, levels and modes, from the records applied so far."""

    def __init__(self) -> None:
        self._subjects: dict[str, dict[int, RegisteredSchema]] = {}
        self._schemas: dict[int, Schema] = {}
        self._ids: dict[Schema, int] = {}
        #: Which (subject, version) pairs carry each id.
        self._carriers: dict[int, set[tuple[str, int]]] = {}
        self._max_id = 0
        self.global_compatibility: Compatibility | None = None
        self.subject_compatibility: dict[str, Compatibility] = {}
        self.global_mode: Mode | None = None
        self.subject_modes: dict[str, Mode] = {}
        #: Offset of the last record applied (-1: none).
        self.applied_offset = -1

    # -- applying ------------------------------------------------------------------------

    def apply(self, record: StoreRecord, offset: int | None = None) -> None:
        """Apply one record (at ``offset`` of ``_schemas``, when known)."""
        if isinstance(record, SchemaRecord):
            self._put(record.registered)
        elif isinstance(record, SchemaTombstone):
            self._remove(record.subject, record.version)
        elif isinstance(record, ConfigRecord):
            if record.subject is None:
                self.global_compatibility = record.level
            else:
                _set_or_remove(self.subject_compatibility, record.subject, record.level)
        elif isinstance(record, ModeRecord):
            if record.subject is None:
                self.global_mode = record.mode
            else:
                _set_or_remove(self.subject_modes, record.subject, record.mode)
        elif isinstance(record, DeleteSubject):
            for v in list(self._subjects.get(record.subject, {}).values()):
                if v.version <= record.version and not v.deleted:
                    self._put(RegisteredSchema(v.subject, v.version, v.schema_id, v.schema,
                                               deleted=True))
        elif isinstance(record, ClearSubject):
            for v in list(self._subjects.get(record.subject, {}).values()):
                if v.deleted:
                    self._remove(v.subject, v.version)
        else:
            assert isinstance(record, Noop)
        if offset is not None:
            self.applied_offset = offset

    def _put(self, registered: RegisteredSchema) -> None:
        old = self._subjects.get(registered.subject, {}).get(registered.version)
        if old is not None and old.schema_id != registered.schema_id:
            self._uncarry(old)
        self._subjects.setdefault(registered.subject, {})[registered.version] = registered
        sid = registered.schema_id
        self._schemas.setdefault(sid, registered.schema)
        self._ids.setdefault(registered.schema, sid)
        self._carriers.setdefault(sid, set()).add((registered.subject, registered.version))
        self._max_id = max(self._max_id, sid)

    def _remove(self, subject: str, version: int) -> None:
        versions = self._subjects.get(subject)
        if versions is None:
            return
        old = versions.pop(version, None)
        if not versions:
            del self._subjects[subject]
        if old is not None:
            self._uncarry(old)

    def _uncarry(self, old: RegisteredSchema) -> None:
        carriers = self._carriers.get(old.schema_id)
        if carriers is None:
            return
        carriers.discard((old.subject, old.version))
        if not carriers:
            # No version carries the id any more: it is gone (never handed out again).
            del self._carriers[old.schema_id]
            schema = self._schemas.pop(old.schema_id, None)
            if schema is not None and self._ids.get(schema) == old.schema_id:
                del self._ids[schema]

    # -- reading -------------------------------------------------------------------------

    @property
    def next_id(self) -> int:
        """The id a schema never registered before gets."""
        return self._max_id + 1

    def note_id(self, schema_id: int) -> None:
        """An id used by a write in flight: never hand it out again."""
        self._max_id = max(self._max_id, schema_id)

    def schema(self, schema_id: int) -> Schema | None:
        return self._schemas.get(schema_id)

    def id_of(self, schema: Schema) -> int | None:
        """The id this schema (same type, text and references) already has."""
        return self._ids.get(schema)

    def ids(self) -> Iterator[int]:
        return iter(sorted(self._schemas))

    def subjects(self, *, deleted: bool = False) -> list[str]:
        """Subjects with a live version (with ``deleted``: with any version), sorted."""
        return sorted(
            s for s, vs in self._subjects.items()
            if deleted or any(not v.deleted for v in vs.values())
        )

    def versions(self, subject: str, *, deleted: bool = False) -> list[RegisteredSchema]:
        """The subject's versions in order (with ``deleted``: soft-deleted ones too)."""
        vs = self._subjects.get(subject, {})
        return [vs[n] for n in sorted(vs) if deleted or not vs[n].deleted]

    def version(self, subject: str, version: int) -> RegisteredSchema | None:
        """One version, live or soft-deleted."""
        return self._subjects.get(subject, {}).get(version)

    def latest(self, subject: str) -> RegisteredSchema | None:
        live = self.versions(subject)
        return live[-1] if live else None

    def max_version(self, subject: str) -> int:
        """The highest version number the subject holds (soft-deleted included), 0 if
        none: a new version takes the next."""
        return max(self._subjects.get(subject, {}), default=0)

    def carriers(self, schema_id: int) -> list[RegisteredSchema]:
        """Every version (soft-deleted too) carrying the id, by subject and version."""
        out = []
        for subject, version in sorted(self._carriers.get(schema_id, ())):
            v = self.version(subject, version)
            if v is not None:
                out.append(v)
        return out

    def compatibility_of(self, subject: str | None) -> Compatibility:
        if subject is not None and subject in self.subject_compatibility:
            return self.subject_compatibility[subject]
        return self.global_compatibility or DEFAULT_COMPATIBILITY

    def mode_of(self, subject: str | None) -> Mode:
        if subject is not None and subject in self.subject_modes:
            return self.subject_modes[subject]
        return self.global_mode or DEFAULT_MODE

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live versions whose references name this version."""
        out = set()
        for vs in self._subjects.values():
            for v in vs.values():
                if v.deleted:
                    continue
                if any(r.subject == subject and r.version == version
                       for r in v.schema.references):
                    out.add(v.schema_id)
        return sorted(out)
