"""The console's history: produce and consume rates from the sampled offsets, over the last
minute, bounded, and sampling that survives a failed sample."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import attrs

from brokerd.operator.views import GroupOffsetView
from brokerd.web import console_history as history
from brokerd.web.console_history import (
    HISTORY_SAMPLES,
    SAMPLE_SECONDS,
    Sample,
)
from brokerd.web.console_html import per_second

from tests.web.test_console import SVG, ConsoleTestCase, group, topic


def chart_legend(page: str) -> str:
    return re.findall(r'<ul class="legend">.*?</ul>', page)[0]


class RateTests(ConsoleTestCase):
    def test_produce_and_consume_rates_from_samples(self) -> None:
        self.sampler.startService()  # samples now
        for _ in range(3):
            self.clock.advance(SAMPLE_SECONDS)
            # 100 records per 5 s into orders; the group commits 50 per 5 s.
            t = self.source.topic_views["orders"]
            self.source.topic_views["orders"] = topic(
                "orders",
                tuple(p.high_watermark + 50 for p in t.partitions),
                **{"cleanup.policy": "compact"},
            )
            g = self.source.group_views["billing"]
            self.source.group_views["billing"] = group(
                "billing",
                {
                    (o.topic, o.partition): (o.committed_offset + 25, (o.high_watermark or 0) + 50)
                    for o in g.offsets
                },
            )
        self.clock.advance(0.5)  # the samples were taken before the last change
        self.sampler.sample()
        self.assertEqual(len(self.sampler.samples), 5)
        self.sampler.stopService()
        samples = tuple(self.sampler.samples)
        self.assertAlmostEqual(history.rate(samples, history.topic_end("orders")) or 0, 300 / 15.5)
        self.assertAlmostEqual(
            history.rate(samples, history.group_committed("billing")) or 0, 150 / 15.5
        )
        overview = self.page("/")
        self.assertIn('<td class="num">19.4/s</td>', overview)
        self.assertIn('<td class="num">9.7/s</td>', overview)
        self.assertIn("<dt>produce rate</dt><dd>19.4/s</dd>", self.page("/topics/orders"))
        group_page = self.page("/groups/billing")
        self.assertIn("<dt>consume rate</dt><dd>9.7/s</dd>", group_page)
        chart = re.findall(r'<svg class="chart".*?</svg>', group_page)[0]
        lines = ET.fromstring(chart).findall(f"{SVG}polyline")
        self.assertEqual(len(lines), 1)  # the one topic's line is the total
        self.assertEqual(len(lines[0].attrib["points"].split()), 5)
        self.assertIn(
            "<li>" + '<span class="swatch" style="background:#0072b2"></span>orders',
            chart_legend(group_page),
        )
        # A second topic: a line each, and the total.
        self.source.group_views["billing"] = attrs.evolve(
            self.source.group_views["billing"],
            offsets=(
                *self.source.group_views["billing"].offsets,
                GroupOffsetView("other", 0, 0, 7, 7),
            ),
        )
        self.sampler.sample()
        chart = re.findall(r'<svg class="chart".*?</svg>', self.page("/groups/billing"))[0]
        titles = [t.text for t in ET.fromstring(chart).iter(f"{SVG}title")]
        self.assertEqual(titles[1:], ["total", "orders", "other"])

    def test_rate_needs_two_samples_and_ignores_decreases(self) -> None:
        one = (Sample(0.0, {"t": 5}),)
        self.assertIsNone(history.rate(one, history.topic_end("t")))
        self.assertEqual(per_second(None), "\u2013")
        self.assertIn('<td class="num">\u2013</td>', self.page("/"))
        # Recreated topic: 100 -> 10 counts as nothing, then +20 in 5 s.
        samples = (Sample(0.0, {"t": 100}), Sample(5.0, {"t": 10}), Sample(10.0, {"t": 30}))
        self.assertEqual(history.rate(samples, history.topic_end("t")), 2.0)
        self.assertEqual(
            history.rate_series(samples, history.topic_end("t")), [(5.0, 0.0), (10.0, 4.0)]
        )
        # A topic that appears later: only the samples that know it count.
        late = (Sample(0.0, {}), Sample(5.0, {"t": 0}), Sample(10.0, {"t": 10}))
        self.assertEqual(history.rate(late, history.topic_end("t")), 2.0)

    def test_rate_window_is_the_last_minute(self) -> None:
        old = [Sample(float(t), {"t": 0}) for t in range(0, 300, 5)]
        recent = [Sample(300.0 + t, {"t": 10 * t}) for t in range(0, 65, 5)]
        self.assertAlmostEqual(history.rate(old + recent, history.topic_end("t")) or 0, 600 / 60)

    def test_a_failed_sample_is_logged_and_sampling_goes_on(self) -> None:
        self.source.broken = True
        self.sampler.startService()
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.assertEqual(len(self.sampler.samples), 0)
        self.source.broken = False
        self.clock.advance(SAMPLE_SECONDS)
        self.assertEqual(len(self.sampler.samples), 1)
        self.sampler.stopService()

    def test_history_is_bounded(self) -> None:
        self.sampler.startService()
        self.clock.pump([SAMPLE_SECONDS] * (HISTORY_SAMPLES + 30))
        self.assertEqual(len(self.sampler.samples), HISTORY_SAMPLES)
        self.sampler.stopService()
        taken = len(self.clock.getDelayedCalls())
        self.assertEqual(taken, 0)
