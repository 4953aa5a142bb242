"""Inline SVG charts of the console: a sparkline for table cells and a line chart with
axes and a legend for the topic and group pages.

Pure functions from ``(time, value)`` points to SVG markup (a string to embed in HTML;
every label escaped). No Twisted, no I/O, no JavaScript: the charts read the same with
scripts off. What this module does not do: decide what is plotted (see
:mod:`brokerd.web.console_pages`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

#: Sparkline size in CSS pixels.
SPARK_WIDTH = 120
SPARK_HEIGHT = 28
#: Bar size (a partition's lag beside its figure).
BAR_WIDTH = 160
BAR_HEIGHT = 12
#: Line chart size and the room its axis labels take.
CHART_WIDTH = 640
CHART_HEIGHT = 220
CHART_LEFT = 64
CHART_RIGHT = 12
CHART_TOP = 12
CHART_BOTTOM = 28
#: At most this many lines in one chart (the legend says how many were left out).
MAX_CHART_SERIES = 8
#: The shortest time axis: a broker that just started still gets a readable scale.
MIN_SPAN_SECONDS = 60.0
#: Line colours, distinguishable for the common forms of colour blindness.
PALETTE = (
    "#0072b2",
    "#d55e00",
    "#009e73",
    "#cc79a7",
    "#e69f00",
    "#56b4e9",
    "#f0e442",
    "#000000",
)

Point = tuple[float, float]


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 5 x 10^k that is >= ``value`` (1 for nothing to show)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1.0, 2.0, 5.0, 10.0):
        candidate = step * 10.0**exponent
        if candidate >= value * (1 - 1e-9):
            return candidate
    return 10.0 ** (exponent + 1)


def _fmt(value: float) -> str:
    """A coordinate with at most one decimal (short markup, enough for pixels)."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _label(value: float) -> str:
    """An axis figure: 1.5k, 20M, 0.25."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def sparkline(points: Sequence[Point], *, label: str) -> str:
    """A small line of ``points`` scaled to its own maximum (zero at the bottom).

    ``label`` names it for screen readers and as a tooltip. Fewer than two points give an
    empty box of the same size, so table rows keep their layout."""
    width, height = SPARK_WIDTH, SPARK_HEIGHT
    head = (
        f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}"><title>{escape(label)}</title>'
    )
    if len(points) < 2:
        return head + "</svg>"
    t0, t1 = points[0][0], points[-1][0]
    top = max(v for _, v in points)
    scale_y = (height - 2) / top if top > 0 else 0.0
    span = (t1 - t0) or 1.0
    coords = " ".join(
        f"{_fmt((t - t0) / span * (width - 2) + 1)},{_fmt(height - 1 - v * scale_y)}"
        for t, v in points
    )
    return (
        head + f'<polyline fill="none" stroke="{PALETTE[0]}" stroke-width="1.5" '
        f'points="{coords}"/></svg>'
    )


def bar(value: float, maximum: float, *, label: str) -> str:
    """A horizontal bar of ``value`` out of ``maximum`` (the largest in its table), so
    rows compare at a glance; ``label`` names it."""
    width, height = BAR_WIDTH, BAR_HEIGHT
    filled = 0.0 if maximum <= 0 else max(0.0, min(1.0, value / maximum)) * width
    return (
        f'<svg class="bar" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}"><title>{escape(label)}</title>'
        f'<rect width="{width}" height="{height}" fill="#eaeef2"/>'
        f'<rect width="{_fmt(filled)}" height="{height}" fill="{PALETTE[1]}"/></svg>'
    )


def _ago(seconds: float) -> str:
    if seconds < 1:
        return "now"
    if seconds < 120:
        return f"-{seconds:.0f}s"
    return f"-{seconds / 60:.0f}m"


def line_chart(
    series: Sequence[tuple[str, Sequence[Point]]],
    *,
    now: float,
    title: str,
) -> str:
    """Lines of ``(label, points)`` against time up to ``now``, zero-based y axis with
    three gridlines, the time axis in seconds/minutes before ``now``, and a legend.

    Lines beyond :data:`MAX_CHART_SERIES` are left out (the legend says how many). A line
    of one point is drawn as a dot."""
    width, height = CHART_WIDTH, CHART_HEIGHT
    plot_w = width - CHART_LEFT - CHART_RIGHT
    plot_h = height - CHART_TOP - CHART_BOTTOM
    shown = [(name, pts) for name, pts in series if pts][:MAX_CHART_SERIES]
    hidden = len([1 for _, pts in series if pts]) - len(shown)
    oldest = min((pts[0][0] for _, pts in shown), default=now)
    span = max(now - oldest, MIN_SPAN_SECONDS)
    start = now - span
    top = nice_ceiling(max((v for _, pts in shown for _, v in pts), default=0.0))

    def x(t: float) -> str:
        return _fmt(CHART_LEFT + (t - start) / span * plot_w)

    def y(v: float) -> str:
        return _fmt(CHART_TOP + plot_h - v / top * plot_h)

    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
    ]
    for fraction in (0.0, 0.5, 1.0):
        value = top * fraction
        parts.append(
            f'<line class="grid" x1="{CHART_LEFT}" x2="{width - CHART_RIGHT}" '
            f'y1="{y(value)}" y2="{y(value)}" stroke="#ccc" stroke-width="1"/>'
            f'<text x="{CHART_LEFT - 6}" y="{y(value)}" text-anchor="end" '
            f'dominant-baseline="middle" font-size="11">{escape(_label(value))}</text>'
        )
    for fraction in (0.0, 0.5, 1.0):
        t = start + span * fraction
        anchor = ("start", "middle", "end")[int(fraction * 2)]
        parts.append(
            f'<text x="{x(t)}" y="{height - 8}" text-anchor="{anchor}" '
            f'font-size="11">{_ago(now - t)}</text>'
        )
    for index, (name, pts) in enumerate(shown):
        colour = PALETTE[index % len(PALETTE)]
        if len(pts) == 1:
            t, v = pts[0]
            parts.append(
                f'<circle cx="{x(t)}" cy="{y(v)}" r="3" fill="{colour}">'
                f"<title>{escape(name)}</title></circle>"
            )
        else:
            coords = " ".join(f"{x(t)},{y(v)}" for t, v in pts)
            parts.append(
                f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="2" '
                f'points="{coords}"><title>{escape(name)}</title></polyline>'
            )
    parts.append("</svg>")
    legend = "".join(
        f'<li><span class="swatch" style="background:{PALETTE[i % len(PALETTE)]}"></span>'
        f"{escape(name)}</li>"
        for i, (name, _) in enumerate(shown)
    )
    if hidden > 0:
        legend += f"<li>{hidden} more not shown</li>"
    if not shown:
        legend = "<li>no samples yet</li>"
    return f'<figure class="chart">{"".join(parts)}<ul class="legend">{legend}</ul></figure>'


__all__ = ["MAX_CHART_SERIES", "PALETTE", "bar", "line_chart", "nice_ceiling", "sparkline"]
