"""Per-topic traffic: counted, and forgotten with deleted topics."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from brokerd.metrics.traffic import TopicTraffic


class TopicTrafficTest(SynchronousTestCase):
    def test_counts_and_forgets_deleted_topics(self) -> None:
        traffic = TopicTraffic()
        traffic.records_in("a", 3, 300)
        traffic.records_in("a", 1, 50)
        traffic.records_out("a", 2, 20)
        traffic.records_in("b", 1, 1)
        families = {f.name: f for f in traffic.collect({"a", "b"})}
        values = {s.labels["topic"]: s.value for s in families["brokerd_topic_records_in"].samples}
        self.assertEqual(values, {"a": 4, "b": 1})
        self.assertEqual(families["brokerd_topic_bytes_in"].samples[0].value, 350)
        self.assertEqual(families["brokerd_topic_records_out"].samples[0].value, 2)
        # "b" is deleted: its series go, and stay gone.
        families = {f.name: f for f in traffic.collect({"a"})}
        self.assertEqual(
            [s.labels["topic"] for s in families["brokerd_topic_bytes_in"].samples], ["a"]
        )
        families = {f.name: f for f in traffic.collect({"a", "b"})}
        self.assertEqual(len(families["brokerd_topic_records_in"].samples), 1)
