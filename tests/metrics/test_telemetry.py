"""The pushed client metrics on /metrics (brokerd/metrics/telemetry.py): a real
ClientTelemetry fed real pushes, exposed through prometheus_client and parsed back."""

from __future__ import annotations

import uuid

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import task
from twisted.internet.defer import Deferred

from brokerd.kafka.telemetry.clients import ClientTelemetry, ConnectionFacts
from brokerd.kafka.telemetry.resources import ClientMetricsResources
from brokerd.metrics.telemetry import TelemetryCollector

from tests.kafka.telemetry import otlp_encode as enc

FACTS = ConnectionFacts("rd-1", "librdkafka", "2.16.0", "127.0.0.1", 4000)


def test_gauges_counters_and_bounds_exported() -> None:
    clock = task.Clock()
    clock.advance(1_000_000)
    resources = ClientMetricsResources()
    Deferred.fromCoroutine(resources.alter(
        "all", [("metrics", 0, "*"), ("interval.ms", 0, "1000")], validate_only=False))
    telemetry = ClientTelemetry(resources, clock=clock, max_series=2)
    registry = CollectorRegistry()
    registry.register(TelemetryCollector(telemetry))
    sub = telemetry.get_subscriptions(uuid.UUID(int=0), FACTS)
    data = enc.metrics_data(
        enc.gauge("p.latency", enc.number_point(2.0, [("node.id", "0"), ("a", "b")])),
        enc.sum_metric("p.requests", enc.number_point(5)),
        enc.gauge("p.dropped", enc.number_point(1.0)),
    )
    for _ in range(2):
        Deferred.fromCoroutine(telemetry.push(
            sub.instance_id, sub.subscription_id, terminating=False, compression=0,
            metrics=data, facts=FACTS))
        clock.advance(1)
    samples = {
        (s.name, s.labels.get("name", ""), s.labels.get("attributes", "")): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    # max_series=2: of the three series pushed, the least recently pushed went.
    assert samples == {
        ("brokerd_client_counter_total", "p.requests", ""): 10.0,  # two deltas of 5
        ("brokerd_client_metric", "p.dropped", ""): 1.0,
        ("brokerd_telemetry_clients", "", ""): 1.0,
        ("brokerd_telemetry_dropped_series_total", "", ""): 2.0,
    }
