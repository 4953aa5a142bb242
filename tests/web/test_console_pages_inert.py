"""Client-chosen names on the live console pages (overview, topic, consumer group, share
group, 404), through a real ``Site``: a topic, group, member, client id, host, config
value and commit metadata made of ``<script>``, quotes, ``&`` and an ``<img onerror>``
show as text and never become markup; and the console's direct walk of a page's tag tree
writes what Twisted's flattener writes."""

from __future__ import annotations

from collections.abc import Callable
from html.parser import HTMLParser
from typing import cast
from urllib.parse import quote

import attrs
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.template import Flattenable, Tag, flattenString, tags

from brokerd.operator.share_groups import ShareGroupInspector, ShareGroupView, SharePartitionView
from brokerd.operator.views import SHARE_GROUP, GroupOffsetView, GroupView, MemberView
from brokerd.web import console_pages as pages
from brokerd.web.console import make_console
from brokerd.web.console_history import SAMPLE_SECONDS, ConsoleSampler
from brokerd.web.console_html import SCRIPT, document, flat

from tests.web.test_console import FakeSource, get, topic

#: Breaks out of an attribute (either quote), opens two elements that would run script,
#: and carries an entity and a bare ampersand.
HOSTILE = "\"'><img src=x onerror=alert(1)><script>alert(\"x\")</script>&amp;&"
Q = quote(HOSTILE, safe="")
SHARE = HOSTILE + " share"
SHARE_AS_GROUP = HOSTILE + " shared"


@attrs.define
class FakeShares:
    """The one thing the console asks of the share groups' inspector."""

    views: list[ShareGroupView]

    def groups(self) -> list[ShareGroupView]:
        return list(self.views)


