"""Series computed at scrape time from the broker's state: partitions, consumer groups,
the log cleaner, the transaction coordinator, and the per-topic traffic counters.

Every figure is read when Prometheus scrapes (on the reactor thread, through the
:class:`~brokerd.operator.inspect.Inspector`'s memory-only snapshots), so the label sets are
exactly the topics, partitions and groups that exist at that moment: a deleted topic's
or group's series disappear with it, and no request ever creates a label.

What it does not do: count events (:mod:`brokerd.metrics.live` and
:mod:`brokerd.metrics.traffic` do) or touch the disk.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from brokerd.metrics.traffic import TopicTraffic
from brokerd.operator.inspect import Inspector
from brokerd.operator.share_groups import ShareGroupInspector
from brokerd.operator.txn_face import TxnListingFace
from brokerd.storage.journal.engine import JournalStore

if TYPE_CHECKING:
    from brokerd.core.cleaner_service import CleanerService


class FetchSessionCounters(Protocol):
    """What the fetch-session collector reads. Implemented by the Kafka listener's
    :class:`~brokerd.kafka.server.fetch_sessions.FetchSessionCache`; a Protocol because
    nothing outside ``brokerd/kafka/`` imports the listener but the wiring."""

    slots: int
    created: int
    evicted: int
    incremental: int

    def __len__(self) -> int: ...
    @property
    def partitions(self) -> int: ...


def _gauge(name: str, documentation: str, labels: Sequence[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=list(labels))


class InspectorCollector:
    """Partitions, topics, groups and per-topic traffic, from the inspector."""

    def __init__(self, inspector: Inspector, traffic: TopicTraffic) -> None:
        self._inspector = inspector
        self._traffic = traffic

    def collect(self) -> Iterator[Metric]:
        topics = self._inspector.topics()
        labels = ("topic", "partition")
        size = _gauge("brokerd_partition_log_size_bytes", "Bytes of the partition's segments.",
                      labels)
        segments = _gauge("brokerd_partition_segments", "Segments of the partition's log.",
                          labels)
        start = _gauge("brokerd_partition_log_start_offset",
                       "First offset readers may fetch.", labels)
        end = _gauge("brokerd_partition_log_end_offset",
                     "High watermark: the offset the next visible record gets.", labels)
        stable = _gauge("brokerd_partition_last_stable_offset",
                        "Last stable offset (read_committed readers stop below it).", labels)
        offline = _gauge("brokerd_partition_offline",
                         "1 while the partition's log could not be opened.", labels)
        offline_count = 0
        for topic in topics:
            for p in topic.partitions:
                key = [topic.name, str(p.partition)]
                offline.add_metric(key, 1 if p.offline is not None else 0)
                if p.offline is not None:
                    offline_count += 1
                    continue
                size.add_metric(key, p.size_bytes)
                segments.add_metric(key, p.segments)
                start.add_metric(key, p.log_start_offset)
                end.add_metric(key, p.high_watermark)
                stable.add_metric(key, p.last_stable_offset)
        yield from (size, segments, start, end, stable, offline)
        yield GaugeMetricFamily("brokerd_offline_partitions",
                                "Partitions whose log could not be opened.",
                                value=offline_count)
        yield GaugeMetricFamily("brokerd_topics", "Topics.", value=len(topics))
        partitions = _gauge("brokerd_topic_partitions", "Partitions of the topic.", ["topic"])
        for topic in topics:
            partitions.add_metric([topic.name], len(topic.partitions))
        yield partitions
        yield from self._traffic.collect({t.name for t in topics})
        yield from self._groups()

    def _groups(self) -> Iterator[Metric]:
        lag = _gauge("brokerd_group_lag",
                     "Committed offset's distance to the high watermark.",
                     ["group", "topic", "partition"])
        committed = _gauge("brokerd_group_committed_offset", "The group's committed offset.",
                           ["group", "topic", "partition"])
        members = _gauge("brokerd_group_members", "Members of the group.", ["group"])
        total = _gauge("brokerd_group_lag_total", "The group's lag over every partition.",
                       ["group"])
        for group in self._inspector.groups():
            members.add_metric([group.group_id], len(group.members))
            total.add_metric([group.group_id], group.total_lag)
            for o in group.offsets:
                key = [group.group_id, o.topic, str(o.partition)]
                committed.add_metric(key, o.committed_offset)
                if o.lag is not None:
                    lag.add_metric(key, o.lag)
        yield from (lag, committed, members, total)


class CleanerCollector:
    """The log cleaner's counters (updated by its threads; read as they are)."""

    def __init__(self, cleaner: CleanerService) -> None:
        self._cleaner = cleaner

    def collect(self) -> Iterator[Metric]:
        c = self._cleaner
        for name, documentation, value in (
            ("brokerd_cleaner_passes", "Compaction passes completed.", c.passes),
            ("brokerd_cleaner_bytes_read", "Bytes the cleaner read.", c.bytes_read),
            ("brokerd_cleaner_bytes_written", "Bytes the cleaner wrote (cleaned segments).",
             c.bytes_written),
            ("brokerd_cleaner_records_removed", "Records compaction removed.",
             c.records_removed),
            ("brokerd_cleaner_errors", "Passes that failed.", c.errors),
        ):
            yield CounterMetricFamily(name, documentation, value=value)
        last = c.last_pass_time
        yield GaugeMetricFamily(
            "brokerd_cleaner_last_pass_timestamp_seconds",
            "When the last pass completed (Unix time; 0: none yet).",
            value=last if last is not None else 0,
        )


