"""A minimal OTLP ``MetricsData`` protobuf encoder for the tests: the fields the clients
send (gauges, sums, histograms, attributes), so the decoder is checked against bytes
built from the schema's field numbers rather than against itself."""

from __future__ import annotations

import struct
from collections.abc import Sequence

Attrs = Sequence[tuple[str, str | int | bool | float]]


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number: int, wire: int, payload: bytes | int) -> bytes:
    key = varint(number << 3 | wire)
    if wire == 0:
        assert isinstance(payload, int)
        return key + varint(payload)
    assert isinstance(payload, bytes)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload  # fixed 64 (1) or 32 (5)


def _any(value: str | int | bool | float) -> bytes:
    if isinstance(value, bool):
        return field(2, 0, int(value))
    if isinstance(value, int):
        return field(3, 0, value)
    if isinstance(value, float):
        return field(4, 1, struct.pack("<d", value))
    return field(1, 2, value.encode())


def key_values(attributes: Attrs, number: int) -> bytes:
    return b"".join(
        field(number, 2, field(1, 2, k.encode()) + field(2, 2, _any(v)))
        for k, v in attributes
    )


def number_point(value: float | int, attributes: Attrs = ()) -> bytes:
    body = field(3, 1, struct.pack("<Q", 1_700_000_000_000_000_000))
    if isinstance(value, int):
        body += field(6, 1, struct.pack("<q", value))
    else:
        body += field(4, 1, struct.pack("<d", value))
    return body + key_values(attributes, 7)


def gauge(name: str, *points: bytes) -> bytes:
    return field(1, 2, name.encode()) + field(
        5, 2, b"".join(field(1, 2, p) for p in points)
    )


def sum_metric(name: str, *points: bytes, monotonic: bool = True, temporality: int = 1) -> bytes:
    body = b"".join(field(1, 2, p) for p in points)
    body += field(2, 0, temporality) + field(3, 0, int(monotonic))
    return field(1, 2, name.encode()) + field(7, 2, body)


def histogram(name: str, count: int, total: float, attributes: Attrs = ()) -> bytes:
    point = field(4, 1, struct.pack("<Q", count)) + field(5, 1, struct.pack("<d", total))
    point += key_values(attributes, 9)
    return field(1, 2, name.encode()) + field(9, 2, field(1, 2, point) + field(2, 0, 2))


def metrics_data(*metrics: bytes, resource: Attrs = ()) -> bytes:
    scope = field(1, 2, field(1, 2, b"test-scope")) + b"".join(field(2, 2, m) for m in metrics)
    resource_metrics = field(1, 2, key_values(resource, 1)) + field(2, 2, scope)
    return field(1, 2, resource_metrics)
