"""A workload matrix in the manner of the OpenMessaging Benchmark, brokerd beside Apache
Kafka: producers sending on a fixed schedule to a topic of 16 partitions, with publish
latency and publish delay at p50 to p99.9.

Each workload is a number of producers (1, 4, 50), keys off or on (1,000 keys drawn at
random), and one run past retention: its topic keeps at most one 1 MiB segment per
partition (``segment.bytes`` and ``retention.bytes`` 1 MiB, retention checked every
second on both brokers), so segments are deleted while the load runs; the row says on how
many partitions the log start offset moved. Every workload gets a new topic.

The load generator is confluent-kafka (librdkafka), as OMB's Kafka driver configures a
producer: ``acks=all``, ``linger.ms=1``, ``batch.size`` 1 MiB. The producers are spread
over at most ``WORKERS`` processes (this file run with ``--worker``), each producer with a
thread blocked in ``poll`` so that its delivery reports are taken when librdkafka has
them. A worker sends on a schedule: record ``n`` is due at ``start + n / rate``. The
*publish delay* is how late the send call was against that schedule (a generator that
falls behind because the broker or the machine is slow shows it here: the
coordinated-omission signal, which a closed-loop tool hides); the *publish latency* runs
from the send call to the delivery report. All processes read ``time.perf_counter``
(``CLOCK_MONOTONIC`` on Linux, one clock for every process) and start their schedules at
the same instant; the first ``warmup`` seconds are sent but not measured.

brokerd runs with ``--fsync never`` beside Kafka's default (the OS flushes); values are
1,000 bytes. There is no consumer: the figures are the produce path's.
"""

from __future__ import annotations

import argparse
import json
import random
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import TOOL_TIMEOUT, Results  # noqa: E402
from bench.cost import cpu_seconds  # noqa: E402

from tests.brokerproc import BrokerProcess  # noqa: E402

SECTION_TITLE = "Workload matrix (OpenMessaging Benchmark style)"
PARTITIONS = 16
KEYS = 1000
SIZE = 1000
WORKERS = 2
SEGMENT_BYTES = 1024 * 1024
RETENTION_CHECK_MS = 1000
# How long a worker may take to import, connect and say it is ready.
READY_TIMEOUT = 60.0
# From the last worker's "ready" to the common start (the start time's trip to each).
START_AFTER = 0.2
READY = "ready"
FLUSH_SECONDS = 30.0
PRODUCER = {"acks": "all", "linger.ms": 1, "batch.size": 1024 * 1024,
            "queue.buffering.max.messages": 1_000_000}
PERCENTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999))
BROKERD_DURABILITY = "fsync never"
KAFKA_DURABILITY = "OS flushes (Kafka default)"
# brokerd's options for the matrix's broker (retention checked as often as Kafka's below).
BROKERD_ARGS = ("--fsync=never", f"--log-retention-check-interval-ms={RETENTION_CHECK_MS}")
KAFKA_SETTINGS = {"log.retention.check.interval.ms": str(RETENTION_CHECK_MS)}


@dataclass(frozen=True)
class Workload:
    name: str
    producers: int
    keys: int
    past_retention: bool = False

    def topic_config(self) -> dict[str, str]:
        if not self.past_retention:
            return {}
        return {"segment.bytes": str(SEGMENT_BYTES), "retention.bytes": str(SEGMENT_BYTES)}


MATRIX = (
    Workload("1 producer, no keys", 1, 0),
    Workload("4 producers, no keys", 4, 0),
    Workload("50 producers, no keys", 50, 0),
    Workload("1 producer, 1,000 keys", 1, KEYS),
    Workload("4 producers, 1,000 keys", 4, KEYS),
    Workload("50 producers, 1,000 keys", 50, KEYS),
    Workload("4 producers, past retention", 4, 0, past_retention=True),
)


@dataclass(frozen=True)
class Load:
    """How hard and how long every workload of a run pushes."""

    rate: int
    seconds: float
    warmup: float


@dataclass(frozen=True)
class WorkloadRun:
    """One workload on one broker (``latency``/``delay``: percentile name -> ms, with
    "max"; empty when not measured and ``note`` says why)."""

    workload: str
    system: str
    durability: str
    target: int
    achieved: float | None
    latency: dict[str, float]
    delay: dict[str, float]
    note: str


def _pick(sorted_ms: list[float]) -> dict[str, float]:
    if not sorted_ms:
        return {}
    n = len(sorted_ms)
    out = {name: sorted_ms[min(n - 1, int(q * n))] for name, q in PERCENTILES}
    out["max"] = sorted_ms[-1]
    return out


# -- the worker process -------------------------------------------------------------------


