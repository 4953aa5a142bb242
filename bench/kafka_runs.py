"""Apache Kafka's rows of ``make bench``, measured with brokerd's clients and commands:
confluent-kafka, kcat and Kafka's perf tests (the functions of bench/brokerd_runs.py,
given the Kafka peer instead of brokerd), end-to-end latency through confluent-kafka
(bench/latency.py), RSS with 1,000 and 10,000 partitions and restart times on the data
set of brokerd's restart step.

Durability is paired on every row. Kafka's default answers a produce once the records
are in the page cache and leaves writing them back to the OS: beside brokerd
``--fsync never``. A topic with ``flush.messages=1`` (the per-topic
``log.flush.interval.messages=1``) makes Kafka fsync the partition's log after every
append, before it answers: beside brokerd ``--fsync always``. One Kafka broker serves
both durabilities, since the flush is a topic config. Consume rows read the
``flush.messages=1`` topics, as brokerd's read its ``--fsync always`` broker's.

Each step starts its own peer in the run's scratch tree and kills it at the end (its
data is scratch). Without a JVM, Kafka's jars or confluent-kafka, every row is there
with the reason it has no figure.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path

from bench import brokerd_runs, cost, kafka_tools, latency, resources
from bench.common import SIZES, Curve, Latency, Results, Row
from bench.kafka_peer import BROKER_HEAP, SYSTEM, KafkaPeer

DEFAULT = "OS flushes (Kafka default)"
FLUSH_EACH = "flush.messages=1"
READ = "read (page cache)"
# Kafka's durability -> the brokerd durability of the row it is compared with.
PAIRED = {FLUSH_EACH: "fsync always", DEFAULT: "fsync never", READ: READ, "": ""}
# (durability, topic configs, topic suffix); the first is the one consume rows read.
MODES = ((FLUSH_EACH, {"flush.messages": "1"}, "flush"), (DEFAULT, {}, "default"))
RESTART_SIZE = resources.RESTART_SIZE
# The fill is not measured: big batches, one acknowledgement per batch.
FILL_PROPS = ("acks=1", "linger.ms=20", "batch.size=262144")
DIRS_TIMEOUT = 600.0
# After a start, how long partitions may answer ListOffsets with an error (still loading).
SERVED_TIMEOUT = 120.0


@contextmanager
def _peer(home: Path) -> Iterator[KafkaPeer]:
    peer = KafkaPeer(home)
    try:
        yield peer.start()
    finally:
        peer.kill()
        shutil.rmtree(home, ignore_errors=True)


def throughput(results: Results, root: Path, records: dict[int, int], rate: int,
               seconds: float, *, why: str) -> None:
    """Produce and consume at each size through every Kafka-protocol client, then the
    latency rows; ``why`` says why Kafka cannot run ("" when it can)."""
    clients = brokerd_runs.kafka_clients(why)
    if why:
        # No broker: every client's rows say why.
        clients = [(*client[:5], why) for client in clients]
        _throughput_rows(results, records, clients, None)
        results.latencies.extend(
            Latency(f"{what}, {rate:,} rec/s for {seconds:g} s", durability, 0, 0, 0, 0, 0,
                    SYSTEM)
            for durability, _, _ in MODES for what in (latency.CK_RECEIPT, latency.CK_REPORT)
        )
        return
    with _peer(root / "kafka-throughput") as peer:
        _throughput_rows(results, records, clients, peer)
        for durability, config, suffix in MODES:
            topic = f"klat-{suffix}"
            peer.create_topic(topic, 1, config)
            rows = latency.confluent_rows(peer.kafka_bootstrap, topic, rate, seconds,
                                          durability)
            results.latencies.extend(replace(row, system=SYSTEM) for row in rows)


def _throughput_rows(results: Results, records: dict[int, int],
                     clients: list[tuple[str, str, str, brokerd_runs.Produce,
                                         brokerd_runs.Consume, str]],
                     peer: KafkaPeer | None) -> None:
    for size in SIZES:
        count = records[size]
        section = f"throughput {size} B"
        note = f"{count:,} records"
        for name, produce_what, consume_what, produce, consume, missing in clients:
            live = peer is not None and not missing
            pid = peer.pid if peer is not None and live else None
            for durability, config, suffix in MODES:
                topic = f"{name}-{size}-{suffix}"
                if peer is not None and live:
                    peer.create_topic(topic, 1, config)
                figure = cost.costed(
                    results, pid, system=SYSTEM, size=size, what=produce_what,
                    durability=durability, served=count, missing=missing,
                    run=partial(produce, peer, topic, count, size) if live else None)
                results.add(Row(section, SYSTEM, produce_what, durability, figure, "rec/s",
                                missing or note, size))
            figure = cost.costed(
                results, pid, system=SYSTEM, size=size, what=consume_what, durability=READ,
                served=count * brokerd_runs.reads_per_consume(consume), missing=missing,
                run=partial(consume, peer, f"{name}-{size}-{MODES[0][2]}", count)
                if live else None)
            results.add(Row(section, SYSTEM, consume_what, READ, figure, "rec/s",
                            missing or note, size))


def _settled_rss(peer: KafkaPeer) -> float:
    time.sleep(resources.RSS_SETTLE_SECONDS)
    return peer.rss() / resources.MIB


def _wait_for_dirs(peer: KafkaPeer, count: int) -> None:
    """Until the broker has made ``count`` partition directories (it makes them once the
    controller's records reach it, after CreateTopics has answered)."""
    deadline = time.monotonic() + DIRS_TIMEOUT
    while peer.partition_dirs() < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"Kafka made {peer.partition_dirs()} of {count} partitions")
        time.sleep(0.2)


