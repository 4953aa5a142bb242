# -*- test-case-name: tests.web.test_actions -*-
"""The console's actions: produce a record, create a topic, edit a topic's configs,
delete a topic, reset a consumer group's offsets.

Every action takes three steps, each its own request:

1. ``GET`` the action's URL: its form (with the CSRF token, :mod:`brokerd.web.csrf`);
2. ``POST`` the form: nothing changes yet; the page says exactly what will be done (a
   reset shows each partition's offset now and after, from a dry run) and asks again;
   deleting a topic asks for its name to be typed;
3. ``POST`` the confirmation (``step=confirm``): the action runs and the page says how
   it ended.

Each POST must pass the CSRF checks and the ACL check of the action
(:mod:`brokerd.web.permits`, as the Kafka API checks the same work); a refused request
changes nothing and says why (403), bad input says which field and why (400), and a
refusal by the broker (a group with members, a config value out of range) shows the
broker's message (409). ``--http-console-readonly`` answers every action 403.

The URLs: ``/topics/NAME/produce``, ``/topics/NAME/configs``, ``/topics/NAME/delete``,
``/new-topic``, ``/groups/ID/reset-offsets``. A form's body is bounded by the site
(:data:`brokerd.web.site.MAX_FORM_BYTES`) before it is read, and each field here by
:data:`MAX_FIELD_CHARS` (a produced value by the topic's ``max.message.bytes`` too).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Protocol
from urllib.parse import quote

import attrs
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request
from twisted.web.template import Tag, tags

from brokerd.errors import BrokerError
from brokerd.operator.errors import GroupNotEmpty
from brokerd.operator.operations import ResetMode, ResetSpec
from brokerd.operator.views import OffsetResetView
from brokerd.security.acl import Operation, ResourceType
from brokerd.storage.types import Record
from brokerd.web.browse import BadQuery, parse_time
from brokerd.web.csrf import TOKEN_FIELD
from brokerd.web.data_face import partition_for
from brokerd.web.markup import (
    Flattenable,
    facts,
    hidden,
    method_not_allowed,
    respond,
    table,
    topic_href,
    url,
)
from brokerd.web.permits import DataPages, may_create_topic, permits
from brokerd.web.schema_face import framed
from brokerd.web.scope import RequestScope

__all__ = ["MAX_FIELD_CHARS", "MAX_HEADERS", "Action", "ActionError", "ActionPage"]

OK, BAD_REQUEST, FORBIDDEN, NOT_FOUND, CONFLICT = 200, 400, 403, 404, 409

_log = Logger()

#: The longest field of a form (a produced value's text included).
MAX_FIELD_CHARS = 1024 * 1024
#: Headers of one produced record, and config lines of one form.
MAX_HEADERS = 64
MAX_CONFIG_LINES = 128
#: The most partitions a topic created here may have.
MAX_PARTITIONS = 10_000
#: The step field's value of the last step.
CONFIRM = "confirm"


class ActionError(ValueError):
    """Input an action refuses; the message names the field."""


Fields = Mapping[str, str]


class Right(Protocol):
    """What an action needs of a principal's ACLs."""

    def needs(self) -> str:
        """The ACL, said to a principal that lacks it."""
        ...

    def allowed(self, scope: RequestScope, fields: Fields) -> bool: ...


@attrs.frozen
class TopicRight:
    """``operation`` on one topic."""

    operation: Operation
    topic: str

    def needs(self) -> str:
        return f"{self.operation.name} on topic {self.topic}"

    def allowed(self, scope: RequestScope, fields: Fields) -> bool:
        return permits(scope, self.operation, ResourceType.TOPIC, self.topic)


class Action(Protocol):
    """One action: its form, its plan from the form, the confirmation, the run."""

    @property
    def title(self) -> str: ...

    @property
    def back(self) -> tuple[str, str]:
        """The page the action is about: (label, href)."""
        ...

    @property
    def right(self) -> Right:
        """The ACL the action needs."""
        ...

    def form(self, fields: Fields) -> list[Flattenable]:
        """The inputs of the form, filled from ``fields``."""
        ...

    def settle(self, fields: Fields) -> Fields:
        """``fields`` with every choice left to the broker made now, so the confirmed
        action is the one confirmed (the default partitioner's partition)."""
        ...

    def confirmation(self, fields: Fields) -> Deferred[list[Flattenable]]:
        """What will be done (fails with :class:`ActionError` for bad input)."""
        ...

    def run(self, fields: Fields) -> Deferred[list[Flattenable]]:
        """Do it; fires with what was done."""
        ...


