"""``make bench``'s machinery: the progress display and its time bound (fake clock), the
report's rendering, and one real ``bench/run.py --quick`` run checked row by row.

The quick run starts real brokers, Redis, NATS and iperf3 on loopback (about a minute on
two busy cores); a peer whose program is not installed must give rows that say so, never
drop them. It leaves the JVM out (Kafka's perf tools and Apache Kafka; their rows must
say so): tests/e2e/test_bench_kafka_peer.py covers the Kafka peer.
"""

from __future__ import annotations

import importlib.util
import io
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import kafka_tools, peers, workloads
from bench.common import Latency, Results, Row
from bench.kafka_peer import SYSTEM as KAFKA
from bench.kafka_runs import DEFAULT as KAFKA_DEFAULT
from bench.kafka_runs import FLUSH_EACH
from bench.progress import Progress, Step
from bench.report import NOT_MEASURED, markdown, ratios

from tests.brokerproc import REPO

QUICK_TIMEOUT = 300
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_prints_a_line_per_step_and_estimates_from_the_pace() -> None:
    clock = FakeClock()
    out = io.StringIO()

    def take(seconds: float) -> Step:
        def run() -> None:
            clock.now += seconds

        return Step(f"step{seconds:g}", 10.0, run)

    progress = Progress([take(20), take(20), take(20)], limit_seconds=900, out=out,
                        now=clock, use_alarm=False)
    progress.run_all(lambda step, exc: "failed")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("[ 1/3] step20")
    # The first step took twice its 10 s estimate; with the estimates' 30 s of prior
    # weight, the pace is (20 + 30) / (10 + 30): the two left take 12.5 s each.
    assert "elapsed 0:20, run ~0:45, ~0:25 left" in lines[0]
    assert "elapsed 1:00, run ~1:00, ~0:00 left" in lines[2]
    assert progress.record == [("step20", 20.0, "ok")] * 3


def test_progress_writes_each_line_whole_when_a_step_prints() -> None:
    clock = FakeClock()
    out = io.StringIO()

    def chatty() -> None:
        print("%3|rdkafka: a client's log line", file=out)
        clock.now += 5

    progress = Progress([Step("chatty", 5, chatty)], limit_seconds=60, out=out, now=clock,
                        use_alarm=False)
    progress.run_all(lambda step, exc: "failed")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("%3|rdkafka")
    assert lines[1].startswith("[ 1/1] chatty")
    assert "elapsed 0:05, run ~0:05" in lines[1]


def test_progress_skips_steps_past_the_deadline_and_reports_failures() -> None:
    clock = FakeClock()
    out = io.StringIO()
    ran: list[str] = []

    def slow() -> None:
        ran.append("slow")
        clock.now += 50

    def broken() -> None:
        ran.append("broken")
        raise ValueError("no such peer")

    steps = [Step("broken", 1, broken), Step("slow", 1, slow), Step("late", 1, slow)]
    progress = Progress(steps, limit_seconds=40, out=out, now=clock, use_alarm=False)
    progress.run_all(lambda step, exc: f"failed: {exc}")
    assert ran == ["broken", "slow"]
    assert [status for _, _, status in progress.record] == [
        "failed: no such peer",
        "ok",
        "skipped: time bound reached",
    ]
    assert "[skipped: time bound reached]" in out.getvalue().splitlines()[2]


def test_progress_interrupts_a_step_at_the_bound() -> None:
    finished: list[bool] = []

    def stuck() -> None:
        try:
            time.sleep(5)
        finally:
            finished.append(True)  # the step's cleanup still runs

    progress = Progress([Step("stuck", 1, stuck)], limit_seconds=0.2, out=io.StringIO())
    start = time.monotonic()
    progress.run_all(lambda step, exc: "failed")
    assert time.monotonic() - start < 2
    assert finished == [True]
    assert progress.record[0][2] == "cut short: time bound reached"


