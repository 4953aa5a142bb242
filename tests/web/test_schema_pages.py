"""The schema registry's pages: subjects listed only to who may see them, a subject's
versions pretty-printed, and the diff between two chosen versions."""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.template import flattenString
from twisted.web.test.requesthelper import DummyRequest

from brokerd.operator.visibility import Visibility
from brokerd.registry.model import Compatibility, RegisteredSchema, Schema, SchemaType
from brokerd.security.acl import (
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from brokerd.web.csrf import CsrfGuard
from brokerd.web.permits import DataPages
from brokerd.web.schema_pages import MAX_DIFF_LINES, SchemasPage, pretty, unified_diff
from brokerd.web.scope import EVERYTHING, RequestScope


def version(subject: str, number: int, fields: dict[str, str]) -> RegisteredSchema:
    text = json.dumps({"type": "record", "name": "R", "fields": [
        {"name": k, "type": v} for k, v in fields.items()]})
    return RegisteredSchema(subject, number, 100 + number, Schema(SchemaType.AVRO, text))


class Lookup:
    """The registry's read side, in memory."""

    def __init__(self, *versions: RegisteredSchema) -> None:
        self.by_subject: dict[str, list[RegisteredSchema]] = {}
        for v in versions:
            self.by_subject.setdefault(v.subject, []).append(v)

    def subjects(self) -> list[str]:
        return sorted(self.by_subject)

    def versions(self, subject: str) -> list[RegisteredSchema]:
        return self.by_subject.get(subject, [])

    def latest(self, subject: str) -> RegisteredSchema | None:
        return self.by_subject[subject][-1] if subject in self.by_subject else None

    def compatibility_of(self, subject: str) -> Compatibility:
        return Compatibility.FULL


def flat(tag: Any) -> str:
    out: list[bytes] = []
    flattenString(None, tag).addCallback(out.append)
    return out[0].decode()


class SchemasPageTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.lookup: Lookup | None = Lookup(
            version("orders-value", 1, {"id": "long"}),
            version("orders-value", 2, {"id": "long", "note": "string"}),
            version("orders-value", 3, {"id": "long", "note": "string", "at": "long"}),
            version("secret-value", 1, {"x": "int"}),
        )
        self.scope = EVERYTHING

    def get(self, *path: bytes, **args: str) -> tuple[int, str]:
        pages = DataPages(None, self.lookup, Clock(), lambda r: self.scope,  # type: ignore[arg-type]
                          None, CsrfGuard())  # type: ignore[arg-type]
        request = DummyRequest(list(path))
        request.method = b"GET"
        request.args = {k.encode(): [v.encode()] for k, v in args.items()}
        SchemasPage(pages).render(request)
        return request.responseCode or 200, b"".join(request.written).decode()

    def test_subjects_are_listed_only_to_who_may_read_their_topic(self) -> None:
        status, html = self.get()
        self.assertEqual(status, 200)
        self.assertIn('href="/schemas/orders-value"', html)
        self.assertIn("secret-value", html)
        reader = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:a", "*",
                            Operation.READ, Permission.ALLOW)
        self.scope = RequestScope(Visibility(AclAuthorizer([reader]), "User:a", "h"), "User:a")
        status, html = self.get()
        self.assertIn("orders-value", html)
        self.assertNotIn("secret-value", html)
        self.assertEqual(self.get(b"secret-value")[0], 404)

    def test_a_subject_shows_its_versions_and_by_default_the_last_diff(self) -> None:
        status, html = self.get(b"orders-value")
        self.assertEqual(status, 200)
        for n in (1, 2, 3):
            self.assertIn(f'id="version-{n}"', html)
        self.assertIn("version 2 (id 102)", html)
        self.assertIn("version 3 (id 103)", html)
        self.assertIn("<ins>+", html)

    def test_the_diff_versions_are_chosen_and_checked(self) -> None:
        _status, html = self.get(b"orders-value", **{"from": "1", "to": "3"})
        self.assertIn("version 1 (id 101)", html)
        _status, html = self.get(b"orders-value", **{"from": "9"})
        self.assertIn("No such version to compare.", html)

    def test_missing_subject_no_registry_and_other_methods(self) -> None:
        self.assertEqual(self.get(b"nothing")[0], 404)
        self.lookup = None
        status, html = self.get()
        self.assertEqual(status, 404)
        self.assertIn("no schema registry", html)
        request = DummyRequest([])
        request.method = b"DELETE"
        pages = DataPages(None, None, Clock(), lambda r: EVERYTHING, None, CsrfGuard())  # type: ignore[arg-type]
        SchemasPage(pages).render(request)
        self.assertEqual(request.responseCode, 405)


def test_pretty_indents_json_and_leaves_protobuf_and_bad_json() -> None:
    assert pretty('{"a":1}', SchemaType.AVRO) == '{\n  "a": 1\n}'
    assert pretty('{"a":1}', SchemaType.PROTOBUF) == '{"a":1}'
    assert pretty("{not json", SchemaType.JSON) == "{not json"


def test_a_diff_of_equal_texts_says_so_and_a_long_one_is_cut() -> None:
    one = version("s", 1, {"id": "long"})
    same = RegisteredSchema("s", 2, 102, one.schema)
    assert "are the same" in flat(unified_diff(one, same))
    many = {f"f{i}": "int" for i in range(MAX_DIFF_LINES)}
    html = flat(unified_diff(one, version("s", 2, many)))
    assert "more lines" in html
