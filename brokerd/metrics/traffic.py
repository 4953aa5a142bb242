# -*- test-case-name: tests.metrics.test_traffic -*-
"""Per-topic traffic: records and bytes produced and fetched, by topic.

Counted in plain dictionaries on the reactor thread (one lookup and two additions per
append or fetched partition, no Prometheus label lookup on the hot path) and exported at
scrape time for the topics that exist then: a deleted topic's counters are dropped, so
its series disappear, and a name that never existed (a client's typo) never gets one,
because only appends that landed and fetches that returned records are counted.

What it does not do: know which topics exist (the caller passes them to
:meth:`TopicTraffic.collect`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from prometheus_client.metrics_core import CounterMetricFamily, Metric

# Index of each figure in a topic's counter list.
_RECORDS_IN, _BYTES_IN, _RECORDS_OUT, _BYTES_OUT = range(4)

_SERIES = (
    ("brokerd_topic_records_in", "Records appended to the topic (produce, both protocols)."),
    ("brokerd_topic_bytes_in", "Bytes appended to the topic, as stored (produce)."),
    ("brokerd_topic_records_out", "Records sent to consumers in fetch answers."),
    ("brokerd_topic_bytes_out", "Record bytes sent to consumers in fetch answers."),
)


class TopicTraffic:
    """Counters of records and bytes in and out per topic. Reactor thread only."""

    def __init__(self) -> None:
        self._topics: dict[str, list[int]] = {}

    def _counters(self, topic: str) -> list[int]:
        counters = self._topics.get(topic)
        if counters is None:
            counters = self._topics[topic] = [0, 0, 0, 0]
        return counters

    def records_in(self, topic: str, records: int, size: int) -> None:
        counters = self._counters(topic)
        counters[_RECORDS_IN] += records
        counters[_BYTES_IN] += size

    def records_out(self, topic: str, records: int, size: int) -> None:
        counters = self._counters(topic)
        counters[_RECORDS_OUT] += records
        counters[_BYTES_OUT] += size

    def collect(self, existing: Collection[str]) -> Iterator[Metric]:
        """The four counter families for the topics in ``existing``; counters of topics
        not in it are forgotten."""
        for gone in [t for t in self._topics if t not in existing]:
            del self._topics[gone]
        for index, (name, documentation) in enumerate(_SERIES):
            family = CounterMetricFamily(name, documentation, labels=["topic"])
            for topic in sorted(self._topics):
                family.add_metric([topic], self._topics[topic][index])
            yield family


__all__ = ["TopicTraffic"]
