"""Kafka's quota arithmetic with times given by hand (a fake clock): the sampled rate's
windows, the span it is measured over, the throttle time, the token bucket."""

from __future__ import annotations

import pytest

from brokerd.core.quotas.rate import SampledRate, TokenBucket, throttle_ms


def test_a_first_burst_is_measured_over_samples_minus_one_windows() -> None:
    rate = SampledRate(11, 1000)
    rate.record(1000, 0)
    # 0 ms elapsed, but Kafka assumes 10 full windows: 1000 bytes over 10 s.
    assert rate.window_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)


def test_the_span_grows_past_the_assumed_windows_with_real_time() -> None:
    rate = SampledRate(11, 1000)
    rate.record(500, 0)
    rate.record(500, 1500)  # a second window, started at 1500
    assert rate.window_ms(1500) == 10_500  # 1 full window elapsed + 9 assumed + 500 ms
    rate.record(0, 10_800)
    assert rate.window_ms(10_800) == 10_800  # 10 full windows: nothing assumed any more


def test_windows_older_than_all_samples_are_forgotten() -> None:
    rate = SampledRate(11, 1000)
    rate.record(5000, 0)
    assert rate.measure(10_999) == pytest.approx(5000 / 10.999)
    # 11 s after it started the window holds nothing any more.
    assert rate.measure(11_000) == 0.0


def test_the_oldest_window_is_reused_after_a_full_cycle() -> None:
    rate = SampledRate(3, 1000)
    for t in (0, 1000, 2000, 3000):
        rate.record(100, t)
    # The fourth record reused the first window (3 samples): 3 windows of 100 kept.
    assert rate.total() == 300
    assert rate.window_ms(3000) == 2000  # from the oldest kept (1000) to now


def test_unrecord_takes_a_value_back() -> None:
    rate = SampledRate()
    rate.record(700, 0)
    rate.unrecord(300, 0)
    assert rate.total() == 400


def test_throttle_time_is_what_brings_the_rate_back_to_the_bound() -> None:
    assert throttle_ms(1000.0, 500.0, 10_000) == 10_000
    assert throttle_ms(550.0, 500.0, 10_000) == 1000
    assert throttle_ms(500.0, 500.0, 10_000) == 0
    assert throttle_ms(100.0, 500.0, 10_000) == 0


def test_token_bucket_bursts_then_throttles_until_refilled() -> None:
    bucket = TokenBucket(11, 1000)
    # 2 mutations/s: a burst of 22 is allowed at once.
    assert bucket.throttle_ms(2.0, 0) == 0
    bucket.record(22, 2.0, 0)
    assert bucket.throttle_ms(2.0, 0) == 0  # at zero, not below
    bucket.record(8, 2.0, 0)
    assert bucket.throttle_ms(2.0, 0) == 4000  # 8 tokens at 2/s
    assert bucket.throttle_ms(2.0, 3000) == 1000
    assert bucket.throttle_ms(2.0, 4000) == 0
    # Refilling stops at the burst.
    assert bucket.tokens(2.0, 1_000_000) == 22.0
