# -*- test-case-name: tests.core.quotas.test_rate -*-
"""The rate a quota is measured with, and the throttle time of a violation, computed as
Kafka's metrics library computes them (times in milliseconds, passed in: no clock here).

:class:`SampledRate` is Kafka's ``Rate`` over a ``SampledStat``: ``samples`` windows of
``window_ms`` each (``quota.window.num`` = 11, ``quota.window.size.seconds`` = 1). A
record goes into the current window, or starts the next one (reusing the oldest) once
the current one is ``window_ms`` old; windows older than ``samples * window_ms`` are
reset before measuring. The rate is the sum of the kept windows over the time they
span, where that span is taken to be at least ``samples - 1`` full windows (so a client's
first burst is not measured over a few milliseconds) and at least 1 ms.

:func:`throttle_ms` is Kafka's answer to a rate above its bound: the time that brings
the measured rate back to the bound, ``(rate - bound) / bound * window``, rounded;
:class:`TokenBucket` is the controller mutation quota's measure (Kafka's
``TokenBucket`` stat: a burst of ``bound * samples * window`` tokens refilled at
``bound`` per second; a request is throttled while the bucket is below zero, for as
long as refilling it takes).

Pure arithmetic: no I/O, no Twisted, no allocation per record beyond the first windows.
"""

from __future__ import annotations

#: Kafka's ``quota.window.num`` and ``quota.window.size.seconds`` defaults.
DEFAULT_SAMPLES = 11
DEFAULT_WINDOW_MS = 1000


class SampledRate:
    """Kafka's windowed rate of one quota sensor, per second."""

    __slots__ = ("_current", "_samples", "_starts", "_values", "_window_ms")

    def __init__(self, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS):
        if samples < 1 or window_ms <= 0:
            raise ValueError("a sampled rate needs windows of positive length")
        self._samples = samples
        self._window_ms = window_ms
        self._starts: list[float] = []
        self._values: list[float] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        if not self._starts:
            self._starts.append(now_ms)
            self._values.append(0.0)
            self._current = 0
        elif now_ms - self._starts[self._current] >= self._window_ms:
            # The current window is complete: the next one starts now.
            self._current = (self._current + 1) % self._samples
            if self._current >= len(self._starts):
                self._starts.append(now_ms)
                self._values.append(0.0)
            else:
                self._starts[self._current] = now_ms
                self._values[self._current] = 0.0
        self._values[self._current] += value

    def unrecord(self, value: float, now_ms: float) -> None:
        """Take back a value recorded (a throttled fetch answer that was not sent)."""
        if self._starts:
            self._values[self._current] -= value

    def _purge(self, now_ms: float) -> None:
        expire = self._samples * self._window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire:
                self._starts[i] = now_ms
                self._values[i] = 0.0

    def window_ms(self, now_ms: float) -> float:
        """The span the rate is measured over (purges old windows first)."""
        self._purge(now_ms)
        oldest = min(self._starts) if self._starts else now_ms
        elapsed = now_ms - oldest
        full = int(elapsed // self._window_ms)
        least = self._samples - 1
        if full < least:
            elapsed += (least - full) * self._window_ms
        return max(elapsed, 1.0)

    def measure(self, now_ms: float) -> float:
        """The rate per second now."""
        window = self.window_ms(now_ms)
        return sum(self._values) / (window / 1000.0)

    def total(self) -> float:
        """What the kept windows hold (for the metrics)."""
        return sum(self._values)


def throttle_ms(rate: float, bound: float, window_ms: float) -> int:
    """Kafka's throttle time of a rate over its bound (0 when within it)."""
    if rate <= bound:
        return 0
    return round((rate - bound) / bound * window_ms)


class TokenBucket:
    """Kafka's token bucket of the controller mutation quota: ``bound`` tokens a second,
    at most ``bound * samples * window`` held (the burst)."""

    __slots__ = ("_burst_seconds", "_last_ms", "_tokens")

    def __init__(self, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS):
        self._burst_seconds = samples * window_ms / 1000.0
        self._tokens: float | None = None  # full until first used
        self._last_ms = 0.0

    def tokens(self, bound: float, now_ms: float) -> float:
        burst = bound * self._burst_seconds
        if self._tokens is None:
            self._tokens = burst
        else:
            refill = bound * max(now_ms - self._last_ms, 0.0) / 1000.0
            self._tokens = min(burst, self._tokens + refill)
        self._last_ms = now_ms
        return self._tokens

    def record(self, value: float, bound: float, now_ms: float) -> None:
        self._tokens = self.tokens(bound, now_ms) - value

    def throttle_ms(self, bound: float, now_ms: float) -> int:
        """How long until the bucket is back at zero (0 when it is not below)."""
        tokens = self.tokens(bound, now_ms)
        if tokens >= 0:
            return 0
        return round(-tokens / bound * 1000.0)