def _fields(request: Request) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, values in request.args.items():
        try:
            key = name.decode("utf-8")
            value = values[0].decode("utf-8") if values else ""
        except UnicodeDecodeError:
            raise ActionError("the form is not UTF-8") from None
        if len(value) > MAX_FIELD_CHARS:
            raise ActionError(f"{key}: longer than {MAX_FIELD_CHARS} characters")
        out[key] = value
    return out


class ActionPage(Resource):
    """One action's URL: GET the form, POST to confirm, POST ``step=confirm`` to run."""

    isLeaf = True

    def __init__(self, pages: DataPages, action: Action) -> None:
        super().__init__()
        self._pages = pages
        self._action = action

    def render(self, request: Request) -> object:
        if request.method not in (b"GET", b"HEAD", b"POST"):
            return method_not_allowed(request, b"GET, HEAD, POST")
        return super().render(request)

    def _admit(self, request: Request, scope: RequestScope) -> tuple[Fields | None, object]:
        """The request's form fields, or (None, the page refusing it): a malformed form,
        a page below the action's, a read-only console, a principal without the ACL."""
        try:
            fields = _fields(request)
        except ActionError as e:
            return None, self._page(request, BAD_REQUEST, tags.p(str(e), class_="banner error"))
        return fields, self._refusal(request, scope, fields)

    def _refusal(self, request: Request, scope: RequestScope, fields: Fields) -> object | None:
        action = self._action
        if request.postpath not in ([], [b""]):
            return self._page(request, NOT_FOUND, tags.p("No such page.", class_="banner error"))
        if not self._pages.actions:
            return self._page(request, FORBIDDEN, tags.p(
                "The console is read-only (--http-console-readonly).",
                class_="banner error", id="error"))
        if not action.right.allowed(scope, fields):
            return self._page(request, FORBIDDEN, tags.p(
                f"Not allowed: this needs {action.right.needs()}.", class_="banner error",
                id="error"))
        return None

    def _page(self, request: Request, status: int, *body: Flattenable) -> object:
        label, href = self._action.back
        return respond(request, status, self._action.title,
                       tags.p(tags.a(f"\u2190 {label}", href=href)),
                       tags.h1(self._action.title), *body)

    def _form(self, request: Request, principal: str, fields: Fields,
              status: int = OK, error: str = "") -> object:
        token = self._pages.csrf.token(principal)
        notice: list[Flattenable] = []
        if error:
            notice.append(tags.p(error, class_="banner error", id="error"))
        return self._page(request, status, *notice, tags.form(
            method="post", action=request.path.decode("utf-8", "replace"), class_="stack",
            id="action-form",
        )(
            *self._action.form(fields), *hidden({TOKEN_FIELD: token}),
            tags.div(tags.button("Continue", type="submit", id="continue")),
        ))

    def render_GET(self, request: Request) -> object:
        scope = self._pages.scope_of(request)
        fields, refused = self._admit(request, scope)
        if fields is None or refused is not None:
            return refused
        return self._form(request, scope.principal or "", fields)

    def render_POST(self, request: Request) -> object:
        scope = self._pages.scope_of(request)
        principal = scope.principal or ""
        why = self._pages.csrf.refusal(request, principal)
        if why is not None:
            return self._page(request, FORBIDDEN, tags.p(
                f"Refused: {why}. Nothing was changed.", class_="banner error", id="error"))
        fields, refused = self._admit(request, scope)
        if fields is None or refused is not None:
            return refused
        if fields.get("step") == CONFIRM:
            d = self._action.run(fields)
            d.addCallback(lambda done: self._page(
                request, OK, tags.div(*done, class_="banner done", id="done")))
        else:
            try:
                settled = self._action.settle(fields)
            except ActionError as e:
                settled, d = fields, defer.fail(e)
            else:
                d = self._action.confirmation(settled)
            d.addCallback(lambda summary: self._confirm_page(request, principal, settled,
                                                             summary))
        d.addErrback(self._failed, request, principal, fields)
        return NOT_DONE_YET

    def _confirm_page(self, request: Request, principal: str, fields: Fields,
                      summary: list[Flattenable]) -> None:
        kept = {k: v for k, v in fields.items() if k not in (TOKEN_FIELD, "step")}
        token = self._pages.csrf.token(principal)
        self._page(
            request, OK,
            tags.div(*summary, class_="banner", id="summary"),
            tags.form(method="post", action=request.path.decode("utf-8", "replace"),
                      class_="stack", id="confirm-form")(
                *hidden(kept), *hidden({TOKEN_FIELD: token, "step": CONFIRM}),
                tags.div(tags.button("Confirm", type="submit", class_="danger",
                                     id="confirm")),
            ),
            tags.p(tags.a("Cancel", href=self._action.back[1])),
        )

    def _failed(self, failure: Failure, request: Request, principal: str,
                fields: Fields) -> None:
        error = failure.value
        if isinstance(error, ActionError | BadQuery):
            self._form(request, principal, fields, BAD_REQUEST, str(error))
        elif isinstance(error, BrokerError):
            status = CONFLICT if isinstance(error, GroupNotEmpty) else BAD_REQUEST
            self._form(request, principal, fields, status,
                       f"The broker refused it: {error}. Nothing was changed.")
        else:
            _log.failure("console action {title}", failure, title=self._action.title)
            self._page(request, 500, tags.p(
                "The action failed; the broker's log says why. It may or may not have "
                "been done: look before trying again.", class_="banner error", id="error"))


