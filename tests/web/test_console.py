"""The web console rendered through Twisted's real HTTP stack (a ``Site`` on a
``StringTransport``) with a fake source of views and a ``task.Clock``: escaping of every
client-supplied text, 404s, quoting in URLs, the fragment the refresh script fetches,
headers (the rates from the sampler's history, the SVG charts' shape and the formats are
tested beside their modules: test_console_history.py, test_console_svg.py,
test_console_html.py)."""

from __future__ import annotations

import base64
import hashlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping

import attrs
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.resource import Resource
from twisted.web.server import Request, Site

from brokerd.operator.views import GroupOffsetView, GroupView, MemberView, PartitionView, TopicView
from brokerd.web.console import make_console
from brokerd.web.console_history import (
    SAMPLE_SECONDS,
    ConsoleSampler,
)
from brokerd.web.console_html import SCRIPT

SVG = "{http://www.w3.org/2000/svg}"
COMPACT = {"cleanup.policy": "compact"}
EVIL = '<script>alert("x")</script>&'
#: EVIL as the flattener writes it in text (quotes are inert there; in attributes they
#: are written as &quot;).
EVIL_ESCAPED = '&lt;script&gt;alert("x")&lt;/script&gt;&amp;'


@attrs.define
class FakeSource:
    """Views as the Inspector would build them; mutable so a test can move them."""

    topic_views: dict[str, TopicView] = attrs.Factory(dict)
    group_views: dict[str, GroupView] = attrs.Factory(dict)
    offline: dict[tuple[str, int], str] = attrs.Factory(dict)
    has_groups: bool = True
    #: Makes :meth:`topics` raise, as a bug in the inspector would.
    broken: bool = False

    def topics(self) -> list[TopicView]:
        if self.broken:
            raise RuntimeError("inspector broke")
        return [self.topic_views[n] for n in sorted(self.topic_views)]

    def topic(self, name: str) -> TopicView | None:
        return self.topic_views.get(name)

    def offline_partitions(self) -> dict[tuple[str, int], str]:
        return dict(self.offline)

    def groups(self) -> list[GroupView]:
        return [self.group_views[g] for g in sorted(self.group_views)] if self.has_groups else []

    def group(self, group_id: str) -> GroupView | None:
        return self.group_views.get(group_id) if self.has_groups else None


def topic(name: str, ends: tuple[int, ...], **configs: str) -> TopicView:
    parts = tuple(
        PartitionView(name, i, 2, end, end - 1, 1000 * end, 1 + i) for i, end in enumerate(ends)
    )
    return TopicView(name, parts, {"retention.ms": "604800000", **configs}, frozenset(configs))


def group(group_id: str, offsets: Mapping[tuple[str, int], tuple[int, int]]) -> GroupView:
    """A Stable group with one member; ``offsets``: (topic, partition) -> (committed, end)."""
    rows = tuple(
        GroupOffsetView(t, p, c, e, max(0, e - c), None) for (t, p), (c, e) in offsets.items()
    )
    member = MemberView("member-1", "client-1", "/127.0.0.1", None, tuple(sorted(offsets)))
    return GroupView(group_id, "Stable", "consumer", "range", (member,), rows)


def get(root: Resource, path: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    """One request through a real ``Site``: status, headers (lower-case names), body."""
    site = Site(root)
    protocol = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1234))
    assert protocol is not None
    transport = StringTransport()
    protocol.makeConnection(transport)
    protocol.dataReceived(
        f"{method} {path} HTTP/1.1\r\nHost: console\r\nConnection: close\r\n\r\n".encode()
    )
    raw = transport.value().decode("utf-8")
    head, _, body = raw.partition("\r\n\r\n")
    status_line, *header_lines = head.split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(": ")
        headers[name.lower()] = value
    if headers.get("transfer-encoding") == "chunked":
        body = _unchunk(body)
    return int(status_line.split()[1]), headers, body


def _unchunk(data: str) -> str:
    out = []
    while data:
        size_text, _, rest = data.partition("\r\n")
        length = int(size_text, 16)
        if length == 0:
            break
        out.append(rest[:length])
        data = rest[length + 2 :]
    return "".join(out)


