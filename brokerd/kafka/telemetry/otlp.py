# -*- test-case-name: tests.kafka.telemetry.test_otlp -*-
"""The part of OpenTelemetry's ``MetricsData`` (OTLP metrics, protobuf) that a pushed
client's metrics need: each data point's metric name, attributes and value.

A hand-written reader of the protobuf wire format (varints, fixed 64-bit, and
length-delimited fields), so that the broker needs no protobuf runtime. It follows the
field numbers of ``opentelemetry/proto/metrics/v1/metrics.proto``: ``MetricsData.
resource_metrics`` (1) -> ``ResourceMetrics.resource`` (1, its ``attributes``) and
``scope_metrics`` (2) -> ``ScopeMetrics.metrics`` (2) -> ``Metric`` (``name`` 1, and
one of ``gauge`` 5, ``sum`` 7, ``histogram`` 9, ``summary`` 11) -> number data points
(``as_double`` 4, ``as_int`` 6, ``attributes`` 7) and, for histograms and summaries,
their count and sum. Unknown fields are skipped, as protobuf readers do; exponential
histograms and exemplars are skipped whole.

Everything is bounded: the input (the caller bounds it: ``telemetry.max.bytes``), the
number of points read (:data:`MAX_POINTS`), the attributes per point and the length of
names and values kept (:data:`MAX_TEXT`). Malformed input raises :class:`InvalidMetrics`.
Pure: no I/O.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator

import attrs

#: Most data points read from one push; the rest are ignored.
MAX_POINTS = 2_000
#: Most attributes kept per data point (resource attributes included).
MAX_ATTRIBUTES = 16
#: Longest metric name, attribute key or attribute value kept (longer ones are cut).
MAX_TEXT = 200

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")


class InvalidMetrics(ValueError):
    """Bytes that are not a protobuf ``MetricsData``."""


class Temporality(enum.IntEnum):
    """OTLP's ``AggregationTemporality``."""

    UNSPECIFIED = 0
    DELTA = 1
    CUMULATIVE = 2


class Kind(enum.Enum):
    GAUGE = "gauge"
    #: A monotonic sum: a counter.
    COUNTER = "counter"
    #: A sum that may go down, shown as a gauge.
    SUM = "sum"