def _text_input(label: str, name: str, fields: Fields, **extra: str) -> Tag:
    return tags.label(label, tags.input(name=name, value=fields.get(name, ""), **extra))


def _text_area(label: str, name: str, fields: Fields, rows: str = "6") -> Tag:
    return tags.label(label, tags.textarea(fields.get(name, ""), name=name, rows=rows))


def _pairs(text: str, field: str, separator: str, limit: int) -> list[tuple[str, str]]:
    """``name SEP value`` lines (blank lines skipped)."""
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition(separator)
        if not sep or not name.strip():
            raise ActionError(f"{field}: {line!r} is not 'name{separator}value'")
        out.append((name.strip(), value.strip() if separator == "=" else value.lstrip()))
    if len(out) > limit:
        raise ActionError(f"{field}: more than {limit} lines")
    return out


def _done(*parts: Flattenable) -> Deferred[list[Flattenable]]:
    return defer.succeed(list(parts))


# -- produce ---------------------------------------------------------------------------


class Produce:
    """Produce one record to a topic (WRITE on it)."""

    def __init__(self, pages: DataPages, topic: str, partitions: int) -> None:
        self._pages = pages
        self._topic = topic
        self._partitions = partitions
        self.title = f"Produce to {topic}"
        self.back = (f"topic {topic}", topic_href(topic))
        self.right = TopicRight(Operation.WRITE, topic)

    def form(self, fields: Fields) -> list[Flattenable]:
        chosen = fields.get("partition", "")
        options = [tags.option("default partitioner", value="")] + [
            tags.option(str(p), value=str(p),
                        **({"selected": "selected"} if chosen == str(p) else {}))
            for p in range(self._partitions)
        ]
        subject: list[Flattenable] = []
        if self._pages.lookup is not None:
            subject.append(_text_input(
                "value schema: subject (the value is JSON, encoded with the subject's "
                "latest schema and framed with its id)", "value_subject", fields))
        return [
            _text_input("key (empty: no key)", "key", fields),
            _text_area("value", "value", fields),
            *subject,
            _text_area("headers (one 'name: value' a line)", "headers", fields, rows="3"),
            tags.label("partition", tags.select(name="partition")(*options)),
        ]

    def _record(self, fields: Fields) -> tuple[int, Record, str]:
        key = fields.get("key", "").encode("utf-8") or None
        # Browsers send a textarea's line breaks as CRLF; a value typed with Enter keeps
        # the newline it shows.
        value_text = fields.get("value", "").replace("\r\n", "\n")
        value = value_text.encode("utf-8")
        note = "as UTF-8 text"
        subject = fields.get("value_subject", "").strip()
        if subject:
            value, note = self._encoded(subject, value_text)
        headers = tuple(
            (name, text.encode("utf-8"))
            for name, text in _pairs(fields.get("headers", ""), "headers", ":", MAX_HEADERS)
        )
        chosen = fields.get("partition", "")
        if chosen:
            try:
                partition = int(chosen)
            except ValueError:
                raise ActionError(f"partition: {chosen!r} is not a number") from None
            if not 0 <= partition < self._partitions:
                raise ActionError(f"partition: the topic has no partition {partition}")
        else:
            partition = partition_for(key, self._partitions)
        return partition, Record(0, 0, key, value, headers), note

    def _encoded(self, subject: str, text: str) -> tuple[bytes, str]:
        lookup = self._pages.lookup
        if lookup is None:
            raise ActionError("value_subject: this broker has no schema registry")
        latest = lookup.latest(subject)
        if latest is None:
            raise ActionError(f"value_subject: no subject {subject!r}")
        parsed = lookup.parsed_by_id(latest.schema_id)
        if parsed is None:
            raise ActionError(f"value_subject: schema id {latest.schema_id} is unknown")
        try:
            document = json.loads(text)
            body = parsed.encode(document)
        except ValueError as e:
            raise ActionError(f"value: does not fit {subject} version "
                              f"{latest.version}: {e}") from None
        note = (f"encoded with {subject} version {latest.version} "
                f"(schema id {latest.schema_id}, {latest.schema.schema_type.value})")
        return framed(latest.schema_id, body), note

    def settle(self, fields: Fields) -> Fields:
        if fields.get("partition"):
            return fields
        # Drawn once, here: the confirmation says where the record goes, and it goes there.
        return {**fields, "partition": str(self._record(fields)[0])}

    def confirmation(self, fields: Fields) -> Deferred[list[Flattenable]]:
        try:
            partition, record, note = self._record(fields)
        except ActionError as e:
            return defer.fail(e)
        return _done(
            tags.p(f"Produce one record to {self._topic} partition {partition}:"),
            facts([
                ("key", "none" if record.key is None else fields.get("key", "")),
                ("value", f"{len(record.value or b'')} bytes, {note}"),
                ("headers", ", ".join(n for n, _ in record.headers) or "none"),
            ]),
        )

    def run(self, fields: Fields) -> Deferred[list[Flattenable]]:
        data = self._pages.data
        assert data is not None
        try:
            partition, record, _ = self._record(fields)
        except ActionError as e:
            return defer.fail(e)
        d = data.produce(self._topic, partition, [record], self._pages.time_ms())

        def produced(info: object) -> list[Flattenable]:
            offset = getattr(info, "base_offset", -1)
            link = url(topic_href(self._topic, "messages"),
                       {"partition": str(partition), "offset": str(offset)})
            return [
                tags.p(f"Produced to {self._topic} partition {partition} at offset {offset}."),
                tags.p(tags.a("See it in the message browser", href=link, id="see-it")),
            ]

        return d.addCallback(produced)


