"""The run's report: ``docs/benchmarks.md`` (Markdown tables, the charts, machine facts)
and the summary printed on the terminal. Formatting only: it measures nothing, and a
row without a figure is printed with the reason it has none.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from bench import cost, workloads
from bench.common import Latency, Results, Row
from bench.fetch_sessions import SECTION as FETCH_SESSIONS
from bench.kafka_peer import SYSTEM as KAFKA
from bench.kafka_runs import PAIRED as KAFKA_PAIRED
from bench.peers import NATS_CLIENT_BOUND, XADD_WHAT, XRANGE_WHAT
from bench.plots import MISSING
from bench.registry_proxy import SECTION as REGISTRY_PROXY
from bench.registry_proxy import TITLE as REGISTRY_PROXY_TITLE
from bench.scaling import SECTION as SCALING

NOT_MEASURED = "not measured"
THROUGHPUT_HEAD = ("system", "what", "durability", "records/s", "MB/s", "note")
OTHER_HEAD = ("system", "what", "durability", "figure", "note")
LATENCY_HEAD = ("what", "durability", "n", "p50 ms", "p99 ms", "p99.9 ms", "max ms")
KAFKA_HEAD = ("what", "brokerd durability", "brokerd", "Kafka durability", "Apache Kafka",
              "brokerd / Kafka")
KAFKA_TITLE = "brokerd beside Apache Kafka"
COST_HEAD = ("system", "row", "durability", "broker CPU per record", "note")
CEILING_HEAD = ("system", "direction, value size", "cheapest µs/rec", "one core, rec/s",
                "at the cost of")


def figure(row: Row) -> str:
    if row.value is None:
        return NOT_MEASURED
    if row.unit == "rec/s":
        return f"{row.value:,.0f} rec/s"
    if row.unit == "x":
        return f"{row.value:,.2f}x"
    if row.unit == "s":
        return f"{row.value:,.2f} s"
    if row.unit == cost.UNIT:
        return f"{row.value:,.2f} {row.unit}"
    return f"{row.value:,.1f} {row.unit}"


def _find(results: Results, section: str, system: str, what: str,
          durability: str) -> Row | None:
    for row in results.rows:
        if (row.section, row.system, row.durability) == (section, system, durability) and (
            row.what.startswith(what)
        ):
            return row
    return None


# (brokerd row, peer row, why the pair is compared): (what-prefix, durability) each.
RATIO_PAIRS = (
    (("kcat -P", "fsync always"), ("Redis", XADD_WHAT, "AOF everysec"),
     "produce, both durable on disk (brokerd before the ack; Redis within a second)"),
    (("native produce", "fsync always"), ("Redis", XADD_WHAT, "AOF everysec"),
     "produce, brokerd's own client"),
    (("kcat -P", "fsync never"), ("Redis", XADD_WHAT, "no persistence"),
     "produce, neither syncs"),
    (("kcat -C", "read (page cache)"), ("Redis", XRANGE_WHAT, "no persistence"),
     "consume / read back, C clients (Redis re-reads the same first 1,000 entries)"),
    (("confluent-kafka produce", "fsync always"),
     ("NATS", "JetStream publish_async", "JetStream defaults (file)"),
     f"produce through Python clients (NATS: {NATS_CLIENT_BOUND})"),
    (("confluent-kafka consume", "read (page cache)"),
     ("NATS", "JetStream pull", "JetStream defaults (file)"),
     f"consume through Python clients (NATS: {NATS_CLIENT_BOUND})"),
)


def ratios(results: Results) -> list[tuple[str, str, str, str]]:
    """(brokerd row, peer row, ratio text, why) for each pair and record size."""
    out: list[tuple[str, str, str, str]] = []
    sections = sorted({r.section for r in results.rows if r.section.startswith("throughput")})
    for section in sections:
        for (b_what, b_dur), (p_sys, p_what, p_dur), why in RATIO_PAIRS:
            ours = _find(results, section, "brokerd", b_what, b_dur)
            theirs = _find(results, section, p_sys, p_what, p_dur)
            if ours is None or theirs is None:
                continue
            text = NOT_MEASURED
            if ours.value is not None and theirs.value:
                text = f"{ours.value / theirs.value:,.2f}"
            size = _size_text(section)
            out.append((f"{size}: {ours.what} [{b_dur}]",
                        f"{p_sys} {theirs.what} [{p_dur}]", text, why))
    # The ceilings: the fastest brokerd produce in bytes/s against loopback TCP and the disk.
    produce = [r for r in results.rows if r.system == "brokerd" and "produce" in r.what
               and r.section.startswith("throughput") and r.mb_per_s is not None]
    for durability, ceiling_system, ceiling_durability in (
        ("fsync never", "iperf3", "memory only"),
        ("fsync always", "disk", "fdatasync each MiB"),
    ):
        best = max((r for r in produce if r.durability == durability),
                   key=lambda r: r.mb_per_s or 0.0, default=None)
        ceiling = next((r for r in results.rows if r.system == ceiling_system
                        and r.durability == ceiling_durability), None)
        if best is None or ceiling is None:
            continue
        text = NOT_MEASURED
        if best.mb_per_s is not None and ceiling.value:
            text = f"{best.mb_per_s / ceiling.value:,.3f}"
        out.append((f"fastest produce in MB/s: {_size_text(best.section)}, {best.what} "
                    f"[{durability}]",
                    f"{ceiling.what} [{ceiling_durability}]", text,
                    "share of the ceiling used (values only, no framing)"))
    return out


def _ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or not theirs:
        return NOT_MEASURED
    ratio = ours / theirs
    # Latencies can differ a thousandfold: two decimals would print 0.00.
    return f"{ratio:,.2f}" if ratio >= 0.1 else f"{ratio:.4f}"


def latency_label(lat: Latency) -> str:
    """A latency row's name, with its system when that is not brokerd."""
    return lat.what if lat.system == "brokerd" else f"{lat.system}, {lat.what}"


