"""Client instances (brokerd/kafka/telemetry/clients.py): Kafka's subscription and push
rules on a fake clock, synchronously."""

from __future__ import annotations

import gzip
import uuid
from typing import Any

from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.telemetry.clients import (
    ClientTelemetry,
    ConnectionFacts,
    Subscribed,
    TelemetryError,
    subscription_id,
)
from brokerd.kafka.telemetry.resources import DEFAULT_INTERVAL_MS, ClientMetricsResources
from brokerd.storage.record.compression import Compression, compress

from tests.kafka.telemetry import otlp_encode as enc

JAVA = ConnectionFacts("producer-1", "apache-kafka-java", "4.4.0", "10.0.0.1", 40000)
RDKAFKA = ConnectionFacts("rd", "librdkafka", "2.16.0", "10.0.0.2", 40001)
ZERO = uuid.UUID(int=0)


def _done(d: Any) -> Any:
    results: list[Any] = []
    failures: list[Any] = []
    d.addCallbacks(results.append, failures.append)
    if failures:
        failures[0].raiseException()
    assert results, "the Deferred did not fire"
    return results[0]


class TelemetryCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = task.Clock()
        self.clock.advance(1_000_000)
        self.resources = ClientMetricsResources()
        self.telemetry = ClientTelemetry(self.resources, clock=self.clock, max_bytes=4096,
                                         max_reporting=2, max_series=3)

    def resource(self, name: str, **configs: str) -> None:
        ops = [(k.replace("_", "."), 0, v) for k, v in configs.items()]
        _done(Deferred.fromCoroutine(self.resources.alter(name, ops, validate_only=False)))

    def get(self, instance: uuid.UUID = ZERO, facts: ConnectionFacts = JAVA) -> Subscribed:
        return self.telemetry.get_subscriptions(instance, facts)

    def push(self, sub: Subscribed, data: bytes = b"", *, terminating: bool = False,
             compression: int = 0, facts: ConnectionFacts = JAVA,
             sub_id: int | None = None) -> None:
        _done(Deferred.fromCoroutine(self.telemetry.push(
            sub.instance_id, sub.subscription_id if sub_id is None else sub_id,
            terminating=terminating, compression=compression, metrics=data, facts=facts)))

    def refused(self, code: ErrorCode, f: Any, *args: Any, **kw: Any) -> None:
        with self.assertRaises(TelemetryError) as caught:
            f(*args, **kw)
        self.assertEqual(caught.exception.code, code)


class SubscriptionTests(TelemetryCase):
    def test_new_instance_without_resources(self) -> None:
        sub = self.get()
        self.assertNotEqual(sub.instance_id, ZERO)
        self.assertEqual(sub.requested_metrics, ())
        self.assertEqual(sub.push_interval_ms, DEFAULT_INTERVAL_MS)
        self.assertEqual(sub.telemetry_max_bytes, 4096)
        self.assertEqual(sub.accepted_compression, (4, 3, 1, 2))
        self.assertEqual(sub.subscription_id, subscription_id((), DEFAULT_INTERVAL_MS,
                                                              sub.instance_id))
        # Every new client gets its own id.
        self.assertNotEqual(self.get().instance_id, sub.instance_id)

    def test_matching_resources_union_and_smallest_interval(self) -> None:
        self.resource("java", metrics="org.apache.kafka.producer.", interval_ms="2000",
                      match="client_software_name=apache-kafka-java,client_id=producer-.*")
        self.resource("all-clients", metrics="org.apache.kafka.consumer.", interval_ms="5000")
        self.resource("rdkafka", metrics="org.apache.kafka.", interval_ms="100",
                      match="client_software_name=librdkafka")
        sub = self.get()
        self.assertEqual(sub.requested_metrics,
                         ("org.apache.kafka.consumer.", "org.apache.kafka.producer."))
        self.assertEqual(sub.push_interval_ms, 2000)
        other = self.get(facts=RDKAFKA)
        self.assertEqual(other.requested_metrics,
                         ("org.apache.kafka.", "org.apache.kafka.consumer."))
        self.assertEqual(other.push_interval_ms, 100)
        # The whole value must match: "producer-.*" is not "xproducer-1".
        self.assertEqual(
            self.get(facts=ConnectionFacts("xproducer-1", "apache-kafka-java", "", "", 0))
            .requested_metrics, ("org.apache.kafka.consumer.",))

    def test_star_is_every_metric_and_instance_selector(self) -> None:
        first = self.get()
        self.clock.advance(DEFAULT_INTERVAL_MS / 1000)
        self.resource("me", metrics="*,a.b", match=f"client_instance_id={first.instance_id}")
        again = self.get(first.instance_id)
        self.assertEqual(again.requested_metrics, ("",))
        self.assertNotEqual(again.subscription_id, first.subscription_id)

    def test_same_subscription_same_id_after_a_restart(self) -> None:
        self.resource("r", metrics="x.", interval_ms="1000")
        sub = self.get()
        restarted = ClientTelemetry(self.resources, clock=self.clock)
        self.assertEqual(restarted.get_subscriptions(sub.instance_id, JAVA).subscription_id,
                         sub.subscription_id)

    def test_asking_again_within_the_interval_is_throttled(self) -> None:
        self.resource("r", metrics="x.", interval_ms="1000")
        sub = self.get()
        self.clock.advance(0.5)
        self.refused(ErrorCode.THROTTLING_QUOTA_EXCEEDED, self.get, sub.instance_id)
        self.clock.advance(0.5)
        self.assertEqual(self.get(sub.instance_id).subscription_id, sub.subscription_id)


