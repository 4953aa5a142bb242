# -*- test-case-name: tests.test_observers, tests.metrics.test_collectors -*-
"""The observer interfaces the connection machinery, the protocols and the core call,
their do-nothing defaults, and :func:`api_name`, the name a request is reported under.

Hot-path code holds one of these objects and calls it unconditionally; without metrics
it holds the null object, whose methods do nothing. This module imports nothing from
Prometheus, Twisted or the rest of brokerd, so the core, the connection layer and both
protocols depend on it from below. What it does not do: count anything
(:mod:`brokerd.metrics.live` does).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Protocol

# Keyed by (enum class, value): members of two IntEnums with equal values compare equal.
_api_names: dict[tuple[type, int], str] = {}


def api_name(key: enum.IntEnum) -> str:
    """``PRODUCE`` -> ``Produce``, ``API_VERSIONS`` -> ``ApiVersions`` (Kafka's names):
    the ``api`` a protocol passes to :meth:`RequestObserver.request_done`."""
    cache_key = (type(key), int(key))
    name = _api_names.get(cache_key)
    if name is None:
        name = _api_names[cache_key] = "".join(w.capitalize() for w in key.name.split("_"))
    return name


class RequestObserver(Protocol):
    """What one listener's connections and requests report."""

    def connection_opened(self) -> None: ...

    def connection_closed(self) -> None: ...

    def now(self) -> float:
        """A monotonic time stamp: a request's start, passed back to :meth:`request_done`."""
        ...

    def request_done(self, api: str, started: float, errors: Iterable[str]) -> None:
        """A request of ``api`` answered (``errors``: the names of the errors its answer
        carries, each once; empty on success)."""
        ...

    def records_out(self, topic: str, records: int, size: int) -> None:
        """A fetch answer carried ``records`` records, ``size`` bytes, of ``topic``."""
        ...


class WriteObserver(Protocol):
    """What the core's write path reports (called in the reactor thread)."""

    def records_in(self, topic: str, records: int, size: int) -> None:
        """An append of ``records`` records, ``size`` stored bytes, to ``topic`` landed."""
        ...

    def durable(self, seconds: float) -> None:
        """An append became durable ``seconds`` after it was queued (its fsync is done)."""
        ...

    def synced(self, seconds: float) -> None:
        """One fsync of a partition took ``seconds``."""
        ...


class NullRequestObserver:
    """Counts nothing (the default of every listener)."""

    def connection_opened(self) -> None:
        pass

    def connection_closed(self) -> None:
        pass

    def now(self) -> float:
        return 0.0

    def request_done(self, api: str, started: float, errors: Iterable[str]) -> None:
        pass

    def records_out(self, topic: str, records: int, size: int) -> None:
        pass


class NullWriteObserver:
    """Counts nothing (the core's default)."""

    def records_in(self, topic: str, records: int, size: int) -> None:
        pass

    def durable(self, seconds: float) -> None:
        pass

    def synced(self, seconds: float) -> None:
        pass


NULL_REQUESTS: RequestObserver = NullRequestObserver()
NULL_WRITES: WriteObserver = NullWriteObserver()

__all__ = [
    "NULL_REQUESTS",
    "NULL_WRITES",
    "NullRequestObserver",
    "NullWriteObserver",
    "RequestObserver",
    "WriteObserver",
    "api_name",
]
