"""One broker's metrics registry (:class:`~brokerd.metrics.registry.BrokerMetrics`): its
own registry, the process collectors on demand, the optional collectors added."""

from __future__ import annotations

from typing import cast

from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.quotas.entities import QuotaConfigs, QuotaEntity
from brokerd.core.quotas.manager import QuotaManager
from brokerd.metrics.registry import BrokerMetrics
from brokerd.operator.inspect import Inspector

from tests.metrics.test_collectors import FakeInspector, samples


class BrokerMetricsTest(SynchronousTestCase):
    def test_process_collectors_on_their_own_registry(self) -> None:
        metrics = BrokerMetrics(cast(Inspector, FakeInspector()))
        got = samples(metrics.registry)
        self.assertIn(("process_resident_memory_bytes", ()), got)
        self.assertTrue(any(name == "python_info" for name, _ in got))

    def test_without_process_collectors_and_two_brokers_share_nothing(self) -> None:
        first = BrokerMetrics(cast(Inspector, FakeInspector()), process=False)
        second = BrokerMetrics(cast(Inspector, FakeInspector()), process=False)
        first.listener("kafka").request_done("Produce", first.listener("kafka").now(), ())
        got_first, got_second = samples(first.registry), samples(second.registry)
        self.assertNotIn(("process_resident_memory_bytes", ()), got_first)
        key = ("brokerd_requests_total", (("api", "Produce"), ("protocol", "kafka")))
        self.assertEqual(got_first[key], 1)
        self.assertNotIn(key, got_second)

    def test_writes_and_listeners_feed_the_registry(self) -> None:
        metrics = BrokerMetrics(cast(Inspector, FakeInspector()), process=False)
        metrics.writes.durable(0.01)
        got = samples(metrics.registry)
        self.assertEqual(got[("brokerd_produce_durable_seconds_count", ())], 1)

    def test_quotas_are_added_on_demand(self) -> None:
        metrics = BrokerMetrics(cast(Inspector, FakeInspector()), process=False)
        self.assertNotIn(("brokerd_client_quota_entities", ()), samples(metrics.registry))
        quotas = QuotaManager(QuotaConfigs({QuotaEntity(None, "app"): {"producer_byte_rate": 1.0}}))
        metrics.add_quotas(quotas, lambda: 0.0)
        self.assertEqual(samples(metrics.registry)[("brokerd_client_quota_entities", ())], 1)
