"""Client telemetry (KIP-714) with the real clients: Kafka 4.4's ``kafka-client-metrics``
tool makes, lists and describes client-metrics resources (durable across a crash);
librdkafka (confluent-kafka) and the Java 4.4 producer then push their metrics on their
own, as they do against Kafka, and the pushed metrics appear on ``/metrics`` and the
console's ``/clients``.

One broker for the module; the JVM runs one tool at a time with a small heap. About 20 s
in all, most of it JVM starts and the clients' first push interval.
"""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis

from tests.brokerproc import BrokerProcess
from tests.control_plane_helpers import confluent
from tests.e2e.test_kafka_tools import TOOL_TIMEOUT, TOOLS, tool, tool_ready
from tests.kafka_helpers import RawKafka, crash_and_restart, module_broker, wait_until

pytestmark = [pytest.mark.clients, pytest.mark.broker]

#: Long enough for a client's first push (at most 1.5 push intervals after it connects).
PUSH_WAIT = 20.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    confluent()
    yield from module_broker(tmp_path_factory, "telemetry")


def pushed(broker: BrokerProcess, **labels: str) -> list[tuple[str, float]]:
    """The pushed series on ``/metrics`` whose labels include ``labels``: (name, value)."""
    url = f"http://127.0.0.1:{broker.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    out = []
    for family in text_string_to_metric_families(text):
        if family.name not in ("brokerd_client_metric", "brokerd_client_counter"):
            continue
        for sample in family.samples:
            if labels.items() <= sample.labels.items():
                out.append((sample.labels["name"], float(sample.value)))
    return out


def client_metrics(broker: BrokerProcess, *args: str) -> str:
    return tool("kafka-client-metrics.sh", "--bootstrap-server", broker.kafka_bootstrap, *args)


def test_the_tool_alters_and_describes_durably(broker: BrokerProcess) -> None:
    out = client_metrics(broker, "--alter", "--name", "java-producers", "--metrics",
                         "org.apache.kafka.producer.", "--interval", "1000", "--match",
                         "client_software_name=apache-kafka-java,client_id=perf-.*")
    assert "Altered client metrics config for java-producers." in out
    crash_and_restart(broker)
    # --describe without --name lists the resources (ListConfigResources), then
    # describes each (DescribeConfigs).
    described = client_metrics(broker, "--describe")
    assert "Client metrics configs for java-producers are:" in described
    assert "interval.ms=1000" in described
    assert "match=client_software_name=apache-kafka-java,client_id=perf-.*" in described
    assert "metrics=org.apache.kafka.producer." in described


def test_librdkafka_pushes_once_subscribed(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    # confluent-kafka's AdminClient has no CLIENT_METRICS resource type: the request is
    # made by hand.
    configs = (
        ("metrics", "org.apache.kafka.producer."),
        ("interval.ms", "500"),
        ("match", "client_software_name=confluent-kafka-python"),
    )
    request = apis.IncrementalAlterConfigsRequest(resources=(
        apis.IncrementalAlterConfigsResource(
            resource_type=16, resource_name="rdkafka", configs=tuple(
                apis.IncrementalAlterableConfig(name=k, config_operation=0, value=v)
                for k, v in configs
            ),
        ),
    ))
    with RawKafka(broker) as kafka:
        answer = kafka.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
    assert answer.responses[0].error_code == 0
    # enable.metrics.push is librdkafka's default (true since 2.5): nothing to set.
    producer = Producer({"bootstrap.servers": broker.kafka_bootstrap,
                         "client.id": "telemetry-rdkafka"})
    try:
        def seen() -> list[tuple[str, float]]:
            producer.produce("telemetry-rdkafka", b"v")
            producer.poll(0.2)
            return pushed(broker, client_id="telemetry-rdkafka")

        series = wait_until(seen, "librdkafka's pushed metrics on /metrics", timeout=PUSH_WAIT)
    finally:
        producer.flush(10)
    names = {name for name, _ in series}
    assert all(n.startswith("org.apache.kafka.producer.") for n in names), names
    assert "org.apache.kafka.producer.record.queue.time.avg" in names
    page = urllib.request.urlopen(
        f"http://127.0.0.1:{broker.http_port}/clients", timeout=10).read().decode()
    assert "telemetry-rdkafka" in page and "confluent-kafka-python" in page


def test_the_java_producer_pushes_once_subscribed(broker: BrokerProcess) -> None:
    # The first test's resource matches the perf tool's producer (client id perf-...).
    # The producer asks for its subscription once connected and pushes every second
    # after that (the first push jittered); its start is slow on a busy machine, so it
    # runs until its metrics are seen (stopped by its pid then).
    tool_ready()
    producer = subprocess.Popen(
        [str(TOOLS / "kafka-producer-perf-test.sh"), "--topic", "telemetry-java",
         "--num-records", "100000", "--throughput", "20", "--record-size", "100",
         "--command-property", f"bootstrap.servers={broker.kafka_bootstrap}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        series = dict(wait_until(
            lambda: pushed(broker, client_software="apache-kafka-java 4.4.0"),
            "the Java producer's pushed metrics on /metrics", timeout=PUSH_WAIT * 2,
            interval=0.5,
        ))
    finally:
        producer.terminate()
        producer.wait(TOOL_TIMEOUT)
    assert all(n.startswith("org.apache.kafka.producer.") for n in series), series
    assert series["org.apache.kafka.producer.record.size.max"] >= 100
