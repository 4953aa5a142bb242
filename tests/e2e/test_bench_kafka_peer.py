"""``make bench``'s Apache Kafka peer (bench/kafka_peer.py, bench/kafka_runs.py): its
generated config, the pairing of its rows with brokerd's in the report, the rows it gives
where it cannot run, the CPU-per-record rows (bench/cost.py, on this process's own /proc),
and a real single-node KRaft broker from the JVM kit's jars that answers and takes records
(one JVM start, ten seconds on a quiet machine); its clean stop and restart on the same
data (two starts) is ``slow``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import cost, kafka_peer, kafka_runs, resources, workloads
from bench.common import Latency, Results, Row
from bench.kafka_peer import SYSTEM, KafkaPeer
from bench.report import NOT_MEASURED, kafka_pairs, markdown


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_config_is_one_kraft_node_on_loopback_with_its_logs_in_its_home(tmp_path: Path) -> None:
    peer = KafkaPeer(tmp_path / "kafka")
    peer.home.mkdir()
    peer._write_properties()
    props = _properties(peer.properties)
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == (f"PLAINTEXT://127.0.0.1:{peer.port},"
                                  f"CONTROLLER://127.0.0.1:{peer.controller_port}")
    assert props["controller.quorum.bootstrap.servers"] == f"127.0.0.1:{peer.controller_port}"
    assert props["log.dirs"] == str(tmp_path / "kafka" / "kafka-logs")
    assert props["offsets.topic.replication.factor"] == "1"
    # Durability stays Kafka's default broker-wide: flush.messages=1 is a topic config.
    assert not any(k.startswith("log.flush") for k in props)
    assert peer.kafka_bootstrap == f"127.0.0.1:{peer.port}"


def test_report_pairs_each_kafka_row_with_brokerd_at_the_paired_durability(
    tmp_path: Path,
) -> None:
    results = Results()
    section = "throughput 100 B"
    what = "kcat -P produce from a file, acks=all"
    for durability, rate in (("fsync always", 300_000.0), ("fsync never", 600_000.0)):
        results.add(Row(section, "brokerd", what, durability, rate, "rec/s", "", 100))
    results.add(Row(section, SYSTEM, what, kafka_runs.FLUSH_EACH, 150_000.0, "rec/s", "", 100))
    results.add(Row(section, SYSTEM, what, kafka_runs.DEFAULT, 1_200_000.0, "rec/s", "", 100))
    results.add(Row("resources", "brokerd", "RSS, empty broker", "", 60.0, "MiB"))
    results.add(Row("resources", SYSTEM, "RSS, empty broker", "", 400.0, "MiB"))
    results.add(Row("resources", SYSTEM, "RSS with 1,000 partitions", "", None, "MiB", "why"))
    receipt = "confluent-kafka: produce to consumer receipt, 1,000 rec/s for 2 s"
    results.latencies += [
        Latency(receipt + " (sent at 990 rec/s)", "fsync always", 10, 2.0, 4.0, 8.0, 9.0),
        Latency(receipt + " (sent at 1,000 rec/s)", kafka_runs.FLUSH_EACH, 10, 4.0, 8.0, 8.0,
                9.0, SYSTEM),
    ]
    pairs = {(p[0], p[3]): p for p in kafka_pairs(results)}
    flush = pairs[(f"100 B: {what}", kafka_runs.FLUSH_EACH)]
    assert flush[1:] == ("fsync always", "300,000 rec/s", kafka_runs.FLUSH_EACH,
                         "150,000 rec/s", "2.00")
    assert pairs[(f"100 B: {what}", kafka_runs.DEFAULT)][1::4] == ("fsync never", "0.50")
    assert pairs[("RSS, empty broker", "")][5] == "0.15"
    assert pairs[("RSS with 1,000 partitions", "")][2:] == (
        NOT_MEASURED, "", NOT_MEASURED, NOT_MEASURED)
    p50 = pairs[("confluent-kafka: produce to consumer receipt, p50", kafka_runs.FLUSH_EACH)]
    assert p50[1:] == ("fsync always", "2.00 ms", kafka_runs.FLUSH_EACH, "4.00 ms", "0.50")
    text = markdown(results, [], tmp_path / "benchmarks.md", quick=True, seconds=1)
    assert "## brokerd beside Apache Kafka" in text
    assert f"| {SYSTEM}, {receipt} (sent at 1,000 rec/s) |" in text


def test_cost_rows_read_the_process_cpu_and_give_the_one_core_rate() -> None:
    results = Results()

    def burn() -> float:
        # Enough CPU for the clock ticks of /proc/PID/stat (10 ms each) to count it.
        deadline = os.times().user + 0.2
        while os.times().user < deadline:
            pass
        return 123.0

    rate = cost.costed(results, os.getpid(), system="brokerd", size=100, what="kcat -P produce",
                       durability="fsync never", served=1000, run=burn)
    assert rate == 123.0
    (row,) = results.rows
    assert row.section == cost.SECTION and row.unit == cost.UNIT
    # 0.2 s of CPU over 1,000 records: about 200 µs each (ticks and the loop's exit blur it).
    assert row.value is not None and 150 < row.value < 1000
    assert f"one core: {1_000_000 / row.value:,.0f} rec/s" in row.note
    cost.costed(results, os.getpid(), system="brokerd", size=100, what="kcat -C -e -q consume",
                durability="read (page cache)", served=1000, run=None, missing="kcat missing")
    assert results.rows[1].value is None and results.rows[1].note == "kcat missing"
    ((system, direction, _us, one_core, which),) = cost.ceilings(results)
    assert (system, direction) == ("brokerd", "produce, 100 B")
    assert one_core == f"{cost.ceiling(row.value) or 0:,.0f}" and which.startswith("kcat -P")
    text = markdown(results, [], Path("benchmarks.md"), quick=True, seconds=1)
    assert "## Cost per record and the one-core ceiling" in text
    assert "| brokerd | 100 B: kcat -P produce | fsync never |" in text


def test_without_the_jvm_every_kafka_row_says_why(tmp_path: Path) -> None:
    results = Results()
    why = "java not found"
    kafka_runs.throughput(results, tmp_path, {100: 10, 1000: 10}, 1000, 1.0, why=why)
    kafka_runs.rss(results, tmp_path, [1000, 10_000], why=why)
    kafka_runs.restart(results, tmp_path, 1000, 10**9, why=why)
    workloads.kafka(results, tmp_path, workloads.Load(rate=10, seconds=1, warmup=0), why=why)
    # 3 clients x (2 produce durabilities + 1 consume) x 2 sizes, each with its cost row;
    # 3 RSS; 3 restart.
    assert len(results.rows) == 18 * 2 + 3 + 3
    assert len([r for r in results.rows if r.section == cost.SECTION]) == 18
    assert all(r.system == SYSTEM and r.value is None and why in r.note for r in results.rows)
    assert {r.what for r in results.rows if r.section == "resources"} >= set(
        resources.restart_whats(1000, 10**9))
    assert len(results.latencies) == 4 and all(x.n == 0 for x in results.latencies)
    assert len(results.workloads) == len(workloads.MATRIX)
    assert all(w.achieved is None and w.note == why for w in results.workloads)
    assert list(tmp_path.iterdir()) == []


def _peer_or_skip(home: Path) -> KafkaPeer:
    why = kafka_peer.missing()
    if why:
        pytest.skip(f"no Kafka peer here: {why}")
    return KafkaPeer(home)


@pytest.mark.clients
def test_kafka_peer_starts_answers_and_takes_records(tmp_path: Path) -> None:
    from confluent_kafka import Producer

    peer = _peer_or_skip(tmp_path / "kafka")
    try:
        assert peer.start_timed() > 0 and peer.answers()
        peer.create_topic("t", 2, {"flush.messages": "1"})
        producer = Producer({"bootstrap.servers": peer.kafka_bootstrap, "acks": "all"})
        for i in range(10):
            producer.produce("t", b"x", partition=i % 2)
        assert producer.flush(30) == 0
        assert peer.end_offsets("t", 2) == [5, 5]
        assert peer.rss() > 50 * 1024 * 1024
    finally:
        peer.kill()


@pytest.mark.slow
@pytest.mark.clients
def test_kafka_peer_stops_cleanly_and_restarts_on_its_data(tmp_path: Path) -> None:
    from confluent_kafka import Producer

    peer = _peer_or_skip(tmp_path / "kafka")
    try:
        peer.start()
        peer.create_topic("t", 1)
        producer = Producer({"bootstrap.servers": peer.kafka_bootstrap, "acks": "all"})
        for _ in range(5):
            producer.produce("t", b"x")
        assert producer.flush(30) == 0
        assert peer.stop_timed() > 0
        # The same data after a restart (the listeners keep their ports).
        peer.start()
        assert peer.end_offset("t", 0) == 5
    finally:
        peer.kill()
