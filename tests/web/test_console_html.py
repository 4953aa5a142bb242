"""The console's HTML formatting: sizes, durations and rates as people read them."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from brokerd.web.console_html import duration, per_second, size


class FormatTests(SynchronousTestCase):
    def test_formats(self) -> None:
        self.assertEqual(
            [size(0), size(1023), size(1536), size(5 * 2**30)],
            ["0 B", "1023 B", "1.5 KiB", "5.0 GiB"],
        )
        self.assertEqual(
            [per_second(0.04), per_second(12.345), per_second(12345.6)],
            ["0.0/s", "12.3/s", "12,346/s"],
        )
        self.assertEqual(
            [duration(12), duration(250), duration(7500), duration(90000)],
            ["12s", "4m 10s", "2h 5m", "1d 1h"],
        )