class FetchSessionsCollector:
    """Kafka fetch sessions (KIP-227): held, their partitions, and what they did."""

    def __init__(self, sessions: FetchSessionCounters) -> None:
        self._sessions = sessions

    def collect(self) -> Iterator[Metric]:
        s = self._sessions
        for name, documentation, value in (
            ("brokerd_fetch_sessions", "Kafka fetch sessions held now.", len(s)),
            ("brokerd_fetch_session_partitions",
             "Partitions held across the fetch sessions.", s.partitions),
            ("brokerd_fetch_session_slots",
             "Most fetch sessions held (--max-incremental-fetch-session-cache-slots).",
             s.slots),
        ):
            yield GaugeMetricFamily(name, documentation, value=value)
        for name, documentation, value in (
            ("brokerd_fetch_sessions_created", "Fetch sessions opened.", s.created),
            ("brokerd_fetch_session_evictions",
             "Fetch sessions evicted to make room for a new one.", s.evicted),
            ("brokerd_fetch_session_incremental_fetches",
             "Incremental fetches served in a session.", s.incremental),
        ):
            yield CounterMetricFamily(name, documentation, value=value)


class StoresCollector:
    """The consumer-offsets store and the transaction log: offline or not, and their
    failed or refused writes (a full disk, a failed fsync)."""

    def __init__(self, stores: Sequence[JournalStore]) -> None:
        self._stores = tuple(stores)

    def collect(self) -> Iterator[Metric]:
        offline = _gauge(
            "brokerd_store_offline",
            "1 while the store refuses writes until its reopen from disk.", ["store"],
        )
        errors = CounterMetricFamily(
            "brokerd_store_write_errors",
            "Store writes that failed or were refused since start.", labels=["store"],
        )
        for store in self._stores:
            journal = store.journal
            offline.add_metric([journal.name], 0 if journal.offline_reason is None else 1)
            errors.add_metric([journal.name], journal.write_errors)
        yield offline
        yield errors


class TransactionsCollector:
    """Transactional ids by state (``Ongoing``, ``CompleteCommit`` ...)."""

    def __init__(self, coordinator: TxnListingFace, states: Sequence[str]) -> None:
        self._coordinator = coordinator
        # Every state is reported, 0 included, so the series exist before a transaction.
        self._states = tuple(states)

    def collect(self) -> Iterator[Metric]:
        by_state = Counter(t.state for t in self._coordinator.list_transactions([], []))
        family = _gauge(
            "brokerd_transactional_ids",
            "Transactional ids by the state of their latest transaction.", ["state"],
        )
        for state in self._states:
            family.add_metric([state], by_state.get(state, 0))
        yield family


class ShareGroupsCollector:
    """Share groups (queues): per group, topic and partition the backlog and the records
    in flight, and the redeliveries and archived records since the broker started."""

    def __init__(self, inspector: ShareGroupInspector) -> None:
        self._inspector = inspector

    def collect(self) -> Iterator[Metric]:
        labels = ["group", "topic", "partition"]
        backlog = _gauge(
            "brokerd_share_group_backlog",
            "Records from the share-partition start to the log end not yet acknowledged "
            "or archived.", labels,
        )
        in_flight = _gauge(
            "brokerd_share_group_in_flight",
            "Records acquired, or available again, inside the share-partition window.",
            labels,
        )
        acquired = _gauge(
            "brokerd_share_group_acquired", "Records acquired by a consumer now.", labels
        )
        redelivered = CounterMetricFamily(
            "brokerd_share_group_redelivered",
            "Deliveries after a record's first since the broker started.", labels=labels,
        )
        archived = CounterMetricFamily(
            "brokerd_share_group_archived",
            "Records archived (rejected or at the delivery count limit) since the broker "
            "started.", labels=labels,
        )
        dead_lettered = CounterMetricFamily(
            "brokerd_share_group_dead_lettered",
            "Records written to the group's dead-letter topic (KIP-1191) since the broker "
            "started.", labels=labels,
        )
        groups = self._inspector.groups()
        for group in groups:
            for p in group.partitions:
                key = [group.group_id, p.topic, str(p.partition)]
                backlog.add_metric(key, p.backlog)
                in_flight.add_metric(key, p.in_flight)
                acquired.add_metric(key, p.acquired)
                redelivered.add_metric(key, p.redelivered_total)
                archived.add_metric(key, p.archived)
                dead_lettered.add_metric(key, p.dead_lettered)
        yield from (backlog, in_flight, acquired, redelivered, archived, dead_lettered)
        yield GaugeMetricFamily("brokerd_share_groups", "Share groups.", value=len(groups))


__all__ = [
    "CleanerCollector",
    "InspectorCollector",
    "ShareGroupsCollector",
    "StoresCollector",
    "TransactionsCollector",
]