def _work(spec: dict[str, Any]) -> dict[str, Any]:
    """One worker: once its producers are connected it prints ``READY`` and reads the
    common start (a perf_counter time) from stdin; then its producers send ``rate``
    records/s for ``warmup + seconds``. Latencies and delays of records due after the
    warm-up."""
    from confluent_kafka import Producer

    topic, rate = spec["topic"], spec["rate"]
    producers = [Producer({"bootstrap.servers": spec["bootstrap"], **PRODUCER})
                 for _ in range(spec["producers"])]
    for producer in producers:
        producer.list_topics(topic, timeout=30)
    print(READY, flush=True)
    start = float(sys.stdin.readline())
    measure_from = start + spec["warmup"]
    end = measure_from + spec["seconds"]
    latencies: list[float] = []
    delays: list[float] = []
    errors: list[str] = []
    acked = [0]
    lock = threading.Lock()
    stop = threading.Event()

    def serve(producer: Any) -> None:
        while not stop.is_set():
            producer.poll(0.05)

    def report(measured: bool, sent: float) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            now = time.perf_counter()
            with lock:
                if err is not None:
                    errors.append(str(err))
                elif measured:
                    latencies.append((now - sent) * 1000)
                    acked[0] += 1
        return on_delivery

    threads = [threading.Thread(target=serve, args=(p,), daemon=True) for p in producers]
    for t in threads:
        t.start()
    rng = random.Random(spec["seed"])
    keys = [f"key-{i}".encode() for i in range(spec["keys"])]
    payload = b"v" * spec["size"]
    interval = 1.0 / rate
    n = 0
    while True:
        due = start + n * interval
        if due >= end:
            break
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        sent = time.perf_counter()
        measured = due >= measure_from
        if measured:
            delays.append((sent - due) * 1000)
        producer = producers[n % len(producers)]
        key = keys[rng.randrange(len(keys))] if keys else None
        while True:
            try:
                producer.produce(topic, payload, key=key, on_delivery=report(measured, sent))
                break
            except BufferError:
                time.sleep(0.001)
        n += 1
    left = sum(p.flush(FLUSH_SECONDS) for p in producers)
    stop.set()
    for t in threads:
        t.join()
    return {"latencies": latencies, "delays": delays, "acked": acked[0], "sent": n,
            "errors": errors[:5], "error_count": len(errors), "undelivered": left}


# -- the parent ---------------------------------------------------------------------------


def _run(bootstrap: str, topic: str, workload: Workload, load: Load) -> dict[str, Any]:
    """Run ``workload`` against ``topic`` (made already): the merged worker results."""
    workers = min(WORKERS, workload.producers)
    procs = []
    for w in range(workers):
        producers = workload.producers // workers + (w < workload.producers % workers)
        spec = {"bootstrap": bootstrap, "topic": topic, "rate": load.rate / workers,
                "producers": producers, "keys": workload.keys, "size": SIZE, "seed": w,
                "warmup": load.warmup, "seconds": load.seconds}
        procs.append(subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        _start_together(procs)
    except BaseException:
        for p in procs:
            p.kill()
            p.wait()
        raise
    outs = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=load.warmup + load.seconds
                                        + FLUSH_SECONDS + TOOL_TIMEOUT)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise RuntimeError("a workload worker did not finish in time") from None
        if proc.returncode != 0:
            raise RuntimeError(f"a workload worker failed: {err[-1000:]}")
        outs.append(json.loads(out.splitlines()[-1]))
    return {
        "latencies": sorted(x for o in outs for x in o["latencies"]),
        "delays": sorted(x for o in outs for x in o["delays"]),
        "acked": sum(o["acked"] for o in outs),
        "sent": sum(o["sent"] for o in outs),
        "errors": [e for o in outs for e in o["errors"]][:3],
        "error_count": sum(o["error_count"] for o in outs),
        "undelivered": sum(o["undelivered"] for o in outs),
    }


def _start_together(procs: list[subprocess.Popen[str]]) -> None:
    """Wait for every worker's ``READY``, then give them all the same start time."""
    deadline = time.monotonic() + READY_TIMEOUT
    for proc in procs:
        assert proc.stdout is not None
        ready = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]
        line = proc.stdout.readline() if ready else ""
        if line.strip() != READY:
            raise RuntimeError(f"a workload worker did not get ready: {line!r}")
    start = time.perf_counter() + START_AFTER
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start!r}\n")
        proc.stdin.flush()