def rss(results: Results, root: Path, levels: list[int], *, why: str) -> None:
    """RSS of the idle broker and with each number of partitions (one-partition-per-
    directory topics made through CreateTopics)."""
    section = resources.SECTION
    whats = ["RSS, empty broker", *(f"RSS with {n:,} partitions" for n in sorted(levels))]
    if why:
        for what in whats:
            results.add(Row(section, SYSTEM, what, "", None, "MiB", why))
        return
    resources.raise_nofile(max(levels) * 2 + resources.FD_SLACK)
    curve = results.curves.setdefault(
        "rss", Curve("Broker RSS", "partitions (and idle connections)", "RSS (MiB)", logx=True)
    )
    series = curve.series.setdefault(f"{SYSTEM}, partitions only", [])
    with _peer(root / "kafka-rss") as peer:
        empty = _settled_rss(peer)
        results.add(Row(section, SYSTEM, whats[0], "", empty, "MiB",
                        f"JVM heap {' '.join(BROKER_HEAP)}"))
        partitions = 0
        for n, what in zip(sorted(levels), whats[1:], strict=True):
            peer.create_topic(f"rss-{n}", n - partitions)
            partitions = n
            _wait_for_dirs(peer, n)
            after = _settled_rss(peer)
            series.append((n, after))
            fds = resources._open_fds(peer.pid)
            results.add(Row(section, SYSTEM, what, "", after, "MiB",
                            f"{(after - empty) * 1024 / n:,.1f} KiB/partition, "
                            f"{fds:,} descriptors open"))


def _fill(peer: KafkaPeer, total_bytes: int) -> int:
    records = max(1, total_bytes // RESTART_SIZE)
    kafka_tools.producer_perf(peer.kafka_bootstrap, "restart", records, RESTART_SIZE,
                              props=FILL_PROPS)
    return records


def _stored(peer: KafkaPeer, partitions: int) -> tuple[int, float]:
    """Records in the restart topic, and the seconds until its end offsets could be
    read (a partition whose log is still loading answers with an error)."""
    begin = time.perf_counter()
    while True:
        try:
            return sum(peer.end_offsets("restart", partitions)), time.perf_counter() - begin
        except Exception:  # a KafkaException while a partition is not served yet
            if time.perf_counter() - begin > SERVED_TIMEOUT:
                raise
            time.sleep(0.1)


def restart(results: Results, root: Path, partitions: int, total_bytes: int, *,
            why: str) -> None:
    """brokerd's restart step on Kafka: ``total_bytes`` of 1,000-byte values in
    ``partitions`` partitions (written by ProducerPerformance, Kafka's default
    durability), kill -9, the timed start; a tenth more, the timed clean stop and the
    fastest of the clean starts. Every record must still be there."""
    unclean_what, shutdown_what, clean_what = resources.restart_whats(partitions, total_bytes)
    if why:
        for what in (unclean_what, shutdown_what, clean_what):
            results.add(Row(resources.SECTION, SYSTEM, what, DEFAULT, None, "s", why))
        return
    with _peer(root / "kafka-restart") as peer:
        peer.create_topic("restart", partitions)
        _wait_for_dirs(peer, partitions)
        written = _fill(peer, total_bytes)
        stored, _ = _stored(peer, partitions)
        if stored != written:
            raise RuntimeError(f"Kafka holds {stored:,} of the {written:,} records written")
        peer.kill()
        unclean = peer.start_timed()
        after_crash, readable = _stored(peer, partitions)
        more = _fill(peer, total_bytes // resources.REFILL_SHARE)
        shutdown = peer.stop_timed()
        clean = peer.start_timed()
        for _ in range(resources.CLEAN_STARTS - 1):
            peer.stop_timed()
            clean = min(clean, peer.start_timed())
        after_clean, _ = _stored(peer, partitions)
    kept = f"{after_crash:,} of {written:,} records kept"
    if after_crash != written or after_clean != written + more:
        raise RuntimeError(f"Kafka lost records over restarts: {kept}, then {after_clean:,} "
                           f"of {written + more:,}")
    section = resources.SECTION
    results.add(Row(section, SYSTEM, unclean_what, DEFAULT, unclean, "s",
                    f"{kept}; every partition's end offset readable {readable:.2f} s later"))
    results.add(Row(section, SYSTEM, shutdown_what, DEFAULT, shutdown, "s",
                    f"{more:,} records written since the start left to flush"))
    results.add(Row(section, SYSTEM, clean_what, DEFAULT, clean, "s",
                    f"fastest of {resources.CLEAN_STARTS} clean starts"))
    curve = Curve(f"{SYSTEM} restart time, {partitions:,} partitions, "
                  f"{total_bytes / 1e9:.2f} GB", "", "seconds")
    curve.series["seconds"] = [(0, unclean), (1, shutdown), (2, clean)]
    results.curves["restart-kafka"] = curve
