"""Client quota series, computed at scrape time from the quota manager's sensors.

Per measured share (quota key, user, client id, as Kafka's quota metrics tag them): the
configured bound, the rate now, the throttle time handed out and the throttled answers
since the share was first measured. The label set is bounded: at most
:data:`MAX_SERIES_SHARES` shares, the most recently used (the manager itself keeps at
most :data:`~brokerd.core.quotas.manager.MAX_SENSORS` and drops idle ones), so a flood
of client ids cannot blow up the scrape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from brokerd.core.quotas.manager import QuotaManager

#: Shares reported at most per scrape.
MAX_SERIES_SHARES = 200
_LABELS = ["quota", "user", "client_id"]


class QuotasCollector:
    """The sensors of one :class:`QuotaManager` (``seconds``: the broker's clock)."""

    def __init__(self, quotas: QuotaManager, seconds: Callable[[], float]) -> None:
        self._quotas = quotas
        self._seconds = seconds

    def collect(self) -> Iterator[Metric]:
        entities = GaugeMetricFamily(
            "brokerd_client_quota_entities", "Quota entities configured (users, client ids, "
            "their defaults and combinations).")
        entities.add_metric([], len(self._quotas.entities()))
        bound = GaugeMetricFamily(
            "brokerd_client_quota_bound", "The quota that applies to the share (bytes/s, "
            "percent of a thread, or partition mutations/s).", labels=_LABELS)
        rate = GaugeMetricFamily(
            "brokerd_client_quota_rate", "The share's rate now, over the quota windows.",
            labels=_LABELS)
        throttle = CounterMetricFamily(
            "brokerd_client_quota_throttle_time_ms", "Throttle time handed to the share's "
            "answers (ms).", labels=_LABELS)
        throttled = CounterMetricFamily(
            "brokerd_client_quota_throttled_requests", "Answers of the share that were "
            "throttled.", labels=_LABELS)
        for view in self._quotas.sensors(self._seconds() * 1000.0, MAX_SERIES_SHARES):
            labels = [view.key, view.user, view.client_id]
            bound.add_metric(labels, view.bound)
            rate.add_metric(labels, view.rate)
            throttle.add_metric(labels, view.throttle_ms_total)
            throttled.add_metric(labels, view.throttled)
        yield entities
        yield bound
        yield rate
        yield throttle
        yield throttled
