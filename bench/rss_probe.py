"""Run only the RSS step of ``make bench`` (bench/resources.py) and print its rows: the
before/after measure of the descriptor budget (docs/performance.md, "Descriptors and
footprint"). ``python -m bench.rss_probe [LEVEL ...]`` (default 1,000 and 10,000), in a
scratch directory under build/; each run starts its own broker and stops it by its PID.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from bench import resources
from bench.common import Brokers, Results

DEFAULT_LEVELS = (1_000, 10_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("levels", nargs="*", type=int, default=list(DEFAULT_LEVELS))
    parser.add_argument("--runs", type=int, default=1, help="repeat the step")
    args = parser.parse_args()
    Path("build").mkdir(exist_ok=True)
    for run in range(args.runs):
        root = Path(tempfile.mkdtemp(prefix="rss-probe-", dir="build"))
        brokers = Brokers(root)
        results = Results()
        begin = time.perf_counter()
        try:
            resources.rss(results, brokers, args.levels)
        finally:
            brokers.close()
            shutil.rmtree(root, ignore_errors=True)
        print(f"run {run + 1} ({time.perf_counter() - begin:.0f} s)")
        for row in results.rows:
            shown = "-" if row.value is None else f"{row.value:,.1f}"
            print(f"  {row.what}: {shown} {row.unit}  {row.note}")


if __name__ == "__main__":
    main()
