"""The observer interfaces the connection machinery, the protocols and the core call,
and their do-nothing defaults.

Hot-path code holds one of these objects and calls it unconditionally; without metrics
it holds the null object, whose methods do nothing. This module imports nothing from
Prometheus or Twisted, so the core and the connection layer can depend on it freely.
What it does not do: count anything (:mod:`brokerd.metrics.live`,
:mod:`brokerd.metrics.writes` do).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


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
]