def test_report_marks_unmeasured_rows_escapes_cells_and_computes_ratios(
    tmp_path: Path,
) -> None:
    results = Results()
    section = "throughput 100 B"
    results.add(Row(section, "brokerd", "kcat -P produce | file", "fsync always", 300_000.0,
                    "rec/s", "1 record", 100))
    results.add(Row(section, "Redis", "XADD, redis-benchmark -P 100 -c 50", "AOF everysec",
                    150_000.0, "rec/s", "", 100))
    results.add(Row(section, "NATS", "JetStream publish_async, acks awaited",
                    "JetStream defaults (file)", None, "rec/s", "nats-server missing", 100))
    results.latencies.append(Latency("native: produce to acknowledgement", "fsync always",
                                     10, 1.0, 2.0, 3.0, 4.0))
    results.steps = [("nats", 0.1, "ok")]
    text = markdown(results, [], tmp_path / "benchmarks.md", quick=True, seconds=60)
    row = "| brokerd | kcat -P produce \\| file | fsync always | 300,000 | 30.0 | 1 record |"
    assert row in text
    assert f"| {NOT_MEASURED} |  | **not measured: nats-server missing** |" in text
    assert "charts not drawn" in text
    assert "| native: produce to acknowledgement | fsync always | 10 | 1.00 | 2.00 | 3.00 |" in text
    (pair,) = ratios(results)
    assert pair[2] == "2.00"
    assert pair[0].startswith("100 B: kcat -P")


def test_missing_peers_give_rows_that_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    # A program that is not installed cannot be made real here: the lookup is faked.
    monkeypatch.setattr(peers, "tool", lambda name: None)
    results = Results()
    peers.iperf3(results, 1)
    peers.redis(results, records={100: 10, 1000: 10}, xrange_requests=1)
    peers.nats(results, records={100: 10, 1000: 10})
    assert len(results.rows) == 1 + 8 + 4
    assert all(r.value is None and "missing" in r.note for r in results.rows)
    assert {r.system for r in results.rows} == {"iperf3", "Redis", "NATS"}


def _tables(text: str) -> dict[str, list[list[str]]]:
    """Section title -> the body rows (cells) of every table in it (headers left out)."""
    tables: dict[str, list[list[str]]] = {}
    title = ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("## "):
            title = line[3:].strip()
            tables[title] = []
            continue
        header = i + 1 < len(lines) and lines[i + 1].startswith("|---")
        if line.startswith("| ") and title and not header:
            tables[title].append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return tables


