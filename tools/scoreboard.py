"""The reliability scoreboard: runs the project's fault-injection tests and prints a
Markdown table (area, test, size, result, measured figures, seconds), the one in
docs/reliability.md. A test reports a figure with ``tests.figures.record``.

    .venv/bin/python tools/scoreboard.py            # short versions (minutes)
    .venv/bin/python tools/scoreboard.py --long     # adds the slow variants (-m slow)
    .venv/bin/python tools/scoreboard.py --soak 120 # only a native kill -9 crash loop

Each row is a pytest selection run in its own process, so one failure does not hide the
others. What it does not do: install anything (``make install`` first) or decide what a
test checks (each test's docstring says).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.figures import FIGURES_ENV, read_figures  # noqa: E402

#: (area, pytest selection, size as run, extra pytest args)
ROWS: list[tuple[str, str, str, tuple[str, ...]]] = [
    (
        "crash loop, native (kill -9 under load)",
        "tests/faults/test_crash.py",
        "4 cycles + garbage tail",
        (),
    ),
    (
        "crash loop, Kafka (kill -9, kafka-python group)",
        "tests/kafka/test_scenarios.py::test_group_split_leave_commit_restart_resume",
        "1 crash",
        (),
    ),
    (
        "crash, Kafka DeleteRecords survives kill -9",
        "tests/kafka/server/handlers/test_partitions_clients.py::test_confluent_delete_records_survives_kill",
        "1 crash",
        (),
    ),
    (
        "crash, compaction (kill -9 mid-clean)",
        "tests/storage/cleaner/test_compactor_e2e.py tests/faults/test_cleaner_crash.py",
        "all steps",
        (),
    ),
    ("transactions crash", "tests/faults/test_transactions_crash.py", "as written", ()),
    (
        "corruption matrix (seeded: flips, torn, garbage, zeroed 4k, indexes)",
        "tests/storage/log/test_loader.py",
        "60 cases + named",
        (),
    ),
    (
        "damage below the recovery point (payload, CRC, length -/+, magic, zeroed)",
        "tests/storage/segment/test_resync.py",
        "6 shapes x 2 points",
        (),
    ),
    (
        "bit rot on a live broker (native 13, librdkafka CORRUPT_MESSAGE)",
        "tests/faults/test_corrupt.py",
        "1,001 records",
        (),
    ),
    (
        "disk full (2 MiB tmpfs) + offline retry + rate-limited ENOSPC log",
        "tests/faults/test_disk.py",
        "tmpfs 2 MiB",
        (),
    ),
    (
        "fsync EIO (injected through a test double of the sync call)",
        "tests/storage/log/test_partition_log_files.py::test_fsync_error_fails_partition",
        "1 partition",
        (),
    ),
    (
        "commits after ENOSPC once space returns (offsets store, transaction log, fsync EIO)",
        "tests/faults/test_stores.py tests/storage/journal/test_faults.py",
        "tmpfs 24 MiB, 10+10 commits",
        (),
    ),
    ("mutated frames / batches (hypothesis fuzz)", "tests/test_fuzz.py", "short profile", ()),
    (
        "connection limits",
        "tests/net/test_connection.py tests/test_tap.py",
        "-k limit",
        ("-k", "limit"),
    ),
    (
        "slow and non-reading clients, idle close",
        "tests/native/test_protocol_loopback.py tests/native/test_protocol.py "
        "tests/kafka/listener/test_protocol.py",
        "-k 'reading or idle'",
        ("-k", "reading or idle"),
    ),
    (
        "a stale-password client beside a correct one from the same address",
        "tests/security/test_auth_throttle_stale_password.py",
        "4 s of retries, 10 correct logins",
        (),
    ),
    (
        "8 never-reading TLS clients asking for 2^31-1 bytes",
        "tests/kafka/server/handlers/test_fetch_bounded.py::test_tls_fetch_of_everything_holds_bounded_memory",
        "100 MiB partition, RSS +64 MiB over budget max",
        (),
    ),
    (
        "8 never-reading plaintext clients after a restart (unchecked ranges)",
        "tests/kafka/server/handlers/test_fetch_bounded.py::test_plaintext_fetch_after_a_restart_holds_bounded_memory",
        "100 MiB partition, RSS +64 MiB over budget max",
        (),
    ),
    (
        "100 connections each sending an 8 MiB frame before login",
        "tests/net/test_edge_memory.py::test_frames_before_login_are_refused_at_the_size_prefix "
        "tests/net/test_edge_memory.py::test_the_request_budget_bounds_buffered_frames_without_sasl",
        "100 x 8 MiB, RSS",
        (),
    ),
    (
        "five rounds of TLS clients closing mid-answer",
        "tests/net/test_edge_memory.py::test_tls_clients_closing_mid_answer_leave_nothing_behind "
        "tests/net/test_twisted_state.py",
        "5 x 10 x 8 MiB",
        (),
    ),
    (
        "one address cannot take every slot",
        "tests/net/test_connlimit.py",
        "20 of 40, 100 of 200",
        (),
    ),
    (
        "Metadata p99 during a 10,000-partition create (short: 2,000; grow and delete too)",
        "tests/core/test_topics_control_plane_load.py",
        "-k partition (2,000; --long 10,000)",
        ("-k", "partition"),
    ),
    (
        "time to create 1,000 vs 10,000 topics (short: first vs last 1,000 of 3,000), one by one",
        "tests/core/test_topics_control_plane_load.py",
        "-k linear (3,000; --long 10,000)",
        ("-k", "linear"),
    ),
    (
        "share sessions flooded: a victim ShareConsumer's redeliveries beside 2,100 "
        "attacker sessions (cap 2,000)",
        "tests/kafka/server/handlers/test_share_session_flood.py::"
        "test_a_victim_consumer_beside_more_sessions_than_the_broker_holds",
        "2,100 sessions, 1,500 records",
        (),
    ),
    (
        "idle connections announcing large frames vs a 900 KiB producer and Metadata",
        "tests/net/test_budget_hostage.py",
        "24 idle, or 12 of one address sending 128 KiB; 8 records (--long: 48 idle, 70 over 75 s)",
        (),
    ),
    (
        "topic deleted and created again under parked fetches (by name and by topic ID)",
        "tests/kafka/server/handlers/test_fetch_broker.py",
        "-k deleted_and_created (2 parked fetches)",
        ("-k", "deleted_and_created"),
    ),
    (
        "time retention deletes a quiet topic's records (retention.ms=3000, 1 s checks)",
        "tests/kafka/test_retention_clients.py",
        "5 records (--long: and kill -9 after)",
        (),
    ),
    (
        "hostile KIP-848 subscription regex (.{0,249} x16 + x, 30-char topic): other clients",
        "tests/kafka/groups/consumer/test_regex_resolver_clients.py",
        "-k hostile: 1 member, 41 near-miss topics, 6 s of 900 KiB produces",
        ("-k", "hostile"),
    ),
]

_COUNTS = re.compile(r"(\d+) (passed|failed|skipped|error|errors|deselected)")


def run(selection: str, extra: tuple[str, ...], long: bool) -> tuple[str, float, str]:
    """The verdict, the seconds taken and the figures the tests recorded."""
    paths = selection.split()
    if not all((REPO / p.split("::")[0]).exists() for p in paths):
        return "not present on this branch", 0.0, ""
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *paths, *extra]
    if long:
        args += ["-m", "slow or not slow"]
    with tempfile.TemporaryDirectory() as tmp:
        figures_file = os.path.join(tmp, "figures.jsonl")
        env = dict(os.environ, **{FIGURES_ENV: figures_file})
        start = time.monotonic()
        done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, env=env)
        took = time.monotonic() - start
        figures = "; ".join(f"{name}: {figure}" for name, figure in read_figures(figures_file))
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]
    counts = {kind: int(n) for n, kind in _COUNTS.findall(tail)}
    parts = [f"{counts[k]} {k}" for k in ("passed", "failed", "skipped") if counts.get(k)]
    verdict = "PASS" if done.returncode == 0 else "FAIL"
    return f"{verdict} ({', '.join(parts) or tail})", took, figures or "—"


def soak(cycles: int, seed: int) -> int:
    from tests.faults.test_crash import crash_loop

    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        crash_loop(Path(tmp), cycles=cycles, seed=seed)
        took = time.monotonic() - start
    print(f"| native crash loop soak | {cycles} kill -9 cycles | PASS | {took:.0f} |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--long", action="store_true", help="include the slow variants")
    parser.add_argument("--soak", type=int, default=0, help="only a crash loop of N cycles")
    parser.add_argument("--seed", type=int, default=3)
    opts = parser.parse_args()
    if opts.soak:
        return soak(opts.soak, opts.seed)
    print("| area | tests | size | result | measured | seconds |")
    print("|---|---|---|---|---|---:|")
    failed = False
    for area, selection, size, extra in ROWS:
        result, took, figures = run(selection, extra, opts.long)
        failed |= result.startswith("FAIL")
        print(
            f"| {area} | `{selection}` | {size} | {result} | {figures} | {took:.1f} |",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