class Parsed(HTMLParser):
    """What a browser's parser makes of a page: its elements, attributes and texts."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[str] = []
        self.attributes: list[tuple[str, str]] = []
        self.texts: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(tag)
        self.attributes.extend((name, value or "") for name, value in attrs)
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.texts).append(data)


def hostile_source() -> FakeSource:
    source = FakeSource()
    member = MemberView(HOSTILE, HOSTILE, HOSTILE, HOSTILE, ((HOSTILE, 0),))
    offsets = (GroupOffsetView(HOSTILE, 0, 1, 10, 9, HOSTILE),)
    source.topic_views[HOSTILE] = topic(HOSTILE, (10,), **{"x.hostile": HOSTILE})
    source.group_views[HOSTILE] = GroupView(
        HOSTILE, HOSTILE, HOSTILE, HOSTILE, (member,), offsets
    )
    source.group_views[SHARE_AS_GROUP] = GroupView(
        SHARE_AS_GROUP, "Stable", members=(member,), group_type=SHARE_GROUP,
        share_partitions=(share_partition(),),
    )
    source.offline[(HOSTILE, 3)] = HOSTILE
    return source


def share_partition() -> SharePartitionView:
    return SharePartitionView(HOSTILE, 0, 2, 10, 8, 1, 1, 7, 0, 1, 0)


def share_view() -> ShareGroupView:
    member = MemberView(HOSTILE, HOSTILE, HOSTILE, None, ((HOSTILE, 0),))
    return ShareGroupView(SHARE, (share_partition(),), "Stable", (member,))


class InertTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1_000_000)
        self.source = hostile_source()
        sampler = ConsoleSampler(self.source, clock=self.clock)
        sampler.sample()
        self.clock.advance(SAMPLE_SECONDS)
        sampler.sample()
        self.sampler = sampler
        shares = cast(ShareGroupInspector, FakeShares([share_view()]))
        self.root = make_console(
            self.source, clock=self.clock, settings={HOSTILE: HOSTILE}, sampler=sampler,
            shares=shares,
        )

    def assertInert(self, path: str, status: int = 200) -> Parsed:
        code, _, body = get(self.root, path)
        self.assertEqual(code, status, body[:300])
        page = Parsed(body)
        whole = "fragment=1" not in path
        # The page's own script only, and nothing else that runs or loads.
        self.assertEqual(page.elements.count("script"), 1 if whole else 0)
        self.assertEqual(page.scripts, [SCRIPT] if whole else [])
        self.assertNotIn("img", page.elements)
        self.assertEqual([n for n, _ in page.attributes if n.startswith("on")], [])
        # ... and the names are there, as text, whole.
        self.assertTrue(any(HOSTILE in text for text in page.texts), path)
        return page

    def test_overview(self) -> None:
        for path in ("/", "/?fragment=1"):
            page = self.assertInert(path)
            hrefs = {v for n, v in page.attributes if n == "href"}
            self.assertLessEqual(
                {f"/topics/{Q}", f"/groups/{Q}", f"/share-groups/{quote(SHARE, safe='')}"},
                hrefs,
            )
            labels = {v for n, v in page.attributes if n == "aria-label"}
            self.assertLessEqual({f"produce rate of {HOSTILE}", f"lag of {HOSTILE}"}, labels)

    def test_topic_page(self) -> None:
        for path in (f"/topics/{Q}", f"/topics/{Q}?fragment=1"):
            page = self.assertInert(path)
            self.assertIn(f"Topic {HOSTILE}", page.texts)
            self.assertIn(HOSTILE, page.texts)  # the config value, in its <code>

    def test_consumer_group_page(self) -> None:
        for path in (f"/groups/{Q}", f"/groups/{Q}?fragment=1"):
            page = self.assertInert(path)
            self.assertIn(f"Consumer group {HOSTILE}", page.texts)
            # Member id, client id, host, instance id and the commit's metadata.
            self.assertGreaterEqual(page.texts.count(HOSTILE), 5)
            titles = {v for n, v in page.attributes if n == "aria-label"}
            self.assertIn(f"lag of {HOSTILE}, records", titles)

    def test_share_group_pages(self) -> None:
        for path in (
            f"/share-groups/{quote(SHARE, safe='')}",
            f"/share-groups/{quote(SHARE, safe='')}?fragment=1",
            f"/groups/{quote(SHARE_AS_GROUP, safe='')}",
        ):
            page = self.assertInert(path)
            self.assertTrue(any(t.startswith("Share group " + HOSTILE) for t in page.texts))
            self.assertGreaterEqual(page.texts.count(HOSTILE), 3)

    def test_not_found(self) -> None:
        missing = HOSTILE + "?"
        for path in (f"/topics/{quote(missing, safe='')}", f"/groups/{Q}x"):
            self.assertInert(path, 404)


class WalkTests(SynchronousTestCase):
    """The console writes its trees itself (faster than Twisted's trampolining
    flattener); what it writes must be Twisted's output, byte for byte."""

    def twisted(self, tree: Flattenable) -> bytes:
        return self.successResultOf(flattenString(None, tree))

    def test_every_page_as_twisted_writes_it(self) -> None:
        source = hostile_source()
        moment = pages.Moment(1_000_000.0, 3)
        group = source.group_views[HOSTILE]
        trees: list[Flattenable] = [
            pages.overview(
                source, moment, settings={HOSTILE: HOSTILE}, started=0.0,
                share_groups=[share_view()],
            ),
            pages.topic_page(source.topic_views[HOSTILE], [group], moment),
            pages.group_page(group, moment),
            pages.group_page(source.group_views[SHARE_AS_GROUP], moment),
            pages.share_group_page(share_view(), moment),
            pages.not_found("topic", HOSTILE),
        ]
        for tree in trees:
            self.assertEqual(flat(tree), self.twisted(tree))
            whole = document(HOSTILE, tree)
            self.assertEqual(flat(whole), self.twisted(whole))

    def test_what_it_does_not_walk_goes_to_twisted(self) -> None:
        # Bytes, a nameless tag, a void element and a generator: the last takes the
        # flattener's path, the rest the walk; both write the same.
        trees: list[Callable[[], Tag]] = [
            lambda: tags.p(b"raw <bytes>"),
            lambda: Tag("")("a", tags.br(), "b"),
            lambda: tags.ul(tags.li(str(i)) for i in range(3)),
        ]
        for tree in trees:
            self.assertEqual(flat(tree()), self.twisted(tree()))
