# -*- test-case-name: tests.web.test_data_pages -*-
"""``GET /topics/NAME/messages``: the message browser's page, a query form over a table
of one partition's records (offset, timestamp, key, value, headers).

The query and the scan are :mod:`brokerd.web.browse`'s; this module is the HTTP side
(status codes: 400 for a query that does not parse, 403 without READ on the topic, 404
for a topic the principal cannot see) and the markup. What it does not do: change
anything (the produce form is :mod:`brokerd.web.actions`'s).
"""

from __future__ import annotations

import datetime

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request
from twisted.web.template import Tag, tags

from brokerd.errors import BrokerError
from brokerd.security.acl import Operation, ResourceType
from brokerd.storage.types import Record
from brokerd.web import browse
from brokerd.web.browse import BadQuery, BrowseQuery, SchemaNames, ShowAs, Shown, StartAt
from brokerd.web.markup import (
    Flattenable,
    facts,
    method_not_allowed,
    respond,
    table,
    topic_href,
    url,
)
from brokerd.web.permits import DataPages, permits

__all__ = ["MessagesPage", "shown_cell"]

OK, BAD_REQUEST, FORBIDDEN, NOT_FOUND = 200, 400, 403, 404

_log = Logger()


def _when(timestamp_ms: int) -> str:
    if timestamp_ms < 0:
        return "none"
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{timestamp_ms % 1000:03d}Z"


def shown_cell(value: Shown) -> Tag:
    """A table cell of a shown key or value: the text, and notes on how it was shown."""
    parts: list[Flattenable] = [tags.pre(value.text)]
    if value.kind not in ("text", "null"):
        parts.append(tags.span(value.kind, class_="tag"))
    if value.note:
        parts.append(tags.span(" " + value.note, class_="note"))
    if value.cut:
        parts.append(tags.span(" (cut: only the start is shown)", class_="cut"))
    return tags.td(*parts, class_=f"value {value.kind}")


def _headers_cell(record: Record) -> Tag:
    if not record.headers:
        return tags.td("")
    rows: list[Flattenable] = []
    for name, value in record.headers:
        seen = browse.shown(value, ShowAs.AUTO, None)
        rows.append(tags.div(tags.code(name[: browse.MAX_SHOWN_CHARS]), ": ", seen.text,
                             " (cut)" if seen.cut else ""))
    return tags.td(*rows, class_="headers")


def _row(record: Record, partition: int, query: BrowseQuery, names: SchemaNames | None) -> Tag:
    return tags.tr(
        tags.td(str(partition), class_="num"),
        tags.td(str(record.offset), class_="num"),
        tags.td(_when(record.timestamp)),
        shown_cell(browse.shown(record.key, query.show, names)),
        shown_cell(browse.shown(record.value, query.show, names)),
        _headers_cell(record),
        class_="record",
    )


def _field(label: str, name: str, value: str, **extra: str) -> Tag:
    return tags.label(label, tags.input(name=name, value=value, **extra))


def query_form(topic: str, partitions: int, query: BrowseQuery) -> Tag:
    """The browser's query, as a GET form that reloads the page."""
    start = query.start
    offset = (
        str(start.value) if start.at is StartAt.OFFSET
        else "" if start.at is StartAt.TIMESTAMP else start.at.value
    )
    partition_choice = tags.select(name="partition")(*(
        tags.option(str(p), value=str(p), **({"selected": "selected"} if p == query.partition
                                                else {}))
        for p in range(partitions)
    ))
    show_choice = tags.select(name="show")(*(
        tags.option(s.value, value=s.value, **({"selected": "selected"} if s is query.show
                                                 else {}))
        for s in ShowAs
    ))
    timestamp = str(start.value) if start.at is StartAt.TIMESTAMP else ""
    return tags.form(method="get", action=topic_href(topic, "messages"), class_="inline")(
        tags.label("partition", partition_choice),
        _field("offset (number, earliest, latest)", "offset", offset, size="10"),
        _field("or time (ms or ISO 8601)", "timestamp", timestamp, size="22"),
        _field("limit", "limit", str(query.limit), size="5"),
        _field("key contains", "key", query.key),
        _field("value contains", "value", query.value),
        _field("header name", "header", query.header, size="12"),
        _field("header value contains", "header_value", query.header_value),
        tags.label("show as", show_choice),
        tags.button("Browse", type="submit"),
    )