@attrs.frozen
class Point:
    """One value of one metric."""

    name: str
    attributes: tuple[tuple[str, str], ...]
    value: float
    kind: Kind
    temporality: Temporality = Temporality.UNSPECIFIED


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise InvalidMetrics("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise InvalidMetrics("varint longer than 10 bytes")


def _fields(data: memoryview) -> Iterator[tuple[int, int, object]]:
    """The (field number, wire type, value) of a message, one at a time (a message of
    a million points is never a million-entry list): ints for varint fields, memoryviews
    for fixed (8 or 4 raw bytes) and length-delimited ones."""
    pos = 0
    n = len(data)
    while pos < n:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise InvalidMetrics("field number 0")
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == 1:
            if pos + 8 > n:
                raise InvalidMetrics("truncated 64-bit field")
            yield number, wire, data[pos:pos + 8]
            pos += 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > n:
                raise InvalidMetrics("length-delimited field runs past its message")
            yield number, wire, data[pos:pos + length]
            pos += length
        elif wire == 5:
            if pos + 4 > n:
                raise InvalidMetrics("truncated 32-bit field")
            yield number, wire, data[pos:pos + 4]
            pos += 4
        else:
            raise InvalidMetrics(f"wire type {wire} is not supported")


def _text(value: object) -> str:
    if not isinstance(value, memoryview):
        raise InvalidMetrics("a string field with a non-string wire type")
    return bytes(value[: MAX_TEXT * 4]).decode("utf-8", "replace")[:MAX_TEXT]


def _sub(value: object) -> memoryview:
    if not isinstance(value, memoryview):
        raise InvalidMetrics("a message field with a non-message wire type")
    return value


def _any_value(data: memoryview) -> str:
    for number, wire, value in _fields(data):
        if number == 1 and wire == 2:
            return _text(value)
        if number == 2 and wire == 0:
            return "true" if value else "false"
        if number == 3 and wire == 0:
            assert isinstance(value, int)
            return str(value - (1 << 64) if value >= 1 << 63 else value)
        if number == 4 and wire == 1:
            return repr(_DOUBLE.unpack(_sub(value))[0])
    return ""


def _attributes(values: Iterable[memoryview]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for kv in values:
        if len(out) >= MAX_ATTRIBUTES:
            break
        key, val = "", ""
        for number, wire, value in _fields(kv):
            if number == 1 and wire == 2:
                key = _text(value)
            elif number == 2 and wire == 2:
                val = _any_value(_sub(value))
        out.append((key, val))
    return out


class _Reader:
    def __init__(self) -> None:
        self.points: list[Point] = []

    def full(self) -> bool:
        return len(self.points) >= MAX_POINTS

    def metrics_data(self, data: memoryview) -> None:
        for number, wire, value in _fields(data):
            if number == 1 and wire == 2 and not self.full():
                self._resource_metrics(_sub(value))

    def _resource_metrics(self, data: memoryview) -> None:
        fields = list(_fields(data))  # a resource and its scopes: a few fields
        resource: list[tuple[str, str]] = []
        for number, wire, value in fields:
            if number == 1 and wire == 2:
                resource = _attributes(
                    _sub(v) for n, w, v in _fields(_sub(value)) if n == 1 and w == 2
                )
        for number, wire, value in fields:
            if number == 2 and wire == 2:
                for n, w, metric in _fields(_sub(value)):
                    if n == 2 and w == 2 and not self.full():
                        self._metric(_sub(metric), resource)

    def _metric(self, data: memoryview, resource: list[tuple[str, str]]) -> None:
        name = ""
        fields = list(_fields(data))  # a name, a description, a unit, one data field
        for number, wire, value in fields:
            if number == 1 and wire == 2:
                name = _text(value)
        for number, wire, value in fields:
            if wire != 2 or number not in (5, 7, 9, 11):
                continue
            temporality = Temporality.UNSPECIFIED
            monotonic = False
            # One pass: the points are kept up to what may still be read, and the scan
            # goes on for the temporality and monotonic flags, which may follow them.
            room = MAX_POINTS - len(self.points)
            points: list[memoryview] = []
            for n, w, v in _fields(_sub(value)):
                if n == 1 and w == 2:
                    if len(points) < room:
                        points.append(_sub(v))
                elif n == 2 and w == 0 and number in (7, 9):
                    assert isinstance(v, int)
                    temporality = Temporality(v) if v in (0, 1, 2) else Temporality.UNSPECIFIED
                elif n == 3 and w == 0 and number == 7:
                    monotonic = bool(v)
            kind = Kind.GAUGE
            if number == 7:
                kind = Kind.COUNTER if monotonic else Kind.SUM
            for point in points:
                if self.full():
                    break
                if number in (5, 7):
                    self._number_point(point, name, kind, temporality, resource)
                else:
                    self._summary_point(point, name, number == 9, temporality, resource)

    def _number_point(
        self, data: memoryview, name: str, kind: Kind, temporality: Temporality,
        resource: list[tuple[str, str]],
    ) -> None:
        value: float | None = None
        attrs_raw: list[memoryview] = []
        for number, wire, v in _fields(data):
            if number == 4 and wire == 1:
                value = _DOUBLE.unpack(_sub(v))[0]
            elif number == 6 and wire == 1:
                value = float(_INT64.unpack(_sub(v))[0])
            elif number == 7 and wire == 2 and len(attrs_raw) < MAX_ATTRIBUTES:
                attrs_raw.append(_sub(v))
        if value is None:
            return
        labels = tuple((resource + _attributes(attrs_raw))[:MAX_ATTRIBUTES])
        self.points.append(Point(name, labels, value, kind, temporality))

    def _summary_point(
        self, data: memoryview, name: str, histogram: bool, temporality: Temporality,
        resource: list[tuple[str, str]],
    ) -> None:
        # HistogramDataPoint: count 4 (fixed64), sum 5 (double), attributes 9;
        # SummaryDataPoint: count 4 (fixed64), sum 5 (double), attributes 7.
        count = total = None
        attrs_raw: list[memoryview] = []
        attributes_field = 9 if histogram else 7
        for number, wire, v in _fields(data):
            if number == 4 and wire == 1:
                count = float(_INT64.unpack(_sub(v))[0])
            elif number == 5 and wire == 1:
                total = _DOUBLE.unpack(_sub(v))[0]
            elif number == attributes_field and wire == 2 and len(attrs_raw) < MAX_ATTRIBUTES:
                attrs_raw.append(_sub(v))
        labels = tuple((resource + _attributes(attrs_raw))[:MAX_ATTRIBUTES])
        for suffix, value in ((".count", count), (".sum", total)):
            if value is not None and not self.full():
                self.points.append(
                    Point(name + suffix, labels, value, Kind.COUNTER, temporality)
                )


def decode_metrics(data: bytes) -> list[Point]:
    """The data points of a serialized ``MetricsData`` (at most :data:`MAX_POINTS`)."""
    reader = _Reader()
    try:
        reader.metrics_data(memoryview(data))
    except struct.error as e:
        raise InvalidMetrics(str(e)) from None
    return reader.points


__all__ = ["MAX_POINTS", "InvalidMetrics", "Kind", "Point", "Temporality", "decode_metrics"]
