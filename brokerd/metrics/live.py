"""The request and connection series of the listeners, and the write path's latencies.

:class:`RequestMetrics` owns the per-protocol Prometheus families (requests, errors,
latency, connections); :meth:`RequestMetrics.listener` gives the
:class:`~brokerd.observers.RequestObserver` one listener's connections call.
:class:`WriteMetrics` is the core's :class:`~brokerd.observers.WriteObserver`.

Label values are bounded: ``protocol``/``listener`` are the two protocol names, ``api``
comes from the protocols' request-type enums and ``error`` from their error-code enums;
the per-label children are resolved once and cached, so a request costs one counter
increment and one histogram observation (plus one increment per error name).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from brokerd.metrics.traffic import TopicTraffic

#: Buckets of the request latency histogram, seconds: from a cached metadata answer to a
#: long poll's full wait.
REQUEST_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0, 60.0,
)
#: Buckets of the fsync and produce-to-durable histograms, seconds (an SSD's fdatasync is
#: tens of microseconds to milliseconds; a busy spinning disk's, hundreds of milliseconds).
DISK_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
)


class ListenerMetrics:
    """One listener's :class:`~brokerd.observers.RequestObserver`."""

    def __init__(self, families: RequestMetrics, protocol: str) -> None:
        self._families = families
        self._protocol = protocol
        self._open = families.connections_open.labels(protocol)
        self._accepted = families.connections_accepted.labels(protocol)
        self._requests: dict[str, tuple[Callable[[], None], Callable[[float], None]]] = {}
        self._errors: dict[tuple[str, str], Callable[[], None]] = {}
        self.now = time.monotonic

    def connection_opened(self) -> None:
        self._open.inc()
        self._accepted.inc()

    def connection_closed(self) -> None:
        self._open.dec()

    def request_done(self, api: str, started: float, errors: Iterable[str]) -> None:
        children = self._requests.get(api)
        if children is None:
            f = self._families
            children = self._requests[api] = (
                f.requests.labels(self._protocol, api).inc,
                f.latency.labels(self._protocol, api).observe,
            )
        count, observe = children
        count()
        observe(self.now() - started)
        for error in errors:
            inc = self._errors.get((api, error))
            if inc is None:
                child = self._families.errors.labels(self._protocol, api, error)
                inc = self._errors[(api, error)] = child.inc
            inc()

    def records_out(self, topic: str, records: int, size: int) -> None:
        self._families.traffic.records_out(topic, records, size)


class RequestMetrics:
    """The request and connection families, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry, traffic: TopicTraffic) -> None:
        self.traffic = traffic
        self.requests = Counter(
            "brokerd_requests", "Requests answered, by protocol and API.",
            ["protocol", "api"], registry=registry,
        )
        self.errors = Counter(
            "brokerd_request_errors",
            "Errors in answers, by protocol, API and error name (each error name once "
            "per answer).",
            ["protocol", "api", "error"], registry=registry,
        )
        self.latency = Histogram(
            "brokerd_request_duration_seconds",
            "Time from a request's dispatch to its answer, by protocol and API.",
            ["protocol", "api"], buckets=REQUEST_BUCKETS, registry=registry,
        )
        self.connections_open = Gauge(
            "brokerd_connections_open", "Client connections open, by listener.",
            ["listener"], registry=registry,
        )
        self.connections_accepted = Counter(
            "brokerd_connections_accepted", "Client connections accepted, by listener.",
            ["listener"], registry=registry,
        )

    def listener(self, protocol: str) -> ListenerMetrics:
        """The observer of the ``protocol`` listener (``"native"`` or ``"kafka"``)."""
        return ListenerMetrics(self, protocol)


class WriteMetrics:
    """The core's :class:`~brokerd.observers.WriteObserver`."""

    def __init__(self, registry: CollectorRegistry, traffic: TopicTraffic) -> None:
        self._traffic = traffic
        self._durable = Histogram(
            "brokerd_produce_durable_seconds",
            "Time from an append being queued to the fsync that covers it completing.",
            buckets=DISK_BUCKETS, registry=registry,
        )
        self._synced = Histogram(
            "brokerd_fsync_duration_seconds", "Duration of one partition's fsync.",
            buckets=DISK_BUCKETS, registry=registry,
        )
        self.records_in = traffic.records_in
        self.durable = self._durable.observe
        self.synced = self._synced.observe


__all__ = ["DISK_BUCKETS", "REQUEST_BUCKETS", "ListenerMetrics", "RequestMetrics", "WriteMetrics"]
