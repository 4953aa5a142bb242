"""The listeners' request and connection series and the write path's latencies
(:mod:`brokerd.metrics.live`), read back from their registry's text exposition."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from twisted.trial.unittest import SynchronousTestCase

from brokerd.metrics.live import RequestMetrics, WriteMetrics
from brokerd.metrics.traffic import TopicTraffic

from tests.metrics.test_collectors import samples


class RequestMetricsTest(SynchronousTestCase):
    def setUp(self) -> None:
        self.registry = CollectorRegistry()
        self.traffic = TopicTraffic()
        self.metrics = RequestMetrics(self.registry, self.traffic)

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
        got = samples(self.registry)
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

    def test_each_error_of_an_answer_counts_once_per_name(self) -> None:
        kafka = self.metrics.listener("kafka")
        kafka.now = lambda: 1.0
        kafka.request_done("Fetch", 1.0, ("A", "B"))
        kafka.request_done("Fetch", 1.0, ("A",))
        got = samples(self.registry)
        errors = {
            dict(labels)["error"]: value for (name, labels), value in got.items()
            if name == "brokerd_request_errors_total"
        }
        self.assertEqual(errors, {"A": 2, "B": 1})

    def test_records_out_reach_the_topic_traffic(self) -> None:
        self.metrics.listener("native").records_out("t", 3, 30)
        self.metrics.listener("kafka").records_out("t", 1, 5)
        got = _traffic(self.traffic)
        self.assertEqual(got["brokerd_topic_records_out_total"], 4)
        self.assertEqual(got["brokerd_topic_bytes_out_total"], 35)


def _traffic(traffic: TopicTraffic) -> dict[str, float]:
    return {s.name: s.value for f in traffic.collect(["t"]) for s in f.samples}


class WriteMetricsTest(SynchronousTestCase):
    def test_durable_and_fsync_latencies_and_records_in(self) -> None:
        registry = CollectorRegistry()
        traffic = TopicTraffic()
        writes = WriteMetrics(registry, traffic)
        writes.durable(0.003)
        writes.synced(0.002)
        writes.synced(0.0002)
        writes.records_in("t", 4, 400)
        got = samples(registry)
        self.assertEqual(got[("brokerd_produce_durable_seconds_count", ())], 1)
        self.assertAlmostEqual(got[("brokerd_produce_durable_seconds_sum", ())], 0.003)
        self.assertEqual(got[("brokerd_fsync_duration_seconds_count", ())], 2)
        self.assertEqual(got[("brokerd_fsync_duration_seconds_bucket", (("le", "0.00025"),))], 1)
        self.assertEqual(_traffic(traffic)["brokerd_topic_records_in_total"], 4)
