"""Which versions each compatibility level checks, in which direction (real Avro
schemas; the rules themselves are the formats', tests/registry/test_formats*)."""

from __future__ import annotations

import json

from twisted.trial.unittest import SynchronousTestCase

from brokerd.registry.compat import incompatibilities
from brokerd.registry.formats import for_type
from brokerd.registry.model import Compatibility, ParsedSchema, SchemaType


def record(*fields: dict[str, object]) -> ParsedSchema:
    text = json.dumps({"type": "record", "name": "R", "fields": list(fields)})
    return for_type(SchemaType.AVRO).parse(text, {})


A = {"name": "a", "type": "int"}
B_DEFAULT = {"name": "b", "type": "int", "default": 0}
B = {"name": "b", "type": "int"}
V1 = record(A)
V2 = record(A, B_DEFAULT)
V3 = record(A, B)  # b without its default


class LevelTests(SynchronousTestCase):
    def test_none_checks_nothing(self) -> None:
        self.assertEqual(incompatibilities(Compatibility.NONE, V3, [(1, V1)]), [])

    def test_backward_reads_the_old_data(self) -> None:
        self.assertEqual(incompatibilities(Compatibility.BACKWARD, V2, [(1, V1)]), [])
        found = incompatibilities(Compatibility.BACKWARD, V3, [(1, V1)])
        self.assertTrue(found)
        self.assertEqual(found[-2:], ["{oldSchemaVersion: 1}", "{compatibility: 'BACKWARD'}"])

    def test_forward_is_the_old_reading_the_new(self) -> None:
        # Dropping b: the old reader has a default for it (FORWARD holds), not so for V3.
        self.assertEqual(incompatibilities(Compatibility.FORWARD, V1, [(1, V2)]), [])
        self.assertTrue(incompatibilities(Compatibility.FORWARD, V1, [(1, V3)]))
        self.assertTrue(incompatibilities(Compatibility.FULL, V1, [(1, V3)]))
        self.assertEqual(incompatibilities(Compatibility.FULL, V2, [(1, V1)]), [])

    def test_transitive_levels_check_every_version(self) -> None:
        history = [(1, V1), (2, V2)]
        self.assertEqual(incompatibilities(Compatibility.BACKWARD, V3, history), [])
        found = incompatibilities(Compatibility.BACKWARD_TRANSITIVE, V3, history)
        self.assertIn("{oldSchemaVersion: 1}", found)
        self.assertNotIn("{oldSchemaVersion: 2}", found)
