"""End-to-end latency: produce call to consumer receipt, at a steady rate.

``make latency`` (or ``python bench/latency.py --rate 1000 --seconds 30``) starts a
broker with default settings (``--fsync always``), runs a producer at the given rate and a
long-polling consumer, and prints p50/p99/p99.9/max for the native protocol and for
confluent-kafka (``make bench`` calls ``measure`` for its latency rows). Each value
carries the producer's ``time.perf_counter()`` at the produce call. The consumer runs in
a process of its own (so that neither client waits for the other's turn at the GIL);
``time.perf_counter`` is ``CLOCK_MONOTONIC`` on Linux, one clock for every process, so
the two ends' readings compare.

Beside produce-to-receipt it prints produce-to-acknowledgement (the produce call's return
for native, the delivery report for confluent-kafka): the difference between the two is
what the consumer side (long poll and fetch) adds; the rest is the produce path.
Delivery reports are served by a thread blocked in ``producer.poll``, so each is taken
when librdkafka has it.

``--floor`` measures what no broker can beat on this machine: a round trip through
loopback TCP to a plain Python server in another process, without and with a
``write`` + ``fdatasync`` of each 100-byte message (docs/performance.md, "End-to-end
latency").
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import Latency, Results  # noqa: E402
from bench.common import percentiles as latency_of  # noqa: E402

from tests.brokerproc import BrokerProcess  # noqa: E402

STAMP = struct.Struct(">d")
PAD = b"p" * 92  # 8-byte timestamp + 92 = 100-byte values
#: How long a consumer process may take to connect and say it is ready.
READY_TIMEOUT = 30.0
#: How long the consumer keeps waiting for the last records after the producer is done.
DRAIN_SECONDS = 30.0
#: The consumer process's first line once it is connected and polling.
READY = "ready"
KAFKA_TOPIC = "klat"


def percentiles(samples: list[float]) -> str:
    if not samples:
        return "no samples"
    lat = latency_of("", "", samples)
    return (
        f"n={lat.n:,}  p50 {lat.p50:.2f} ms  p99 {lat.p99:.2f} ms  p99.9 {lat.p999:.2f} ms"
        f"  max {lat.max:.2f} ms"
    )


def paced(rate: int, seconds: float) -> list[float]:
    """Send times, evenly spaced."""
    return [i / rate for i in range(int(rate * seconds))]


def send_paced(rate: int, seconds: float, send: Callable[[float], None]) -> float:
    """Call ``send(perf_counter())`` at each of :func:`paced`'s times (late calls go at
    once, so a slow ``send`` lowers the rate); returns the seconds the sending took."""
    start = time.perf_counter()
    for at in paced(rate, seconds):
        delay = start + at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        send(time.perf_counter())
    return time.perf_counter() - start


# -- the consumer processes ------------------------------------------------------------


def _consume_native(port: int, total: int, out: IO[str]) -> list[float]:
    from brokerd.client import NativeClient

    latencies: list[float] = []
    deadline: float | None = None
    with NativeClient("127.0.0.1", port, timeout=30) as client:
        offset = 0
        print(READY, file=out, flush=True)
        while len(latencies) < total:
            r = client.poll("lat", 0, offset, max_wait_ms=1000)
            now = time.perf_counter()
            for rec in r.records:
                latencies.append(now - STAMP.unpack_from(rec.value or b"")[0])
            if r.records:
                offset = r.records[-1].offset + 1
                deadline = None
            elif deadline is None:
                deadline = now + DRAIN_SECONDS
            elif now > deadline:
                break
    return latencies


def _consume_kafka(bootstrap: str, total: int, out: IO[str], topic: str) -> list[float]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "latency",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 500,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.poll(0.5)  # connected, fetching
    print(READY, file=out, flush=True)
    latencies: list[float] = []
    idle_since = time.perf_counter()
    while len(latencies) < total and time.perf_counter() - idle_since < DRAIN_SECONDS:
        msg = consumer.poll(0.5)
        if msg is None or msg.error() is not None:
            continue
        value = msg.value()
        if value is not None:
            latencies.append(time.perf_counter() - STAMP.unpack_from(value)[0])
            idle_since = time.perf_counter()
    consumer.close()
    return latencies


class ConsumerProcess:
    """``bench/latency.py --consume ...`` as a child: started, waited for until ready,
    and read for its latencies (one JSON list on its last line)."""

    def __init__(self, *args: str) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--consume", *args],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self._out = self._proc.stdout
        ready: list[str] = []
        reader = threading.Thread(target=lambda: ready.append(self._out.readline()))
        reader.start()
        reader.join(READY_TIMEOUT)
        if not ready or ready[0].strip() != READY:
            self._proc.kill()
            raise RuntimeError(f"latency consumer {args} did not start")

    def latencies(self) -> list[float]:
        text = self._out.read()
        self._proc.wait(READY_TIMEOUT)
        return [float(x) for x in json.loads(text or "[]")]


# -- the producers -----------------------------------------------------------------------


def native(
    proc: BrokerProcess, rate: int, seconds: float, spans: list[float] | None = None
) -> tuple[list[float], list[float]]:
    """Produce-to-receipt and produce-to-acknowledgement latencies; the seconds the sending
    took are appended to ``spans`` (one produce is in flight at a time: when an
    acknowledgement takes longer than the interval, the rate falls below ``rate``)."""
    acks: list[float] = []
    total = int(rate * seconds)
    with proc.client() as client:
        client.create_topic("lat", 1)
    consumer = ConsumerProcess("native", str(proc.native_port), str(total))
    time.sleep(0.2)
    with proc.client() as client:

        def send(sent: float) -> None:
            client.produce("lat", 0, [STAMP.pack(sent) + PAD])
            acks.append(time.perf_counter() - sent)

        took = send_paced(rate, seconds, send)
        if spans is not None:
            spans.append(took)
    return consumer.latencies(), acks


def kafka(
    proc: BrokerProcess, rate: int, seconds: float, spans: list[float] | None = None
) -> tuple[list[float], list[float]]:
    """Produce-to-receipt and produce-to-delivery-report latencies through confluent-kafka
    on brokerd; the seconds the sending took are appended to ``spans``."""
    with proc.client() as client:
        client.create_topic(KAFKA_TOPIC, 1)
    return kafka_client(proc.kafka_bootstrap, KAFKA_TOPIC, rate, seconds, spans)


def kafka_client(
    bootstrap: str, topic: str, rate: int, seconds: float, spans: list[float] | None = None
) -> tuple[list[float], list[float]]:
    """:func:`kafka` on any Kafka-protocol broker, ``topic`` (one partition) made first."""
    from confluent_kafka import Message, Producer

    acks: list[float] = []

    def delivered(err: object, msg: Message) -> None:
        value = msg.value()
        if err is None and value is not None:
            acks.append(time.perf_counter() - STAMP.unpack_from(value)[0])

    total = int(rate * seconds)
    consumer = ConsumerProcess("kafka", bootstrap, str(total), topic)
    time.sleep(0.5)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    # Connected, with the topic's metadata, before the clock starts.
    producer.list_topics(topic, timeout=10)
    stop = threading.Event()

    def serve_reports() -> None:
        while not stop.is_set():
            producer.poll(0.05)

    reports = threading.Thread(target=serve_reports, daemon=True)
    reports.start()
    took = send_paced(
        rate,
        seconds,
        lambda sent: producer.produce(topic, STAMP.pack(sent) + PAD, on_delivery=delivered),
    )
    if spans is not None:
        spans.append(took)
    producer.flush(30)
    stop.set()
    reports.join(5)
    return consumer.latencies(), acks


# -- the floor ---------------------------------------------------------------------------


def _serve_floor(port_out: IO[str], sync: bool) -> None:
    """Echo each 100-byte message after appending it to a file (and fdatasync with
    ``sync``): one blocking socket, one thread, until the client closes."""
    with tempfile.TemporaryDirectory(prefix="brokerd-floor-") as tmp:
        fd = os.open(os.path.join(tmp, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        with socket.create_server(("127.0.0.1", 0)) as server:
            print(server.getsockname()[1], file=port_out, flush=True)
            conn, _ = server.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with conn:
                while True:
                    data = conn.recv(100, socket.MSG_WAITALL)
                    if len(data) < 100:
                        break
                    os.write(fd, data)
                    if sync:
                        os.fdatasync(fd)
                    conn.sendall(data)
        os.close(fd)


def floor(rate: int, seconds: float, *, sync: bool) -> list[float]:
    """Round trips of 100-byte messages at ``rate`` through a plain server process."""
    role = "sync" if sync else "echo"
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve-floor", role],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    port = int(child.stdout.readline())
    samples: list[float] = []
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def echo(sent: float) -> None:
            conn.sendall(STAMP.pack(sent) + PAD)
            conn.recv(100, socket.MSG_WAITALL)
            samples.append(time.perf_counter() - sent)

        send_paced(rate, seconds, echo)
    child.wait(READY_TIMEOUT)
    return samples


# -- make bench, make latency ------------------------------------------------------------


CK_RECEIPT = "confluent-kafka: produce to consumer receipt"
CK_REPORT = "confluent-kafka: produce to delivery report"


def _how(rate: int, seconds: float, took: float) -> str:
    # A producer that waits for each acknowledgement falls behind: say so.
    return f"{rate:,} rec/s for {seconds:g} s (sent at {int(rate * seconds) / took:,.0f} rec/s)"


def _complete(rows: list[Latency], rate: int, seconds: float) -> list[Latency]:
    expected = int(rate * seconds)
    for row in rows:
        if row.n < expected:
            raise RuntimeError(f"{row.what}: {row.n} of {expected} records measured")
    return rows


def confluent_rows(bootstrap: str, topic: str, rate: int, seconds: float,
                   durability: str) -> list[Latency]:
    """The two confluent-kafka rows (receipt, delivery report) on any Kafka-protocol
    broker, ``topic`` made first."""
    spans: list[float] = []
    received, acked = kafka_client(bootstrap, topic, rate, seconds, spans)
    how = _how(rate, seconds, spans[-1])
    return _complete([latency_of(f"{CK_RECEIPT}, {how}", durability, received),
                      latency_of(f"{CK_REPORT}, {how}", durability, acked)], rate, seconds)


def measure(results: Results, proc: BrokerProcess, rate: int, seconds: float,
            never: BrokerProcess | None = None) -> None:
    """The latency rows of ``make bench``: native and confluent-kafka on ``proc`` (with
    ``--fsync always``), and confluent-kafka on ``never`` (``--fsync never``, the row
    Apache Kafka's default durability is compared with) when given."""
    spans: list[float] = []
    received, acked = native(proc, rate, seconds, spans)
    how = _how(rate, seconds, spans[-1])
    durability = "fsync always"
    rows = _complete([
        latency_of(f"native: produce to long-poll receipt, {how}", durability, received),
        latency_of(f"native: produce to acknowledgement, {how}", durability, acked),
    ], rate, seconds)
    for broker, mode in ((proc, "always"), (never, "never")):
        if broker is None:
            continue
        with broker.client() as client:
            client.create_topic(KAFKA_TOPIC, 1)
        rows += confluent_rows(broker.kafka_bootstrap, KAFKA_TOPIC, rate, seconds,
                               f"fsync {mode}")
    results.latencies.extend(rows)


def _child(argv: list[str]) -> None:
    """The roles this script plays in a child process (see ``ConsumerProcess``, ``floor``)."""
    role = argv[0]
    if role == "--serve-floor":
        _serve_floor(sys.stdout, sync=argv[1] == "sync")
        return
    kind, where, total = argv[1], argv[2], int(argv[3])
    if kind == "native":
        latencies = _consume_native(int(where), total, sys.stdout)
    else:
        latencies = _consume_kafka(where, total, sys.stdout, argv[4])
    print(json.dumps(latencies), flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("--consume", "--serve-floor"):
        _child(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=1000, help="records per second")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument(
        "--floor", action="store_true", help="also measure the loopback and fdatasync floor"
    )
    parser.add_argument("broker_args", nargs="*", help="extra broker options (after --)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="brokerd-latency-") as tmp:
        if args.floor:
            print("floor: loopback echo     ", percentiles(floor(args.rate, args.seconds,
                                                                 sync=False)))
            print("floor: echo + fdatasync  ", percentiles(floor(args.rate, args.seconds,
                                                                 sync=True)))
        proc = BrokerProcess(Path(tmp) / "data", args=tuple(args.broker_args)).start()
        try:
            print(f"{args.rate} records/s for {args.seconds:g} s, fsync always")
            received, acked = native(proc, args.rate, args.seconds)
            print("native long-poll        ", percentiles(received))
            print("  native produce acks   ", percentiles(acked))
            received, acked = kafka(proc, args.rate, args.seconds)
            print("confluent-kafka         ", percentiles(received))
            print("  confluent delivery    ", percentiles(acked))
        finally:
            proc.stop()


if __name__ == "__main__":
    main()
