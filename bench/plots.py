"""The report's charts: PNG files drawn with matplotlib (Agg backend, no display).

One file per curve of the run, named after it, plus one bar chart per throughput
section. Draws only what the results hold; a curve with no points gets no file. Without
matplotlib (``make bench-deps`` installs it) nothing is drawn and ``draw`` says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import Curve, Results, Row

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter
except ImportError:
    if TYPE_CHECKING:
        raise
    HAVE_MATPLOTLIB = False
else:
    HAVE_MATPLOTLIB = True
    THOUSANDS = FuncFormatter(lambda v, _pos: f"{v:,.0f}")
    PLAIN = FuncFormatter(lambda v, _pos: f"{v:g}")

DPI = 100
MISSING = "charts not drawn: matplotlib is not installed (make bench-deps)"
RESTART_LABELS = ("start after\nkill -9", "clean\nshutdown", "start after\nclean shutdown")
SYSTEM_COLORS = {"brokerd": "#48c", "Apache Kafka": "#4a4"}
PEER_COLOR = "#c84"


def _line(curve: Curve, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, points in curve.series.items():
        xs = [x for x, _ in points]
        ys = [y for _, y in points]
        cdf = len(points) > 20
        ax.plot(xs, ys, label=label, marker=None if cdf else "o",
                drawstyle="steps-post" if cdf else "default")
        if not cdf:
            for x, y in points:
                ax.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(0, 6),
                            ha="center", fontsize=8)
    if curve.logx:
        ax.set_xscale("log")
        xs_all = sorted({x for pts in curve.series.values() for x, _ in pts})
        ax.set_xticks(xs_all)
        ax.set_xticklabels([f"{x:,.0f}" for x in xs_all])
    ax.set_title(curve.title)
    ax.set_xlabel(curve.xlabel)
    ax.set_ylabel(curve.ylabel)
    ax.set_ylim(bottom=0)
    if curve.ylabel == "records/s":
        ax.yaxis.set_major_formatter(THOUSANDS)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _restart(curve: Curve, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    values = [y for _, y in curve.series["seconds"]]
    bars = ax.bar(RESTART_LABELS[: len(values)], values, color=["#c44", "#888", "#48c"])
    ax.bar_label(bars, labels=[f"{v:.1f} s" for v in values])
    ax.set_title(curve.title)
    ax.set_ylabel(curve.ylabel)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _throughput(section: str, rows: list[Row], path: Path) -> None:
    measured = [r for r in rows if r.section == section and r.unit == "rec/s"
                and r.value is not None]
    if not measured:
        return
    fig, ax = plt.subplots(figsize=(9.0, 0.32 * len(measured) + 1.2))
    labels = [f"{r.system}: {r.what} [{r.durability}]" for r in measured]
    colors = [SYSTEM_COLORS.get(r.system, PEER_COLOR) for r in measured]
    bars = ax.barh(labels, [r.value or 0.0 for r in measured], color=colors)
    ax.bar_label(bars, labels=[f"{r.value or 0:,.0f}" for r in measured], fontsize=7, padding=2)
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("records/s")
    ax.xaxis.set_major_formatter(THOUSANDS)
    ax.set_title(f"Throughput, {int(section.split()[1]):,} B values\n"
                 "(blue: brokerd, green: Apache Kafka)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _cost(rows: list[Row], path: Path) -> None:
    """The broker's CPU per record of every measured cost row (log scale: 0.2 to 60 µs)."""
    measured = [r for r in rows if r.section == "cost" and r.value]
    if not measured:
        return
    measured.sort(key=lambda r: (r.size, r.system != "brokerd"))
    fig, ax = plt.subplots(figsize=(9.0, 0.26 * len(measured) + 1.2))
    labels = [f"{r.system}, {r.size:,} B: {r.what[:48]} [{r.durability}]" for r in measured]
    colors = [SYSTEM_COLORS.get(r.system, PEER_COLOR) for r in measured]
    bars = ax.barh(labels, [r.value or 0.0 for r in measured], color=colors)
    ax.bar_label(bars, labels=[f"{r.value or 0:,.2f}" for r in measured], fontsize=6, padding=2)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(PLAIN)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="y", labelsize=6)
    ax.set_xlabel("broker CPU µs per record (log scale)")
    ax.set_title("Broker CPU per record (blue: brokerd, green: Apache Kafka)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _workloads(results: Results, path: Path) -> None:
    """Publish latency p50 and p99 of every measured workload (log scale)."""
    runs = [w for w in results.workloads if w.latency]
    if not runs:
        return
    fig, ax = plt.subplots(figsize=(9.0, 0.42 * len(runs) + 1.2))
    labels = [f"{w.system}: {w.workload}" for w in runs]
    ys = list(range(len(runs)))
    for offset, name, alpha in ((-0.2, "p50", 1.0), (0.2, "p99", 0.5)):
        ax.barh([y + offset for y in ys], [w.latency[name] for w in runs], height=0.4,
                color=[SYSTEM_COLORS.get(w.system, PEER_COLOR) for w in runs], alpha=alpha,
                label=name)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(PLAIN)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("publish latency, ms (log scale; solid p50, light p99)")
    ax.set_title("Workload matrix: publish latency\n(blue: brokerd, green: Apache Kafka)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def draw(results: Results, directory: Path) -> list[Path]:
    """Write every chart into ``directory``; the paths written, in report order."""
    written: list[Path] = []
    if not HAVE_MATPLOTLIB:
        return written
    directory.mkdir(parents=True, exist_ok=True)
    for section in sorted({r.section for r in results.rows if r.section.startswith("throughput")},
                          key=lambda s: int(s.split()[1])):
        path = directory / f"throughput-{section.split()[1]}.png"
        path.unlink(missing_ok=True)  # a chart from an earlier run must not pass for this one
        _throughput(section, results.rows, path)
        if path.exists():
            written.append(path)
    for stem, chart in (("cost", lambda p: _cost(results.rows, p)),
                        ("workloads", lambda p: _workloads(results, p))):
        path = directory / f"{stem}.png"
        path.unlink(missing_ok=True)
        chart(path)
        if path.exists():
            written.append(path)
    for name, curve in results.curves.items():
        if not any(curve.series.values()):
            continue
        path = directory / f"{name.replace('_', '-')}.png"
        if name.startswith("restart"):
            _restart(curve, path)
        else:
            _line(curve, path)
        written.append(path)
    return written