class PushTests(TelemetryCase):
    def setUp(self) -> None:
        super().setUp()
        self.resource("r", metrics="*", interval_ms="1000")

    def test_push_right_after_get_then_once_per_interval(self) -> None:
        sub = self.get()
        self.push(sub)  # at once after the Get: clients add jitter
        self.clock.advance(0.9)
        self.refused(ErrorCode.THROTTLING_QUOTA_EXCEEDED, self.push, sub)
        self.clock.advance(0.1)
        self.push(sub)

    def test_changed_subscription_is_unknown_then_asked_again_at_once(self) -> None:
        sub = self.get()
        self.clock.advance(1)
        self.resource("r", interval_ms="2000")
        self.refused(ErrorCode.UNKNOWN_SUBSCRIPTION_ID, self.push, sub)
        # Right after UNKNOWN_SUBSCRIPTION_ID the client may ask again without waiting,
        # and push right after that.
        self.clock.advance(0.01)
        new = self.get(sub.instance_id)
        self.assertEqual(new.push_interval_ms, 2000)
        self.clock.advance(0.01)
        self.push(new)

    def test_terminating_push_is_taken_early_and_is_the_last(self) -> None:
        sub = self.get()
        self.push(sub)
        self.push(sub, terminating=True)  # early, but terminating
        self.clock.advance(10)
        self.refused(ErrorCode.INVALID_REQUEST, self.push, sub)

    def test_too_large_unsupported_compression_and_reserved_ids(self) -> None:
        sub = self.get()
        self.refused(ErrorCode.TELEMETRY_TOO_LARGE, self.push, sub, b"x" * 4097)
        self.clock.advance(1)
        self.refused(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, self.push, sub, compression=9)
        self.get(sub.instance_id)  # allowed at once after UNSUPPORTED_COMPRESSION_TYPE
        for reserved in (ZERO, uuid.UUID(int=1)):
            self.refused(ErrorCode.INVALID_REQUEST, self.telemetry.check_push, reserved, 0,
                         terminating=False, compression=0, size=0, facts=JAVA)

    def test_pushed_metrics_kept_decoded_and_deltas_added(self) -> None:
        sub = self.get()
        data = enc.metrics_data(
            enc.gauge("g", enc.number_point(2.5)),
            enc.sum_metric("c", enc.number_point(3), temporality=1),
        )
        self.push(sub, compress(Compression.GZIP, data), compression=Compression.GZIP)
        self.clock.advance(1)
        self.push(sub, compress(Compression.ZSTD, data), compression=Compression.ZSTD)
        (client,) = self.telemetry.clients()
        self.assertEqual(client.pushes, 2)
        self.assertEqual(client.software, "apache-kafka-java 4.4.0")
        self.assertEqual(client.address, "10.0.0.1:40000")
        got = {(s.name, s.counter): s.value for s in client.series}
        self.assertEqual(got, {("g", False): 2.5, ("c", True): 6.0})

    def test_undecodable_metrics_accepted_but_dropped(self) -> None:
        sub = self.get()
        self.push(sub, gzip.compress(b"\x0a\x05ab"), compression=Compression.GZIP)
        (client,) = self.telemetry.clients()
        self.assertEqual((client.pushes, client.series), (1, ()))
        self.assertIn("past", self.telemetry.last_decode_error)
        self.assertEqual(self.telemetry.undecodable.count, 1)

    def test_series_and_reporting_clients_bounded(self) -> None:
        facts = [ConnectionFacts(f"c{i}", "", "", "", 0) for i in range(3)]
        four = enc.metrics_data(enc.gauge("g", *(enc.number_point(1, [("i", i)])
                                                 for i in range(4))))
        for f in facts:
            self.push(self.get(facts=f), four, facts=f)
        clients = {c.client_id: c for c in self.telemetry.clients()}
        # max_series=3: each client kept its 3 most recent series; max_reporting=2: the
        # least recently seen client lost its series.
        self.assertEqual(len(clients["c2"].series), 3)
        self.assertEqual(len(clients["c1"].series), 3)
        self.assertEqual(clients["c0"].series, ())
        self.assertEqual(self.telemetry.dropped_series, 3 * 1 + 3)

    def test_idle_instances_expire(self) -> None:
        sub = self.get()
        self.clock.advance(59)
        self.assertEqual(len(self.telemetry.clients()), 1)
        self.clock.advance(1)  # three intervals of 1 s, but never sooner than 60 s
        self.assertEqual(self.telemetry.clients(), [])
        # A forgotten instance pushing again is matched anew, with the same id.
        self.push(sub)
