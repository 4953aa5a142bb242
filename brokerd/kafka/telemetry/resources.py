# -*- test-case-name: tests.kafka.telemetry.test_resources -*-
"""Client-metrics resources (config resource type 16, KIP-714): which clients push which
metrics, how often.

A resource is a name and three configs, as in Kafka:

- ``metrics``: a comma-separated list of metric-name prefixes the matching clients push
  (``org.apache.kafka.producer.``); ``*`` is every metric; empty, none.
- ``interval.ms``: how often they push (default 300000; 100 to 3600000).
- ``match``: a comma-separated list of ``selector=regex`` (selectors
  ``client_instance_id``, ``client_id``, ``client_software_name``,
  ``client_software_version``, ``client_source_address``, ``client_source_port``); a
  client matches when every selector's value is matched whole by its regex; no
  selectors, every client. The regexes are RE2's (:mod:`brokerd.kafka.regex`), bounded
  in length and program size, so no pattern costs more than linear time per client.

:class:`ClientMetricsResources` holds them (durably, through
:class:`brokerd.storage.stores.client_metrics.ClientMetricsStore`) and counts changes in
:attr:`~ClientMetricsResources.version`, which tells the client instances
(:mod:`brokerd.kafka.telemetry.clients`) to work out their subscription again.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
from twisted.internet import defer

from brokerd.kafka.regex import InvalidRegex, Regex, compile_regex
from brokerd.storage.config.definition import ConfigDef, ConfigType
from brokerd.storage.config.topic_config import AlterOp, AlterWords, apply_incremental
from brokerd.storage.stores.client_metrics import MAX_RESOURCES, ClientMetricsStore

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
#: Kafka's default push interval (5 minutes) and its bounds.
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
#: In ``metrics``: every metric. In the answer to the client: an empty string.
ALL_METRICS = "*"
#: Longest config value brokerd keeps (a list of prefixes or selectors).
MAX_VALUE_CHARS = 8192


class Selector(enum.Enum):
    """What a ``match`` entry tests, with Kafka's names."""

    CLIENT_INSTANCE_ID = "client_instance_id"
    CLIENT_ID = "client_id"
    CLIENT_SOFTWARE_NAME = "client_software_name"
    CLIENT_SOFTWARE_VERSION = "client_software_version"
    CLIENT_SOURCE_ADDRESS = "client_source_address"
    CLIENT_SOURCE_PORT = "client_source_port"


CONFIGS: Mapping[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef(
            METRICS, (), ConfigType.LIST, "",
            "Metric-name prefixes the matching clients push; * for every metric.",
        ),
        ConfigDef(
            INTERVAL_MS, (), ConfigType.INT, str(DEFAULT_INTERVAL_MS),
            "How often, in milliseconds, the matching clients push their metrics.",
        ),
        ConfigDef(
            MATCH, (), ConfigType.LIST, "",
            "selector=regex entries a client must all match (client_instance_id, client_id,"
            " client_software_name, client_software_version, client_source_address,"
            " client_source_port); none matches every client.",
        ),
    )
}


class InvalidClientMetricsConfig(ValueError):
    """A resource name, config name or value Kafka refuses (INVALID_CONFIG / INVALID_REQUEST)."""


@attrs.frozen
class ClientFacts:
    """What a subscription's ``match`` can test of one client."""

    client_instance_id: str
    client_id: str
    client_software_name: str
    client_software_version: str
    client_source_address: str
    client_source_port: str

    def value(self, selector: Selector) -> str:
        return str(getattr(self, selector.value))


@attrs.frozen
class Subscription:
    """One resource, parsed."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[Selector, Regex], ...]

    def matches(self, client: ClientFacts) -> bool:
        return all(regex.fullmatch(client.value(sel)) for sel, regex in self.match)


def _items(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse(name: str, configs: Mapping[str, str]) -> Subscription:
    """A resource's configs checked as Kafka checks them, and parsed."""
    if not name:
        raise InvalidClientMetricsConfig("Subscription name can't be empty")
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        raise InvalidClientMetricsConfig(f"Unknown client metrics config: {', '.join(unknown)}")
    for key, value in configs.items():
        if len(value) > MAX_VALUE_CHARS:
            raise InvalidClientMetricsConfig(f"{key} is longer than {MAX_VALUE_CHARS} characters")
    raw_interval = configs.get(INTERVAL_MS, str(DEFAULT_INTERVAL_MS))
    try:
        interval = int(raw_interval.strip())
    except ValueError:
        raise InvalidClientMetricsConfig(
            f"Invalid value {raw_interval} for configuration {INTERVAL_MS}: "
            "Not a number of type INT"
        ) from None
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise InvalidClientMetricsConfig(
            f"Invalid value {interval} for configuration {INTERVAL_MS}: Value must be between "
            f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}"
        )
    match: list[tuple[Selector, Regex]] = []
    seen: set[Selector] = set()
    for entry in _items(configs.get(MATCH, "")):
        key, eq, pattern = entry.partition("=")
        if not eq or not pattern:
            raise InvalidClientMetricsConfig(f"Illegal client matching pattern: {entry}")
        try:
            selector = Selector(key.strip())
        except ValueError:
            raise InvalidClientMetricsConfig(
                f"Illegal client matching pattern: {entry} (unknown selector {key.strip()!r})"
            ) from None
        if selector in seen:
            raise InvalidClientMetricsConfig(f"Duplicate client matching selector: {key}")
        seen.add(selector)
        try:
            match.append((selector, compile_regex(pattern.strip())))
        except InvalidRegex as e:
            raise InvalidClientMetricsConfig(f"Illegal client matching pattern: {e}") from None
    return Subscription(
        name, tuple(dict.fromkeys(_items(configs.get(METRICS, "")))), interval, tuple(match)
    )