def _summary(topic: str, query: BrowseQuery, found: browse.Scan) -> list[Flattenable]:
    o = found.offsets
    out: list[Flattenable] = [
        facts([
            ("partition", str(query.partition)),
            ("log start / end", f"{o.log_start_offset} / {o.high_watermark}"
                                + (f" (last stable {o.last_stable_offset})"
                                   if o.last_stable_offset != o.high_watermark else "")),
            ("scanned", f"offsets {found.first_offset} to {found.next_offset - 1}: "
                        f"{found.examined_records} records, {found.examined_bytes} bytes"
                        if found.examined_records else "nothing"),
            ("shown", f"{len(found.records)} record(s)"),
            ("stopped at", found.stop.value),
        ]),
    ]
    more = url(topic_href(topic, "messages"), query.arguments(offset=str(found.next_offset)))
    if found.bounded:
        out.append(tags.p(
            f"The scan stopped at {found.stop.value} before finding {query.limit} "
            "matching records. ",
            tags.a(f"Continue from offset {found.next_offset}", href=more, id="continue"),
            class_="banner",
        ))
    links: list[Flattenable] = []
    if found.first_offset > o.log_start_offset and not query.filtered:
        # Without filters a page of ``limit`` offsets back is the previous page (gaps
        # of markers or compaction make it a little shorter).
        earlier = max(o.log_start_offset, found.first_offset - query.limit)
        links.append(tags.a(f"Earlier records from offset {earlier}", id="earlier", href=url(
            topic_href(topic, "messages"), query.arguments(offset=str(earlier)))))
    if found.stop is browse.ScanStop.LIMIT:
        links += [" \u00b7 " if links else "",
                  tags.a(f"Next records from offset {found.next_offset}", href=more, id="next")]
    if links:
        out.append(tags.p(*links))
    return out


class MessagesPage(Resource):
    """``/topics/NAME/messages`` (GET, HEAD)."""

    isLeaf = True

    def __init__(self, pages: DataPages, topic: str) -> None:
        super().__init__()
        self._pages = pages
        self._topic = topic

    def render(self, request: Request) -> object:
        if request.method not in (b"GET", b"HEAD"):
            return method_not_allowed(request, b"GET, HEAD")
        return super().render(request)

    def render_GET(self, request: Request) -> object:
        pages, name = self._pages, self._topic
        scope = pages.scope_of(request)
        view = scope.source(pages.source).topic(name)
        title = f"Messages of {name}"
        if view is None or pages.data is None or request.postpath not in ([], [b""]):
            return respond(request, NOT_FOUND, "Not found", tags.h1("Not found"),
                           tags.p(f"There is no topic {name!r}."))
        back = tags.p(tags.a(f"\u2190 topic {name}", href=topic_href(name)), " \u00b7 ",
                      tags.a("produce a record", href=topic_href(name, "produce")))
        if not permits(scope, Operation.READ, ResourceType.TOPIC, name):
            return respond(request, FORBIDDEN, title, back, tags.h1(title), tags.p(
                "Reading this topic's records needs READ on it.", class_="banner error"))
        partitions = len(view.partitions)
        try:
            query = browse.parse_query(request.args, partitions)
        except BadQuery as e:
            return respond(request, BAD_REQUEST, title, back, tags.h1(title),
                           query_form(name, partitions, BrowseQuery()),
                           tags.p(f"Bad query: {e}", class_="banner error", id="error"))
        names = SchemaNames(pages.lookup) if pages.lookup is not None else None
        d = defer.Deferred.fromCoroutine(
            browse.scan(pages.data, pages.clock, name, query, names,
                        max_bytes=pages.scan_bytes, max_seconds=pages.scan_seconds)
        )

        def found(result: browse.Scan) -> None:
            rows = [_row(r, query.partition, query, names) for r in result.records]
            respond(
                request, OK, title, back, tags.h1(title),
                query_form(name, partitions, query),
                *_summary(name, query, result),
                table(["partition", "offset", "timestamp", "key", "value", "headers"], rows,
                      empty="No records match.", numeric=(0, 1)),
            )

        def failed(failure: Failure) -> None:
            failure.trap(BrokerError)
            respond(request, BAD_REQUEST, title, back, tags.h1(title),
                    query_form(name, partitions, query),
                    tags.p(f"The read failed: {failure.value}", class_="banner error",
                           id="error"))

        def broken(failure: Failure) -> None:
            if failure.check(defer.CancelledError):
                return  # the client went away
            _log.failure("browsing {topic}", failure, topic=name)
            respond(request, 500, title, back, tags.p("The page failed; the broker's log "
                                                      "says why.", class_="banner error"))

        d.addCallback(found).addErrback(failed).addErrback(broken)
        # A client that goes away stops its scan at the next read.
        request.notifyFinish().addErrback(lambda _: d.cancel())
        return NOT_DONE_YET
