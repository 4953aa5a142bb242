"""One broker's metrics: :class:`BrokerMetrics` builds its own
:class:`~prometheus_client.CollectorRegistry` (never the global one, so two brokers in a
process, as in tests, do not share series) with the process and platform collectors,
the live request/write series and the scrape-time collectors.

What it does not do: serve HTTP (:mod:`brokerd.web.metrics_resource`) or decide which
parts of the broker exist (the service tree passes them in).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector

from brokerd.core.quotas.manager import QuotaManager
from brokerd.metrics.collectors import (
    CleanerCollector,
    FetchSessionCounters,
    FetchSessionsCollector,
    InspectorCollector,
    ShareGroupsCollector,
    StoresCollector,
    TransactionsCollector,
)
from brokerd.metrics.live import ListenerMetrics, RequestMetrics, WriteMetrics
from brokerd.metrics.telemetry import TelemetryCollector
from brokerd.metrics.traffic import TopicTraffic
from brokerd.operator.inspect import Inspector
from brokerd.operator.share_groups import ShareGroupInspector
from brokerd.operator.telemetry_face import TelemetryFace
from brokerd.operator.txn_face import TxnListingFace
from brokerd.storage.journal.engine import JournalStore

if TYPE_CHECKING:
    from brokerd.core.cleaner_service import CleanerService


class BrokerMetrics:
    """Every series of one broker.

    ``registry`` is what ``/metrics`` serves; :meth:`listener` and :attr:`writes` are the
    observers the listeners and the core call; :meth:`add_cleaner` and
    :meth:`add_transactions` add the optional parts' collectors.
    """

    def __init__(self, inspector: Inspector, *, process: bool = True) -> None:
        self.registry = CollectorRegistry()
        if process:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
        self.traffic = TopicTraffic()
        self._requests = RequestMetrics(self.registry, self.traffic)
        self.writes = WriteMetrics(self.registry, self.traffic)
        self.registry.register(InspectorCollector(inspector, self.traffic))

    def listener(self, protocol: str) -> ListenerMetrics:
        """The observer of the ``protocol`` (``"native"``/``"kafka"``) listener."""
        return self._requests.listener(protocol)

    def add_cleaner(self, cleaner: CleanerService) -> None:
        self.registry.register(CleanerCollector(cleaner))

    def add_transactions(self, coordinator: TxnListingFace, states: Sequence[str]) -> None:
        """``states``: every state a transactional id can be in (the coordinator's)."""
        self.registry.register(TransactionsCollector(coordinator, states))

    def add_share_groups(self, inspector: ShareGroupInspector) -> None:
        self.registry.register(ShareGroupsCollector(inspector))

    def add_client_telemetry(self, telemetry: TelemetryFace) -> None:
        """The metrics clients push (KIP-714)."""
        self.registry.register(TelemetryCollector(telemetry))

    def add_quotas(self, quotas: QuotaManager, seconds: Callable[[], float]) -> None:
        from brokerd.metrics.quotas import QuotasCollector

        self.registry.register(QuotasCollector(quotas, seconds))

    def add_fetch_sessions(self, sessions: FetchSessionCounters) -> None:
        self.registry.register(FetchSessionsCollector(sessions))

    def add_stores(self, stores: Sequence[JournalStore]) -> None:
        self.registry.register(StoresCollector(stores))


__all__ = ["BrokerMetrics"]