class Text(Resource):
    """What the site adds beside the console (``/metrics``)."""

    isLeaf = True

    def __init__(self, text: bytes) -> None:
        super().__init__()
        self._text = text

    def render_GET(self, request: Request) -> bytes:
        return self._text


class ConsoleTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1_000_000)
        self.source = FakeSource()
        self.source.topic_views["orders"] = topic(
            "orders", (10, 20), **{"cleanup.policy": "compact"}
        )
        self.source.group_views["billing"] = group(
            "billing", {("orders", 0): (4, 10), ("orders", 1): (20, 20)}
        )
        self.sampler = ConsoleSampler(self.source, clock=self.clock)
        self.root = make_console(
            self.source, clock=self.clock, settings={"fsync": "always"}, sampler=self.sampler
        )

    def page(self, path: str, status: int = 200) -> str:
        code, headers, body = get(self.root, path)
        self.assertEqual(code, status, body[:500])
        self.assertTrue(headers["content-type"].startswith("text/html"))
        return body


class PagesTests(ConsoleTestCase):
    def test_overview_lists_topics_groups_and_broker(self) -> None:
        self.clock.advance(3725)
        body = self.page("/")
        self.assertIn('<a href="/topics/orders">orders</a>', body)
        self.assertIn('<a href="/groups/billing">billing</a>', body)
        # records: (10 - 2) + (20 - 2); size 30,000 B; lag 6.
        self.assertIn('<td class="num">26</td>', body)
        self.assertIn('<td class="num">29.3 KiB</td>', body)
        self.assertIn('<td class="num">6</td>', body)
        self.assertIn("<dt>uptime</dt><dd>1h 2m</dd>", body)
        self.assertIn("<div><dt>fsync</dt><dd><code>always</code></dd></div>", body)
        self.assertIn("none offline", body)
        self.assertIn("<script>" + SCRIPT + "</script>", body)

    def test_overview_shows_client_quotas_and_their_use(self) -> None:
        from brokerd.core.quotas.entities import DEFAULT, QuotaConfigs, QuotaEntity
        from brokerd.core.quotas.manager import QuotaManager

        quotas = QuotaManager(QuotaConfigs({
            QuotaEntity("alice", DEFAULT): {"producer_byte_rate": 1048576.0},
            QuotaEntity(None, "etl"): {"request_percentage": 12.5},
        }))
        quotas.record("producer_byte_rate", "alice", "app", 30_000_000, self.clock.seconds() * 1000)
        root = make_console(self.source, clock=self.clock, settings={}, quotas=quotas)
        code, _, body = get(root, "/")
        self.assertEqual(code, 200)
        self.assertIn("<td>user=alice,client-id=&lt;default&gt;</td><td>producer_byte_rate"
                      '</td><td class="num">1,048,576</td>', body)
        self.assertIn('<td>client-id=etl</td><td>request_percentage</td>'
                      '<td class="num">12.5</td>', body)
        # 30 MB over the 10 s assumed: 3,000,000 B/s, one throttled answer.
        self.assertIn('<td>producer_byte_rate</td><td>alice</td><td>app</td>'
                      '<td class="num">1,048,576</td><td class="num">3,000,000</td>'
                      '<td class="num">1</td>', body)
        self.assertNotIn("Client quotas", self.page("/"))  # a console without quotas

    def test_topic_page_partitions_and_marked_overrides(self) -> None:
        body = self.page("/topics/orders")
        self.assertIn("<h1>Topic orders</h1>", body)
        # Partition 1: log start 2, end 20, LSO 19, 18 records, 20,000 B, 2 segments.
        row = (
            '<tr><td class="num">1</td><td class="num">2</td><td class="num">20</td>'
            '<td class="num">19</td><td class="num">18</td><td class="num">19.5 KiB</td>'
            '<td class="num">2</td></tr>'
        )
        self.assertIn(row, body)
        self.assertRegex(
            body, r"<td>cleanup\.policy</td><td><code>compact</code></td><td><span class=\"tag\">"
        )
        self.assertRegex(body, r"<td>retention\.ms</td><td><code>604800000</code></td><td></td>")
        self.assertIn('<a href="/groups/billing">billing</a>', body)

    def test_offsets_are_not_called_records(self) -> None:
        # End minus start counts offsets: transaction markers, aborted records and what
        # compaction removed count too, so the column says offsets, and why, not records.
        for path in ("/", "/topics/orders"):
            body = self.page(path)
            self.assertRegex(
                body,
                r'<th class="num"><abbr title="[^"<]*transaction markers and aborted records'
                r'[^"<]*">offsets</abbr></th>',
            )
            self.assertNotIn(">records</th>", body)
        self.assertIn("<dt>offsets</dt><dd>26 <abbr", self.page("/topics/orders"))

    def test_group_page_members_offsets_and_lag_chart(self) -> None:
        body = self.page("/groups/billing")
        self.assertIn("<h1>Consumer group billing</h1>", body)
        self.assertIn("<td>client-1</td><td>/127.0.0.1</td>", body)
        self.assertIn('<a href="/topics/orders">orders</a> [0, 1]', body)
        self.assertIn(
            '<td class="num">0</td><td class="num">4</td><td class="num">10</td>'
            '<td class="num">6</td>',
            body,
        )
        self.assertIn('<svg class="chart"', body)
        self.assertIn("<li>no samples yet</li>", body)

    def test_offline_partition_shown(self) -> None:
        self.source.topic_views["broken"] = TopicView(
            "broken", (PartitionView("broken", 0, 0, 0, 0, 0, 0, "bad <segment>"),), {}
        )
        self.source.offline[("broken", 0)] = "bad <segment>"
        overview = self.page("/")
        self.assertIn('<span class="bad">1 offline</span>', overview)
        self.assertIn("<td>bad &lt;segment&gt;</td>", overview)
        self.assertIn('<tr class="offline">', overview)
        self.assertIn("offline: bad &lt;segment&gt;", self.page("/topics/broken"))

    def test_no_kafka_listener_no_groups(self) -> None:
        self.source.has_groups = False
        self.assertIn("The Kafka listener is off", self.page("/"))
        self.page("/groups/billing", 404)

    def test_fragment_is_the_body_with_a_newer_render_counter(self) -> None:
        full = self.page("/")
        first = int(re.findall(r'data-render="(\d+)"', full)[0])
        fragment = self.page("/?fragment=1")
        self.assertTrue(fragment.startswith('<p class="stamp" id="snapshot"'))
        self.assertNotIn("<html", fragment)
        self.assertNotIn("<script", fragment)
        self.assertEqual(int(re.findall(r'data-render="(\d+)"', fragment)[0]), first + 1)
        self.page("/favicon.ico", 404)
        again = self.page("/?fragment=1")
        self.assertEqual(int(re.findall(r'data-render="(\d+)"', again)[0]), first + 2)
        self.assertIn("orders", fragment)
        self.assertIn("<h1>Topic orders</h1>", self.page("/topics/orders?fragment=1"))

    def test_headers_and_script_hash(self) -> None:
        _, headers, _ = get(self.root, "/")
        digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
        csp = headers["content-security-policy"]
        self.assertIn(f"script-src 'sha256-{digest}'", csp)
        self.assertIn("default-src 'none'", csp)
        self.assertEqual(headers["cache-control"], "no-store")
        self.assertEqual(headers["x-content-type-options"], "nosniff")

    def test_read_only(self) -> None:
        for method in ("POST", "PUT", "DELETE"):
            for path in ("/", "/topics/orders", "/groups/billing"):
                status, _, _ = get(self.root, path, method)
                self.assertEqual(status, 405, (method, path))

    def test_head(self) -> None:
        status, headers, body = get(self.root, "/groups/billing", "HEAD")
        self.assertEqual((status, body), (200, ""))
        self.assertTrue(headers["content-type"].startswith("text/html"))

    def test_list_paths_redirect_to_the_overview(self) -> None:
        for path, target in (("/topics", "/#topics"), ("/groups/", "/#groups")):
            status, headers, _ = get(self.root, path)
            self.assertEqual((status, headers["location"]), (303, target))

    def test_root_accepts_children_from_the_site(self) -> None:
        self.root.putChild(b"metrics", Text(b"brokerd_up 1\n"))
        status, _, body = get(self.root, "/metrics")
        self.assertEqual((status, body), (200, "brokerd_up 1\n"))
        self.page("/")
        self.page("/topics/orders")