_WORDS = AlterWords(
    InvalidClientMetricsConfig,
    "Unknown client metrics config: {}",
    "Null value not supported for: {}",
)


def _named_ops(
    ops: Iterable[tuple[str, int, str | None]],
) -> Iterator[tuple[str, AlterOp, str | None]]:
    """``ops`` with their AlterOp, refused entry by entry as Kafka does: an unknown name
    before an unknown operation. A generator on purpose: :func:`apply_incremental` meets
    one entry's other refusals (a null value, a list operation on a number) before the
    next entry is looked at."""
    for name, raw, value in ops:
        if name not in CONFIGS:
            raise InvalidClientMetricsConfig(_WORDS.unknown.format(name))
        try:
            op = AlterOp(raw)
        except ValueError:
            raise InvalidClientMetricsConfig(
                f"Unknown config operation {raw} for {name}"
            ) from None
        yield name, op, value


def apply_ops(
    current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]]
) -> dict[str, str]:
    """``current`` after IncrementalAlterConfigs' ``ops`` (name, operation, value), as
    topic configs are altered (:func:`~brokerd.storage.config.topic_config.apply_incremental`);
    the values are checked together afterwards (:func:`parse`)."""
    return apply_incremental(
        current, {}, _named_ops(ops),
        table=CONFIGS, check=None, words=_WORDS,
    )


RunBlocking = Callable[..., defer.Deferred[Any]]


def _run_here(f: Callable[..., Any], *args: object) -> defer.Deferred[Any]:
    return defer.maybeDeferred(f, *args)


class ClientMetricsResources:
    """Every client-metrics resource, kept in memory and in its store.

    :param store: where they last (None: in memory only, for tests).
    :param run_blocking: runs the store's write off the reactor (the write pool).
    """

    def __init__(
        self,
        store: ClientMetricsStore | None = None,
        *,
        run_blocking: RunBlocking = _run_here,
    ) -> None:
        self._store = store
        self._run_blocking = run_blocking
        self._configs: dict[str, dict[str, str]] = {}
        self._parsed: dict[str, Subscription] = {}
        #: Bumped on every change: client instances older than it look again.
        self.version = 0
        self._lock = defer.DeferredLock()
        if store is not None:
            for name, configs in store.load().items():
                # A file written by this broker always parses; one edited by hand
                # keeps its text (described, alterable) but subscribes nobody.
                with contextlib.suppress(InvalidClientMetricsConfig):
                    self._parsed[name] = parse(name, configs)
                self._configs[name] = dict(configs)

    def names(self) -> list[str]:
        return sorted(self._configs)

    def configs(self, name: str) -> Mapping[str, str] | None:
        """A resource's overrides; None when it does not exist."""
        return self._configs.get(name)

    def subscriptions(self) -> Sequence[Subscription]:
        return list(self._parsed.values())

    async def alter(
        self, name: str, ops: Iterable[tuple[str, int, str | None]], *, validate_only: bool
    ) -> None:
        """Apply IncrementalAlterConfigs' ``ops`` to resource ``name`` (made when new;
        deleted when no config is left), durably before it takes effect."""
        ops = list(ops)
        await self._lock.acquire()
        try:
            new = apply_ops(self._configs.get(name, {}), ops)
            parsed = parse(name, new)
            if validate_only:
                return
            configs = dict(self._configs)
            if new:
                if name not in configs and len(configs) >= MAX_RESOURCES:
                    raise InvalidClientMetricsConfig(
                        f"brokerd keeps at most {MAX_RESOURCES} client metrics resources"
                    )
                configs[name] = new
            else:
                configs.pop(name, None)
            if self._store is not None:
                await self._run_blocking(self._store.save, configs)
            self._configs = configs
            if new:
                self._parsed[name] = parsed
            else:
                self._parsed.pop(name, None)
            self.version += 1
        finally:
            self._lock.release()


__all__ = [
    "ALL_METRICS",
    "CONFIGS",
    "DEFAULT_INTERVAL_MS",
    "ClientFacts",
    "ClientMetricsResources",
    "InvalidClientMetricsConfig",
    "Selector",
    "Subscription",
    "parse",
]
