# -*- test-case-name: tests.core.quotas.test_manager -*-
"""Quota enforcement: each connection's use measured against the quota that applies to
it, and the throttle time of a violation, as Kafka's quota managers compute it.

:class:`QuotaManager` holds the configured quotas (:class:`~brokerd.core.quotas.entities.
QuotaConfigs`) and one *sensor* per measured share (quota key, user, client id): a
:class:`~brokerd.core.quotas.rate.SampledRate` for the byte rates and the request time
percentage, a :class:`~brokerd.core.quotas.rate.TokenBucket` for controller mutations.
The listener asks :attr:`QuotaManager.keys_set` first: while no quota of a key is set,
nothing of that key is looked up or measured (the hot path pays one set test).

* :meth:`record` adds a use (produce request bytes, fetch answer bytes, request time in
  percent-seconds) and answers the throttle time (0 within the quota); the request time
  throttle is capped at one window, as Kafka caps it.
* :meth:`unrecord` takes back a fetch answer's bytes when the answer is replaced by an
  empty throttled one (Kafka does the same).
* :meth:`window_bytes` is the most a fetch may return under the consumer quota
  (the bound times ``samples - 1`` windows).
* :meth:`mutation_throttle` / :meth:`record_mutations`: the controller mutation quota
  (partitions created or deleted), checked before a strict request and charged after.

Sensors unused for :data:`SENSOR_EXPIRY_MS` are dropped, and at most
:data:`MAX_SENSORS` are kept (the least recently used goes first), so memory stays
bounded whatever client ids connect. Pure: times come in as arguments.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping

import attrs

from brokerd.core.quotas.entities import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    REQUEST_PERCENTAGE,
    Applied,
    Change,
    QuotaConfigs,
    QuotaEntity,
)
from brokerd.core.quotas.rate import (
    DEFAULT_SAMPLES,
    DEFAULT_WINDOW_MS,
    SampledRate,
    TokenBucket,
    throttle_ms,
)

#: Sensors kept at most (Kafka keeps one per share too; this bounds a client-id flood).
MAX_SENSORS = 10_000
#: A sensor unused this long is dropped (Kafka's inactive sensor expiry, one hour).
SENSOR_EXPIRY_MS = 3_600_000
#: Resolutions cached at most (per key, user, client id) before the cache restarts.
MAX_RESOLUTIONS = 10_000


@attrs.define
class Sensor:
    """One share's measure of one quota key, and what it has cost the share."""

    key: str
    share: tuple[str, str]
    rate: SampledRate
    bucket: TokenBucket | None
    bound: float
    last_ms: float
    throttle_ms_total: int = 0
    throttled: int = 0


@attrs.frozen
class SensorView:
    """A sensor as ``/metrics`` and the console show it."""

    key: str
    user: str
    client_id: str
    bound: float
    rate: float
    throttle_ms_total: int
    throttled: int


