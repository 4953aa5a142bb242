"""The shipped systemd units, run end to end under ``systemd-socket-activate``.

The service's own ``ExecStart`` runs with both named sockets inherited (``native`` and
``kafka``, named as the socket units name them) and ``$NOTIFY_SOCKET`` pointing at a
datagram socket the test reads (``tests/systemd_harness.py``). Proved here: READY=1 comes
from the main process only once both inherited listeners and the HTTP endpoint answer;
native and Kafka clients produce and consume through the inherited sockets; SIGTERM while
native and Kafka producers (acks=all) are running gives STOPPING=1 at once, a clean exit
within 10 s with the clean-shutdown marker, and, after the next activation, every
acknowledged record at its acknowledged offset; after a SIGKILL, READY=1 comes only once
the logs are recovered.
"""

from __future__ import annotations

import http.client
import signal
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.client import NativeClient, NativeError

from tests.kafka_helpers import WAIT, close_consumer, wait_until
from tests.systemd_harness import (
    SOCKET_ACTIVATE,
    ActivatedBroker,
    NotifySocket,
    answered_within,
    service_command,
    socket_units,
)

pytestmark = [
    pytest.mark.skipif(
    SOCKET_ACTIVATE is None, reason="systemd-socket-activate missing (Debian package systemd)"
),
    pytest.mark.broker,
]

#: The shutdown budget under load (the unit's TimeoutStopSec= is far above it).
STOP_BUDGET = 10.0
#: READY=1 promises the listeners serve: a first request right after it is answered at
#: once, not after some start-up work still to come (bounds with room for a loaded
#: 2-core machine).
FIRST_ANSWER = 5.0
#: STOPPING=1 is the first step of a shutdown.
STOPPING_WITHIN = 5.0
NATIVE_BATCH = 20


@pytest.fixture
def notify() -> Iterator[NotifySocket]:
    sock = NotifySocket()
    yield sock
    sock.close()


@pytest.fixture
def activated(tmp_path: Path, notify: NotifySocket) -> Iterator[ActivatedBroker]:
    broker = ActivatedBroker(tmp_path, notify)
    yield broker
    broker.kill()


def kafka_api_versions(port: int) -> int:
    """One ApiVersions v0 request on a fresh connection; its error code."""
    client_id = b"sd-test"
    header = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    with socket.create_connection(("127.0.0.1", port), timeout=FIRST_ANSWER) as s:
        s.sendall(struct.pack(">i", len(header)) + header)
        data = b""
        while len(data) < 10:
            chunk = s.recv(64)
            assert chunk, "the Kafka listener closed the connection"
            data += chunk
    _, correlation, error = struct.unpack(">iih", data[:10])
    assert correlation == 7
    return int(error)


def http_status(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=FIRST_ANSWER)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def ready_and_serving(broker: ActivatedBroker) -> None:
    """Wait for READY=1, then check that it came from the broker and that all three
    listeners answer straight away."""
    ready = broker.notify.wait_for("READY")
    assert ready.fields == {"READY": "1", "STATUS": "serving"}
    assert ready.pid == broker.pid, "NotifyAccess=main: READY must come from the main process"

    def native() -> object:
        with NativeClient("127.0.0.1", broker.native_port, timeout=FIRST_ANSWER) as client:
            return client.list_topics()

    answered_within(FIRST_ANSWER, native)
    assert answered_within(FIRST_ANSWER, lambda: kafka_api_versions(broker.kafka_port)) == 0
    assert answered_within(FIRST_ANSWER, lambda: http_status(broker.http_port, "/")) == 200


def test_the_unit_runs_both_named_sockets_and_http(tmp_path: Path) -> None:
    """What the harness runs is the unit's own command line with the socket units' names."""
    assert socket_units() == {"kafka": "127.0.0.1:9092", "native": "127.0.0.1:7070"}
    argv = service_command(tmp_path, 8070)
    assert "--native=systemd:domain=INET:name=native" in argv
    assert "--kafka=systemd:domain=INET:name=kafka" in argv
    assert "--http=tcp:8070:interface=127.0.0.1" in argv
    assert f"--data-dir={tmp_path}/brokerd" in argv


