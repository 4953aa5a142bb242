"""Typed views of what the core uses from the storage layer and from the reactor.

Twisted declares the reactor through zope interfaces, whose methods lack ``self`` and so
cannot be called through the interface type under mypy; storage is duck-typed so that
tests may pass fakes. These ``typing.Protocol`` classes state exactly the attributes and
methods the core calls: :class:`~brokerd.storage.logdir.log_directory.LogDirectory` and
:class:`~brokerd.storage.log.partition_log.PartitionLog` satisfy :class:`LogStore` and
:class:`PartitionStore`; a reactor satisfies :class:`CoreReactor` (the time and timers
it adds to are typed once, in :mod:`brokerd.clock`).

Only declarations here, no behaviour.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, ParamSpec, Protocol, TypeVar, overload

from twisted.internet.defer import Deferred

from brokerd.clock import Clock
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.prepared_append import PreparedBatches
from brokerd.storage.log.producer_state import (
    ActiveProducer,
    ProducerStateManager,
    ReplaySource,
    SnapshotEntry,
)
from brokerd.storage.types import AppendInfo, LogRead, ReadSpec, TopicInfo

P = ParamSpec("P")
T = TypeVar("T")


class ThreadReactor(Protocol):
    """``IReactorFromThreads``: what a pool's worker uses to hand a result back."""

    def callFromThread(
        self, callable: Callable[..., object], *args: object, **kw: object
    ) -> None: ...


class Runner(Protocol):
    """Runs a blocking call off the reactor thread: ``run(f, *args) -> Deferred``."""

    def __call__(
        self, f: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> Deferred[T]: ...


class PartitionStore(ReplaySource, Protocol):
    """One partition's log (:class:`brokerd.storage.log.partition_log.PartitionLog`): what the
    producer-state replay reads of it, and more.

    Writer methods run in the write pool, one job per partition at a time; readers in
    the read pool; the offsets are read in the reactor thread.
    """

    @property
    def high_watermark(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def config(self) -> LogConfig: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def segment_bases(self) -> tuple[int, ...]: ...

    @property
    def producers(self) -> ProducerStateManager: ...

    def append_prepared(self, prepared: PreparedBatches, *, now_ms: int) -> AppendInfo: ...
    def append_values(
        self, values: Sequence[bytes | None], *, timestamp_ms: int
    ) -> AppendInfo: ...
    def flush(self) -> None: ...
    def publish(self) -> int: ...
    def enforce_retention(self, now: float | None = None) -> int: ...
    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int,
        timestamp_ms: int,
    ) -> AppendInfo: ...
    def producer_snapshot(
        self,
    ) -> tuple[int, dict[int, SnapshotEntry], tuple[int, dict[int, int]]]: ...
    def describe_producers(self) -> list[tuple[ActiveProducer, int]]: ...
    @overload
    def read(
        self, offset: int, max_bytes: int, spec: ReadSpec, *, memory_only: Literal[False] = ...
    ) -> LogRead: ...
    @overload
    def read(
        self, offset: int, max_bytes: int, spec: ReadSpec, *, memory_only: bool
    ) -> LogRead | None: ...
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...
    def max_timestamp_offset(self) -> tuple[int, int] | None: ...


class LogStore(Protocol):
    """The data directory (:class:`brokerd.storage.logdir.log_directory.LogDirectory`); its blocking
    methods run in the write pool."""

    @property
    def auto_create(self) -> bool: ...
    @property
    def default_config(self) -> LogConfig: ...

    def topics(self) -> dict[str, TopicInfo]: ...
    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...
    def get(self, topic: str, partition: int, *, create: bool = False) -> PartitionStore: ...
    def logs(self) -> Mapping[tuple[str, int], PartitionStore]: ...
    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo: ...
    def alter_topic_configs(
        self,
        name: str,
        update: Callable[[Mapping[str, str]], Mapping[str, str | None]],
        *,
        validate_only: bool = False,
    ) -> TopicInfo: ...
    def delete_topic(self, name: str) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def offline(self) -> Mapping[tuple[str, int], str]: ...
    def create_partitions(self, name: str, total: int) -> TopicInfo: ...
    def delete_records(self, topic: str, partition: int, offset: int) -> int: ...
    def checkpoint(self) -> None: ...
    def retry_offline(self, now: float | None = None) -> int: ...
    def close(self) -> None: ...


class CoreReactor(Clock, ThreadReactor, Protocol):
    """What the core needs of the reactor: time, timers and handing results back from
    its pools' threads."""
