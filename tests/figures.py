"""Measured figures that a test reports beside its verdict (the scoreboard's "measured"
column, docs/reliability.md).

A test calls :func:`record` with a short name and the figure as text; the figure is
printed (visible with ``pytest -s``) and, when the scoreboard runs the test, appended to
the file named by ``BROKERD_FIGURES`` as one JSON line. Tests still assert their bound:
the figure is what was seen, not the check.
"""

from __future__ import annotations

import json
import os

__all__ = ["FIGURES_ENV", "read_figures", "record"]

FIGURES_ENV = "BROKERD_FIGURES"


def record(name: str, figure: str) -> None:
    """Report ``figure`` (say ``"RSS +21.3 MiB"``) under ``name``."""
    print(f"[figure] {name}: {figure}")
    path = os.environ.get(FIGURES_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"name": name, "figure": figure}) + "\n")


def read_figures(path: str) -> list[tuple[str, str]]:
    """The figures recorded into ``path``, in order (empty when none were)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        item = json.loads(line)
        out.append((str(item["name"]), str(item["figure"])))
    return out
