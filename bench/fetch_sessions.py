"""What a quiet consumer of many partitions costs the broker, with and without fetch
sessions (KIP-227).

One consumer (kafka-python, in a child process, fetch sessions on as by default,
``fetch.max.wait.ms`` 500) is assigned every partition of a 2,000-partition topic while a
producer sends a trickle (20 records/s, each to a random partition). Over the measured
seconds the broker process's CPU time (user + system, all threads, ``/proc/PID/stat``),
less what the same trickle costs it without the consumer (measured just before, as
long), is divided by the seconds and by the consumer's fetch requests.

brokerd runs twice, alternately (A B A B, medians): with its session cache (the default,
1000 slots) and with ``--max-incremental-fetch-session-cache-slots 0``, which answers
every fetch as a full fetch of the 2,000 partitions, as brokerd did before it kept
sessions. Apache Kafka (the JVM kit's broker) runs the same consumer, with sessions and
with the client's sessions off, when the JVM is here.

``python -m bench.fetch_sessions`` runs this step alone and prints the rows.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import kafka_peer  # noqa: E402
from bench.common import Brokers, Results, Row  # noqa: E402
from bench.cost import cpu_seconds  # noqa: E402

SECTION = "fetch sessions"
PARTITIONS = 2000
RATE = 20
TOPIC = "fetch-sessions-bench"
NO_SESSIONS = ("--max-incremental-fetch-session-cache-slots", "0")
WHAT = "1 consumer of 2,000 partitions, 20 rec/s: broker CPU"
READY_TIMEOUT = 180.0


def _child(bootstrap: str, topic: str, partitions: int, sessions: bool, seconds: float) -> None:
    """The consumer: assigned every partition, at the log end; prints ``ready``, waits
    for a line on stdin, polls ``seconds`` and prints its fetches and records (JSON)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="latest",
        enable_incremental_fetch_sessions=sessions, fetch_max_wait_ms=500,
        request_timeout_ms=30000,
    )
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    fetches = [0]
    fetcher = consumer._fetcher
    handle = fetcher._handle_fetch_response

    def counted(*args: object) -> object:
        fetches[0] += 1  # one fetch answered
        return handle(*args)

    fetcher._handle_fetch_response = counted
    # Warm up: every position known (ListOffsets) and the session open.
    deadline = time.monotonic() + READY_TIMEOUT
    while fetches[0] < 5 and time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)
    print("ready", flush=True)
    sys.stdin.readline()
    fetches[0] = 0
    records = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for batch in consumer.poll(timeout_ms=200).values():
            records += len(batch)
    print(json.dumps({"fetches": fetches[0], "records": records}), flush=True)
    consumer.close()


def _trickle(bootstrap: str, topic: str, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    rng = random.Random(1)
    while not stop.wait(1.0 / RATE):
        producer.produce(topic, b"x" * 100, partition=rng.randrange(PARTITIONS))
        producer.poll(0)
    producer.flush(10)


def baseline(bootstrap: str, pid: int, seconds: float) -> float:
    """Broker CPU ms per second with the trickle and no consumer: what the produces and
    the broker's own timers cost, taken off the consumer runs."""
    stop = threading.Event()
    producer = threading.Thread(target=_trickle, args=(bootstrap, TOPIC, stop), daemon=True)
    producer.start()
    try:
        time.sleep(1.0)
        before = cpu_seconds(pid)
        time.sleep(seconds)
        cpu = cpu_seconds(pid) - before
    finally:
        stop.set()
        producer.join(15)
    return cpu * 1000 / seconds


def measure(bootstrap: str, pid: int, seconds: float, *, sessions: bool = True,
            base_ms_per_s: float = 0.0) -> dict[str, float]:
    """One run: broker CPU ms per second (less ``base_ms_per_s``, the trickle's own
    cost) and per fetch, fetches per second."""
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.fetch_sessions", "--child", bootstrap,
         "--seconds", str(seconds), *(() if sessions else ("--no-sessions",))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
    )
    stop = threading.Event()
    producer = threading.Thread(target=_trickle, args=(bootstrap, TOPIC, stop), daemon=True)
    try:
        assert child.stdin is not None and child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("the consumer did not start")
        producer.start()
        time.sleep(1.0)  # the trickle under way before the measured seconds
        before = cpu_seconds(pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        done = json.loads(child.stdout.readline())
        cpu = cpu_seconds(pid) - before
    finally:
        stop.set()
        if child.poll() is None:
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    producer.join(15)
    fetches = max(int(done["fetches"]), 1)
    consumer_ms = max(cpu * 1000 - base_ms_per_s * seconds, 0.0)
    return {"cpu_ms_per_s": consumer_ms / seconds, "cpu_ms_per_fetch": consumer_ms / fetches,
            "fetches_per_s": fetches / seconds, "records": float(done["records"]),
            "base_ms_per_s": base_ms_per_s}


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _create(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})
    for future in client.create_topics([NewTopic(TOPIC, PARTITIONS, 1)],
                                       operation_timeout=120, request_timeout=120).values():
        future.result()