def _deleted_on(bootstrap: str, topic: str) -> int:
    """Partitions of ``topic`` whose log start offset is above 0 (segments deleted)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{topic}"})
    try:
        return sum(1 for p in range(PARTITIONS)
                   if consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[0] > 0)
    finally:
        consumer.close()


def _create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1, config=config)],
        operation_timeout=60, request_timeout=60,
    ).values():
        future.result()
    # Until every partition has a leader in the metadata (a new topic's may lag).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=30).topics.get(topic)
        if found is not None and len(found.partitions) == PARTITIONS and all(
                p.leader >= 0 for p in found.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic}: partitions without a leader")


def matrix(results: Results, bootstrap: str, system: str, durability: str,
           load: Load, pid: int | None = None) -> None:
    """Every workload of ``MATRIX`` on the broker at ``bootstrap`` (its process ``pid``,
    when given, for the broker's CPU over each run)."""
    for i, workload in enumerate(MATRIX):
        topic = f"omb-{i}-{workload.producers}p{'-keys' if workload.keys else ''}"
        _create(bootstrap, topic, workload.topic_config())
        before, began = (cpu_seconds(pid) if pid else 0.0), time.perf_counter()
        done = _run(bootstrap, topic, workload, load)
        notes = [f"{done['sent']:,} sent, {len(done['latencies']):,} measured"]
        if pid:
            spent, wall = cpu_seconds(pid) - before, time.perf_counter() - began
            notes.append(f"broker CPU {spent * 1e6 / max(1, done['sent']):,.1f} µs/rec, "
                         f"{spent / wall:.0%} of a core over the run")
        if done["error_count"] or done["undelivered"]:
            notes.append(f"**{done['error_count']:,} delivery errors, {done['undelivered']:,} "
                         f"undelivered** {'; '.join(done['errors'])}")
        if workload.past_retention:
            deleted = _deleted_on(bootstrap, topic)
            notes.append(f"segments deleted during the run on {deleted} of {PARTITIONS} "
                         "partitions")
        results.workloads.append(WorkloadRun(
            workload.name, system, durability, load.rate, done["acked"] / load.seconds,
            _pick(done["latencies"]), _pick(done["delays"]), "; ".join(notes)))


def not_measured(results: Results, system: str, durability: str, load: Load,
                 why: str) -> None:
    for workload in MATRIX:
        results.workloads.append(WorkloadRun(workload.name, system, durability, load.rate,
                                             None, {}, {}, why))


def brokerd(results: Results, proc: BrokerProcess, load: Load) -> None:
    pid = None if proc.proc is None else proc.proc.pid
    matrix(results, proc.kafka_bootstrap, "brokerd", BROKERD_DURABILITY, load, pid)


def kafka(results: Results, root: Path, load: Load, *, why: str) -> None:
    from bench.kafka_peer import SYSTEM, KafkaPeer

    if why:
        not_measured(results, SYSTEM, KAFKA_DURABILITY, load, why)
        return
    peer = KafkaPeer(root / "kafka-workloads", settings=KAFKA_SETTINGS)
    try:
        peer.start()
        matrix(results, peer.kafka_bootstrap, SYSTEM, KAFKA_DURABILITY, load, peer.pid)
    finally:
        peer.kill()


# -- the report ---------------------------------------------------------------------------

HEAD = ("workload", "system", "durability", "rec/s (target)", "latency p50", "p95", "p99",
        "p99.9", "max", "delay p50", "p99", "p99.9", "max", "note")


def _ms(figures: dict[str, float], name: str) -> str:
    return f"{figures[name]:,.2f}" if name in figures else ""


def report_lines(results: Results, charts: dict[str, str]) -> list[str]:
    if not results.workloads:
        return []
    rows = []
    order = sorted(results.workloads,
                   key=lambda r: ([w.name for w in MATRIX].index(r.workload)
                                  if r.workload in [w.name for w in MATRIX] else 99,
                                  r.system != "brokerd"))
    for run in order:
        rate = ("not measured" if run.achieved is None
                else f"{run.achieved:,.0f} ({run.target:,})")
        note = run.note if run.achieved is not None else f"**not measured: {run.note}**"
        rows.append((run.workload, run.system, run.durability, rate,
                     *(_ms(run.latency, n) for n in ("p50", "p95", "p99", "p99.9", "max")),
                     *(_ms(run.delay, n) for n in ("p50", "p99", "p99.9", "max")), note))
    lines = [f"## {SECTION_TITLE}", "",
             "confluent-kafka producers sending 1,000-byte values on a fixed schedule to a "
             f"topic of {PARTITIONS} partitions (`acks=all`, `linger.ms=1`, `batch.size` "
             "1 MiB, OMB's Kafka producer settings), spread over at most "
             f"{WORKERS} processes with a delivery-report thread per producer. Publish "
             "latency (ms) runs from the send call to the delivery report; publish delay "
             "(ms) is how late the send call was against the schedule: the "
             "coordinated-omission signal (a broker that stalls the generator shows here, "
             "where a closed-loop tool would just send fewer records). Keys, when on, are "
             f"drawn at random from {KEYS:,}. The past-retention topic keeps one 1 MiB "
             "segment per partition and both brokers check retention every second, so "
             "segments are deleted during the load. brokerd `--fsync never` beside "
             "Kafka's default; each workload on a new topic, its warm-up left out. The "
             "note gives the broker's CPU per record sent and how busy it kept one core "
             "over the run (warm-up and flush included): near 100 % for brokerd is its "
             "one reactor saturated.", ""]
    lines += ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    lines.append("")
    if "workloads" in charts:
        lines += [f"![workloads]({charts['workloads']})", ""]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--worker", required=True, help="(internal) a worker's JSON spec")
    args = parser.parse_args()
    print(json.dumps(_work(json.loads(args.worker))), flush=True)


if __name__ == "__main__":
    main()
