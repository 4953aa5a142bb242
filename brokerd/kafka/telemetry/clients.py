# -*- test-case-name: tests.kafka.telemetry.test_clients -*-
"""Client instances (KIP-714): what each asked for, when it may push, and what it pushed.

GetTelemetrySubscriptions and PushTelemetry are answered here by Kafka's rules (its
``ClientMetricsManager``):

- A client's first request carries the zero id; the broker assigns a random UUID (the
  client instance id), which the client sends from then on. An instance is matched
  against every client-metrics resource (:mod:`brokerd.kafka.telemetry.resources`): it
  pushes the union of the matching resources' metric prefixes (every metric if one says
  ``*``), at the smallest of their intervals (the 5-minute default when none matches).
  Its subscription id is a CRC-32C of those prefixes and the interval, mixed with the
  instance id, so the same subscription gets the same id after a restart and a changed
  one gets a new id.
- A resource changed since the instance was matched: it is matched again (a new
  subscription id), so its next push is UNKNOWN_SUBSCRIPTION_ID and the client asks again.
- Too early: a GetTelemetrySubscriptions less than an interval after the instance's last
  request, unless its last answer was UNKNOWN_SUBSCRIPTION_ID or
  UNSUPPORTED_COMPRESSION_TYPE, and a push less than an interval after the last one,
  unless a GetTelemetrySubscriptions came in between (clients add jitter) or it is the
  terminating push, are THROTTLING_QUOTA_EXCEEDED.
- A push after a terminating push is INVALID_REQUEST; one with an id the instance does
  not have, UNKNOWN_SUBSCRIPTION_ID; a compression type outside
  :data:`ACCEPTED_COMPRESSION`, UNSUPPORTED_COMPRESSION_TYPE; metrics larger than
  ``telemetry.max.bytes``, TELEMETRY_TOO_LARGE.

Beyond Kafka (which hands pushed metrics to a plugin), an accepted push is decompressed
and decoded (:mod:`brokerd.kafka.telemetry.otlp`, off the reactor) and its latest values
kept per client for ``/metrics`` and the console, within fixed bounds
(:data:`MAX_INSTANCES` instances, :data:`MAX_REPORTING_CLIENTS` clients with metrics,
:data:`MAX_SERIES_PER_CLIENT` series each): past a bound the least recently active
client, or a client's least recently pushed series, is dropped. An instance idle for
three push intervals (at least a minute) is forgotten, with its metrics.
"""

from __future__ import annotations

import enum
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import crc32c
from twisted.internet import defer

from brokerd.clock import Seconds
from brokerd.errors import CorruptBatch
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.telemetry.otlp import InvalidMetrics, Kind, Point, Temporality, decode_metrics
from brokerd.kafka.telemetry.resources import (
    ALL_METRICS,
    DEFAULT_INTERVAL_MS,
    ClientFacts,
    ClientMetricsResources,
)
from brokerd.net.refusals import RefusalLog
from brokerd.storage.record.compression import Compression, decompress

#: Kafka's default of ``telemetry.max.bytes``: the largest metrics payload of a push.
DEFAULT_TELEMETRY_MAX_BYTES = 1024 * 1024
#: A push's metrics may decompress to at most this many times ``telemetry.max.bytes``.
DECOMPRESSED_FACTOR = 8
#: The compression types a push may use (Kafka's list, in its order of preference).
ACCEPTED_COMPRESSION = (Compression.ZSTD, Compression.LZ4, Compression.GZIP, Compression.SNAPPY)
#: Client instances remembered (Kafka's cache size); the least recently seen goes first.
MAX_INSTANCES = 16384
#: Clients whose pushed metrics are kept (and exported).
MAX_REPORTING_CLIENTS = 64
#: Series kept per client.
MAX_SERIES_PER_CLIENT = 500
#: An instance is forgotten after this many push intervals without a request ...
EXPIRY_INTERVALS = 3
#: ... and never sooner than this.
MIN_EXPIRY_MS = 60_000

RunBlocking = Callable[..., defer.Deferred[Any]]


def _run_here(f: Callable[..., Any], *args: object) -> defer.Deferred[Any]:
    return defer.maybeDeferred(f, *args)


