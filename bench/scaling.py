"""Scaling curves: throughput against producers and against partitions, and the cost of a
fetch at random offsets in a small and a large partition.

Producers are separate processes (forked; each its own native connection, one request of
100 records in flight, its own partition), so the curve shows the broker, not one
client's interpreter. Partitions: one connection keeps 16 requests of 100 records in
flight, spread round-robin over the topic's partitions. Each point runs on both fsync
modes. The random-offset fetch is one-record native long-poll fetches (no wait) at
seeded random offsets, timed one at a time.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event

from bench.brokerd_runs import check_end, native_produce
from bench.common import Curve, Results, Row, percentiles, value
from brokerd.client import NativeClient
from brokerd.native import client_codec, messages

from tests.brokerproc import BrokerProcess

SECTION = "scaling"
SIZE = 100
BATCH = 100
PIPELINE = 16
PRODUCERS = (1, 4, 16)
PARTITIONS = (1, 16, 256)
START_TIMEOUT = 60.0
SEED = 20261130


def _produce_child(port: int, topic: str, partition: int, requests: int, go: Event,
                   out: Connection) -> None:
    try:
        frame = client_codec.encode_produce(topic, partition, [value(SIZE)] * BATCH)
        with NativeClient("127.0.0.1", port, timeout=60) as client:
            client.list_topics()
            out.send("ready")
            go.wait(START_TIMEOUT)
            start = time.monotonic()
            for _ in range(requests):
                (r,) = client.call_many([(messages.RequestType.PRODUCE, frame)])
                if not isinstance(r, messages.ProduceResponse):
                    raise RuntimeError(f"produce answered {r!r}")
            out.send((start, time.monotonic()))
    except BaseException as exc:
        out.send(f"failed: {exc!r}")
        raise


def producers_rate(proc: BrokerProcess, producers: int, records: int, tag: str) -> float:
    """Records/s of ``producers`` processes writing ``records`` in all."""
    topic = f"producers-{tag}-{producers}"
    with proc.client() as client:
        client.create_topic(topic, producers)
    requests = records // producers // BATCH
    context = multiprocessing.get_context("fork")
    go = context.Event()
    children = []
    try:
        for i in range(producers):
            mine, theirs = context.Pipe(duplex=False)
            child = context.Process(
                target=_produce_child,
                args=(proc.native_port, topic, i, requests, go, theirs),
                daemon=True,
            )
            child.start()
            children.append((child, mine))
        for _, pipe in children:
            if not pipe.poll(START_TIMEOUT) or pipe.recv() != "ready":
                raise RuntimeError("a producer process did not connect")
        go.set()
        spans: list[tuple[float, float]] = []
        for _, pipe in children:
            if not pipe.poll(600):
                raise RuntimeError("a producer process did not finish")
            answer = pipe.recv()
            if not isinstance(answer, tuple):
                raise RuntimeError(str(answer))
            spans.append((float(answer[0]), float(answer[1])))
    finally:
        for child, _ in children:
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join()
    for i in range(producers):
        check_end(proc, topic, requests * BATCH, partition=i)
    total = producers * requests * BATCH
    return total / (max(e for _, e in spans) - min(s for s, _ in spans))


def partitions_rate(proc: BrokerProcess, partitions: int, records: int, tag: str) -> float:
    """Records/s of one connection spreading requests over ``partitions`` partitions."""
    topic = f"partitions-{tag}-{partitions}"
    with proc.client() as client:
        client.create_topic(topic, partitions)
    frames = [
        client_codec.encode_produce(topic, p, [value(SIZE)] * BATCH) for p in range(partitions)
    ]
    requests = records // BATCH
    with proc.client(timeout=120) as client:
        start = time.perf_counter()
        sent = 0
        while sent < requests:
            n = min(PIPELINE, requests - sent)
            batch = [(messages.RequestType.PRODUCE, frames[(sent + i) % partitions])
                     for i in range(n)]
            for r in client.call_many(batch):
                if not isinstance(r, messages.ProduceResponse):
                    raise RuntimeError(f"produce answered {r!r}")
            sent += n
        seconds = time.perf_counter() - start
        ends = sum(client.list_offsets(topic, p)[1] for p in range(partitions))
    if ends != requests * BATCH:
        raise RuntimeError(f"{topic}: {ends} records stored of {requests * BATCH}")
    return requests * BATCH / seconds


def curves(results: Results, brokers: dict[str, BrokerProcess], records: int) -> None:
    producers = Curve("Throughput against producers", "producer processes", "records/s",
                      logx=True)
    partitions = Curve("Throughput against partitions", "partitions", "records/s", logx=True)
    for mode, proc in brokers.items():
        label = f"fsync {mode}"
        for n in PRODUCERS:
            rate = producers_rate(proc, n, records, mode)
            producers.series.setdefault(label, []).append((n, rate))
            results.add(Row(SECTION, "brokerd",
                            f"native produce, {n} producer process(es), 1 request in flight each",
                            label, rate, "rec/s", f"{records:,} records in all", SIZE))
        for n in PARTITIONS:
            rate = partitions_rate(proc, n, records, mode)
            partitions.series.setdefault(label, []).append((n, rate))
            results.add(Row(SECTION, "brokerd",
                            f"native produce over {n} partition(s), {PIPELINE} requests in flight",
                            label, rate, "rec/s", f"{records:,} records in all", SIZE))
    results.curves["producers"] = producers
    results.curves["partitions"] = partitions


def random_fetch(results: Results, proc: BrokerProcess, *, small: int, large: int,
                 samples: int) -> None:
    """One-record fetch latency at random offsets of a ``small`` and a ``large`` partition."""
    rng = random.Random(SEED)
    cdf = Curve("One-record fetch at random offsets", "latency (ms)", "fraction of fetches")
    p50s: list[float] = []
    for count in (small, large):
        topic = f"random-{count}"
        native_produce(proc, topic, count, SIZE)
        offsets = [rng.randrange(count) for _ in range(samples)]
        seconds: list[float] = []
        with proc.client() as client:
            for offset in offsets:
                t = time.perf_counter()
                r = client.poll(topic, 0, offset, max_wait_ms=0, min_bytes=0, max_bytes=1)
                seconds.append(time.perf_counter() - t)
                if not r.records or r.records[0].offset != offset:
                    raise RuntimeError(f"fetch at {offset} of {topic} returned the wrong record")
        lat = percentiles(f"native one-record fetch, random offsets of {count:,} records",
                          "fsync never (page cache)", seconds)
        results.latencies.append(lat)
        p50s.append(lat.p50)
        ordered = sorted(seconds)
        cdf.series[f"{count:,} records"] = [
            (s * 1000, (i + 1) / len(ordered)) for i, s in enumerate(ordered)
        ]
    results.curves["random_fetch"] = cdf
    results.add(Row(SECTION, "brokerd",
                    f"random-offset fetch p50, {large:,} / {small:,} records", "",
                    p50s[1] / p50s[0], "x", f"{samples:,} fetches each"))
