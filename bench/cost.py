"""What a record costs the broker: CPU microseconds per record, and the one-core ceiling
that follows from them.

Around each throughput row (bench/brokerd_runs.py for brokerd, bench/kafka_runs.py for
Apache Kafka, the same clients on both) the broker process's CPU time is read from
``/proc/PID/stat`` (user + system, every thread: the reactor, the disk threads, a JVM's
network, request-handler, flusher and GC threads) before and after; divided by the
records the row moved, that is what one record cost the broker. A kcat consume row reads
the partition ``KCAT_READS`` times, so it served that many times its records.

The ceiling row is ``1,000,000 / µs per record``: the highest rate one fully busy core
could carry at that cost. For brokerd that is the whole answer (one reactor thread does
the Python work of every request; the threads beside it only wait on disk), so it is
also where one broker saturates on any machine. Kafka spreads the same work over many
threads: its figure is the rate per core it pays for, and a machine with more cores
multiplies it.

The client runs on the same cores, so a row's wall-clock rate is bounded by both; the
CPU figure is the broker's alone and does not depend on how busy the client was.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from bench.common import Results, Row

SECTION = "cost"
UNIT = "µs/rec"
CEILING_UNIT = "rec/s per core"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    # After the command name: state is field 0, utime 11, stime 12 (man 5 proc).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ceiling(us_per_record: float | None) -> float | None:
    """Records/s one core carries at ``us_per_record`` of broker CPU each."""
    if not us_per_record:
        return None
    return 1_000_000 / us_per_record


def costed(results: Results, pid: int | None, *, system: str, size: int, what: str,
           durability: str, served: int, run: Callable[[], float] | None,
           missing: str = "") -> float | None:
    """Run one throughput row (``run``, which returns its rate), add its cost row, and
    return the rate. ``served``: the records the row moved through the broker. Without
    ``run`` (the row cannot be measured: ``missing`` says why) the cost row says so."""
    if run is None or pid is None:
        results.add(Row(SECTION, system, what, durability, None, UNIT, missing, size))
        return None
    before = cpu_seconds(pid)
    rate = run()
    spent = cpu_seconds(pid) - before
    us = spent * 1_000_000 / served
    one_core = ceiling(us)
    results.add(Row(SECTION, system, what, durability, us, UNIT,
                    f"{spent:.2f} s CPU over {served:,} records; one core: "
                    f"{one_core:,.0f} rec/s" if one_core else f"{served:,} records", size))
    return rate


def ceilings(results: Results) -> list[tuple[str, str, str, str, str]]:
    """Per system, record size and direction: the cheapest measured row's cost and the
    rate one core carries at it (system, direction, cost, one-core rate, which row)."""
    out: list[tuple[str, str, str, str, str]] = []
    rows = [r for r in results.rows if r.section == SECTION and r.value]
    keys = sorted({(r.system, r.size) for r in rows}, key=lambda k: (k[0] != "brokerd", k))
    for system, size in keys:
        for direction, test in (("produce", _is_produce), ("consume", _is_consume)):
            mine = [r for r in rows if (r.system, r.size) == (system, size) and test(r.what)]
            if not mine:
                continue
            best = min(mine, key=lambda r: r.value or 0.0)
            assert best.value is not None
            out.append((system, f"{direction}, {size:,} B", f"{best.value:,.2f}",
                        f"{ceiling(best.value) or 0:,.0f}",
                        f"{best.what} [{best.durability}]"))
    return out


def _is_produce(what: str) -> bool:
    return "produce" in what or what.startswith("kcat -P") or "ProducerPerformance" in what


def _is_consume(what: str) -> bool:
    return not _is_produce(what)