class TelemetryError(Exception):
    """A refused request: its error code and message."""

    def __init__(self, code: ErrorCode, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


@attrs.frozen
class ConnectionFacts:
    """What the connection tells about a client (its instance id aside)."""

    client_id: str
    software_name: str
    software_version: str
    address: str
    port: int

    def for_instance(self, instance_id: uuid.UUID) -> ClientFacts:
        return ClientFacts(
            client_instance_id=str(instance_id),
            client_id=self.client_id,
            client_software_name=self.software_name,
            client_software_version=self.software_version,
            client_source_address=self.address,
            client_source_port=str(self.port),
        )


@attrs.frozen
class Subscribed:
    """The answer to a GetTelemetrySubscriptions."""

    instance_id: uuid.UUID
    subscription_id: int
    push_interval_ms: int
    telemetry_max_bytes: int
    #: Empty: nothing subscribed; ``("",)``: every metric.
    requested_metrics: tuple[str, ...]
    accepted_compression: tuple[int, ...] = tuple(int(c) for c in ACCEPTED_COMPRESSION)


@attrs.define
class Series:
    """One pushed series, at its latest value (a delta counter's running total)."""

    name: str
    attributes: tuple[tuple[str, str], ...]
    value: float
    counter: bool


class Issued(enum.Enum):
    """The last answer an instance got, as far as the rules care."""

    NONE = "none"
    THROTTLED = "throttled"
    UNKNOWN_SUBSCRIPTION = "unknown-subscription"
    UNSUPPORTED_COMPRESSION = "unsupported-compression"
    OTHER = "other"


def java_uuid_hash(u: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode()``: the 64-bit halves XORed, then folded to 32 bits."""
    hilo = (u.int >> 64) ^ (u.int & 0xFFFF_FFFF_FFFF_FFFF)
    return ((hilo >> 32) ^ hilo) & 0xFFFF_FFFF


def _signed32(v: int) -> int:
    v &= 0xFFFF_FFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def subscription_id(metrics: Sequence[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    # repr keeps "every metric" ([""]) apart from "none" ([]).
    text = repr(sorted(metrics)) + str(interval_ms)
    return _signed32(int(crc32c.crc32c(text.encode())) ^ java_uuid_hash(instance_id))


@attrs.define(eq=False)
class ClientInstance:
    """One client instance as the broker knows it."""

    instance_id: uuid.UUID
    facts: ConnectionFacts
    version: int
    subscription_id: int
    metrics: tuple[str, ...]
    interval_ms: int
    last_get: float | None = None
    last_push: float | None = None
    last_seen: float = 0.0
    issued: Issued = Issued.NONE
    terminating: bool = False
    pushes: int = 0
    series: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], Series] = attrs.Factory(
        OrderedDict
    )

    @property
    def client_id(self) -> str:
        return self.facts.client_id

    @property
    def software(self) -> str:
        name, version = self.facts.software_name, self.facts.software_version
        return f"{name} {version}".strip()

    @property
    def address(self) -> str:
        return f"{self.facts.address}:{self.facts.port}" if self.facts.port else self.facts.address



@attrs.frozen
class ClientView:
    instance_id: str
    client_id: str
    software: str
    address: str
    push_interval_ms: int
    subscribed: tuple[str, ...]
    pushes: int
    last_push: float | None
    terminating: bool
    series: tuple[Series, ...]


class ClientTelemetry:
    """Every client instance of one broker.

    :param resources: the client-metrics resources.
    :param clock: wall time (seconds).
    :param max_bytes: ``telemetry.max.bytes``.
    :param run_blocking: runs a push's decompression and decoding off the reactor.
    """

    def __init__(
        self,
        resources: ClientMetricsResources,
        *,
        clock: Seconds,
        max_bytes: int = DEFAULT_TELEMETRY_MAX_BYTES,
        run_blocking: RunBlocking = _run_here,
        max_instances: int = MAX_INSTANCES,
        max_reporting: int = MAX_REPORTING_CLIENTS,
        max_series: int = MAX_SERIES_PER_CLIENT,
    ) -> None:
        self.resources = resources
        self._clock = clock
        self.max_bytes = max_bytes
        self._run_blocking = run_blocking
        self._max_instances = max_instances
        self._max_reporting = max_reporting
        self._max_series = max_series
        #: Least recently seen first.
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        #: The instances whose series are kept, least recently pushed first.
        self._reporting: OrderedDict[uuid.UUID, None] = OrderedDict()
        self.dropped_series = 0
        #: Why the last push whose metrics did not decode was dropped ("" if none).
        self.last_decode_error = ""
        #: Such pushes, counted and logged at a bounded rate.
        self.undecodable = RefusalLog()

    def _now(self) -> float:
        return self._clock.seconds()

    def _match(self, instance_id: uuid.UUID, facts: ConnectionFacts) -> ClientInstance:
        interval = DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        everything = False
        client = facts.for_instance(instance_id)
        for sub in self.resources.subscriptions():
            if sub.matches(client):
                everything = everything or ALL_METRICS in sub.metrics
                metrics.update(sub.metrics)
                interval = min(interval, sub.interval_ms)
        wanted = ("",) if everything else tuple(sorted(metrics))
        return ClientInstance(
            instance_id=instance_id,
            facts=facts,
            version=self.resources.version,
            subscription_id=subscription_id(wanted, interval, instance_id),
            metrics=wanted,
            interval_ms=interval,
        )

    def _instance(self, instance_id: uuid.UUID, facts: ConnectionFacts) -> ClientInstance:
        """The instance of ``instance_id``, matched again when a resource changed since
        (a broker restarted, or a forgotten instance, is matched anew: the same
        subscription gets the same id)."""
        now = self._now()
        self._expire(now)
        found = self._instances.get(instance_id)
        if found is None or found.version != self.resources.version:
            fresh = self._match(instance_id, facts)
            if found is not None:
                # Its metrics and counts stay; the timing rules start over, as in Kafka.
                fresh.series, fresh.pushes = found.series, found.pushes
            found = fresh
            self._instances[instance_id] = found
            while len(self._instances) > self._max_instances:
                self._forget_oldest()
        found.facts = facts
        found.last_seen = now
        self._instances.move_to_end(instance_id)
        return found

    def _expire(self, now: float) -> None:
        while self._instances:
            oldest = next(iter(self._instances.values()))
            ttl = max(EXPIRY_INTERVALS * oldest.interval_ms, MIN_EXPIRY_MS) / 1000
            if now - oldest.last_seen < ttl:
                # Mostly ordered by expiry too (intervals differ, so a later one may
                # expire first; it goes when it reaches the front).
                return
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        instance_id, _ = self._instances.popitem(last=False)
        self._reporting.pop(instance_id, None)

    # -- GetTelemetrySubscriptions -----------------------------------------------------

    def get_subscriptions(self, instance_id: uuid.UUID, facts: ConnectionFacts) -> Subscribed:
        """The subscription of the instance (a new one for the zero id).

        :raises TelemetryError: THROTTLING_QUOTA_EXCEEDED when asked too early.
        """
        if instance_id.int == 0:
            instance_id = uuid.uuid4()
        inst = self._instance(instance_id, facts)
        now = self._now()
        early = inst.issued not in (Issued.UNKNOWN_SUBSCRIPTION, Issued.UNSUPPORTED_COMPRESSION)
        last = max((t for t in (inst.last_get, inst.last_push) if t is not None), default=None)
        if early and last is not None and (now - last) * 1000 < inst.interval_ms:
            inst.issued = Issued.THROTTLED
            raise TelemetryError(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{instance_id}] arrived before the next push "
                "interval time",
            )
        inst.last_get = now
        inst.issued = Issued.NONE
        return Subscribed(
            instance_id=instance_id,
            subscription_id=inst.subscription_id,
            push_interval_ms=inst.interval_ms,
            telemetry_max_bytes=self.max_bytes,
            requested_metrics=inst.metrics,
        )

    # -- PushTelemetry -----------------------------------------------------------------

    def check_push(
        self,
        instance_id: uuid.UUID,
        sub_id: int,
        *,
        terminating: bool,
        compression: int,
        size: int,
        facts: ConnectionFacts,
    ) -> ClientInstance:
        """The instance a push may go to, after Kafka's checks (in Kafka's order).

        :raises TelemetryError: the push is refused.
        """
        if instance_id.int == 0 or instance_id.int == 1:  # Kafka's reserved ids
            raise TelemetryError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid request from the client [{instance_id}], invalid client instance id",
            )
        inst = self._instance(instance_id, facts)
        now = self._now()
        if inst.terminating:
            inst.issued = Issued.OTHER
            raise TelemetryError(
                ErrorCode.INVALID_REQUEST,
                f"Client [{instance_id}] sent the previous request with state terminating to "
                "TRUE, can not accept any requests after that",
            )
        accept = inst.last_get is not None and (
            inst.last_push is None or inst.last_get > inst.last_push
        )
        if not accept:
            last = max((t for t in (inst.last_get, inst.last_push) if t is not None), default=None)
            accept = last is None or (now - last) * 1000 >= inst.interval_ms
        if accept:
            inst.last_push = now
        elif not terminating:
            inst.issued = Issued.THROTTLED
            raise TelemetryError(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{instance_id}] arrived before the next push "
                "interval time",
            )
        if sub_id != inst.subscription_id:
            inst.issued = Issued.UNKNOWN_SUBSCRIPTION
            raise TelemetryError(
                ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                f"Unknown client subscription id for the client [{instance_id}]",
            )
        if compression != Compression.NONE and compression not in ACCEPTED_COMPRESSION:
            inst.issued = Issued.UNSUPPORTED_COMPRESSION
            raise TelemetryError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"Unknown compression type [{compression}] for the client [{instance_id}]",
            )
        if size > self.max_bytes:
            inst.issued = Issued.OTHER
            raise TelemetryError(
                ErrorCode.TELEMETRY_TOO_LARGE,
                f"Telemetry request from [{instance_id}] is larger than the maximum allowed "
                f"size [{self.max_bytes}]",
            )
        inst.terminating = terminating
        inst.issued = Issued.NONE
        return inst

    async def push(
        self,
        instance_id: uuid.UUID,
        sub_id: int,
        *,
        terminating: bool,
        compression: int,
        metrics: bytes,
        facts: ConnectionFacts,
    ) -> None:
        """Accept a push (:meth:`check_push`'s errors), then keep its decoded values.

        Metrics that do not decode are dropped (the push is still accepted, as Kafka
        accepts it before its plugin reads it); :attr:`last_decode_error` says why.
        """
        inst = self.check_push(
            instance_id, sub_id, terminating=terminating, compression=compression,
            size=len(metrics), facts=facts,
        )
        inst.pushes += 1
        if not metrics:
            return
        bound = self.max_bytes * DECOMPRESSED_FACTOR
        try:
            points: list[Point] = await self._run_blocking(
                decode_push, compression, metrics, bound
            )
        except (InvalidMetrics, CorruptBatch) as e:
            self.last_decode_error = f"{instance_id}: {e}"
            self.undecodable.refused(
                "kafka: the metrics client {client} pushed did not decode, dropped: {error}",
                client=instance_id, error=str(e),
            )
            return
        self._keep(inst, points)

    def _keep(self, inst: ClientInstance, points: Sequence[Point]) -> None:
        if inst.instance_id not in self._instances:
            return  # forgotten while its push was decoded
        for p in points:
            key = (p.name, p.attributes)
            found = inst.series.get(key)
            delta = p.kind is Kind.COUNTER and p.temporality is Temporality.DELTA
            if found is None:
                found = Series(p.name, p.attributes, p.value, p.kind is Kind.COUNTER)
                inst.series[key] = found
            elif delta:
                found.value += p.value
            else:
                found.value = p.value
            inst.series.move_to_end(key)
        while len(inst.series) > self._max_series:
            inst.series.popitem(last=False)
            self.dropped_series += 1
        self._reporting[inst.instance_id] = None
        self._reporting.move_to_end(inst.instance_id)
        # The least recently pushing clients lose their series first.
        while len(self._reporting) > self._max_reporting:
            old_id, _ = self._reporting.popitem(last=False)
            old = self._instances.get(old_id)
            if old is not None:
                self.dropped_series += len(old.series)
                old.series = OrderedDict()

    # -- what operators see (brokerd.operator.telemetry_face.TelemetryFace) --------------

    def clients(self) -> list[ClientView]:
        self._expire(self._now())
        out = [
            ClientView(
                instance_id=str(i.instance_id),
                client_id=i.client_id,
                software=i.software,
                address=i.address,
                push_interval_ms=i.interval_ms,
                subscribed=i.metrics,
                pushes=i.pushes,
                last_push=i.last_push,
                terminating=i.terminating,
                series=tuple(i.series.values()),
            )
            for i in self._instances.values()
        ]
        out.sort(key=lambda v: v.last_push or 0.0, reverse=True)
        return out


def decode_push(compression: int, metrics: bytes, bound: int) -> list[Point]:
    """A push's metrics decompressed (at most ``bound`` bytes) and decoded. Blocking."""
    raw = metrics if compression == Compression.NONE else decompress(
        compression, memoryview(metrics), bound
    )
    return decode_metrics(raw)


__all__ = [
    "ACCEPTED_COMPRESSION",
    "DEFAULT_TELEMETRY_MAX_BYTES",
    "MAX_REPORTING_CLIENTS",
    "MAX_SERIES_PER_CLIENT",
    "ClientTelemetry",
    "ConnectionFacts",
    "Subscribed",
    "TelemetryError",
]
