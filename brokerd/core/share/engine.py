# -*- test-case-name: tests.core.share.test_engine -*-
"""The share groups' records engine: every share-partition of every share group.

:class:`ShareEngine` keeps one :class:`~brokerd.core.share.partition.SharePartition` per
(group, topic, partition) and each group's settings (:class:`ShareConfig`). Every
operation that changes state returns the share-state journal records describing the
change (:mod:`brokerd.storage.stores.share_state`); the caller makes them durable before
answering (:class:`brokerd.core.share.service.ShareService` does). It is synchronous and
protocol-neutral: the Kafka listener and any other front end call the same operations.

What it does not do: read the log (the caller passes the log's batches as
:class:`LogSpan` ranges), write files, manage group membership, or keep time (the caller
passes milliseconds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from brokerd.core.share.config import (
    DEFAULTS,
    DLQ_TOPIC,
    AutoOffsetReset,
    ShareConfig,
    parse_group_configs,
)
from brokerd.core.share.partition import (
    AckBatch,
    AcquiredRange,
    DeadLetter,
    LogSpan,
    PartitionSummary,
    SharePartition,
    Span,
    StateRun,
)
from brokerd.core.share.states import RecordState
from brokerd.storage.stores.share_state import (
    GroupConfigs,
    GroupDeleted,
    PartitionDeleted,
    PartitionState,
    ShareStateRecord,
    StoredPartition,
    StoredRun,
)

__all__ = ["GroupDeadLetters", "ShareEngine", "TopicPartition"]

TopicPartition = tuple[str, int]


@attrs.frozen
class GroupDeadLetters:
    """A share-partition's dead letters, with where the group's config sends them."""

    group: str
    topic: str
    partition: int
    dlq_topic: str
    copy_record: bool
    letters: tuple[DeadLetter, ...]


class ShareEngine:
    """See the module docstring."""

    def __init__(self, defaults: Mapping[str, str] = DEFAULTS) -> None:
        self._partitions: dict[str, dict[TopicPartition, SharePartition]] = {}
        self._overrides: dict[str, dict[str, str]] = {}
        #: The broker's default of every group config (``group.share.*``).
        self.defaults: Mapping[str, str] = dict(defaults)
        #: Each group's parsed settings, by the defaults they were parsed against: every
        #: share fetch asks, and parsing them each time was a tenth of a fetch's time.
        self._configs: dict[str, tuple[Mapping[str, str], ShareConfig]] = {}

    # -- settings ------------------------------------------------------------------------

    def config(self, group: str) -> ShareConfig:
        cached = self._configs.get(group)
        if cached is not None and cached[0] is self.defaults:
            return cached[1]
        config = parse_group_configs(self._overrides.get(group, {}), self.defaults)
        if group in self._partitions or group in self._overrides:
            self._configs[group] = (self.defaults, config)
        return config

    def overrides(self, group: str) -> dict[str, str]:
        return dict(self._overrides.get(group, {}))

    def configured(self) -> list[str]:
        """The groups with a ``share.*`` override (ListConfigResources lists them)."""
        return sorted(g for g, c in self._overrides.items() if c)

    def set_overrides(self, group: str, overrides: Mapping[str, str]) -> list[ShareStateRecord]:
        """Replace the group's config overrides (already validated)."""
        if overrides:
            self._overrides[group] = dict(overrides)
        else:
            self._overrides.pop(group, None)
        self._configs.pop(group, None)
        config = self.config(group)
        for part in self._partitions.get(group, {}).values():
            part.limit = config.delivery_count_limit
            part.lock_duration_ms = config.lock_duration_ms
            part.max_record_locks = config.max_record_locks
            part.dead_letters = bool(config.dlq_topic)
        return [GroupConfigs(group, tuple(sorted(overrides.items())))]

    # -- restore -------------------------------------------------------------------------

    def restore(
        self,
        partitions: Mapping[tuple[str, str, int], StoredPartition],
        configs: Mapping[str, Mapping[str, str]],
    ) -> None:
        """Load what the journal holds (at start-up): acquired records become available
        again, their delivery counts kept."""
        self._load(partitions, configs, {})

    def reload(
        self,
        partitions: Mapping[tuple[str, str, int], StoredPartition],
        configs: Mapping[str, Mapping[str, str]],
    ) -> None:
        """Load what the journal holds on a live broker, after a journal write failed or
        the journal was reopened from disk: every change the journal does not hold is
        undone. Acquisitions it holds stay with their members (same delivery count,
        same lock); what it holds as acquired but memory no longer does becomes
        available again, as after a restart."""
        self._load(partitions, configs, self._partitions)

    def _load(
        self,
        partitions: Mapping[tuple[str, str, int], StoredPartition],
        configs: Mapping[str, Mapping[str, str]],
        before: Mapping[str, Mapping[TopicPartition, SharePartition]],
    ) -> None:
        self._overrides = {g: dict(c) for g, c in configs.items()}
        self._configs = {}
        self._partitions = {}
        for (group, topic, index), stored in partitions.items():
            part = self._new_partition(group, stored.start)
            part.restore(
                stored.start, stored.end,
                (
                    StateRun(r.first, r.last, RecordState(r.state), r.delivery_count)
                    for r in stored.runs()
                ),
                held=before.get(group, {}).get((topic, index)),
            )
            self._partitions.setdefault(group, {})[(topic, index)] = part

    # -- reading -------------------------------------------------------------------------

    def groups(self) -> list[str]:
        return sorted(set(self._partitions) | set(self._overrides))

    def has_group(self, group: str) -> bool:
        return group in self._partitions or group in self._overrides

    def partition(self, group: str, topic: str, index: int) -> SharePartition | None:
        return self._partitions.get(group, {}).get((topic, index))

    def partitions(self, group: str) -> dict[TopicPartition, SharePartition]:
        return dict(self._partitions.get(group, {}))

    def describe(self, group: str) -> dict[TopicPartition, PartitionSummary]:
        """Backlog figures per partition of the group (start offset, in flight,
        acquired, redelivered, archived)."""
        return {tp: p.summary() for tp, p in sorted(self._partitions.get(group, {}).items())}

    # -- changing ------------------------------------------------------------------------

    def needs_reset(self, group: str, topic: str, index: int, *, log_end: int) -> bool:
        """Whether :meth:`ensure` will place the share-partition by
        ``share.auto.offset.reset``: the group has not read it yet, or its start is past
        the log's end (the topic was deleted and created again under its name)."""
        part = self.partition(group, topic, index)
        return part is None or part.start > log_end

    def ensure(
        self, group: str, topic: str, index: int, *, log_start: int, log_end: int,
        found: int | None = None,
    ) -> tuple[SharePartition, list[ShareStateRecord]]:
        """The share-partition, placed by the group's ``share.auto.offset.reset`` when
        :meth:`needs_reset` (latest: the log end; earliest: the log start; by_duration:
        ``found``, the first offset at or after the duration's start that the caller
        looked up, None when no record is that recent), and moved up past records the
        log no longer has."""
        group_parts = self._partitions.setdefault(group, {})
        part = group_parts.get((topic, index))
        if self.needs_reset(group, topic, index, log_end=log_end):
            start = self._reset_offset(group, log_start, log_end, found)
            if part is None:
                part = group_parts[(topic, index)] = self._new_partition(group, start)
                return part, [self._state(group, topic, index, part, ())]
            # Past the log's end: a new share-partition in place of the old one's.
            records = self.set_start(group, topic, index, start)
            return group_parts[(topic, index)], records
        assert part is not None
        if part.start < log_start:
            part.move_start(log_start)
            return part, [self._state(group, topic, index, part, ())]
        return part, []

    def _reset_offset(
        self, group: str, log_start: int, log_end: int, found: int | None
    ) -> int:
        reset = self.config(group).auto_offset_reset
        if reset is AutoOffsetReset.EARLIEST:
            return log_start
        if reset is AutoOffsetReset.BY_DURATION and found is not None:
            return min(max(found, log_start), log_end)
        return log_end

    def acquire(
        self,
        group: str,
        topic: str,
        index: int,
        member: str,
        spans: Sequence[LogSpan],
        max_records: int,
        now_ms: float,
        *,
        whole_batches: bool = False,
    ) -> tuple[list[AcquiredRange], list[ShareStateRecord]]:
        """Acquire up to ``max_records`` of ``spans`` for ``member`` (the partition must
        have been :meth:`ensure` d); with ``whole_batches`` a batch begun is taken whole
        (:meth:`SharePartition.acquire`)."""
        part = self._require(group, topic, index)
        ranges, changed = part.acquire(
            member, spans, max_records, now_ms, whole_batches=whole_batches
        )
        return ranges, self._records(group, topic, index, part, changed)

    def acknowledge(
        self, group: str, topic: str, index: int, member: str, batches: Iterable[AckBatch],
        now_ms: float = 0.0,
    ) -> list[ShareStateRecord]:
        """:raises InvalidAcknowledgement: nothing changed (INVALID_RECORD_STATE)."""
        part = self._require(group, topic, index)
        changed = part.acknowledge(member, batches, now_ms)
        return self._records(group, topic, index, part, changed)

    def release_member(self, group: str, member: str) -> list[ShareStateRecord]:
        """Release everything ``member`` holds in the group (it left or timed out)."""
        out: list[ShareStateRecord] = []
        for (topic, index), part in self._partitions.get(group, {}).items():
            out += self._records(group, topic, index, part, part.release_member(member))
        return out

    def expire_locks(self, now_ms: float) -> list[ShareStateRecord]:
        out: list[ShareStateRecord] = []
        for group, parts in self._partitions.items():
            for (topic, index), part in parts.items():
                out += self._records(group, topic, index, part, part.expire_locks(now_ms))
        return out

    def take_dead_letters(self) -> list[GroupDeadLetters]:
        """Every share-partition's dead letters noted since the last call (a group
        without a dead-letter topic notes none)."""
        out: list[GroupDeadLetters] = []
        # Only a group's own override names a dead-letter topic (there is no broker
        # default), so groups without one cost nothing here.
        for group, overrides in self._overrides.items():
            if not overrides.get(DLQ_TOPIC):
                continue
            config: ShareConfig | None = None
            for (topic, index), part in self._partitions.get(group, {}).items():
                if not part.dead_letters:
                    continue
                letters = part.take_dead_letters()
                if letters:
                    config = config or self.config(group)
                    out.append(GroupDeadLetters(
                        group, topic, index, config.dlq_topic, config.dlq_copy_record,
                        tuple(letters),
                    ))
        return out

    def dead_lettered(
        self, group: str, topic: str, index: int, first: int, last: int, *,
        written: bool = True,
    ) -> list[ShareStateRecord]:
        """Archive the ARCHIVING records ``first..last`` (their dead-letter record is
        written, or never will be); nothing if the share-partition is gone."""
        part = self.partition(group, topic, index)
        if part is None:
            return []
        changed = part.dead_lettered(first, last, written=written)
        return self._records(group, topic, index, part, changed)

    def next_deadline(self) -> float | None:
        deadlines = [
            d for parts in self._partitions.values() for p in parts.values()
            if (d := p.next_deadline()) is not None
        ]
        return min(deadlines) if deadlines else None

    def set_start(self, group: str, topic: str, index: int, offset: int) -> list[ShareStateRecord]:
        """Set the share-partition's start offset (AlterShareGroupOffsets): the window
        restarts there, forgetting records in flight."""
        group_parts = self._partitions.setdefault(group, {})
        part = self._new_partition(group, offset)
        group_parts[(topic, index)] = part
        return [self._state(group, topic, index, part, (), replace=True)]

    def delete_partition(self, group: str, topic: str, index: int) -> list[ShareStateRecord]:
        parts = self._partitions.get(group, {})
        if parts.pop((topic, index), None) is None:
            return []
        return [PartitionDeleted(group, topic, index)]

    def forget_topic(self, topic: str) -> list[ShareStateRecord]:
        """Every group's share-partitions of a deleted topic."""
        return [
            record
            for group, parts in self._partitions.items()
            for (name, index) in sorted(parts)
            if name == topic
            for record in self.delete_partition(group, name, index)
        ]

    def delete_group(self, group: str) -> list[ShareStateRecord]:
        known = group in self._partitions or group in self._overrides
        self._partitions.pop(group, None)
        self._overrides.pop(group, None)
        self._configs.pop(group, None)
        return [GroupDeleted(group)] if known else []

    # -- helpers -------------------------------------------------------------------------

    def _new_partition(self, group: str, start: int) -> SharePartition:
        config = self.config(group)
        part = SharePartition(
            start, delivery_count_limit=config.delivery_count_limit,
            lock_duration_ms=config.lock_duration_ms, max_record_locks=config.max_record_locks,
        )
        part.dead_letters = bool(config.dlq_topic)
        return part

    def _require(self, group: str, topic: str, index: int) -> SharePartition:
        part = self.partition(group, topic, index)
        if part is None:
            raise KeyError(f"share-partition {group}/{topic}-{index} is not initialised")
        return part

    def _records(
        self, group: str, topic: str, index: int, part: SharePartition, changed: list[Span]
    ) -> list[ShareStateRecord]:
        if not changed:
            return []
        return [self._state(group, topic, index, part, part.runs(changed))]

    @staticmethod
    def _state(
        group: str, topic: str, index: int, part: SharePartition,
        runs: Iterable[StateRun], *, replace: bool = False,
    ) -> PartitionState:
        return PartitionState(
            group, topic, index, part.start, part.end,
            tuple(StoredRun(r.first, r.last, int(r.state), r.delivery_count) for r in runs),
            replace=replace,
        )
