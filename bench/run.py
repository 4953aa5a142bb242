"""``make bench``: brokerd beside its peers' own tools, in one run, written up as
``docs/benchmarks.md`` with charts in ``docs/bench/``.

Steps: machine facts, a disk probe, iperf3 (the loopback ceiling), Redis Streams via
redis-benchmark and NATS JetStream via nats-py, brokerd's throughput at 100 B and 1,000 B
through the native client, confluent-kafka and kcat (``--fsync always`` and ``never``),
end-to-end latency at 1,000 records/s, compaction and transactions, scaling curves
(producers, partitions, random-offset fetch), share-group consumption on one partition
(1, 4 and 16 native queue consumers, 1 and 4 confluent-kafka ShareConsumers, beside a
classic group's one member), an OpenMessaging-Benchmark-style workload matrix (1, 4 and
50 producers on 16 partitions, keys off and on, a run past retention), the broker's
CPU for one consumer of 2,000 partitions at a trickle with and without fetch sessions, the
Schema Registry's lookups and the HTTP proxy's produce and consume, memory and restart time,
then Apache Kafka
(a single-node KRaft broker from the JVM kit's jars) through the same clients and
commands: throughput and latency (with the broker's CPU per record beside each throughput
row on both), the workload matrix, the fetch-session rows, RSS, restart time (last: the
longest, and the first the time bound would cut). One progress line per step; the whole
run is bounded (``--time-limit``, 36 minutes by default). ``--quick`` runs every step at small sizes
(under two minutes) for the smoke test and leaves the JVM out (Kafka's perf tools and
broker: their rows say so) unless ``--kafka`` is given, which adds a few minutes of JVM
starts. Everything runs on 127.0.0.1 in scratch directories; every server is started here
and stopped by its own PID. The modules beside this one hold the steps.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import (  # noqa: E402
    brokerd_runs,
    disk,
    features,
    fetch_sessions,
    kafka_peer,
    kafka_runs,
    kafka_tools,
    latency,
    machine,
    peers,
    plots,
    registry_proxy,
    report,
    resources,
    scaling,
    share_groups,
    start_time,
    workloads,
)
from bench.common import SIZES, Brokers, Results, scratch  # noqa: E402
from bench.progress import Progress, Step  # noqa: E402

from tests.brokerproc import BrokerProcess  # noqa: E402

TIME_LIMIT = 36 * 60.0
# Kept for stopping the shared brokers, drawing and writing once the steps are done.
REPORT_RESERVE = 30.0
LATENCY_RATE = 1000
NO_JVM_IN_QUICK = "--quick leaves the JVM out (add --kafka)"


@dataclass(frozen=True)
class Sizes:
    records: dict[int, int]
    redis: dict[int, int]
    xrange_requests: int
    nats: dict[int, int]
    iperf_seconds: int
    disk_mib: int
    small_syncs: int
    latency_seconds: float
    features_records: int
    cleaner_records: int
    scaling_records: int
    share_records: int
    random_small: int
    random_large: int
    random_samples: int
    rss_levels: tuple[int, ...]
    restart_partitions: int
    restart_bytes: int
    registry_lookups: int
    proxy_records: int
    # Apache Kafka's throughput rows (its RSS and restart rows use the sizes above).
    kafka_records: dict[int, int]
    # Every workload of the matrix (bench/workloads.py), on brokerd and on Kafka.
    workload: workloads.Load
    # The fetch-session rows (bench/fetch_sessions.py): measured seconds, A/B rounds.
    session_seconds: float
    session_rounds: int
    # Expected seconds per step, for the progress estimate.
    expected: dict[str, float]
    # Fresh starts timed by the start-time step (brokerd's; Kafka's are fewer).
    start_runs: int = 10


FULL = Sizes(
    records={100: 1_000_000, 1000: 300_000},
    redis={100: 1_000_000, 1000: 300_000},
    xrange_requests=2_000,
    nats={100: 50_000, 1000: 20_000},
    iperf_seconds=5,
    disk_mib=512,
    small_syncs=200,
    latency_seconds=20.0,
    features_records=200_000,
    cleaner_records=200_000,
    scaling_records=200_000,
    share_records=60_000,
    random_small=10_000,
    random_large=10_000_000,
    random_samples=500,
    rss_levels=(1_000, 10_000),
    restart_partitions=1_000,
    restart_bytes=5_000_000_000,
    registry_lookups=20_000,
    proxy_records=100_000,
    kafka_records={100: 1_000_000, 1000: 300_000},
    workload=workloads.Load(rate=10_000, seconds=10.0, warmup=2.0),
    session_seconds=15.0,
    session_rounds=2,
    expected={"fetch sessions": 150, "kafka fetch sessions": 150,
              "facts": 1, "disk": 6, "iperf3": 6, "brokerd 100 B": 75, "brokerd 1000 B": 60,
              "latency": 75, "compaction, transactions": 40, "scaling curves": 60,
              "share groups": 55, "random-offset fetch": 45, "workload matrix": 200,
              "rss": 90, "restart": 120, "registry, proxy": 55, "redis": 20, "nats": 25,
              "start time": 40,
              "kafka throughput": 180, "kafka workloads": 130, "kafka rss": 120,
              "kafka restart": 240, "kafka share groups": 90},
)
QUICK = Sizes(
    records={100: 50_000, 1000: 10_000},
    redis={100: 50_000, 1000: 10_000},
    xrange_requests=100,
    nats={100: 2_000, 1000: 1_000},
    iperf_seconds=1,
    disk_mib=16,
    small_syncs=30,
    latency_seconds=2.0,
    features_records=10_000,
    cleaner_records=20_000,
    scaling_records=16_000,
    share_records=6_000,
    random_small=10_000,
    random_large=200_000,
    random_samples=100,
    rss_levels=(1_000,),
    restart_partitions=1_000,
    restart_bytes=20_000_000,
    registry_lookups=500,
    proxy_records=1_000,
    kafka_records={100: 50_000, 1000: 10_000},
    workload=workloads.Load(rate=400, seconds=0.5, warmup=0.25),
    session_seconds=2.0,
    session_rounds=1,
    expected={"fetch sessions": 40, "kafka fetch sessions": 1,
              "facts": 1, "disk": 1, "iperf3": 2, "brokerd 100 B": 10, "brokerd 1000 B": 4,
              "latency": 8, "compaction, transactions": 8, "scaling curves": 10,
              "share groups": 12, "random-offset fetch": 3, "workload matrix": 25,
              "rss": 12, "restart": 15, "registry, proxy": 4, "redis": 5, "nats": 4,
              "kafka throughput": 1, "kafka workloads": 1, "kafka rss": 1, "kafka restart": 1,
              "kafka share groups": 1, "start time": 5},
    start_runs=3,
)
# --quick --kafka: the Kafka steps' expected seconds (JVM starts dominate them).
QUICK_KAFKA_EXPECTED = {"brokerd 100 B": 40, "brokerd 1000 B": 35, "kafka throughput": 120,
                        "kafka share groups": 60,
                        "kafka workloads": 60, "kafka rss": 60, "kafka restart": 90,
                        "kafka fetch sessions": 60}


def steps(sizes: Sizes, results: Results, brokers: Brokers, root: Path, *,
          jvm_missing: str) -> list[Step]:
    """The run's steps; ``jvm_missing`` says why Kafka's perf tools and broker cannot run
    ("" when they can)."""
    kafka_missing = jvm_missing or kafka_peer.missing()

    def fsync_brokers() -> dict[str, BrokerProcess]:
        return {m: brokers.shared(f"--fsync={m}") for m in brokerd_runs.FSYNC_MODES}

    def always() -> BrokerProcess:
        return brokers.shared("--fsync=always")

    table: list[tuple[str, Callable[[], None]]] = [
        ("facts", lambda: results.facts.update(machine.facts(root))),
        ("disk", lambda: disk.probe(root, results, mebibytes=sizes.disk_mib,
                                    small_syncs=sizes.small_syncs)),
        ("iperf3", lambda: peers.iperf3(results, sizes.iperf_seconds)),
        ("redis", lambda: peers.redis(results, records=sizes.redis,
                                      xrange_requests=sizes.xrange_requests)),
        ("nats", lambda: peers.nats(results, records=sizes.nats)),
        *(
            (f"brokerd {size} B",
             (lambda size=size: brokerd_runs.throughput(
                 results, fsync_brokers(), size, sizes.records[size],
                 jvm_missing=jvm_missing)))
            for size in SIZES
        ),
        ("latency", lambda: latency.measure(results, always(), LATENCY_RATE,
                                            sizes.latency_seconds,
                                            never=brokers.shared("--fsync=never"))),
        ("compaction, transactions", lambda: _features(sizes, results, always())),
        ("scaling curves", lambda: scaling.curves(results, fsync_brokers(),
                                                  sizes.scaling_records)),
        ("share groups", lambda: share_groups.consumption(results, always(),
                                                          sizes.share_records)),
        ("random-offset fetch", lambda: scaling.random_fetch(
            results, brokers.shared("--fsync=never"), small=sizes.random_small,
            large=sizes.random_large, samples=sizes.random_samples)),
        ("workload matrix", lambda: workloads.brokerd(
            results, brokers.shared(*workloads.BROKERD_ARGS), sizes.workload)),
        ("fetch sessions", lambda: fetch_sessions.brokerd(
            results, brokers, sizes.session_seconds, sizes.session_rounds)),
        ("registry, proxy", lambda: registry_proxy.measure(
            results, brokers, lookups=sizes.registry_lookups, records=sizes.proxy_records)),
        ("rss", lambda: resources.rss(results, brokers, list(sizes.rss_levels))),
        ("restart", lambda: resources.restart(results, brokers, sizes.restart_partitions,
                                              sizes.restart_bytes)),
        ("kafka throughput", lambda: kafka_runs.throughput(
            results, root, sizes.kafka_records, LATENCY_RATE, sizes.latency_seconds,
            why=kafka_missing)),
        ("kafka workloads", lambda: workloads.kafka(results, root, sizes.workload,
                                                    why=kafka_missing)),
        ("kafka fetch sessions", lambda: fetch_sessions.kafka(
            results, root, sizes.session_seconds, sizes.session_rounds, why=kafka_missing)),
        ("kafka rss", lambda: kafka_runs.rss(results, root, list(sizes.rss_levels),
                                             why=kafka_missing)),
        ("start time", lambda: start_time.measure(
            results, root, sizes.start_runs, kafka_why=kafka_missing)),
        ("kafka restart", lambda: kafka_runs.restart(
            results, root, sizes.restart_partitions, sizes.restart_bytes, why=kafka_missing)),
        ("kafka share groups", lambda: share_groups.kafka_rows(
            results, root, always(), sizes.share_records, why=kafka_missing)),
    ]
    return [Step(name, sizes.expected[name], _settled(run)) for name, run in table]


def _settled(run: Callable[[], None]) -> Callable[[], None]:
    """``run`` after the page cache is written back: one step's gigabytes of dirty data
    would otherwise be flushed during the next one and inflate its fsync latencies."""

    def step() -> None:
        os.sync()
        run()

    return step


def _features(sizes: Sizes, results: Results, proc: BrokerProcess) -> None:
    features.compaction_produce(results, proc, sizes.features_records)
    features.transactions(results, proc, sizes.features_records)
    features.cleaner(results, sizes.cleaner_records)


def _failed(step: Step, exc: BaseException) -> str:
    print(f"\n  {step.name} failed:", file=sys.stderr)
    traceback.print_exception(exc, file=sys.stderr, limit=-3)
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return f"failed: {text[:160]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--report", type=Path, default=None,
                        help="default docs/benchmarks.md (--quick: build/bench-quick/)")
    parser.add_argument("--plots", type=Path, default=None,
                        help="default docs/bench (--quick: build/bench-quick/bench)")
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT, help="seconds")
    parser.add_argument("--skip", action="append", default=[], help="a step's name")
    parser.add_argument("--kafka", action="store_true",
                        help="with --quick: run the JVM steps too (Kafka's tools and broker)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    jvm = args.kafka or not args.quick
    if args.quick and args.kafka:
        sizes = replace(sizes, expected={**sizes.expected, **QUICK_KAFKA_EXPECTED})
    jvm_missing = kafka_tools.missing() if jvm else NO_JVM_IN_QUICK
    if jvm_missing:
        print(f"Kafka's perf tools and Apache Kafka: not measured: {jvm_missing}",
              file=sys.stderr)
    # A quick run's figures mean little: by default they never replace the real report.
    home = REPO / "build" / "bench-quick" if args.quick else REPO / "docs"
    args.report = args.report or home / "benchmarks.md"
    args.plots = args.plots or home / "bench"
    results = Results()
    began = time.monotonic()
    print(f"brokerd bench{' --quick' if args.quick else ''}: report {args.report}, "
          f"bounded to {args.time_limit / 60:.1f} min", file=sys.stderr)
    with scratch("brokerd-bench-") as root:
        brokers = Brokers(root)
        try:
            chosen = [s for s in steps(sizes, results, brokers, root, jvm_missing=jvm_missing)
                      if s.name not in args.skip]
            progress = Progress(chosen, limit_seconds=max(1.0, args.time_limit - REPORT_RESERVE))
            progress.run_all(_failed)
            results.steps = progress.record
        finally:
            brokers.close()
    drawn = plots.draw(results, args.plots)
    report.write(results, drawn, args.report, quick=args.quick,
                 seconds=time.monotonic() - began)
    print(report.terminal(results))
    print(f"wrote {args.report} and {len(drawn)} charts in {args.plots} "
          f"({(time.monotonic() - began) / 60:.1f} min)", file=sys.stderr)
    return 0 if all(status == "ok" for _, _, status in results.steps) else 1


if __name__ == "__main__":
    sys.exit(main())