class NotFoundTests(ConsoleTestCase):
    def test_unknown_topic_group_and_page(self) -> None:
        for path, words in (
            ("/topics/nosuch", "no topic <code>nosuch</code>"),
            ("/groups/nosuch", "no consumer group <code>nosuch</code>"),
            ("/nosuch", "no page <code>/nosuch</code>"),
            ("/topics/orders/extra?x=1", "no page <code>/topics/orders/extra</code>"),
            ("/groups/billing/x/y", "no page"),
            ("/groups/%FF%FE", "no consumer group"),
        ):
            body = self.page(path, 404)
            self.assertIn("<title>Not found - brokerd</title>", body)
            self.assertIn(words, body)

    def test_not_found_escapes_the_name(self) -> None:
        body = self.page("/groups/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E", 404)
        self.assertIn("&lt;img src=x onerror=alert(1)&gt;", body)
        self.assertNotIn("<img", body)

    def test_topic_deleted_between_refreshes(self) -> None:
        self.page("/topics/orders?fragment=1")
        del self.source.topic_views["orders"]
        self.assertIn("no topic", self.page("/topics/orders?fragment=1", 404))


class EscapingTests(ConsoleTestCase):
    def setUp(self) -> None:
        super().setUp()
        evil_member = MemberView(EVIL, EVIL, EVIL, EVIL, (("orders", 0),))
        offsets = (GroupOffsetView("orders", 0, 1, 10, 9, EVIL),)
        self.source.group_views[EVIL] = GroupView(EVIL, EVIL, EVIL, EVIL, (evil_member,), offsets)
        self.source.topic_views["orders"] = topic("orders", (10,), **{"x.evil": EVIL})
        self.source.offline[("orders", 7)] = EVIL
        self.sampler.sample()
        self.clock.advance(SAMPLE_SECONDS)
        self.sampler.sample()

    def assertClean(self, body: str) -> None:
        self.assertNotIn("<script>alert", body)
        self.assertEqual(body.count("<script"), body.count("<script>(function()"))
        self.assertIn(EVIL_ESCAPED, body)

    def test_every_page_escapes_client_text(self) -> None:
        quoted = "%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E%26"
        for path in ("/", "/topics/orders", f"/groups/{quoted}", f"/groups/{quoted}?fragment=1"):
            self.assertClean(self.page(path))

    def test_links_quote_group_ids(self) -> None:
        self.source.group_views["a/b c?d#e"] = group("a/b c?d#e", {("orders", 0): (1, 10)})
        body = self.page("/")
        self.assertIn('<a href="/groups/a%2Fb%20c%3Fd%23e">a/b c?d#e</a>', body)
        self.assertIn("<h1>Consumer group a/b c?d#e</h1>", self.page("/groups/a%2Fb%20c%3Fd%23e"))

    def test_svg_labels_escaped_and_parse(self) -> None:
        body = self.page(f"/groups/{'%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E%26'}")
        titles = []
        for svg in re.findall(r"<svg .*?</svg>", body):
            title = ET.fromstring(svg).find(f"{SVG}title")
            assert title is not None and title.text is not None
            titles.append(title.text)
        # The lag chart names the group; the partition's bar its topic and partition.
        self.assertEqual(titles, [f"lag of {EVIL}, records", "lag of orders 0"])
        overview = self.page("/")
        spark = re.findall(r"<svg .*?</svg>", overview.split('id="groups"')[1])[0]
        self.assertEqual(ET.fromstring(spark).attrib["aria-label"], f"lag of {EVIL}")