def test_ready_then_both_protocols_through_the_inherited_sockets(
    activated: ActivatedBroker,
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    activated.start()
    ready_and_serving(activated)
    # The broker listens on exactly the sockets it inherited: no port of its own.
    assert f"advertised as 127.0.0.1:{activated.kafka_port}" in activated.log()

    with NativeClient("127.0.0.1", activated.native_port) as client:
        client.create_topic("sd-native", 1)
        values = [b"native-%d" % i for i in range(100)]
        assert client.produce("sd-native", 0, values[:50]) == 0
        assert client.produce("sd-native", 0, values[50:]) == 50
        assert client.fetch("sd-native", 0, 0) == values

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": activated.kafka_bootstrap, "acks": "all", "linger.ms": 5}
    )
    delivered: list[tuple[int, bytes]] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        delivered.append((msg.offset(), msg.value()))  # type: ignore[attr-defined]

    kafka_values = [b"kafka-%d" % i for i in range(100)]
    for value in kafka_values:
        producer.produce("sd-kafka", value, partition=0, on_delivery=on_delivery)
    assert producer.flush(WAIT) == 0
    assert sorted(delivered) == list(enumerate(kafka_values))

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": activated.kafka_bootstrap,
            "group.id": "sd-group",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition("sd-native", 0, 0)])
        seen: list[bytes] = []

        def read_all() -> bool:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                seen.append(msg.value())
            return len(seen) >= 100

        wait_until(read_all, "the native records through the Kafka listener")
        assert seen == values
    finally:
        close_consumer(consumer)
    # And the Kafka-produced records through the native listener.
    with NativeClient("127.0.0.1", activated.native_port) as client:
        assert client.fetch("sd-kafka", 0, 0) == kafka_values

    started = activated.terminate()
    code, exited = activated.wait(STOP_BUDGET)
    assert code == -signal.SIGTERM, activated.log()
    assert (activated.data_dir / ".clean_shutdown").exists()
    stopping = activated.notify.wait_for("STOPPING", timeout=0)
    assert stopping.pid == activated.pid
    assert started <= stopping.at <= exited + 0.5


class NativeProducer(threading.Thread):
    """Produces batches over one native connection until stopped or refused; records
    every acknowledged ``(offset, value)``."""

    def __init__(self, port: int, topic: str, partition: int) -> None:
        super().__init__(name=f"native-producer-{topic}-{partition}", daemon=True)
        self.port = port
        self.topic = topic
        self.partition = partition
        self.acked: list[tuple[int, bytes]] = []
        self.stop_error: BaseException | None = None
        self.halt = threading.Event()

    def run(self) -> None:
        sent = 0
        try:
            with NativeClient("127.0.0.1", self.port) as client:
                while not self.halt.is_set():
                    values = [
                        b"%s-%d-%d" % (self.topic.encode(), self.partition, sent + i)
                        for i in range(NATIVE_BATCH)
                    ]
                    base = client.produce(self.topic, self.partition, values)
                    self.acked.extend((base + i, v) for i, v in enumerate(values))
                    sent += NATIVE_BATCH
        except (NativeError, OSError) as e:
            # Refused (shutting down) or disconnected: what was not acknowledged may or
            # may not be stored, and is not checked.
            self.stop_error = e


class KafkaProducer(threading.Thread):
    """A confluent-kafka producer (acks=all) producing until stopped; records every
    delivery report without error as ``(partition, offset, value)``."""

    def __init__(self, confluent_kafka: object, bootstrap: str, topic: str) -> None:
        super().__init__(name=f"kafka-producer-{topic}", daemon=True)
        self.producer = confluent_kafka.Producer(  # type: ignore[attr-defined]
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 30_000,
                "reconnect.backoff.max.ms": 200,
            }
        )
        self.topic = topic
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed = 0
        self.halt = threading.Event()

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is None:
            self.acked.append(
                (msg.partition(), msg.offset(), msg.value())  # type: ignore[attr-defined]
            )
        else:
            self.failed += 1

    def run(self) -> None:
        sent = 0
        while not self.halt.is_set():
            try:
                self.producer.produce(
                    self.topic,
                    b"k-%d" % sent,
                    partition=sent % 2,
                    on_delivery=self._on_delivery,
                )
                sent += 1
            except BufferError:
                self.producer.poll(0.05)
            self.producer.poll(0)
        # The broker is gone: drop what was never acknowledged (reported as failures).
        self.producer.purge()
        self.producer.flush(5)