# -- topics ----------------------------------------------------------------------------


class CreateTopic:
    """Create a topic (CREATE on the cluster or on the topic)."""

    title = "Create a topic"
    back = ("overview", "/#topics")

    def __init__(self, pages: DataPages) -> None:
        self._pages = pages
        self.right: Right = self

    def needs(self) -> str:
        return "CREATE on the cluster or on the topic"

    def allowed(self, scope: RequestScope, fields: Fields) -> bool:
        return may_create_topic(scope, fields.get("name", "").strip() or "*")

    def form(self, fields: Fields) -> list[Flattenable]:
        filled = {"partitions": "1", **fields}
        return [
            _text_input("name", "name", filled, required="required"),
            _text_input("partitions", "partitions", filled, size="6"),
            _text_area("configs (one 'name=value' a line, Kafka's topic config names)",
                       "configs", filled, rows="4"),
        ]

    def _plan(self, fields: Fields) -> tuple[str, int, dict[str, str]]:
        name = fields.get("name", "").strip()
        if not name:
            raise ActionError("name: a topic needs a name")
        try:
            partitions = int(fields.get("partitions", "1"))
        except ValueError:
            raise ActionError("partitions: not a number") from None
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise ActionError(f"partitions: from 1 to {MAX_PARTITIONS}")
        configs = dict(_pairs(fields.get("configs", ""), "configs", "=", MAX_CONFIG_LINES))
        return name, partitions, configs

    def settle(self, fields: Fields) -> Fields:
        return fields

    def confirmation(self, fields: Fields) -> Deferred[list[Flattenable]]:
        try:
            name, partitions, configs = self._plan(fields)
        except ActionError as e:
            return defer.fail(e)
        return _done(
            tags.p(f"Create topic {name} with {partitions} partition(s)."),
            facts([(k, tags.code(v)) for k, v in sorted(configs.items())]) if configs
            else tags.p("No config overrides: the broker's defaults apply."),
        )

    def run(self, fields: Fields) -> Deferred[list[Flattenable]]:
        data = self._pages.data
        assert data is not None
        try:
            name, partitions, configs = self._plan(fields)
        except ActionError as e:
            return defer.fail(e)
        return data.create_topic(name, partitions, configs).addCallback(lambda _: [
            tags.p(f"Created topic {name} with {partitions} partition(s). "),
            tags.p(tags.a(f"Go to {name}", href=topic_href(name), id="see-it")),
        ])