class QuotaManager:
    """Configured client quotas and their enforcement (see the module docstring)."""

    def __init__(
        self,
        configs: QuotaConfigs | None = None,
        *,
        samples: int = DEFAULT_SAMPLES,
        window_ms: int = DEFAULT_WINDOW_MS,
    ) -> None:
        self.configs = configs if configs is not None else QuotaConfigs()
        self.samples = samples
        self.window_ms = window_ms
        #: The quota keys some entity sets (read on the hot path: empty = no quota).
        self.keys_set: frozenset[str] = self.configs.keys_set
        self._sensors: OrderedDict[tuple[str, tuple[str, str]], Sensor] = OrderedDict()
        self._resolved: dict[tuple[str, str, str], Applied | None] = {}

    # ------------------------------------------------------------------ config

    def apply(self, changes: Iterable[Change]) -> None:
        """Apply validated alterations; the next use of each share sees them."""
        self.configs.apply(changes)
        self.keys_set = self.configs.keys_set
        self._resolved.clear()

    def entities(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        return self.configs.entities()

    def _applied(self, key: str, user: str, client_id: str) -> Applied | None:
        memo = (key, user, client_id)
        try:
            return self._resolved[memo]
        except KeyError:
            pass
        if len(self._resolved) >= MAX_RESOLUTIONS:
            self._resolved.clear()
        applied = self._resolved[memo] = self.configs.resolve(key, user, client_id)
        return applied

    def _sensor(self, key: str, applied: Applied, now_ms: float) -> Sensor:
        sensors = self._sensors
        name = (key, applied.share)
        sensor = sensors.get(name)
        if sensor is None:
            bucket = (
                TokenBucket(self.samples, self.window_ms)
                if key == CONTROLLER_MUTATION_RATE else None
            )
            sensor = Sensor(key, applied.share, SampledRate(self.samples, self.window_ms),
                            bucket, applied.bound, now_ms)
            sensors[name] = sensor
            self._evict(now_ms)
        else:
            sensors.move_to_end(name)
            sensor.bound = applied.bound
            sensor.last_ms = now_ms
        return sensor

    def _evict(self, now_ms: float) -> None:
        sensors = self._sensors
        while len(sensors) > MAX_SENSORS:
            sensors.popitem(last=False)
        while sensors:
            oldest = next(iter(sensors.values()))
            if now_ms - oldest.last_ms < SENSOR_EXPIRY_MS:
                break
            sensors.popitem(last=False)

    # ------------------------------------------------------------------ rates

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Add ``value`` to the share's rate of ``key``; the throttle time in ms."""
        applied = self._applied(key, user, client_id)
        if applied is None:
            return 0
        sensor = self._sensor(key, applied, now_ms)
        rate = sensor.rate
        rate.record(value, now_ms)
        measured = rate.measure(now_ms)
        if measured <= applied.bound:
            return 0
        delay = throttle_ms(measured, applied.bound, rate.window_ms(now_ms))
        if key == REQUEST_PERCENTAGE:
            delay = min(delay, self.window_ms)
        if delay > 0:
            sensor.throttle_ms_total += delay
            sensor.throttled += 1
        return delay

    def unrecord(self, key: str, user: str, client_id: str, value: float, now_ms: float) -> None:
        applied = self._applied(key, user, client_id)
        if applied is None:
            return
        sensor = self._sensors.get((key, applied.share))
        if sensor is not None:
            sensor.rate.unrecord(value, now_ms)

    def window_bytes(self, user: str, client_id: str) -> int | None:
        """The most one fetch may return under the consumer byte rate quota (None: no
        quota applies)."""
        applied = self._applied(CONSUMER_BYTE_RATE, user, client_id)
        if applied is None:
            return None
        return int(applied.bound * (self.samples - 1) * self.window_ms / 1000)

    # ------------------------------------------------------------------ mutations

    def mutation_throttle(self, user: str, client_id: str, now_ms: float) -> int:
        """How long the share must wait before it may mutate again (0: it may now)."""
        applied = self._applied(CONTROLLER_MUTATION_RATE, user, client_id)
        if applied is None:
            return 0
        sensor = self._sensor(CONTROLLER_MUTATION_RATE, applied, now_ms)
        assert sensor.bucket is not None
        return sensor.bucket.throttle_ms(applied.bound, now_ms)

    def record_mutations(self, user: str, client_id: str, count: int, now_ms: float) -> int:
        """Charge ``count`` partition mutations; the throttle time that leaves."""
        applied = self._applied(CONTROLLER_MUTATION_RATE, user, client_id)
        if applied is None or count <= 0:
            return 0
        sensor = self._sensor(CONTROLLER_MUTATION_RATE, applied, now_ms)
        assert sensor.bucket is not None
        sensor.rate.record(count, now_ms)
        sensor.bucket.record(count, applied.bound, now_ms)
        delay = sensor.bucket.throttle_ms(applied.bound, now_ms)
        if delay > 0:
            sensor.throttle_ms_total += delay
            sensor.throttled += 1
        return delay

    def note_refused(self, user: str, client_id: str, delay: int) -> None:
        """Count a strict request refused with THROTTLING_QUOTA_EXCEEDED."""
        applied = self._applied(CONTROLLER_MUTATION_RATE, user, client_id)
        if applied is None:
            return
        sensor = self._sensors.get((CONTROLLER_MUTATION_RATE, applied.share))
        if sensor is not None:
            sensor.throttle_ms_total += delay
            sensor.throttled += 1

    # ------------------------------------------------------------------ views

    def sensors(self, now_ms: float, limit: int) -> list[SensorView]:
        """The ``limit`` most recently used sensors (a bounded set of label values)."""
        self._evict(now_ms)
        out: list[SensorView] = []
        for sensor in reversed(self._sensors.values()):
            if len(out) >= limit:
                break
            out.append(SensorView(
                key=sensor.key, user=sensor.share[0], client_id=sensor.share[1],
                bound=sensor.bound, rate=sensor.rate.measure(now_ms),
                throttle_ms_total=sensor.throttle_ms_total, throttled=sensor.throttled,
            ))
        return out