# (section, system, start of "what" (or all of it, ending in "$"), durability) of every row
# a run must report.
def _expected_rows() -> list[tuple[str, str, str, str]]:
    rows = []
    for size in ("100 B", "1,000 B"):
        section = f"Throughput, {size} values"
        for client in ("native produce", "confluent-kafka produce", "kcat -P produce",
                       kafka_tools.PERF_PRODUCE):
            for mode in ("fsync always", "fsync never"):
                rows.append((section, "brokerd", client, mode))
        for client in ("native consume", "confluent-kafka consume", "kcat -C",
                       kafka_tools.PERF_CONSUME):
            rows.append((section, "brokerd", client, "read (page cache)"))
        for client in ("confluent-kafka produce", "kcat -P produce", kafka_tools.PERF_PRODUCE):
            for mode in (FLUSH_EACH, KAFKA_DEFAULT):
                rows.append((section, KAFKA, client, mode))
        for client in ("confluent-kafka consume", "kcat -C", kafka_tools.PERF_CONSUME):
            rows.append((section, KAFKA, client, "read (page cache)"))
        for mode in ("AOF everysec", "no persistence"):
            rows.append((section, "Redis", "XADD, redis-benchmark -P 100 -c 50", mode))
            rows.append((section, "Redis", "XRANGE s - + COUNT 1000", mode))
        rows.append((section, "NATS", "JetStream publish_async", "JetStream defaults (file)"))
        rows.append((section, "NATS", "JetStream pull fetch", "JetStream defaults (file)"))
        # The broker's CPU per record beside every Kafka-protocol and native row.
        cost = "Cost per record and the one-core ceiling"
        for client in ("native produce", "confluent-kafka produce", "kcat -P produce"):
            for mode in ("fsync always", "fsync never"):
                rows.append((cost, "brokerd", f"{size}: {client}", mode))
            for mode in (FLUSH_EACH, KAFKA_DEFAULT):
                if client != "native produce":
                    rows.append((cost, KAFKA, f"{size}: {client}", mode))
        for client in ("native consume", "confluent-kafka consume", "kcat -C"):
            rows.append((cost, "brokerd", f"{size}: {client}", "read (page cache)"))
            if client != "native consume":
                rows.append((cost, KAFKA, f"{size}: {client}", "read (page cache)"))
    ceilings = "Ceilings: loopback TCP and the disk"
    rows += [
        (ceilings, "disk", "sequential write", "no sync"),
        (ceilings, "disk", "sequential write", "fdatasync each MiB"),
        (ceilings, "iperf3", "iperf3 TCP loopback", "memory only"),
    ]
    features = "Compaction and transactions beside plain produce"
    rows += [
        (features, "brokerd", "confluent-kafka keyed produce, cleanup.policy=delete",
         "fsync always"),
        (features, "brokerd", "confluent-kafka keyed produce, cleanup.policy=compact",
         "fsync always"),
        (features, "brokerd", "confluent-kafka idempotent produce", "fsync always"),
        (features, "brokerd", "confluent-kafka transactional produce, 10,000", "fsync always"),
        (features, "brokerd", "confluent-kafka transactional produce, 100 ", "fsync always"),
        (features, "brokerd", "confluent-kafka consume, read_committed", "read (page cache)"),
        (features, "brokerd", "log cleaner pass", ""),
    ]
    for mode in ("fsync always", "fsync never"):
        for n in (1, 4, 16):
            rows.append(("Scaling", "brokerd", f"native produce, {n} producer process", mode))
        for n in (1, 16, 256):
            rows.append(("Scaling", "brokerd", f"native produce over {n} partition", mode))
    rows.append(("Scaling", "brokerd", "random-offset fetch p50", ""))
    for n in (1, 4, 16):
        rows.append(("Scaling", "brokerd", f"share-group consume, {n} native queue consumer",
                     "fsync always"))
    for n in (1, 4):
        rows.append(("Scaling", "brokerd",
                     f"share-group consume, {n} confluent-kafka ShareConsumer", "fsync always"))
    rows.append(("Scaling", "brokerd", "share-group consume, explicit acknowledgements, 4 "
                 "confluent-kafka ShareConsumer", "fsync always"))
    rows.append(("Scaling", "brokerd", "classic group consume, confluent-kafka Consumer, one "
                 "member", "read (page cache)"))
    rows.append(("Scaling", "brokerd", "plain native consume of the same partition",
                 "read (page cache)"))
    platform = "Schema Registry and HTTP proxy"
    rows += [
        (platform, "brokerd", "registry GET /schemas/ids/{id}", ""),
        (platform, "brokerd", "registry POST /subjects/{subject}", ""),
        (platform, "brokerd", "proxy v2 produce, JSON records", "fsync always"),
        (platform, "brokerd", "proxy v2 consumer instance", "read (page cache)"),
    ]
    resources = "Resources: memory and restart time"
    rows += [
        (resources, "brokerd", "RSS, empty broker", ""),
        (resources, "brokerd", "RSS with 1,000 partitions$", ""),
        (resources, "brokerd", "RSS with 1,000 partitions + 1,000 idle connections", ""),
        (resources, "brokerd", "start after kill -9", "fsync never"),
        (resources, "brokerd", "clean shutdown", "fsync never"),
        (resources, "brokerd", "start after a clean shutdown", "fsync never"),
        (resources, KAFKA, "RSS, empty broker", ""),
        (resources, KAFKA, "RSS with 1,000 partitions$", ""),
        (resources, KAFKA, "start after kill -9", KAFKA_DEFAULT),
        (resources, KAFKA, "clean shutdown", KAFKA_DEFAULT),
        (resources, KAFKA, "start after a clean shutdown", KAFKA_DEFAULT),
    ]
    return rows


def _left_out(system: str, what: str) -> bool:
    """Rows a quick run leaves out (the JVM's), saying so."""
    return system == KAFKA or what.startswith("Kafka ")


PEER_PROGRAMS = {"Redis": ("redis-server", "redis-benchmark"), "NATS": ("nats-server",),
                 "iperf3": ("iperf3",)}


def _installed(program: str) -> bool:
    return shutil.which(program) is not None or Path("/usr/sbin", program).exists()


