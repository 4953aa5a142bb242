"""What the operator surface reads of client telemetry (KIP-714), as typed Protocols:
the Kafka listener's :class:`brokerd.kafka.telemetry.clients.ClientTelemetry` satisfies
them, and the service wiring hands it to the metrics' collector and to the console, so
neither imports the Kafka listener.

What this module does not do: implement any of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class PushedSeriesView(Protocol):
    """One metric series a client pushed, at its last value. Implemented by
    :class:`~brokerd.kafka.telemetry.clients.Series` (the operator package does not import
    the Kafka listener)."""

    @property
    def name(self) -> str: ...
    @property
    def attributes(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def value(self) -> float: ...
    @property
    def counter(self) -> bool: ...


class TelemetryClientView(Protocol):
    """One client instance that asked for its subscription or pushed. Implemented by
    :class:`~brokerd.kafka.telemetry.clients.ClientView` (the operator package does not
    import the Kafka listener)."""

    @property
    def instance_id(self) -> str: ...
    @property
    def client_id(self) -> str: ...
    @property
    def software(self) -> str: ...
    @property
    def address(self) -> str: ...
    @property
    def push_interval_ms(self) -> int: ...
    @property
    def subscribed(self) -> tuple[str, ...]: ...
    @property
    def pushes(self) -> int: ...
    @property
    def last_push(self) -> float | None: ...
    @property
    def terminating(self) -> bool: ...
    @property
    def series(self) -> Sequence[PushedSeriesView]: ...


class TelemetryFace(Protocol):
    """The clients known now (idle ones expire), most recently pushed first. Implemented by
    :class:`~brokerd.kafka.telemetry.clients.ClientTelemetry` (the operator package does not
    import the Kafka listener)."""

    def clients(self) -> Sequence[TelemetryClientView]: ...

    @property
    def dropped_series(self) -> int:
        """Series dropped so far because a bound was reached."""
        ...


__all__ = ["PushedSeriesView", "TelemetryClientView", "TelemetryFace"]
