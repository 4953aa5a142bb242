"""The scrape-time collectors of the metrics package, with fakes (the request observers,
the registry, per-topic traffic, the write statistics and the /metrics resource are
tested beside their modules: tests/metrics/test_live.py, tests/metrics/test_registry.py,
tests/metrics/test_traffic.py, tests/core/test_write_stats.py,
tests/web/test_metrics_resource.py)."""

from __future__ import annotations

import uuid
from typing import cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.txn.state import TxnState
from brokerd.metrics.collectors import CleanerCollector
from brokerd.metrics.registry import BrokerMetrics
from brokerd.operator.inspect import Inspector
from brokerd.operator.views import GroupOffsetView, GroupView, MemberView, PartitionView, TopicView


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the registry's text exposition, parsed back."""
    text = generate_latest(registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


class FakeInspector:
    """The inspector's read side, with topics and groups set by the test."""

    def __init__(self) -> None:
        self.topic_views: list[TopicView] = []
        self.group_views: list[GroupView] = []

    def topics(self) -> list[TopicView]:
        return self.topic_views

    def groups(self) -> list[GroupView]:
        return self.group_views

    def offline_partitions(self) -> dict[tuple[str, int], str]:
        return {
            (p.topic, p.partition): p.offline
            for t in self.topic_views for p in t.partitions if p.offline is not None
        }


def topic(name: str, *parts: PartitionView) -> TopicView:
    return TopicView(name, parts, {})


class AnswersTest(SynchronousTestCase):
    def setUp(self) -> None:
        self.inspector = FakeInspector()
        self.metrics = BrokerMetrics(cast(Inspector, self.inspector), process=False)

    def test_partitions_groups_and_traffic_at_scrape_time(self) -> None:
        self.inspector.topic_views = [
            topic("t", PartitionView("t", 0, 5, 12, 10, 4096, 2),
                  PartitionView("t", 1, 0, 0, 0, 0, 0, "cannot open")),
        ]
        self.inspector.group_views = [
            GroupView("g", "Stable", "consumer", "range",
                      (MemberView("m1", "c", "h"), MemberView("m2", "c", "h")),
                      (GroupOffsetView("t", 0, 9, 12, 3),
                       GroupOffsetView("gone", 0, 1, None, None))),
        ]
        self.metrics.writes.records_in("t", 7, 700)
        self.metrics.listener("kafka").records_out("t", 2, 200)
        got = samples(self.metrics.registry)
        p0 = (("partition", "0"), ("topic", "t"))
        self.assertEqual(got[("brokerd_partition_log_size_bytes", p0)], 4096)
        self.assertEqual(got[("brokerd_partition_segments", p0)], 2)
        self.assertEqual(got[("brokerd_partition_log_start_offset", p0)], 5)
        self.assertEqual(got[("brokerd_partition_log_end_offset", p0)], 12)
        self.assertEqual(got[("brokerd_partition_last_stable_offset", p0)], 10)
        p1 = (("partition", "1"), ("topic", "t"))
        self.assertEqual(got[("brokerd_partition_offline", p1)], 1)
        self.assertNotIn(("brokerd_partition_log_size_bytes", p1), got)
        self.assertEqual(got[("brokerd_offline_partitions", ())], 1)
        self.assertEqual(got[("brokerd_topic_partitions", (("topic", "t"),))], 2)
        self.assertEqual(got[("brokerd_group_members", (("group", "g"),))], 2)
        self.assertEqual(got[("brokerd_group_lag_total", (("group", "g"),))], 3)
        self.assertEqual(
            got[("brokerd_group_lag", (("group", "g"), ("partition", "0"), ("topic", "t")))], 3
        )
        # A committed offset of a partition that does not exist has no lag series.
        self.assertNotIn(
            ("brokerd_group_lag", (("group", "g"), ("partition", "0"), ("topic", "gone"))), got
        )
        self.assertEqual(got[("brokerd_topic_records_in_total", (("topic", "t"),))], 7)
        self.assertEqual(got[("brokerd_topic_bytes_out_total", (("topic", "t"),))], 200)
        # The topic and group are deleted: every series labelled with them goes.
        self.inspector.topic_views = []
        self.inspector.group_views = []
        got = samples(self.metrics.registry)
        self.assertFalse(
            [key for key in got if ("topic", "t") in key[1] or ("group", "g") in key[1]]
        )
        self.assertEqual(got[("brokerd_topics", ())], 0)


class FakeCleaner:
    passes = 3
    bytes_read = 1000
    bytes_written = 400
    records_removed = 12
    errors = 1
    last_pass_time: float | None = 1700000000.5


class FakeCoordinator:
    def __init__(self, states: list[str]) -> None:
        self.states = states

    def list_transactions(self, state_filters: object, producer_id_filters: object) -> list[object]:
        return [type("Listing", (), {"state": s})() for s in self.states]


class OptionalCollectorsTest(SynchronousTestCase):
    def test_cleaner_and_transactions(self) -> None:
        metrics = BrokerMetrics(cast(Inspector, FakeInspector()), process=False)
        metrics.add_cleaner(FakeCleaner())
        metrics.add_transactions(
            FakeCoordinator(["Ongoing", "Ongoing", "CompleteAbort"]),  # type: ignore[arg-type]
            [s.value for s in TxnState],
        )
        got = samples(metrics.registry)
        self.assertEqual(got[("brokerd_cleaner_passes_total", ())], 3)
        self.assertEqual(got[("brokerd_cleaner_bytes_written_total", ())], 400)
        self.assertEqual(got[("brokerd_cleaner_errors_total", ())], 1)
        self.assertEqual(got[("brokerd_cleaner_last_pass_timestamp_seconds", ())], 1700000000.5)
        self.assertEqual(got[("brokerd_transactional_ids", (("state", "Ongoing"),))], 2)
        self.assertEqual(got[("brokerd_transactional_ids", (("state", "CompleteAbort"),))], 1)
        self.assertEqual(got[("brokerd_transactional_ids", (("state", "CompleteCommit"),))], 0)

    def test_fetch_sessions(self) -> None:
        from brokerd.kafka.server.fetch_sessions import CachedPartition, FetchSessionCache

        now = [0]
        cache = FetchSessionCache(2, now_ms=lambda: now[0])
        parts = [CachedPartition("t", uuid.UUID(int=0), p, 0, 1000) for p in range(3)]
        sid = cache.create(parts, privileged=False, uses_topic_ids=False, size=3)
        cache.open(sid, 1, uses_topic_ids=False)
        metrics = BrokerMetrics(cast(Inspector, FakeInspector()), process=False)
        metrics.add_fetch_sessions(cache)
        got = samples(metrics.registry)
        self.assertEqual(got[("brokerd_fetch_sessions", ())], 1)
        self.assertEqual(got[("brokerd_fetch_session_partitions", ())], 3)
        self.assertEqual(got[("brokerd_fetch_session_slots", ())], 2)
        self.assertEqual(got[("brokerd_fetch_sessions_created_total", ())], 1)
        self.assertEqual(got[("brokerd_fetch_session_evictions_total", ())], 0)
        self.assertEqual(got[("brokerd_fetch_session_incremental_fetches_total", ())], 1)

    def test_cleaner_without_a_pass(self) -> None:
        cleaner = FakeCleaner()
        cleaner.last_pass_time = None
        (family,) = [f for f in CleanerCollector(cleaner).collect() if "last_pass" in f.name]
        self.assertEqual(family.samples[0].value, 0)