def test_sigterm_under_produce_load_is_clean_and_loses_nothing(
    activated: ActivatedBroker,
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    activated.start()
    ready_and_serving(activated)
    with NativeClient("127.0.0.1", activated.native_port) as client:
        client.create_topic("load-native", 2)
        client.create_topic("load-kafka", 2)

    native = [NativeProducer(activated.native_port, "load-native", p) for p in (0, 1)]
    kafka = KafkaProducer(confluent_kafka, activated.kafka_bootstrap, "load-kafka")
    producers: list[NativeProducer | KafkaProducer] = [*native, kafka]
    for producer in producers:
        producer.start()
    try:
        wait_until(
            lambda: all(len(p.acked) >= 200 for p in producers),
            "every producer to have acknowledgements",
        )
        sent_at = activated.terminate()
        stopping = activated.notify.wait_for("STOPPING", timeout=STOPPING_WITHIN)
        assert stopping.at - sent_at < STOPPING_WITHIN
        assert stopping.pid == activated.pid
        code, exited = activated.wait(STOP_BUDGET)
        assert stopping.at <= exited
    finally:
        for producer in producers:
            producer.halt.set()
        for producer in producers:
            producer.join(WAIT)
    log = activated.log()
    assert exited - sent_at < STOP_BUDGET
    # twistd re-raises SIGTERM after a clean shutdown: systemd counts that as success.
    assert code == -signal.SIGTERM, log
    assert (activated.data_dir / ".clean_shutdown").exists(), log
    assert "Traceback" not in log and "Unhandled" not in log, log
    assert "Received SIGTERM" in log and "Server Shut Down" in log
    # The producers were really running into the shutdown.
    for producer in native:
        assert producer.stop_error is not None, "native producer never saw the shutdown"

    # The next activation: every acknowledged record is where its acknowledgement said.
    activated.notify.clear()
    activated.start()
    ready_and_serving(activated)
    with NativeClient("127.0.0.1", activated.native_port) as client:
        for producer in native:
            stored = fetch_all(client, "load-native", producer.partition)
            for offset, value in producer.acked:
                assert stored.get(offset) == value, (producer.partition, offset)
        stored_kafka = {p: fetch_all(client, "load-kafka", p) for p in (0, 1)}
    for partition, offset, value in kafka.acked:
        assert stored_kafka[partition].get(offset) == value, (partition, offset)
    assert len(kafka.acked) >= 200 and all(len(p.acked) >= 200 for p in native)
    assert activated.stop() == -signal.SIGTERM


def fetch_all(client: NativeClient, topic: str, partition: int) -> dict[int, bytes]:
    """Every record of a partition by offset (type-2 fetches until the end)."""
    start, end = client.list_offsets(topic, partition)
    stored: dict[int, bytes] = {}
    offset = start
    while offset < end:
        values = client.fetch(topic, partition, offset)
        assert values, f"{topic}-{partition}: nothing at {offset} below {end}"
        for value in values:
            stored[offset] = value
            offset += 1
    return stored


def test_sigterm_at_once_after_ready_is_clean(
    activated: ActivatedBroker,
) -> None:
    """A SIGTERM right after READY=1 (twistd's handlers are in place by then) still shuts
    down cleanly."""
    activated.start()
    activated.notify.wait_for("READY")
    sent_at = activated.terminate()
    code, exited = activated.wait(STOP_BUDGET)
    assert code == -signal.SIGTERM, activated.log()
    assert exited - sent_at < STOP_BUDGET
    assert (activated.data_dir / ".clean_shutdown").exists()
    assert activated.notify.wait_for("STOPPING", timeout=0).pid == activated.pid


def test_after_a_crash_ready_comes_once_recovery_is_done(activated: ActivatedBroker) -> None:
    """SIGKILL under load (what TimeoutStopSec= running out does), then the next
    activation: the broker recovers its logs before READY=1, and every acknowledged
    record is there."""
    activated.start()
    ready_and_serving(activated)
    producer = NativeProducer(activated.native_port, "crash-native", 0)
    producer.start()
    try:
        wait_until(lambda: len(producer.acked) >= 500, "acknowledged native records")
        activated.kill()
    finally:
        producer.halt.set()
        producer.join(WAIT)
    assert not (activated.data_dir / ".clean_shutdown").exists()

    activated.notify.clear()
    activated.start()
    activated.notify.wait_for("READY")
    # The journal logger flushes every line: recovery was logged before READY=1.
    assert "previous shutdown was not clean (logs recovered)" in activated.log()
    ready_and_serving(activated)
    with NativeClient("127.0.0.1", activated.native_port) as client:
        stored = fetch_all(client, "crash-native", 0)
    for offset, value in producer.acked:
        assert stored.get(offset) == value, offset
