# -*- test-case-name: tests.web.test_console_svg -*-
"""Inline SVG charts of the console: a sparkline for table cells and a line chart with
axes and a legend for the topic and group pages.

Pure functions from ``(time, value)`` points to SVG elements, as
:mod:`twisted.web.template` tags to put in a page's tree (the flattener escapes every
label). No Twisted, no I/O, no JavaScript: the charts read the same with
scripts off. What this module does not do: decide what is plotted (see
:mod:`brokerd.web.console_pages`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from twisted.web.template import Tag, tags

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

SVG_NAMESPACE = "http://www.w3.org/2000/svg"


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


#: The ".0" of whole numbers written with one decimal, as :func:`_fmt` drops it.
_WHOLE = re.compile(r"\.0(?![0-9])")


def _label(value: float) -> str:
    """An axis figure: 1.5k, 20M, 0.25."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _svg(kind: str, width: int, height: int, label: str) -> Tag:
    """An ``svg`` element of ``width`` x ``height`` named ``label`` (its accessible name
    and its tooltip)."""
    return Tag("svg")(
        Tag("title")(label),
        class_=kind,
        xmlns=SVG_NAMESPACE,
        width=str(width),
        height=str(height),
        viewBox=f"0 0 {width} {height}",
        role="img",
        **{"aria-label": label},
    )


def sparkline(points: Sequence[Point], *, label: str) -> Tag:
    """A small line of ``points`` scaled to its own maximum (zero at the bottom).

    ``label`` names it for screen readers and as a tooltip. Fewer than two points give an
    empty box of the same size, so table rows keep their layout."""
    width, height = SPARK_WIDTH, SPARK_HEIGHT
    svg = _svg("spark", width, height, label)
    if len(points) < 2:
        return svg
    t0, t1 = points[0][0], points[-1][0]
    top = max(v for _, v in points)
    scale_y = (height - 2) / top if top > 0 else 0.0
    span = (t1 - t0) or 1.0
    # One pass of the pattern over the whole line instead of a call per coordinate: the
    # sparklines' coordinates are most of the overview's rendering time.
    coords = _WHOLE.sub("", " ".join(
        f"{(t - t0) / span * (width - 2) + 1:.1f},{height - 1 - v * scale_y:.1f}"
        for t, v in points
    ))
    return svg(
        Tag("polyline")(fill="none", stroke=PALETTE[0], points=coords, **{"stroke-width": "1.5"})
    )


def bar(value: float, maximum: float, *, label: str) -> Tag:
    """A horizontal bar of ``value`` out of ``maximum`` (the largest in its table), so
    rows compare at a glance; ``label`` names it."""
    width, height = BAR_WIDTH, BAR_HEIGHT
    filled = 0.0 if maximum <= 0 else max(0.0, min(1.0, value / maximum)) * width
    return _svg("bar", width, height, label)(
        Tag("rect")(width=str(width), height=str(height), fill="#eaeef2"),
        Tag("rect")(width=_fmt(filled), height=str(height), fill=PALETTE[1]),
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
) -> Tag:
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

    svg = _svg("chart", width, height, title)
    for fraction in (0.0, 0.5, 1.0):
        value = top * fraction
        svg(
            Tag("line")(
                class_="grid", x1=str(CHART_LEFT), x2=str(width - CHART_RIGHT),
                y1=y(value), y2=y(value), stroke="#ccc", **{"stroke-width": "1"},
            ),
            Tag("text")(
                _label(value), x=str(CHART_LEFT - 6), y=y(value),
                **{"text-anchor": "end", "dominant-baseline": "middle", "font-size": "11"},
            ),
        )
    for fraction in (0.0, 0.5, 1.0):
        t = start + span * fraction
        anchor = ("start", "middle", "end")[int(fraction * 2)]
        svg(
            Tag("text")(
                _ago(now - t), x=x(t), y=str(height - 8),
                **{"text-anchor": anchor, "font-size": "11"},
            )
        )
    for index, (name, pts) in enumerate(shown):
        colour = PALETTE[index % len(PALETTE)]
        if len(pts) == 1:
            t, v = pts[0]
            svg(Tag("circle")(Tag("title")(name), cx=x(t), cy=y(v), r="3", fill=colour))
        else:
            coords = " ".join(f"{x(t)},{y(v)}" for t, v in pts)
            svg(
                Tag("polyline")(
                    Tag("title")(name), class_="series", fill="none", stroke=colour,
                    points=coords, **{"stroke-width": "2"},
                )
            )
    legend: list[Tag] = [
        tags.li(
            tags.span(class_="swatch", style=f"background:{PALETTE[i % len(PALETTE)]}"), name
        )
        for i, (name, _) in enumerate(shown)
    ]
    if hidden > 0:
        legend.append(tags.li(f"{hidden} more not shown"))
    if not shown:
        legend = [tags.li("no samples yet")]
    return tags.figure(svg, tags.ul(*legend, class_="legend"), class_="chart")


__all__ = ["MAX_CHART_SERIES", "PALETTE", "bar", "line_chart", "nice_ceiling", "sparkline"]
