"""The console's client telemetry views (brokerd/web/client_pages.py, routed by
brokerd/web/console.py): the overview's Clients section and /clients, rendered over a
real ClientTelemetry fed a real push, through twisted.web's test requests."""

from __future__ import annotations

import uuid

from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.telemetry.clients import ClientTelemetry, ConnectionFacts
from brokerd.kafka.telemetry.resources import ClientMetricsResources
from brokerd.web.client_pages import clients_page, clients_section
from brokerd.web.console_html import flat

from tests.kafka.telemetry import otlp_encode as enc

FACTS = ConnectionFacts("orders-producer", "apache-kafka-java", "4.4.0", "10.0.0.7", 41000)


class ClientPagesTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = task.Clock()
        self.clock.advance(1_000_000)
        resources = ClientMetricsResources()
        Deferred.fromCoroutine(resources.alter(
            "all", [("metrics", 0, "*"), ("interval.ms", 0, "1000")], validate_only=False))
        self.telemetry = ClientTelemetry(resources, clock=self.clock)
        sub = self.telemetry.get_subscriptions(uuid.UUID(int=0), FACTS)
        data = enc.metrics_data(enc.gauge(
            "org.apache.kafka.producer.record.queue.time.avg",
            enc.number_point(12.5, [("topic", "orders<b>")])))
        Deferred.fromCoroutine(self.telemetry.push(
            sub.instance_id, sub.subscription_id, terminating=False, compression=0,
            metrics=data, facts=FACTS))
        self.instance = str(sub.instance_id)

    def test_overview_section(self) -> None:
        self.clock.advance(3)
        html = flat(clients_section(self.telemetry.clients(), self.clock.seconds())).decode()
        self.assertIn(f'href="/clients#client-{self.instance}"', html)
        self.assertIn("orders-producer", html)
        self.assertIn("apache-kafka-java 4.4.0", html)
        self.assertIn("10.0.0.7:41000", html)
        self.assertIn("3s ago", html)

    def test_clients_page_escapes_what_clients_sent(self) -> None:
        html = flat(clients_page(self.telemetry.clients(), self.clock.seconds(), 1)).decode()
        self.assertIn("org.apache.kafka.producer.record.queue.time.avg", html)
        self.assertIn("topic=orders&lt;b&gt;", html)
        self.assertNotIn("orders<b>", html)
        self.assertIn("every metric", html)
        self.assertIn("12.5", html)

    def test_no_clients(self) -> None:
        html = flat(clients_page([], self.clock.seconds(), 1)).decode()
        self.assertIn("No client has asked for its telemetry subscription yet.", html)