class EditConfigs:
    """Edit a topic's config overrides (ALTER_CONFIGS on it): the form holds the
    overrides as they are; a line removed is an override deleted."""

    def __init__(self, pages: DataPages, topic: str, overrides: Mapping[str, str]) -> None:
        self._pages = pages
        self._topic = topic
        self._overrides = dict(overrides)
        self.title = f"Edit the configs of {topic}"
        self.back = (f"topic {topic}", topic_href(topic))
        self.right = TopicRight(Operation.ALTER_CONFIGS, topic)

    def form(self, fields: Fields) -> list[Flattenable]:
        current = "\n".join(f"{k}={v}" for k, v in sorted(self._overrides.items()))
        return [_text_area("overrides (one 'name=value' a line; remove a line to go back "
                           "to the broker's default)", "configs",
                           {"configs": fields.get("configs", current)}, rows="10")]

    def _plan(self, fields: Fields) -> tuple[dict[str, str], list[str]]:
        wanted = dict(_pairs(fields.get("configs", ""), "configs", "=", MAX_CONFIG_LINES))
        changed = {k: v for k, v in wanted.items() if self._overrides.get(k) != v}
        removed = sorted(set(self._overrides) - set(wanted))
        if not changed and not removed:
            raise ActionError("configs: nothing changed")
        return changed, removed

    def settle(self, fields: Fields) -> Fields:
        return fields

    def confirmation(self, fields: Fields) -> Deferred[list[Flattenable]]:
        try:
            changed, removed = self._plan(fields)
        except ActionError as e:
            return defer.fail(e)
        rows = [
            tags.tr(tags.td(k), tags.td(self._overrides.get(k, "(default)")), tags.td(v))
            for k, v in sorted(changed.items())
        ] + [tags.tr(tags.td(k), tags.td(self._overrides[k]), tags.td("(default)"))
             for k in removed]
        return _done(tags.p(f"Change these configs of {self._topic}:"),
                     table(["config", "now", "after"], rows, empty=""))

    def run(self, fields: Fields) -> Deferred[list[Flattenable]]:
        data = self._pages.data
        assert data is not None
        try:
            changed, removed = self._plan(fields)
        except ActionError as e:
            return defer.fail(e)
        return data.admin.alter_topic_configs(self._topic, changed, removed).addCallback(
            lambda _: [tags.p(f"Changed {len(changed) + len(removed)} config(s) of "
                              f"{self._topic}."),
                       tags.p(tags.a(f"Go to {self._topic}", href=topic_href(self._topic),
                                     id="see-it"))])


class DeleteTopic:
    """Delete a topic and its data (DELETE on it); the confirmation asks for the name."""

    def __init__(self, pages: DataPages, topic: str) -> None:
        self._pages = pages
        self._topic = topic
        self.title = f"Delete topic {topic}"
        self.back = (f"topic {topic}", topic_href(topic))
        self.right = TopicRight(Operation.DELETE, topic)

    def form(self, fields: Fields) -> list[Flattenable]:
        return [
            tags.p(f"Deleting {self._topic} removes its records for good."),
            _text_input("type the topic's name to confirm", "confirm_name", fields,
                        autocomplete="off"),
        ]

    def _check(self, fields: Fields) -> None:
        if fields.get("confirm_name") != self._topic:
            raise ActionError("confirm_name: type the topic's name exactly to delete it")

    def settle(self, fields: Fields) -> Fields:
        return fields

    def confirmation(self, fields: Fields) -> Deferred[list[Flattenable]]:
        try:
            self._check(fields)
        except ActionError as e:
            return defer.fail(e)
        return _done(tags.p(f"Delete topic {self._topic} and all its records?"))

    def run(self, fields: Fields) -> Deferred[list[Flattenable]]:
        data = self._pages.data
        assert data is not None
        try:
            self._check(fields)
        except ActionError as e:
            return defer.fail(e)
        return data.admin.delete_topic(self._topic).addCallback(
            lambda _: [tags.p(f"Deleted topic {self._topic}.")])


