"""The message browser's HTTP side over a fake core: 404 for a topic the request cannot
see, 403 without READ, 400 for a bad query or a failed read, and the records shown inert
with the links to page on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.template import flattenString
from twisted.web.test.requesthelper import DummyRequest

from brokerd.errors import OffsetOutOfRange
from brokerd.operator.visibility import Visibility
from brokerd.security.acl import Operation, ResourceType
from brokerd.storage.types import LogRead, PartitionOffsets, Record
from brokerd.web.browse import BrowseQuery, Shown, Start, StartAt
from brokerd.web.browse_page import MessagesPage, query_form, shown_cell
from brokerd.web.csrf import CsrfGuard
from brokerd.web.permits import DataPages
from brokerd.web.scope import EVERYTHING, RequestScope


class Data:
    """The two reads the browser makes, over one partition of decoded records."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.log_start = 0
        #: Where reads find the log start (moved by a DeleteRecords after the offsets).
        self.read_start = 0
        self.reads = self

    def offsets(self, topic: str, partition: int) -> Deferred[PartitionOffsets]:
        end = len(self.records)
        return succeed(PartitionOffsets(self.log_start, end, end))

    def read(self, topic: str, partition: int, offset: int, max_bytes: int) -> Deferred[LogRead]:
        if offset < self.read_start:
            return fail(OffsetOutOfRange(offset, self.read_start, len(self.records)))
        end = len(self.records)
        return succeed(LogRead(b"", end, self.log_start, end,
                               decoded=tuple(self.records[offset:])))


class Source:
    """The views' one question the page asks: which partitions a topic has."""

    def topic(self, name: str) -> Any:
        return SimpleNamespace(name=name, partitions=[0, 1]) if name == "t" else None


class Request(DummyRequest):
    """A DummyRequest that, like twisted.web's Request, answers ``notifyFinish`` after
    the page already finished (the fake core answers at once)."""

    def notifyFinish(self) -> Deferred[None]:
        if self.finished:
            return succeed(None)
        return super().notifyFinish()


def flat(tag: Any) -> str:
    out: list[bytes] = []
    flattenString(None, tag).addCallback(out.append)
    return out[0].decode()


class MessagesPageTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.data = Data([
            Record(i, 1_700_000_000_000 + i, b"k%d" % i, b"<script>%d</script>" % i)
            for i in range(3)
        ])
        self.scope = EVERYTHING

    def get(self, topic: str = "t", **args: str) -> Request:
        pages = DataPages(
            self.data,  # type: ignore[arg-type]
            None, Clock(), lambda request: self.scope, Source(),  # type: ignore[arg-type]
            CsrfGuard(),
        )
        request = Request([])
        request.method = b"GET"
        request.args = {k.encode(): [v.encode()] for k, v in args.items()}
        MessagesPage(pages, topic).render(request)
        return request

    def html(self, request: Request) -> str:
        return b"".join(request.written).decode()

    def test_the_records_are_shown_inert_with_a_link_to_the_next_page(self) -> None:
        request = self.get(offset="earliest", limit="2")
        self.assertEqual(request.responseCode, 200)
        html = self.html(request)
        self.assertIn("&lt;script&gt;0&lt;/script&gt;", html)
        self.assertNotIn("<script>", html)
        self.assertIn("2023-11-14 22:13:20.000Z", html)
        self.assertIn('id="next"', html)
        self.assertIn("offset=2", html)

    def test_an_unknown_topic_is_not_found_and_a_bad_query_is_400(self) -> None:
        self.assertEqual(self.get("missing").responseCode, 404)
        bad = self.get(partition="9")
        self.assertEqual(bad.responseCode, 400)
        self.assertIn('id="error"', self.html(bad))

    def test_a_failed_read_is_400_naming_the_failure(self) -> None:
        self.data.read_start = 2
        request = self.get(offset="0")
        self.assertEqual(request.responseCode, 400)
        self.assertIn("The read failed", self.html(request))

    def test_reading_needs_read_on_the_topic(self) -> None:
        seeing = (Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS)
        describe_only = SimpleNamespace(
            authorize=lambda principal, host, op, rtype, name: (
                op in seeing and rtype is ResourceType.TOPIC
            )
        )
        self.scope = RequestScope(Visibility(describe_only, "User:eve", "h"), "User:eve")  # type: ignore[arg-type]
        request = self.get()
        self.assertEqual(request.responseCode, 403)
        self.assertIn("needs READ", self.html(request))

    def test_other_methods_are_refused(self) -> None:
        request = Request([])
        request.method = b"POST"
        pages = DataPages(None, None, Clock(), lambda r: EVERYTHING, Source(),  # type: ignore[arg-type]
                          CsrfGuard())
        MessagesPage(pages, "t").render(request)
        self.assertEqual(request.responseCode, 405)


def test_the_query_form_keeps_the_query() -> None:
    query = BrowseQuery(partition=1, start=Start(StartAt.TIMESTAMP, 5), key="<k>")
    html = flat(query_form("a/b", 2, query))
    assert 'action="/topics/a%2Fb/messages"' in html
    assert '<option value="1" selected="selected">1</option>' in html
    assert 'name="timestamp" value="5"' in html and 'name="offset" value=""' in html
    assert 'name="key" value="&lt;k&gt;"' in html


def test_a_shown_cell_notes_its_kind_and_cut() -> None:
    assert flat(shown_cell(Shown("text", "abc"))) == '<td class="value text"><pre>abc</pre></td>'
    html = flat(shown_cell(Shown("hex", "00ff", note="not UTF-8", cut=True)))
    assert '<span class="tag">hex</span>' in html
    assert "not UTF-8" in html and "(cut: only the start is shown)" in html
