# -*- test-case-name: tests.metrics.test_telemetry -*-
"""The metrics clients push (KIP-714), exported at scrape time.

Each series a client pushed is one sample, labelled with the client instance id, its
client id and software, the OTLP metric name (``name``, e.g.
``org.apache.kafka.producer.record.queue.time.avg``) and its attributes
(``attributes``, ``key=value`` pairs joined by commas, sorted): gauges and sums that
may go down in ``brokerd_client_metric``, monotonic sums (delta pushes added up) in
``brokerd_client_counter_total``. One family each, whatever the metric, keeps the
exposition's family count fixed; cardinality is bounded where the series are kept
(:mod:`brokerd.kafka.telemetry.clients`: clients with metrics x series per client), and
``brokerd_telemetry_dropped_series_total`` counts what those bounds dropped.

What it does not do: decode or keep anything (it reads
:class:`brokerd.operator.telemetry_face.TelemetryFace`).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from brokerd.operator.telemetry_face import TelemetryFace

_LABELS = ["client_instance_id", "client_id", "client_software", "name", "attributes"]


def attributes_label(attributes: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(attributes))


class TelemetryCollector:
    """Pushed client metrics, from the client instances."""

    def __init__(self, telemetry: TelemetryFace) -> None:
        self._telemetry = telemetry

    def collect(self) -> Iterator[Metric]:
        clients = self._telemetry.clients()
        gauges = GaugeMetricFamily(
            "brokerd_client_metric",
            "A gauge (or non-monotonic sum) a client pushed (KIP-714), at its last value.",
            labels=_LABELS,
        )
        counters = CounterMetricFamily(
            "brokerd_client_counter",
            "A monotonic sum a client pushed (KIP-714), its deltas added up.",
            labels=_LABELS,
        )
        known = GaugeMetricFamily(
            "brokerd_telemetry_clients",
            "Client instances that asked for their telemetry subscription or pushed.",
        )
        known.add_metric([], len(clients))
        dropped = CounterMetricFamily(
            "brokerd_telemetry_dropped_series",
            "Pushed series dropped because the clients x series bound was reached.",
        )
        dropped.add_metric([], self._telemetry.dropped_series)
        for client in clients:
            for s in client.series:
                labels = [
                    client.instance_id, client.client_id, client.software, s.name,
                    attributes_label(s.attributes),
                ]
                (counters if s.counter else gauges).add_metric(labels, s.value)
        yield gauges
        yield counters
        yield known
        yield dropped


__all__ = ["TelemetryCollector"]
