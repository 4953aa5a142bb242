"""/metrics, /healthz and /readyz of a real ``twistd broker`` under real clients (native
and confluent-kafka), parsed with ``prometheus_client.parser``."""

from __future__ import annotations

import shutil
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from brokerd.client import NativeError

from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.broker

confluent_kafka = pytest.importorskip("confluent_kafka")
AdminClient = pytest.importorskip("confluent_kafka.admin").AdminClient

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(port: int) -> Samples:
    status, text = http_get(port, "/metrics")
    assert status == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    data = tmp_path / "data"
    data.mkdir()
    proc = BrokerProcess(data).start()
    try:
        yield proc
    finally:
        proc.stop()


def test_series_move_under_native_and_kafka_traffic(broker: BrokerProcess) -> None:
    with broker.client() as client:
        client.create_topic("m", 1)
        client.produce("m", 0, [b"one", b"two"])
    first = scrape(broker.http_port)
    topic = (("topic", "m"),)
    assert first[("brokerd_topic_records_in_total", topic)] == 2
    native_produce = (("api", "Produce"), ("protocol", "native"))
    assert first[("brokerd_requests_total", native_produce)] == 1

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.kafka_bootstrap, "acks": "all", "linger.ms": 0}
    )
    for i in range(5):
        producer.produce("m", value=b"k%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.kafka_bootstrap,
            "group.id": "mg",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["m"])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 7 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value())
        assert len(got) == 7
        consumer.commit(asynchronous=False)
        with broker.client() as client:
            assert client.fetch("m", 0, 0)[:2] == [b"one", b"two"]
            with pytest.raises(NativeError, match="UNKNOWN_TOPIC"):
                client.fetch("nosuch-topic", 0, 0)
        second = scrape(broker.http_port)
    finally:
        consumer.close()

    assert second[("brokerd_topic_records_in_total", topic)] == 7
    assert second[("brokerd_topic_bytes_in_total", topic)] > first[
        ("brokerd_topic_bytes_in_total", topic)
    ]
    # The native fetch's records; the Kafka consumer's fetches add their batches' bytes.
    assert second[("brokerd_topic_records_out_total", topic)] == 7
    assert second[("brokerd_topic_bytes_out_total", topic)] > second[
        ("brokerd_topic_bytes_in_total", topic)
    ]
    kafka_produce = (("api", "Produce"), ("protocol", "kafka"))
    assert second[("brokerd_requests_total", kafka_produce)] >= 1
    assert second[("brokerd_request_duration_seconds_count", kafka_produce)] >= 1
    assert second[("brokerd_requests_total", (("api", "Fetch"), ("protocol", "kafka")))] >= 1
    assert second[("brokerd_requests_total", (("api", "Fetch"), ("protocol", "native")))] == 2
    assert second[
        ("brokerd_request_errors_total",
         (("api", "Fetch"), ("error", "UNKNOWN_TOPIC_OR_PARTITION"), ("protocol", "native")))
    ] == 1
    # A fetch of a topic that does not exist creates no per-topic series.
    assert not [k for k in second if ("topic", "nosuch-topic") in k[1]]
    assert second[("brokerd_connections_accepted_total", (("listener", "native"),))] >= 2
    assert second[("brokerd_connections_accepted_total", (("listener", "kafka"),))] >= 2
    assert second[("brokerd_connections_open", (("listener", "native"),))] == 0
    assert second[("brokerd_fsync_duration_seconds_count", ())] > first[
        ("brokerd_fsync_duration_seconds_count", ())
    ]
    # One observation per append (the Kafka producer's five records may be one batch).
    assert second[("brokerd_produce_durable_seconds_count", ())] > first[
        ("brokerd_produce_durable_seconds_count", ())
    ]
    partition = (("partition", "0"), ("topic", "m"))
    assert second[("brokerd_partition_log_end_offset", partition)] == 7
    assert second[("brokerd_partition_segments", partition)] == 1
    assert second[("brokerd_partition_log_size_bytes", partition)] > 0
    assert second[("brokerd_group_lag", (("group", "mg"), *partition))] == 0
    assert ("brokerd_group_members", (("group", "mg"),)) in second
    assert second[("process_open_fds", ())] > 0
    assert http_get(broker.http_port, "/healthz") == (200, "ok\n")
    assert http_get(broker.http_port, "/readyz") == (200, "ready\n")


def test_readyz_while_a_partition_is_offline(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    proc = BrokerProcess(data).start()
    try:
        with proc.client() as client:
            client.create_topic("ok", 1)
            client.create_topic("evil", 2)
        assert http_get(proc.http_port, "/readyz") == (200, "ready\n")
        proc.stop()
        # A partition directory replaced by a symlink is never opened: offline.
        shutil.rmtree(data / "evil-1")
        outside = tmp_path / "outside"
        outside.mkdir()
        (data / "evil-1").symlink_to(outside)
        proc.start()
        status, body = http_get(proc.http_port, "/readyz")
        assert status == 503
        assert body.startswith("not ready\n")
        assert "partition evil-1 offline" in body
        samples = scrape(proc.http_port)
        assert samples[("brokerd_offline_partitions", ())] == 1
        assert samples[("brokerd_partition_offline", (("partition", "1"), ("topic", "evil")))] == 1
        assert http_get(proc.http_port, "/healthz") == (200, "ok\n")
        # Deleting the topic (allowed in any state) makes the broker ready again, and
        # its series disappear.
        admin = AdminClient({"bootstrap.servers": proc.kafka_bootstrap})
        admin.delete_topics(["evil"])["evil"].result(30)
        assert http_get(proc.http_port, "/readyz") == (200, "ready\n")
        samples = scrape(proc.http_port)
        assert not [k for k in samples if ("topic", "evil") in k[1]]
        assert samples[("brokerd_offline_partitions", ())] == 0
    finally:
        proc.stop()


def test_http_none_serves_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    proc = BrokerProcess(data, args=("--http=none",)).start()
    try:
        with proc.client() as client:
            client.create_topic("t", 1)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", proc.http_port), timeout=2).close()
    finally:
        proc.stop()
