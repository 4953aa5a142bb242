"""Share groups as operators see them, from a real share engine and fake logs: the views'
figures (backlog, in flight, redeliveries, archived), the /metrics series, and the
console's list and page (escaping, 404s, what an ACL-scoped request sees)."""

from __future__ import annotations

import attrs
from prometheus_client import CollectorRegistry
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.share.engine import ShareEngine
from brokerd.core.share.partition import AckBatch, LogSpan
from brokerd.core.share.states import AckType
from brokerd.metrics.collectors import ShareGroupsCollector
from brokerd.operator.share_groups import ShareGroupInspector
from brokerd.operator.visibility import Visibility
from brokerd.security.acl import (
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from brokerd.web.console import make_console
from brokerd.web.scope import RequestScope

from tests.metrics.test_collectors import samples
from tests.web.test_console import FakeSource, get

NASTY = "<b>&x"


@attrs.define
class FakeLog:
    high_watermark: int
    last_stable_offset: int


def engine_with_records() -> tuple[ShareEngine, dict[tuple[str, int], FakeLog]]:
    """Group ``workers`` on jobs/0: 10 records, 0-1 accepted, 2 rejected, 3 released and
    acquired again (a redelivery), 4-5 acquired; the log holds 12 (LSO 11), and the group
    reads committed records."""
    engine = ShareEngine()
    engine.set_overrides("workers", {"share.isolation.level": "read_committed"})
    engine.ensure("workers", "jobs", 0, log_start=0, log_end=0)
    engine.acquire("workers", "jobs", 0, "a", [LogSpan(0, 9)], 6, 0.0)
    engine.acknowledge("workers", "jobs", 0, "a", [
        AckBatch(0, 1, (AckType.ACCEPT,)), AckBatch(2, 2, (AckType.REJECT,)),
        AckBatch(3, 3, (AckType.RELEASE,)),
    ])
    engine.acquire("workers", "jobs", 0, "b", [LogSpan(3, 9)], 1, 0.0)
    engine.ensure(NASTY, "jobs", 1, log_start=0, log_end=0)
    engine.acquire(NASTY, "jobs", 1, "c", [LogSpan(0, 0)], 1, 0.0)
    logs = {("jobs", 0): FakeLog(12, 11), ("jobs", 1): FakeLog(1, 1)}
    return engine, logs


class ViewTests(SynchronousTestCase):
    def setUp(self) -> None:
        engine, logs = engine_with_records()
        self.inspector = ShareGroupInspector(engine, lambda: logs)  # type: ignore[arg-type,return-value]

    def test_figures_per_partition(self) -> None:
        view = self.inspector.group("workers")
        assert view is not None
        (p,) = view.partitions
        # read_committed: the log's end is the LSO, 11; done: 0, 1, 2.
        self.assertEqual(
            (p.start_offset, p.end_offset, p.backlog, p.in_flight, p.acquired, p.available,
             p.redelivered, p.redelivered_total, p.archived),
            (3, 11, 8, 3, 3, 0, 1, 1, 1),
        )
        self.assertEqual(view.to_json()["backlog"], 8)
        self.assertEqual(view.summary(), {
            "group_id": "workers", "partitions": 1, "backlog": 8, "in_flight": 3,
            "redelivered_total": 1, "archived": 1,
        })

    def test_the_default_isolation_reads_to_the_high_watermark(self) -> None:
        engine, logs = engine_with_records()
        engine.set_overrides("workers", {})
        view = ShareGroupInspector(engine, lambda: logs).group("workers")  # type: ignore[arg-type,return-value]
        assert view is not None
        (p,) = view.partitions
        self.assertEqual((p.end_offset, p.backlog), (12, 9))

    def test_unknown_groups_and_listing(self) -> None:
        self.assertIsNone(self.inspector.group("nobody"))
        self.assertEqual(self.inspector.group_ids(), [NASTY, "workers"])


class MetricsTests(SynchronousTestCase):
    def test_series_per_group_topic_partition(self) -> None:
        engine, logs = engine_with_records()
        registry = CollectorRegistry()
        registry.register(ShareGroupsCollector(ShareGroupInspector(engine, lambda: logs)))  # type: ignore[arg-type,return-value]
        got = samples(registry)
        key = (("group", "workers"), ("partition", "0"), ("topic", "jobs"))
        self.assertEqual(got[("brokerd_share_group_backlog", key)], 8)
        self.assertEqual(got[("brokerd_share_group_in_flight", key)], 3)
        self.assertEqual(got[("brokerd_share_group_acquired", key)], 3)
        self.assertEqual(got[("brokerd_share_group_redelivered_total", key)], 1)
        self.assertEqual(got[("brokerd_share_group_archived_total", key)], 1)
        self.assertEqual(got[("brokerd_share_groups", ())], 2)


class ConsoleTests(SynchronousTestCase):
    def setUp(self) -> None:
        engine, logs = engine_with_records()
        self.shares = ShareGroupInspector(engine, lambda: logs)  # type: ignore[arg-type,return-value]
        self.clock = Clock()

    def root(self, **kw: object) -> object:
        return make_console(FakeSource(), clock=self.clock, settings={},
                            shares=self.shares, **kw)  # type: ignore[arg-type]

    def test_overview_lists_share_groups_escaped(self) -> None:
        code, _, body = get(self.root(), "/")  # type: ignore[arg-type]
        self.assertEqual(code, 200)
        self.assertIn('<section id="share-groups"><h2>Share groups</h2>', body)
        self.assertIn('<a href="/share-groups/workers">workers</a>', body)
        self.assertIn('<a href="/share-groups/%3Cb%3E%26x">&lt;b&gt;&amp;x</a>', body)
        self.assertNotIn("<b>&x", body)

    def test_share_group_page_and_not_found(self) -> None:
        code, _, body = get(self.root(), "/share-groups/workers")  # type: ignore[arg-type]
        self.assertEqual(code, 200)
        self.assertIn("<h1>Share group workers</h1>", body)
        self.assertIn('<a href="/topics/jobs">jobs</a>', body)
        self.assertIn("<dt>backlog</dt><dd>8</dd>", body)
        code, _, body = get(self.root(), "/share-groups/nobody")  # type: ignore[arg-type]
        self.assertEqual(code, 404)
        code, headers, _ = get(self.root(), "/share-groups")  # type: ignore[arg-type]
        self.assertEqual((code, headers["location"]), (303, "/#share-groups"))

    def test_without_share_groups_the_section_is_absent(self) -> None:
        root = make_console(FakeSource(), clock=self.clock, settings={})
        _, _, body = get(root, "/")
        self.assertNotIn("Share groups", body)

    def test_a_scoped_request_sees_only_groups_it_may_describe(self) -> None:
        authorizer = AclAuthorizer([
            AclBinding(ResourceType.GROUP, "workers", PatternType.LITERAL, "User:alice", "*",
                       Operation.DESCRIBE, Permission.ALLOW),
        ], frozenset())
        scope = RequestScope(Visibility(authorizer, "User:alice", "127.0.0.1"), "User:alice")
        root = self.root(scope_of=lambda request: scope)
        _, _, body = get(root, "/")  # type: ignore[arg-type]
        self.assertIn("/share-groups/workers", body)
        self.assertNotIn("%3Cb%3E", body)
        # The group is visible, its topic is not: no partitions shown.
        _, _, page = get(root, "/share-groups/workers")  # type: ignore[arg-type]
        self.assertNotIn('href="/topics/jobs"', page)
        code, _, _ = get(root, "/share-groups/%3Cb%3E%26x")  # type: ignore[arg-type]
        self.assertEqual(code, 404)
