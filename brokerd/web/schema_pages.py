# -*- test-case-name: tests.web.test_data_pages -*-
"""The schema registry's pages: ``/schemas`` (every subject with its latest version,
schema type, compatibility level) and ``/schemas/SUBJECT`` (its versions with their
ids, each schema's text pretty-printed, and a unified diff between two versions chosen
with ``?from=V&to=V``, by default the last two).

Read through :class:`~brokerd.web.schema_face.SchemaSource` (answers from memory). Under
``--authorizer acl`` a subject is listed and shown only to a principal that may see it
(:func:`brokerd.web.permits.may_see_subject`). What this module does not do: change the
registry (its REST API does).
"""

from __future__ import annotations

import difflib
import json
from urllib.parse import quote

from twisted.web.resource import Resource
from twisted.web.server import Request
from twisted.web.template import Tag, tags

from brokerd.web.markup import Flattenable, facts, method_not_allowed, respond, table
from brokerd.web.permits import DataPages, may_see_subject
from brokerd.web.schema_face import Named, SchemaSource, SchemaVersion

__all__ = ["SchemasPage", "pretty", "unified_diff"]

OK, BAD_REQUEST, NOT_FOUND = 200, 400, 404
#: Lines of a diff shown (two huge schemas must not make a huge page).
MAX_DIFF_LINES = 2000


def _href(subject: str) -> str:
    return "/schemas/" + quote(subject, safe="")


def pretty(text: str, schema_type: Named) -> str:
    """A schema's text as shown: JSON (Avro, JSON Schema) indented, Protobuf as is."""
    if schema_type.value == "PROTOBUF":
        return text
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def unified_diff(old: SchemaVersion, new: SchemaVersion) -> Tag:
    """``old`` to ``new`` as a unified diff, each line marked up by its kind."""
    lines = list(difflib.unified_diff(
        pretty(old.schema.text, old.schema.schema_type).splitlines(),
        pretty(new.schema.text, new.schema.schema_type).splitlines(),
        f"version {old.version} (id {old.schema_id})",
        f"version {new.version} (id {new.schema_id})",
        lineterm="",
    ))
    if not lines:
        return tags.p("The two versions' texts are the same.", class_="muted", id="diff")
    out: list[Flattenable] = []
    for line in lines[:MAX_DIFF_LINES]:
        if line.startswith(("+++", "---")):
            out.append(tags.span(line, class_="muted"))
        elif line.startswith("+"):
            out.append(tags.ins(line))
        elif line.startswith("-"):
            out.append(tags.del_(line))
        else:
            out.append(tags.span(line))
    if len(lines) > MAX_DIFF_LINES:
        out.append(tags.span(f"... {len(lines) - MAX_DIFF_LINES} more lines", class_="cut"))
    return tags.pre(*out, class_="diff", id="diff")


class SchemasPage(Resource):
    """``/schemas`` and ``/schemas/SUBJECT`` (GET, HEAD)."""

    isLeaf = True

    def __init__(self, pages: DataPages) -> None:
        super().__init__()
        self._pages = pages

    def render(self, request: Request) -> object:
        if request.method not in (b"GET", b"HEAD"):
            return method_not_allowed(request, b"GET, HEAD")
        return super().render(request)

    def render_GET(self, request: Request) -> object:
        lookup = self._pages.lookup
        if lookup is None:
            return respond(request, NOT_FOUND, "Schemas", tags.h1("Schemas"),
                           tags.p("This broker runs no schema registry."))
        path = [p for p in request.postpath or [] if p]
        if not path:
            return self._subjects(request, lookup)
        try:
            subject = b"/".join(path).decode("utf-8")
        except UnicodeDecodeError:
            subject = ""
        return self._subject(request, lookup, subject)

    def _subjects(self, request: Request, lookup: SchemaSource) -> object:
        scope = self._pages.scope_of(request)
        rows = []
        for subject in lookup.subjects():
            if not may_see_subject(scope, subject):
                continue
            latest = lookup.latest(subject)
            if latest is None:
                continue
            rows.append(tags.tr(
                tags.td(tags.a(subject, href=_href(subject))),
                tags.td(str(latest.version), class_="num"),
                tags.td(str(latest.schema_id), class_="num"),
                tags.td(latest.schema.schema_type.value),
                tags.td(lookup.compatibility_of(subject).value),
            ))
        return respond(request, OK, "Schemas", tags.h1("Schema registry"), tags.section(
            tags.h2("Subjects"),
            table(["subject", "latest version", "id", "type", "compatibility"], rows,
                  empty="No subjects registered.", numeric=(1, 2)),
        ))

    def _subject(self, request: Request, lookup: SchemaSource, subject: str) -> object:
        scope = self._pages.scope_of(request)
        versions = lookup.versions(subject) if subject else []
        if not versions or not may_see_subject(scope, subject):
            return respond(request, NOT_FOUND, "Not found", tags.h1("Not found"),
                           tags.p(f"There is no subject {subject!r}."))
        by_number = {v.version: v for v in versions}
        numbers = sorted(by_number)
        body: list[Flattenable] = [
            tags.p(tags.a("\u2190 all subjects", href="/schemas")),
            tags.h1(f"Subject {subject}"),
            facts([
                ("compatibility", lookup.compatibility_of(subject).value),
                ("versions", ", ".join(str(n) for n in numbers)),
            ]),
        ]
        body.append(self._diff_section(request, subject, by_number, numbers))
        for number in reversed(numbers):
            v = by_number[number]
            body.append(tags.section(
                tags.h2(f"Version {v.version}"),
                facts([("schema id", str(v.schema_id)), ("type", v.schema.schema_type.value),
                       ("references", ", ".join(
                           f"{r.name} \u2192 {r.subject} v{r.version}"
                           for r in v.schema.references) or "none")]),
                tags.pre(pretty(v.schema.text, v.schema.schema_type)),
                id=f"version-{v.version}",
            ))
        return respond(request, OK, f"Subject {subject}", *body)

    def _diff_section(self, request: Request, subject: str,
                      by_number: dict[int, SchemaVersion], numbers: list[int]) -> Tag:
        if len(numbers) < 2:
            return tags.section(tags.h2("Diff"), tags.p("Only one version: nothing to compare.",
                                                        class_="muted"))

        def chosen(name: bytes, default: int) -> int | None:
            raw = request.args.get(name, [b""])[0]
            if not raw:
                return default
            try:
                value = int(raw)
            except ValueError:
                return None
            return value if value in by_number else None

        old, new = chosen(b"from", numbers[-2]), chosen(b"to", numbers[-1])

        def choice(name: str, selected: int | None) -> Tag:
            return tags.select(name=name)(*(
                tags.option(str(n), value=str(n),
                            **({"selected": "selected"} if n == selected else {}))
                for n in numbers))

        form = tags.form(method="get", action=_href(subject), class_="inline")(
            tags.label("from version", choice("from", old)),
            tags.label("to version", choice("to", new)),
            tags.button("Compare", type="submit"),
        )
        if old is None or new is None:
            shown: Tag = tags.p("No such version to compare.", class_="banner error")
        else:
            shown = unified_diff(by_number[old], by_number[new])
        return tags.section(tags.h2("Diff"), form, shown)
