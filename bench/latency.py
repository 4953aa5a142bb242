"""End-to-end latency: produce call to consumer receipt, at a steady rate.

``make latency`` (or ``python bench/latency.py --rate 1000 --seconds 30``) starts a
broker with default settings (``--fsync always``), runs a producer at the given rate and a
long-polling consumer, and prints p50/p99/p99.9/max for the native protocol and for
confluent-kafka (``make bench`` calls ``measure`` for its latency rows). Each value
carries the producer's ``time.perf_counter()`` at the produce call; producer and consumer
run in one process, so the clocks agree.

Beside produce-to-receipt it prints produce-to-acknowledgement (the produce call's return
for native, the delivery report for confluent-kafka): the difference between the two is
what the consumer side (long poll and fetch) adds; the rest is the produce path.
(Delivery reports are served by ``producer.poll``, called after each produce, so they
are late by up to one send interval.)
"""

from __future__ import annotations

import argparse
import struct
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import Latency, Results  # noqa: E402
from bench.common import percentiles as latency_of  # noqa: E402

from tests.brokerproc import BrokerProcess  # noqa: E402

STAMP = struct.Struct(">d")
PAD = b"p" * 92  # 8-byte timestamp + 92 = 100-byte values


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


def native(
    proc: BrokerProcess, rate: int, seconds: float, spans: list[float] | None = None
) -> tuple[list[float], list[float]]:
    """Produce-to-receipt and produce-to-acknowledgement latencies; the seconds the sending
    took are appended to ``spans`` (one produce is in flight at a time: when an
    acknowledgement takes longer than the interval, the rate falls below ``rate``)."""
    latencies: list[float] = []
    acks: list[float] = []
    total = int(rate * seconds)
    done = threading.Event()

    def consume() -> None:
        with proc.client(timeout=30) as client:
            offset = 0
            while len(latencies) < total:
                r = client.poll("lat", 0, offset, max_wait_ms=1000)
                now = time.perf_counter()
                for rec in r.records:
                    latencies.append(now - STAMP.unpack_from(rec.value)[0])
                if r.records:
                    offset = r.records[-1].offset + 1
        done.set()

    with proc.client() as client:
        client.create_topic("lat", 1)
    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    time.sleep(0.2)
    with proc.client() as client:
        start = time.perf_counter()
        for at in paced(rate, seconds):
            delay = start + at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            sent = time.perf_counter()
            client.produce("lat", 0, [STAMP.pack(sent) + PAD])
            acks.append(time.perf_counter() - sent)
        if spans is not None:
            spans.append(time.perf_counter() - start)
    done.wait(30)
    return latencies, acks


def kafka(
    proc: BrokerProcess, rate: int, seconds: float, spans: list[float] | None = None
) -> tuple[list[float], list[float]]:
    """Produce-to-receipt and produce-to-delivery-report latencies; the seconds the sending
    took are appended to ``spans``."""
    from confluent_kafka import Consumer, Message, Producer, TopicPartition

    latencies: list[float] = []
    acks: list[float] = []

    def delivered(err: object, msg: Message) -> None:
        value = msg.value()
        if err is None and value is not None:
            acks.append(time.perf_counter() - STAMP.unpack_from(value)[0])

    total = int(rate * seconds)
    stop = threading.Event()
    ready = threading.Event()

    def consume() -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": proc.kafka_bootstrap,
                "group.id": "latency",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 500,
            }
        )
        consumer.assign([TopicPartition("klat", 0, 0)])
        ready.set()
        while len(latencies) < total and not stop.is_set():
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            value = msg.value()
            if value is not None:
                latencies.append(time.perf_counter() - STAMP.unpack_from(value)[0])
        consumer.close()

    with proc.client() as client:
        client.create_topic("klat", 1)
    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    ready.wait(10)
    time.sleep(1.0)
    producer = Producer({"bootstrap.servers": proc.kafka_bootstrap, "acks": "all", "linger.ms": 0})
    # Connected, with the topic's metadata, before the clock starts.
    producer.list_topics("klat", timeout=10)
    start = time.perf_counter()
    for at in paced(rate, seconds):
        delay = start + at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.produce("klat", STAMP.pack(time.perf_counter()) + PAD, on_delivery=delivered)
        producer.poll(0)
    if spans is not None:
        spans.append(time.perf_counter() - start)
    producer.flush(30)
    reader.join(30)
    stop.set()
    return latencies, acks


def measure(results: Results, proc: BrokerProcess, rate: int, seconds: float) -> None:
    """The four latency rows of ``make bench`` (``proc`` runs with ``--fsync always``)."""
    durability = "fsync always"
    total = int(rate * seconds)
    spans: list[float] = []
    received, acked = native(proc, rate, seconds, spans)
    # The native producer waits for each acknowledgement: say so when it fell behind.
    how = f"{rate:,} rec/s for {seconds:g} s (sent at {total / spans[-1]:,.0f} rec/s)"
    rows: list[Latency] = [
        latency_of(f"native: produce to long-poll receipt, {how}", durability, received),
        latency_of(f"native: produce to acknowledgement, {how}", durability, acked),
    ]
    received, acked = kafka(proc, rate, seconds, spans)
    how = f"{rate:,} rec/s for {seconds:g} s (sent at {total / spans[-1]:,.0f} rec/s)"
    rows += [
        latency_of(f"confluent-kafka: produce to consumer receipt, {how}", durability, received),
        latency_of(f"confluent-kafka: produce to delivery report, {how}", durability, acked),
    ]
    expected = int(rate * seconds)
    for row in rows:
        if row.n < expected:
            raise RuntimeError(f"{row.what}: {row.n} of {expected} records measured")
    results.latencies.extend(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=1000, help="records per second")
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="brokerd-latency-") as tmp:
        proc = BrokerProcess(Path(tmp) / "data").start()
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
