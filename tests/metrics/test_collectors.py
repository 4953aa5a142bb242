"""The metrics package with fakes: per-topic traffic, answer inspection, the request and
write observers, the scrape-time collectors and the /metrics resource."""

from __future__ import annotations

import uuid
from typing import cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest

from brokerd.core.appends import MarkerAppend, ValuesAppend
from brokerd.core.write_stats import MAX_UNSYNCED_SAMPLES, WriteStats
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.observe import kafka_errors
from brokerd.kafka.txn.state import TxnState
from brokerd.kafka.wire.messages.fetch import FetchPartitionResponse, FetchTopicResponse
from brokerd.kafka.wire.requests import apis
from brokerd.metrics.collectors import CleanerCollector
from brokerd.metrics.registry import BrokerMetrics
from brokerd.metrics.traffic import TopicTraffic
from brokerd.native.messages import RequestType
from brokerd.observers import api_name
from brokerd.operator.inspect import Inspector
from brokerd.operator.views import GroupOffsetView, GroupView, MemberView, PartitionView, TopicView
from brokerd.storage.types import AppendInfo
from brokerd.web.metrics_resource import MetricsResource


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


class TopicTrafficTest(SynchronousTestCase):
    def test_counts_and_forgets_deleted_topics(self) -> None:
        traffic = TopicTraffic()
        traffic.records_in("a", 3, 300)
        traffic.records_in("a", 1, 50)
        traffic.records_out("a", 2, 20)
        traffic.records_in("b", 1, 1)
        families = {f.name: f for f in traffic.collect({"a", "b"})}
        values = {s.labels["topic"]: s.value for s in families["brokerd_topic_records_in"].samples}
        self.assertEqual(values, {"a": 4, "b": 1})
        self.assertEqual(families["brokerd_topic_bytes_in"].samples[0].value, 350)
        self.assertEqual(families["brokerd_topic_records_out"].samples[0].value, 2)
        # "b" is deleted: its series go, and stay gone.
        families = {f.name: f for f in traffic.collect({"a"})}
        self.assertEqual(
            [s.labels["topic"] for s in families["brokerd_topic_bytes_in"].samples], ["a"]
        )
        families = {f.name: f for f in traffic.collect({"a", "b"})}
        self.assertEqual(len(families["brokerd_topic_records_in"].samples), 1)


class AnswersTest(SynchronousTestCase):
    def test_api_names(self) -> None:
        self.assertEqual(api_name(apis.ApiKey.PRODUCE), "Produce")
        self.assertEqual(api_name(apis.ApiKey.API_VERSIONS), "ApiVersions")
        self.assertEqual(api_name(RequestType.LONG_POLL_FETCH), "LongPollFetch")
        # Equal values of the two protocols' enums are different APIs.
        self.assertEqual(api_name(apis.ApiKey(int(RequestType.FETCH))), "ListOffsets")
        self.assertEqual(api_name(RequestType.FETCH), "Fetch")

    def test_kafka_errors_found_at_every_level_once(self) -> None:
        answer = apis.ProduceResponse(
            responses=(
                apis.ProduceTopicResponse(
                    name="t",
                    partition_responses=(
                        apis.ProducePartitionResponse(index=0, error_code=0),
                        apis.ProducePartitionResponse(
                            index=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
                        ),
                        apis.ProducePartitionResponse(
                            index=2, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
                        ),
                    ),
                ),
                apis.ProduceTopicResponse(
                    name="u",
                    partition_responses=(
                        apis.ProducePartitionResponse(
                            index=0, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        ),
                    ),
                ),
            )
        )
        self.assertEqual(
            kafka_errors(answer), ["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION"]
        )
        self.assertEqual(kafka_errors(apis.FetchResponse(error_code=9999)), ["UNKNOWN_9999"])
        self.assertEqual(kafka_errors(apis.FetchResponse()), [])
        # Nested two levels down, beside the fields the walk skips by their wire type
        # (records, offsets): found.
        fetched = apis.FetchResponse(responses=(FetchTopicResponse(topic="t", partitions=(
            FetchPartitionResponse(partition_index=0, records=b"x" * 70, high_watermark=3),
            FetchPartitionResponse(
                partition_index=1, error_code=ErrorCode.OFFSET_OUT_OF_RANGE
            ),
        )),))
        self.assertEqual(kafka_errors(fetched), ["OFFSET_OUT_OF_RANGE"])
        self.assertEqual(kafka_errors(object()), [])

    def setUp(self) -> None:
        self.inspector = FakeInspector()
        self.metrics = BrokerMetrics(cast(Inspector, self.inspector), process=False)

    def test_requests_errors_latency_and_connections(self) -> None:
        now = [100.0]
        kafka = self.metrics.listener("kafka")
        kafka.now = lambda: now[0]
        kafka.connection_opened()
        kafka.connection_opened()
        kafka.connection_closed()
        started = kafka.now()
        now[0] += 0.25
        kafka.request_done("Produce", started, ())
        kafka.request_done("Produce", started, ("NOT_LEADER_OR_FOLLOWER",))
        self.metrics.listener("native").request_done("Fetch", 0.0, ("UNKNOWN_TOPIC_OR_PARTITION",))
        got = samples(self.metrics.registry)
        k = (("api", "Produce"), ("protocol", "kafka"))
        self.assertEqual(got[("brokerd_requests_total", k)], 2)
        self.assertEqual(got[("brokerd_request_duration_seconds_count", k)], 2)
        self.assertAlmostEqual(got[("brokerd_request_duration_seconds_sum", k)], 0.5)
        self.assertEqual(
            got[("brokerd_request_duration_seconds_bucket", (*k[:1], ("le", "0.1"), k[1]))], 0
        )
        self.assertEqual(
            got[("brokerd_request_errors_total",
                 (("api", "Produce"), ("error", "NOT_LEADER_OR_FOLLOWER"), ("protocol", "kafka")))],
            1,
        )
        self.assertEqual(got[("brokerd_connections_open", (("listener", "kafka"),))], 1)
        self.assertEqual(got[("brokerd_connections_accepted_total", (("listener", "kafka"),))], 2)
        self.assertIn(("brokerd_requests_total", (("api", "Fetch"), ("protocol", "native"))), got)

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

    def test_process_collectors_on_their_own_registry(self) -> None:
        metrics = BrokerMetrics(cast(Inspector, self.inspector))
        got = samples(metrics.registry)
        self.assertIn(("process_resident_memory_bytes", ()), got)
        self.assertTrue(any(name == "python_info" for name, _ in got))


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


