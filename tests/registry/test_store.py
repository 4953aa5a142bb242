"""The registry's state from ``_schemas`` records: replay equals live, ids stay stable,
deletes, levels and modes."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from brokerd.registry.model import Compatibility, Mode, RegisteredSchema, Schema, SchemaType
from brokerd.registry.records import (
    ClearSubject,
    ConfigRecord,
    DeleteSubject,
    ModeRecord,
    SchemaRecord,
    SchemaTombstone,
    StoreRecord,
    decode_record,
    encode_record,
)
from brokerd.registry.store import RegistryState

A = Schema(SchemaType.AVRO, '"string"')
B = Schema(SchemaType.AVRO, '"int"')


def version(subject: str, n: int, sid: int, schema: Schema, deleted: bool = False) -> SchemaRecord:
    return SchemaRecord(RegisteredSchema(subject, n, sid, schema, deleted))


HISTORY: list[StoreRecord] = [
    version("a", 1, 1, A),
    version("b", 1, 1, A),
    version("a", 2, 2, B),
    ConfigRecord(None, Compatibility.FULL),
    ConfigRecord("a", Compatibility.NONE),
    ModeRecord("b", Mode.READONLY),
    version("a", 1, 1, A, deleted=True),
    DeleteSubject("b", 1),
    SchemaTombstone("b", 1),
]


class StoreTests(SynchronousTestCase):
    def test_replay_of_the_encoded_log_equals_live(self) -> None:
        live = RegistryState()
        for offset, record in enumerate(HISTORY):
            live.apply(record, offset)
        replayed = RegistryState()
        for offset, record in enumerate(HISTORY):
            replayed.apply(decode_record(*encode_record(record)), offset)
        for state in (live, replayed):
            self.assertEqual(state.subjects(), ["a"])
            self.assertEqual(state.subjects(deleted=True), ["a"])
            self.assertEqual([v.version for v in state.versions("a")], [2])
            self.assertEqual([v.version for v in state.versions("a", deleted=True)], [1, 2])
            self.assertEqual(state.compatibility_of("a"), Compatibility.NONE)
            self.assertEqual(state.compatibility_of("b"), Compatibility.FULL)
            self.assertEqual(state.mode_of("b"), Mode.READONLY)
            self.assertEqual(state.applied_offset, len(HISTORY) - 1)
            self.assertEqual(state.next_id, 3)

    def test_ids_are_stable_across_subjects(self) -> None:
        state = RegistryState()
        state.apply(version("a", 1, 1, A))
        self.assertEqual(state.id_of(A), 1)
        self.assertIsNone(state.id_of(B))
        state.apply(version("b", 1, 1, A))
        self.assertEqual([(v.subject, v.version) for v in state.carriers(1)],
                         [("a", 1), ("b", 1)])

    def test_permanent_delete_forgets_an_id_only_when_nothing_carries_it(self) -> None:
        state = RegistryState()
        state.apply(version("a", 1, 5, A))
        state.apply(version("b", 1, 5, A))
        state.apply(SchemaTombstone("a", 1))
        self.assertEqual(state.schema(5), A)
        state.apply(SchemaTombstone("b", 1))
        self.assertIsNone(state.schema(5))
        self.assertIsNone(state.id_of(A))
        self.assertEqual(state.next_id, 6, "an id is never handed out twice")
        self.assertEqual(state.subjects(deleted=True), [])

    def test_delete_subject_up_to_a_version_and_clear(self) -> None:
        state = RegistryState()
        for n in (1, 2, 3):
            state.apply(version("s", n, n, A if n != 2 else B))
        state.apply(DeleteSubject("s", 2))
        self.assertEqual([v.version for v in state.versions("s")], [3])
        self.assertEqual(state.max_version("s"), 3)
        state.apply(ClearSubject("s"))
        self.assertEqual([v.version for v in state.versions("s", deleted=True)], [3])

    def test_defaults_and_removal_of_subject_levels(self) -> None:
        state = RegistryState()
        self.assertEqual(state.compatibility_of("s"), Compatibility.BACKWARD)
        self.assertEqual(state.mode_of(None), Mode.READWRITE)
        state.apply(ConfigRecord("s", Compatibility.FORWARD))
        state.apply(ConfigRecord("s", None))
        state.apply(ModeRecord(None, Mode.IMPORT))
        self.assertEqual(state.compatibility_of("s"), Compatibility.BACKWARD)
        self.assertEqual(state.mode_of("s"), Mode.IMPORT)