# Three minutes of `make test` for a smoke run of every step (the suite's slowest test by
# far): it runs in `make test-long`, and `make bench-quick` is the same run by hand. The
# harness's parts (progress, bounds, report, missing peers) are tested above in seconds.
@pytest.mark.slow
@pytest.mark.clients
def test_quick_run_reports_every_row(tmp_path: Path) -> None:
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (Debian package kcat): its rows cannot be measured")
    report = tmp_path / "benchmarks.md"
    charts = tmp_path / "bench"
    command = [sys.executable, str(REPO / "bench" / "run.py"), "--quick", "--report",
               str(report), "--plots", str(charts), "--time-limit", "240"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=QUICK_TIMEOUT,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    # One progress line per step, each with the elapsed time and the estimate.
    progress = [x for x in done.stderr.splitlines() if re.match(r"\[\s*\d+/24\]", x)]
    assert len(progress) == 24, done.stderr
    unfinished = [x for x in progress if not re.search(r"elapsed \d+:\d\d, run ~\d+:\d\d", x)]
    assert not unfinished, done.stderr

    text = report.read_text()
    tables = _tables(text)
    cost = "Cost per record and the one-core ceiling"
    for section, system, what, durability in _expected_rows():
        found = [r for r in tables.get(section, []) if r[0] == system and r[2] == durability
                 and (r[1] == what[:-1] if what.endswith("$") else r[1].startswith(what))]
        assert len(found) == 1, (section, system, what, durability, tables.get(section))
        row = found[0]
        missing = [p for p in PEER_PROGRAMS.get(system, ()) if not _installed(p)]
        if system == "NATS" and importlib.util.find_spec("nats") is None:
            missing.append("nats-py")
        if _left_out(system, what):
            assert row[3] == NOT_MEASURED and "leaves the JVM out" in row[-1], row
        elif missing:
            assert row[3] == NOT_MEASURED and "missing" in row[-1], row
        else:
            assert row[3] != NOT_MEASURED and re.match(r"[\d,.]+", row[3]), row

    # The one-core ceiling: brokerd's cheapest produce and consume at each size.
    ceilings = [r for r in tables[cost] if len(r) == 5 and r[0] == "brokerd"
                and re.match(r"[\d,]+$", r[3])]
    assert {r[1] for r in ceilings} == {"produce, 100 B", "consume, 100 B",
                                        "produce, 1,000 B", "consume, 1,000 B"}, ceilings
    # The workload matrix: every workload on brokerd with its percentiles; Kafka's say why.
    matrix = tables["Workload matrix (OpenMessaging Benchmark style)"]
    for workload in workloads.MATRIX:
        (ours,) = [r for r in matrix if r[0] == workload.name and r[1] == "brokerd"]
        assert re.match(r"[\d,]+ \(", ours[3]) and all(re.match(r"[\d,.]+$", c)
                                                        for c in ours[4:13]), ours
        (theirs,) = [r for r in matrix if r[0] == workload.name and r[1] == KAFKA]
        assert theirs[3] == NOT_MEASURED and "leaves the JVM out" in theirs[-1], theirs
    assert "segments deleted during the run" in " ".join(r[-1] for r in matrix)

    latencies = {r[0] for rows in tables.values() for r in rows if r and len(r) == 7}
    for what in ("native: produce to long-poll receipt", "native: produce to acknowledgement",
                 "confluent-kafka: produce to consumer receipt",
                 "confluent-kafka: produce to delivery report",
                 f"{KAFKA}, confluent-kafka: produce to consumer receipt",
                 "disk: fdatasync after a 1 MiB write", "disk: fdatasync after a 4 KiB append",
                 "native one-record fetch, random offsets of 10,000 records"):
        assert any(w.startswith(what) for w in latencies), (what, latencies)
    ratio_rows = tables["brokerd / peer ratios"]
    assert len(ratio_rows) >= 4 and all(re.match(r"[\d,.]+$", r[2]) for r in ratio_rows
                                        if "Redis" in r[1])
    machine = {r[0]: r[1] for r in tables["Machine"]}
    for fact in ("cores", "kernel", "Python", "confluent-kafka", "kcat"):
        assert machine.get(fact, "?") not in ("?", ""), fact
    assert all(r[2] == "ok" for r in tables["Steps of this run"]), tables["Steps of this run"]
    assert "`--quick`" in text

    if importlib.util.find_spec("matplotlib") is None:
        assert "charts not drawn" in text
        return
    for name in ("throughput-100", "throughput-1000", "cost", "workloads", "producers",
                 "partitions", "random-fetch", "share-groups", "rss", "restart"):
        png = charts / f"{name}.png"
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000, name
        assert f"](bench/{name}.png)" in text
