"""The console's SVG charts: sparklines, line charts with axes and legends, bars, and the
nice ceilings of their scales."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from twisted.trial.unittest import SynchronousTestCase
from twisted.web.template import Flattenable

from brokerd.web.console_html import flat
from brokerd.web.console_svg import MAX_CHART_SERIES, bar, line_chart, nice_ceiling, sparkline

from tests.web.test_console import SVG


def markup(tree: Flattenable) -> str:
    return flat(tree).decode("utf-8")


class SvgTests(SynchronousTestCase):
    def test_sparkline_scales_to_its_box(self) -> None:
        svg = ET.fromstring(markup(sparkline([(0, 0.0), (5, 10.0), (10, 5.0)], label="a <b>")))
        self.assertEqual(svg.attrib["viewBox"], "0 0 120 28")
        self.assertEqual(svg.attrib["aria-label"], "a <b>")
        line = svg.find(f"{SVG}polyline")
        assert line is not None
        points = [tuple(map(float, p.split(","))) for p in line.attrib["points"].split()]
        self.assertEqual(points, [(1.0, 27.0), (60.0, 1.0), (119.0, 14.0)])

    def test_sparkline_without_history_is_an_empty_box(self) -> None:
        for points in ([], [(0.0, 3.0)]):
            svg = ET.fromstring(markup(sparkline(points, label="x")))
            self.assertIsNone(svg.find(f"{SVG}polyline"))
            self.assertEqual(svg.attrib["width"], "120")
        level = ET.fromstring(markup(sparkline([(0, 0.0), (5, 0.0)], label="x")))
        line = level.find(f"{SVG}polyline")
        assert line is not None
        self.assertEqual(line.attrib["points"], "1,27 119,27")

    def test_line_chart_axes_series_and_legend(self) -> None:
        series = [("total", [(100.0, 0.0), (160.0, 80.0)]), ("one", [(160.0, 5.0)])]
        html = markup(line_chart(series, now=160.0, title="lag <x>"))
        svg = ET.fromstring(re.findall(r"<svg .*?</svg>", html)[0])
        self.assertEqual(svg.attrib["aria-label"], "lag <x>")
        labels = [t.text for t in svg.findall(f"{SVG}text")]
        self.assertEqual(labels, ["0", "50", "100", "-60s", "-30s", "now"])
        (line,) = svg.findall(f"{SVG}polyline")
        points = [tuple(map(float, p.split(","))) for p in line.attrib["points"].split()]
        # x from 64 (60 s ago) to 628 (now); y from 192 (0) up by 80/100 of 180.
        self.assertEqual(points, [(64.0, 192.0), (628.0, 48.0)])
        self.assertEqual(len(svg.findall(f"{SVG}circle")), 1)
        self.assertEqual(html.count("<li>"), 2)

    def test_line_chart_caps_its_series(self) -> None:
        series = [(f"s{i}", [(0.0, float(i)), (10.0, 1.0)]) for i in range(MAX_CHART_SERIES + 3)]
        html = markup(line_chart(series, now=10.0, title="many"))
        self.assertEqual(html.count("<polyline"), MAX_CHART_SERIES)
        self.assertIn("<li>3 more not shown</li>", html)

    def test_bar_is_the_share_of_the_largest(self) -> None:
        widths = []
        for value in (0, 3, 6, 9):
            rects = ET.fromstring(markup(bar(value, 6, label="lag"))).findall(f"{SVG}rect")
            widths.append((rects[0].attrib["width"], rects[1].attrib["width"]))
        self.assertEqual(widths, [("160", "0"), ("160", "80"), ("160", "160"), ("160", "160")])
        nothing = ET.fromstring(markup(bar(0, 0, label="lag"))).findall(f"{SVG}rect")
        self.assertEqual(nothing[1].attrib["width"], "0")

    def test_nice_ceiling(self) -> None:
        cases = {0: 1, 0.3: 0.5, 1: 1, 1.2: 2, 3: 5, 7: 10, 20: 20, 21: 50, 999: 1000}
        for value, expected in cases.items():
            self.assertAlmostEqual(nice_ceiling(value), expected)