# -- groups ----------------------------------------------------------------------------


class ResetOffsets:
    """Reset a consumer group's offsets of one topic (READ on the group and the topic),
    only while the group is inactive, as ``brokerctl groups reset-offsets``."""

    def __init__(self, pages: DataPages, group_id: str, topics: Sequence[str]) -> None:
        self._pages = pages
        self._group = group_id
        self._topics = list(topics)
        self.title = f"Reset the offsets of group {group_id}"
        self.back = (f"group {group_id}", "/groups/" + url_quote(group_id))
        self.right: Right = self

    def needs(self) -> str:
        return f"READ on group {self._group} and on the topic"

    def allowed(self, scope: RequestScope, fields: Fields) -> bool:
        topic = fields.get("topic") or (self._topics[0] if self._topics else "")
        return permits(scope, Operation.READ, ResourceType.GROUP, self._group) and (
            not topic or permits(scope, Operation.READ, ResourceType.TOPIC, topic))

    def form(self, fields: Fields) -> list[Flattenable]:
        chosen_mode = fields.get("mode", "earliest")
        modes = [tags.option(m.value, value=m.value,
                             **({"selected": "selected"} if m.value == chosen_mode else {}))
                 for m in ResetMode]
        return [
            _text_input("topic", "topic", {"topic": self._topics[0] if self._topics else "",
                                           **fields}),
            tags.label("to", tags.select(name="mode")(*modes)),
            _text_input("offset, or time (ms or ISO 8601) for datetime", "value", fields),
            tags.p("The group must have no members (stop its consumers first).",
                   class_="note"),
        ]

    def _plan(self, fields: Fields) -> tuple[str, ResetSpec]:
        topic = fields.get("topic", "").strip()
        if not topic:
            raise ActionError("topic: which topic's offsets to reset")
        try:
            mode = ResetMode(fields.get("mode", ""))
        except ValueError:
            raise ActionError("mode: one of earliest, latest, offset, datetime") from None
        value = 0
        text = fields.get("value", "").strip()
        if mode is ResetMode.OFFSET:
            try:
                value = int(text)
            except ValueError:
                raise ActionError(f"value: {text!r} is not an offset") from None
        elif mode is ResetMode.DATETIME:
            try:
                value = parse_time(text)
            except BadQuery as e:
                raise ActionError(f"value: {e}") from None
        return topic, ResetSpec(mode, value)

    def _rows(self, rows: list[OffsetResetView]) -> Tag:
        return table(
            ["partition", "committed now", "after", "log start", "end"],
            [tags.tr(*(tags.td(str(x), class_="num") for x in (
                r.partition, "none" if r.previous_offset is None else r.previous_offset,
                r.new_offset, r.log_start_offset, r.high_watermark))) for r in rows],
            empty="No partitions.", numeric=(0, 1, 2, 3, 4),
        )

    def _reset(self, fields: Fields, dry_run: bool) -> Deferred[tuple[str, Tag]]:
        data = self._pages.data
        assert data is not None
        try:
            topic, spec = self._plan(fields)
        except ActionError as e:
            return defer.fail(e)
        d = data.admin.reset_offsets(self._group, topic, spec, dry_run=dry_run)
        return d.addCallback(lambda rows: (topic, self._rows(rows)))

    def settle(self, fields: Fields) -> Fields:
        return fields

    def confirmation(self, fields: Fields) -> Deferred[list[Flattenable]]:
        return self._reset(fields, True).addCallback(lambda found: [
            tags.p(f"Commit these offsets of {found[0]} for group {self._group}:"), found[1]])

    def run(self, fields: Fields) -> Deferred[list[Flattenable]]:
        return self._reset(fields, False).addCallback(lambda found: [
            tags.p(f"Committed these offsets of {found[0]} for group {self._group}:"),
            found[1]])


def url_quote(text: str) -> str:
    return quote(text, safe="")
