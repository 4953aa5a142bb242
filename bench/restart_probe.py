"""Restart-time probe: the bench's restart step, repeated on one kept data directory.

``fill`` creates a topic of N partitions, writes about B bytes of 1,000-byte values with
``--fsync never`` and kills the broker (kill -9). ``time`` then starts the broker on that
directory several times and prints the seconds until both listeners answer: after a
kill -9 (the broker is killed again once it answers, so every trial starts unclean; the
first trial after ``fill`` also has the fill's unsynced pages) and after a clean stop
(SIGTERM, then the start is timed). Every record written must be there each time.

Usage::

    python -m bench.restart_probe fill DIR --partitions 1000 --bytes 5e9
    python -m bench.restart_probe time DIR --trials 3

What it does not do: profile (run ``py-spy record`` on the broker, or profile
``LogDirectory.open`` on the directory) or write results anywhere but stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bench.common import stop_quietly
from bench.resources import _compiled, _fill, _start_timed, _stop_timed, _stored

from tests.brokerproc import BrokerProcess

TOPIC = "restart"
STATE_FILE = "probe.json"


def _proc(home: Path) -> BrokerProcess:
    return BrokerProcess(home / "data", args=("--fsync=never",))


def fill(home: Path, partitions: int, total_bytes: int) -> None:
    home.mkdir(parents=True, exist_ok=True)
    proc = _proc(home).start()
    try:
        with proc.client(timeout=600) as client:
            client.create_topic(TOPIC, partitions)
        written = _fill(proc, TOPIC, partitions, total_bytes)
    finally:
        proc.kill()
    (home / STATE_FILE).write_text(json.dumps({"partitions": partitions, "records": written}))
    print(f"wrote {written:,} records in {partitions:,} partitions; killed")


def _check(proc: BrokerProcess, state: dict[str, int]) -> None:
    found = _stored(proc, TOPIC, state["partitions"])
    if found != state["records"]:
        stop_quietly(proc)
        sys.exit(f"records lost: {found:,} of {state['records']:,}")


def time_starts(home: Path, trials: int) -> None:
    state = json.loads((home / STATE_FILE).read_text())
    _compiled()
    unclean: list[float] = []
    clean: list[float] = []
    proc = _proc(home)
    for _ in range(trials):
        unclean.append(_start_timed(proc))
        _check(proc, state)
        proc.kill()
    # A clean stop first, so that the first timed start below is a clean one.
    _start_timed(proc)
    _stop_timed(proc)
    for _ in range(trials):
        clean.append(_start_timed(proc))
        _check(proc, state)
        _stop_timed(proc)
    for what, seconds in (("after kill -9", unclean), ("after clean stop", clean)):
        print(f"start {what}: " + ", ".join(f"{s:.2f}" for s in seconds)
              + f" s (best {min(seconds):.2f}, spread {max(seconds) - min(seconds):.2f},"
              f" median {statistics.median(seconds):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("fill", "time"))
    parser.add_argument("home", type=Path)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--bytes", type=float, default=5e9)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    if args.action == "fill":
        fill(args.home, args.partitions, int(args.bytes))
    else:
        time_starts(args.home, args.trials)


if __name__ == "__main__":
    main()
