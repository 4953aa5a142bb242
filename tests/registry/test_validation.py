"""The produce validator alone: framing, the subject by TopicNameStrategy, tombstones,
and the record errors it names."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from brokerd.errors import InvalidRecord
from brokerd.registry.model import framed
from brokerd.registry.validation import SchemaValidator


class Lookup:
    """The one question validation asks, over a fixed table (subject -> ids)."""

    def __init__(self, ids: dict[str, set[int]]) -> None:
        self.ids = ids

    def subject_has_id(self, subject: str, schema_id: int) -> bool:
        return schema_id in self.ids.get(subject, set())


class ValidatorTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.validate = SchemaValidator(
            Lookup({"t-value": {1}, "t-key": {2}})  # type: ignore[arg-type]
        ).validate

    def test_registered_ids_and_tombstones_pass(self) -> None:
        self.validate("t", [(None, framed(1, b"x")), (b"k", None)], False, True)
        self.validate("t", [(framed(2, b""), framed(1, b""))], True, True)

    def test_each_refused_record_is_named(self) -> None:
        with self.assertRaises(InvalidRecord) as caught:
            self.validate("t", [
                (None, framed(1, b"ok")), (None, b"plain"), (None, framed(2, b"")),
                (b"unframed", framed(1, b"")),
            ], True, True)
        errors = caught.exception.record_errors
        self.assertEqual([i for i, _ in errors], [1, 2, 3])
        self.assertIn("not framed", errors[0][1])
        self.assertIn("schema id 2 is not registered under subject 't-value'", errors[1][1])
        self.assertIn("key is not framed", errors[2][1])
        self.assertIn("record 1:", str(caught.exception))

    def test_only_the_sides_asked_are_checked(self) -> None:
        self.validate("t", [(b"any key", framed(1, b""))], False, True)
        self.validate("t", [(framed(2, b""), b"any value")], True, False)