class RecordingObserver:
    def __init__(self) -> None:
        self.ins: list[tuple[str, int, int]] = []
        self.durables: list[float] = []
        self.syncs: list[float] = []

    def records_in(self, topic: str, records: int, size: int) -> None:
        self.ins.append((topic, records, size))

    def durable(self, seconds: float) -> None:
        self.durables.append(seconds)

    def synced(self, seconds: float) -> None:
        self.syncs.append(seconds)


class WriteStatsTest(SynchronousTestCase):
    def test_synced_job_reports_records_durable_and_fsync(self) -> None:
        obs = RecordingObserver()
        now = [10.0]
        stats = WriteStats("t", obs, monotonic=lambda: now[0])
        values = ValuesAppend((b"ab", b"c"))
        marker = MarkerAppend(1, 0, commit=True)
        now[0] = 10.5
        stats.job_done(
            [(values, AppendInfo(4, 5, 0), 10.0), (marker, AppendInfo(6, 6, 0), 10.25)],
            synced=True, sync_seconds=0.125,
        )
        self.assertEqual(obs.ins, [("t", 2, values.stored_bytes())])  # the marker is no record
        self.assertEqual(obs.syncs, [0.125])
        self.assertEqual(obs.durables, [0.5, 0.25])

    def test_unsynced_appends_are_durable_at_the_next_sync_and_bounded(self) -> None:
        obs = RecordingObserver()
        now = [0.0]
        stats = WriteStats("t", obs, monotonic=lambda: now[0])
        append = ValuesAppend((b"x",))
        many = [(append, AppendInfo(i, i, 0), 1.0) for i in range(MAX_UNSYNCED_SAMPLES + 10)]
        stats.job_done(many, synced=False, sync_seconds=None)
        self.assertEqual(obs.durables, [])
        self.assertEqual(len(obs.ins), MAX_UNSYNCED_SAMPLES + 10)
        now[0] = 3.0
        stats.job_done([], synced=True, sync_seconds=0.01)  # the interval flush
        self.assertEqual(obs.durables, [2.0] * MAX_UNSYNCED_SAMPLES)
        stats.job_done([], synced=True, sync_seconds=0.01)
        self.assertEqual(len(obs.durables), MAX_UNSYNCED_SAMPLES)


class MetricsResourceTest(SynchronousTestCase):
    def test_text_format_and_openmetrics_on_request(self) -> None:
        metrics = BrokerMetrics(cast(Inspector, FakeInspector()), process=False)
        resource = MetricsResource(metrics.registry)
        request = DummyRequest([b""])
        body = resource.render_GET(request)
        content_type = request.responseHeaders.getRawHeaders(b"content-type")[0]
        self.assertTrue(content_type.startswith(b"text/plain"))
        self.assertIn(b"brokerd_topics 0.0", body)
        request = DummyRequest([b""])
        request.requestHeaders.setRawHeaders(b"accept", [b"application/openmetrics-text"])
        body = resource.render_GET(request)
        content_type = request.responseHeaders.getRawHeaders(b"content-type")[0]
        self.assertTrue(content_type.startswith(b"application/openmetrics-text"))
        self.assertTrue(body.endswith(b"# EOF\n"))