def kafka_pairs(results: Results) -> list[tuple[str, ...]]:
    """One row per Apache Kafka figure: the brokerd row of the same section, client or
    command and paired durability beside it, and brokerd / Kafka."""
    out: list[tuple[str, ...]] = []
    for theirs in results.rows:
        if theirs.system != KAFKA:
            continue
        durability = KAFKA_PAIRED.get(theirs.durability, theirs.durability)
        ours = next((r for r in results.rows if r.system == "brokerd"
                     and (r.section, r.what, r.durability)
                     == (theirs.section, theirs.what, durability)), None)
        what = theirs.what
        if theirs.section.startswith("throughput"):
            what = f"{_size_text(theirs.section)}: {what}"
        elif theirs.section == cost.SECTION:
            what = f"CPU per record, {theirs.size:,} B: {what}"
        out.append((what, durability, NOT_MEASURED if ours is None else figure(ours),
                    theirs.durability, figure(theirs),
                    _ratio(None if ours is None else ours.value, theirs.value)))
    for lat in results.latencies:
        if lat.system != KAFKA:
            continue
        kind = lat.what.split(",")[0]
        durability = KAFKA_PAIRED.get(lat.durability, lat.durability)
        ours_lat = next((x for x in results.latencies if x.system == "brokerd"
                         and x.what.split(",")[0] == kind and x.durability == durability
                         and x.n), None)
        for name, pick in (("p50", lambda x: x.p50), ("p99", lambda x: x.p99),
                           ("p99.9", lambda x: x.p999)):
            mine = None if ours_lat is None else pick(ours_lat)
            theirs_ms = pick(lat) if lat.n else None
            out.append((f"{kind}, {name}", durability,
                        NOT_MEASURED if mine is None else f"{mine:.2f} ms", lat.durability,
                        NOT_MEASURED if theirs_ms is None else f"{theirs_ms:.2f} ms",
                        _ratio(mine, theirs_ms)))
    return out


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [c.replace("|", "\\|") for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _row_cells(row: Row, throughput: bool) -> tuple[str, ...]:
    note = row.note if row.value is not None else f"**not measured: {row.note}**"
    if row.section == cost.SECTION:
        return (row.system, f"{row.size:,} B: {row.what}", row.durability, figure(row), note)
    if throughput:
        value = NOT_MEASURED if row.value is None else f"{row.value:,.0f}"
        mbps = "" if row.mb_per_s is None else f"{row.mb_per_s:,.1f}"
        return (row.system, row.what, row.durability, value, mbps, note)
    return (row.system, row.what, row.durability, figure(row), note)


def _latency_cells(lat: Latency) -> tuple[str, ...]:
    if lat.n == 0:
        return (latency_label(lat), lat.durability, "0", NOT_MEASURED, "", "", "")
    return (latency_label(lat), lat.durability, f"{lat.n:,}", f"{lat.p50:.2f}",
            f"{lat.p99:.2f}", f"{lat.p999:.2f}", f"{lat.max:.2f}")


SECTION_TITLES = {
    "ceilings": "Ceilings: loopback TCP and the disk",
    "features": "Compaction and transactions beside plain produce",
    SCALING: "Scaling",
    REGISTRY_PROXY: REGISTRY_PROXY_TITLE,
    "resources": "Resources: memory and restart time",
    FETCH_SESSIONS: "Fetch sessions: a quiet consumer of 2,000 partitions",
    cost.SECTION: "Cost per record and the one-core ceiling",
}


SECTION_METHODS = {
    "features": (
        "confluent-kafka, 100-byte values, one partition each. Keyed rows use 1,000 distinct "
        "keys; the compacted topic is created with `cleanup.policy=compact` (the cleaner runs "
        "beside). Transactions are committed one after another. The cleaner rows run the "
        "storage engine in-process: one pass over the partition while a writer appends and "
        "flushes (fsync) every 100 records."
    ),
    cost.SECTION: (
        "The broker process's CPU time (user + system, all its threads, from "
        "`/proc/PID/stat`) over each throughput row above, divided by the records the row "
        "moved (a kcat consume row reads the partition three times). The one-core figure "
        "is 1,000,000 / µs per record: the rate one fully busy core carries at that cost. "
        "brokerd does its Python work on one reactor thread, so its figure is also where one "
        "broker saturates, however many cores the machine has; Kafka spreads the work over "
        "many threads, so its figure is a rate per core that more cores multiply. Rows "
        "with fsync include the kernel's time for the syncs. The figure is the broker's "
        "alone: the client's CPU is not in it (docs/performance.md, \"The one-core "
        "ceiling\")."
    ),
    SCALING: (
        "Producers are separate processes, each with its own native connection and "
        "partition and one request of 100 records in flight: the curve shows how group "
        "commit (one fsync for the requests that arrived meanwhile) lets more producers "
        "share a sync. The partition curve is one connection keeping 16 such requests in "
        "flight, spread round-robin over the partitions. The random-offset rows are "
        "one-record native fetches, one at a time, at seeded random offsets; their ratio "
        "shows what the offset lookup (index bisect, then a scan of batch headers) costs as "
        "a partition grows a thousandfold. The share-group rows are 1, 4 and 16 consumer "
        "processes draining one partition's records through one share group (native "
        "QueueFetch of up to 100 records, then one QueueAcknowledge ACCEPT, each change "
        "fsynced in the share-state journal); every record is delivered exactly once "
        "(checked). The Kafka-protocol share-group rows are 1 and 4 confluent-kafka "
        "ShareConsumer processes (a preview API in that client) draining the same partition "
        "through a new share group: up to 100 records per poll, each poll's records accepted "
        "with `commit_sync` before the next poll, joining the group counted; one more row "
        "has 4 of them in explicit acknowledgement mode, each record accepted with "
        "`acknowledge` and the acknowledgements sent with the next poll's ShareFetch (one "
        "request and one fsync per poll instead of two). "
        "Beside them, a classic consumer group's one member (confluent-kafka, "
        "`group.protocol=classic`) reads the same records, from its assignment to its "
        "offset commit: a classic group gives one partition to one member, so more members "
        "would not help; and one plain native reader reads them without a group."
    ),
    REGISTRY_PROXY: (
        "One Python client (`http.client`) on one keep-alive connection, a request at a "
        "time, each answer parsed and checked: the figures are client + server on this "
        "box. Lookups cycle over 20 registered Avro schemas (ids and subjects); the "
        "registry answers them from memory. The proxy rows produce JSON records of about "
        "100 bytes, 100 per `POST /topics/NAME` (REST Proxy v2, embedded format json; "
        "the broker answers after the fsync), then one v2 consumer instance, assigned the "
        "partition, reads them back with `GET .../records`. No peer stands beside these "
        "rows: neither Confluent's Schema Registry and REST Proxy (not on Maven Central) "
        "nor Karapace (not on PyPI) can be installed here."
    ),
    FETCH_SESSIONS: (
        "One kafka-python consumer (fetch sessions on, `fetch.max.wait.ms` 500, in its own "
        "process) assigned every partition of a 2,000-partition topic while a producer "
        "sends 20 records/s of 100 bytes, each to a random partition. The figure is the "
        "broker process's CPU time (user + system, all threads, `/proc/PID/stat`) over the "
        "measured seconds, per second and per fetch the consumer made; the runs alternate "
        "(A B A B) and each row is their median. brokerd's second row runs with "
        "`--max-incremental-fetch-session-cache-slots 0`: every fetch is a full fetch of "
        "the 2,000 partitions, as before brokerd kept sessions. Apache Kafka's second row "
        "turns the client's sessions off. The consumer's own CPU shares the cores, so "
        "fetches per second depend on the machine as well (the note gives them)."
    ),
    "resources": (
        "RSS is the twistd process's VmRSS, a second after each change. 10,000 partitions "
        "need three descriptors each (a segment's log, index and time index): where the "
        "descriptor limit cannot be raised that far, those rows say so. Restart times run "
        "from starting twistd until both listeners answer a request (native ListTopics and "
        "Kafka ApiVersions); the first follows a `kill -9` right after the data was written "
        "with `--fsync never` (recovery checks everything past the recovery point), the "
        "clean stop syncs a tenth more written after that start, and every record must "
        "still be there afterwards. Apache Kafka's rows are the same steps on its broker "
        "(RSS of the JVM, with partitions made through CreateTopics; the restart data "
        "written by ProducerPerformance, each start timed until its broker and controller "
        "listeners answer ApiVersions)."
    ),
}


def markdown(results: Results, plots: list[Path], report: Path, *, quick: bool,
             seconds: float) -> str:
    rel = {p.stem: os.path.relpath(p, report.parent) for p in plots}
    f = results.facts
    lines = [
        "# brokerd benchmarks",
        "",
        f"Written by `make bench` (`bench/run.py{' --quick' if quick else ''}`) on "
        f"{f.get('date', '?')} in {seconds / 60:.1f} minutes. Do not edit by hand: run it "
        "again.",
        "",
        "Everything runs on one machine over 127.0.0.1: clients, brokerd and its peers "
        "share the same cores, so every figure is \"client + server on this box\". "
        + ("This was a `--quick` run: tiny sizes, for the smoke test; its figures mean "
           "little." if quick else
           "The machine may have been shared with other work during the run: treat the "
           "figures as noisy (a few tens of percent) and compare rows of the same run."),
        "",
        "Durability is stated on every row: brokerd `--fsync always` answers a produce "
        "after its bytes are fsynced, `--fsync never` leaves syncing to the OS (see "
        "`docs/operations.md`); Redis with `appendonly yes appendfsync everysec` syncs its "
        "log once a second, without persistence never; JetStream runs with its defaults "
        "(file storage). Apache Kafka's default leaves flushing to the OS (beside brokerd "
        "`--fsync never`); its topics with `flush.messages=1` fsync after every append "
        "(beside brokerd `--fsync always`).",
        "",
        *([] if plots else [f"({MISSING}.)", ""]),
        "## Machine",
        "",
        *_table(("fact", "value"), [(k, v) for k, v in f.items()]),
        "",
    ]
    order = ["ceilings"]
    order += sorted({r.section for r in results.rows if r.section.startswith("throughput")},
                    key=lambda s: int(s.split()[1]))
    order += [cost.SECTION, "features", SCALING, FETCH_SESSIONS, REGISTRY_PROXY, "resources"]
    for section in order:
        # brokerd's rows first, then the peers', each in run order.
        rows = sorted((r for r in results.rows if r.section == section),
                      key=lambda r: r.system != "brokerd")
        if not rows:
            continue
        throughput = section.startswith("throughput")
        if section in SECTION_TITLES:
            title = SECTION_TITLES[section]
        else:
            title = f"Throughput, {_size_text(section)} values"
        lines += [f"## {title}", ""]
        head = THROUGHPUT_HEAD if throughput else OTHER_HEAD
        if section == cost.SECTION:
            head = COST_HEAD
            rows.sort(key=lambda r: (r.system != "brokerd", r.size))
        lines += _table(head, [_row_cells(r, throughput) for r in rows])
        lines.append("")
        if section == cost.SECTION:
            lines += [*_table(CEILING_HEAD, cost.ceilings(results)), ""]
            if "cost" in rel:
                lines += [f"![cost]({rel['cost']})", ""]
        if section in SECTION_METHODS:
            lines += [SECTION_METHODS[section], ""]
        if throughput:
            stem = f"throughput-{section.split()[1]}"
            if stem in rel:
                lines += [f"![{title}]({rel[stem]})", ""]
            lines += _method_throughput()
        if section == "ceilings":
            lats = [x for x in results.latencies if x.what.startswith("disk")]
            lines += [*_table(LATENCY_HEAD, [_latency_cells(x) for x in lats]), ""]
        if section == SCALING:
            for stem in ("producers", "partitions", "random-fetch", "share-groups"):
                if stem in rel:
                    lines += [f"![{stem}]({rel[stem]})", ""]
            lats = [x for x in results.latencies if x.what.startswith("native one-record")]
            lines += [*_table(LATENCY_HEAD, [_latency_cells(x) for x in lats]), ""]
        if section == "resources":
            for stem in ("rss", "restart"):
                if stem in rel:
                    lines += [f"![{stem}]({rel[stem]})", ""]
    lines += ["## brokerd / peer ratios", "",
              "Above 1: brokerd is faster. Pairs compare rows of the same record size and a "
              "comparable durability.", ""]
    lines += [*_table(("brokerd", "peer", "ratio", "why this pair"), ratios(results)), ""]
    lines += [f"## {KAFKA_TITLE}", "",
              "Apache Kafka (a single-node KRaft broker, broker and controller in one JVM "
              "with a 1 GiB heap, log directory on the same disk as brokerd's) measured "
              "with the same clients and commands. Each Kafka figure stands beside the "
              "brokerd row of the same client and the paired durability. brokerd / Kafka "
              "above 1 means brokerd is faster for rates (rec/s); below 1 means brokerd is "
              "faster or smaller for latencies, memory and seconds.", ""]
    lines += [*_table(KAFKA_HEAD, kafka_pairs(results)), ""]
    if "restart-kafka" in rel:
        lines += [f"![restart-kafka]({rel['restart-kafka']})", ""]
    lines += workloads.report_lines(results, rel)
    lines += ["## End-to-end latency at a fixed rate", "",
              "A producer sends at a steady 1,000 records/s while a consumer long-polls; each "
              "value carries the send time. The consumer runs in a process of its own "
              "(`time.perf_counter` is one monotonic clock for every process); "
              "confluent-kafka's delivery reports are served by a thread blocked in "
              "`poll`. Produce to receipt includes the fsync (`--fsync always`) and the "
              "consumer's fetch. The confluent-kafka rows run on brokerd with `--fsync "
              "always` and `never`, and on Apache Kafka's topics of both durabilities "
              "(`flush.messages=1` fsyncs before each produce is answered), after its "
              "throughput rows (the JVM is warm).", ""]
    e2e = [x for x in results.latencies if ":" in x.what and not x.what.startswith("disk")]
    lines += [*_table(LATENCY_HEAD, [_latency_cells(x) for x in e2e]), ""]
    lines += ["## Steps of this run", ""]
    steps = [(name, f"{s:.1f}", status) for name, s, status in results.steps]
    lines += [*_table(("step", "seconds", "status"), steps), ""]
    return "\n".join(lines)


def _size_text(section: str) -> str:
    """``throughput 1000 B`` -> ``1,000 B``."""
    return f"{int(section.split()[1]):,} B"


def _method_throughput() -> list[str]:
    return [
        "Each brokerd produce row writes to one partition and is checked afterwards (the "
        "partition's end offset must equal the records sent). kcat reads its values from a "
        "file (`kcat -P -l`), its time includes its start-up; `kcat -C -e -q` reads from "
        "offset 0 to the end, three times as three processes (start-up included), and the "
        "fastest read stands. redis-benchmark's XRANGE rows repeat the same call "
        "(`XRANGE s - + COUNT 1000`, the stream's first 1,000 entries), so they read hot "
        "memory; brokerd's consume rows read the whole partition (kcat: the best of three "
        "whole reads; the other clients: one). Kafka's perf tools' rows are their own "
        "figures (ProducerPerformance from its first send to its last acknowledgement, "
        "ConsumerPerformance's fetch rate once its group is joined): the JVM's start-up is "
        "not in them. Apache Kafka's rows run the same clients, one topic of one partition "
        "per row (`flush.messages=1` or Kafka's default), checked the same way.",
        "",
    ]


def write(results: Results, plots: list[Path], report: Path, *, quick: bool,
          seconds: float) -> None:
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(markdown(results, plots, report, quick=quick, seconds=seconds) + "\n")


def terminal(results: Results) -> str:
    width = max((len(f"1,000 B {r.system}: {r.what}") for r in results.rows), default=10)
    out = []
    for r in results.rows:
        label = f"{r.system}: {r.what}"
        if r.section.startswith("throughput"):
            label = f"{_size_text(r.section)} {label}"
        out.append(f"{label:<{width}}  {r.durability:<26} {figure(r):>18}"
                   + (f"  ({r.note})" if r.value is None else ""))
    for x in results.latencies:
        out.append(f"{latency_label(x):<{width}}  {x.durability:<26} "
                   + (NOT_MEASURED if x.n == 0 else
                      f"p50 {x.p50:.2f} ms  p99 {x.p99:.2f} ms  p99.9 {x.p999:.2f} ms"))
    return "\n".join(out)