def _rows(results: Results, system: str, label: str, runs: list[dict[str, float]]) -> None:
    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    note = (f"median of {len(runs)}; {median('fetches_per_s'):.1f} fetches/s; "
            f"less {median('base_ms_per_s'):.0f} ms/s the trickle costs without a consumer")
    results.add(Row(SECTION, system, f"{WHAT} per second, {label}", "", median("cpu_ms_per_s"),
                    "ms/s", note))
    results.add(Row(SECTION, system, f"{WHAT} per fetch, {label}", "",
                    median("cpu_ms_per_fetch"), "ms/fetch", note))


def brokerd(results: Results, brokers: Brokers, seconds: float, rounds: int) -> None:
    """brokerd with sessions and without, alternating."""
    on = brokers.shared("--fsync=never")
    off = brokers.shared("--fsync=never", *NO_SESSIONS)
    for proc in (on, off):
        _create(proc.kafka_bootstrap)
    runs: dict[str, list[dict[str, float]]] = {"sessions": [], "no sessions": []}
    for _ in range(rounds):
        for label, proc in (("no sessions", off), ("sessions", on)):
            assert proc.proc is not None
            base = baseline(proc.kafka_bootstrap, proc.proc.pid, seconds)
            runs[label].append(measure(proc.kafka_bootstrap, proc.proc.pid, seconds,
                                       base_ms_per_s=base))
            _log(f"brokerd {label}: {runs[label][-1]}")
    _rows(results, "brokerd", "with sessions", runs["sessions"])
    _rows(results, "brokerd", "every fetch full (slots 0)", runs["no sessions"])


def kafka(results: Results, root: Path, seconds: float, rounds: int, *, why: str) -> None:
    """Apache Kafka, the client's sessions on and off, alternating."""
    if why:
        for label in ("with sessions", "every fetch full"):
            results.add(Row(SECTION, kafka_peer.SYSTEM, f"{WHAT} per second, {label}", "",
                            None, "ms/s", why))
        return
    peer = kafka_peer.KafkaPeer(root / "kafka-fetch-sessions").start()
    try:
        _create(peer.kafka_bootstrap)
        # A first run, not counted: a fresh JVM compiles and collects for a while.
        measure(peer.kafka_bootstrap, peer.pid, seconds)
        runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
        for _ in range(rounds):
            for sessions in (False, True):
                base = baseline(peer.kafka_bootstrap, peer.pid, seconds)
                runs[sessions].append(measure(peer.kafka_bootstrap, peer.pid, seconds,
                                              sessions=sessions, base_ms_per_s=base))
                _log(f"kafka sessions={sessions}: {runs[sessions][-1]}")
    finally:
        peer.kill()
    _rows(results, kafka_peer.SYSTEM, "with sessions", runs[True])
    _rows(results, kafka_peer.SYSTEM, "every fetch full (client sessions off)", runs[False])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", metavar="BOOTSTRAP")
    parser.add_argument("--no-sessions", action="store_true")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kafka", action="store_true", help="Apache Kafka too")
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, TOPIC, PARTITIONS, not args.no_sessions, args.seconds)
        return 0
    results = Results()
    with tempfile.TemporaryDirectory(prefix="bench-fetch-sessions-") as tmp:
        brokers = Brokers(Path(tmp))
        try:
            brokerd(results, brokers, args.seconds, args.rounds)
            if args.kafka:
                kafka(results, Path(tmp), args.seconds, args.rounds, why=kafka_peer.missing())
        finally:
            brokers.close()
    for row in results.rows:
        value = "-" if row.value is None else f"{row.value:.2f}"
        print(f"{row.system:14} {row.what}: {value} {row.unit} ({row.note})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
