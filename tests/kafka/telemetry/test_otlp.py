"""The OTLP MetricsData reader (brokerd/kafka/telemetry/otlp.py): bytes built from the
schema's field numbers (tests/kafka/telemetry/otlp_encode.py), and malformed ones."""

from __future__ import annotations

import math

import pytest

from brokerd.kafka.telemetry.otlp import (
    MAX_POINTS,
    MAX_TEXT,
    InvalidMetrics,
    Kind,
    Temporality,
    decode_metrics,
)

from tests.kafka.telemetry import otlp_encode as enc


def test_gauges_sums_and_histograms_with_attributes() -> None:
    data = enc.metrics_data(
        enc.gauge("org.apache.kafka.producer.record.queue.time.avg",
                  enc.number_point(1.5), enc.number_point(7, [("topic", "t"), ("partition", 3)])),
        enc.sum_metric("org.apache.kafka.producer.record.send.total", enc.number_point(12)),
        enc.sum_metric("x.updown", enc.number_point(-2.0), monotonic=False, temporality=2),
        enc.histogram("x.latency", 4, 10.5, [("node_id", "0")]),
        resource=[("client_rack", "r1"), ("debug", True)],
    )
    points = decode_metrics(data)
    got = [(p.name, p.attributes, p.value, p.kind, p.temporality) for p in points]
    rack = (("client_rack", "r1"), ("debug", "true"))
    assert got == [
        ("org.apache.kafka.producer.record.queue.time.avg", rack, 1.5, Kind.GAUGE,
         Temporality.UNSPECIFIED),
        ("org.apache.kafka.producer.record.queue.time.avg",
         (*rack, ("topic", "t"), ("partition", "3")), 7.0, Kind.GAUGE, Temporality.UNSPECIFIED),
        ("org.apache.kafka.producer.record.send.total", rack, 12.0, Kind.COUNTER,
         Temporality.DELTA),
        ("x.updown", rack, -2.0, Kind.SUM, Temporality.CUMULATIVE),
        ("x.latency.count", (*rack, ("node_id", "0")), 4.0, Kind.COUNTER,
         Temporality.CUMULATIVE),
        ("x.latency.sum", (*rack, ("node_id", "0")), 10.5, Kind.COUNTER,
         Temporality.CUMULATIVE),
    ]


def test_nan_unknown_fields_and_empty_input() -> None:
    unknown = enc.field(15, 2, b"future") + enc.field(16, 0, 99)
    data = enc.metrics_data(enc.gauge("g", enc.number_point(math.nan) + unknown) + unknown)
    (point,) = decode_metrics(data + unknown)
    assert math.isnan(point.value)
    assert decode_metrics(b"") == []


def test_bounds_on_points_and_text() -> None:
    many = enc.gauge("g", *(enc.number_point(i) for i in range(MAX_POINTS + 5)))
    assert len(decode_metrics(enc.metrics_data(many))) == MAX_POINTS
    (point,) = decode_metrics(enc.metrics_data(enc.gauge("n" * 5000, enc.number_point(1))))
    assert len(point.name) == MAX_TEXT


@pytest.mark.parametrize("data", [
    b"\x0a\x05abc",  # a length past the end
    b"\x0a",  # a truncated length
    b"\x0b",  # wire type 3 (groups) is not read
    b"\x00\x01",  # field number 0
    b"\xff" * 11,  # an endless varint
    enc.field(1, 2, enc.field(2, 2, b"\x12\x09short")),  # a nested length past its end
])
def test_malformed(data: bytes) -> None:
    with pytest.raises(InvalidMetrics):
        decode_metrics(data)
