# -*- test-case-name: tests.web.test_console_history -*-
"""The console's history: a service that samples end offsets, committed offsets and lag at
a fixed interval, and the rates and series derived from those samples.

Memory only, reactor thread only; a sample is a few dictionaries taken from the
:class:`~brokerd.operator.inspect.Inspector` (which never blocks). What this module does not
do: render anything (see :mod:`brokerd.web.console_pages`) or keep history across
restarts: after a restart rates start again from nothing.

Rates are differences of sums between samples divided by the time between them. A sum
that went down (a topic deleted and created again, a group's offsets reset backwards) gives
no negative rate: that interval counts as zero.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, cast

import attrs
from twisted.application import service
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from brokerd.clock import Seconds
from brokerd.operator.views import GroupView, TopicView

#: Seconds between two samples of the console's history, and how many are kept
#: (120 x 5 s: the last ten minutes).
SAMPLE_SECONDS = 5.0
HISTORY_SAMPLES = 120
#: The rates shown as "now" are averaged over this much of the latest history, so one
#: late sample does not make the figure jump.
RATE_WINDOW_SECONDS = 60.0

_log = Logger()


class ConsoleSource(Protocol):
    """What the console reads of the broker (:class:`brokerd.operator.inspect.Inspector` is
    one; tests pass fakes)."""

    @property
    def has_groups(self) -> bool: ...
    def topics(self) -> list[TopicView]: ...
    def topic(self, name: str) -> TopicView | None: ...
    def offline_partitions(self) -> dict[tuple[str, int], str]: ...
    def groups(self) -> list[GroupView]: ...
    def group(self, group_id: str) -> GroupView | None: ...


def _frozen(value: Mapping[str, int]) -> Mapping[str, int]:
    return dict(value)


def _frozen_nested(value: Mapping[str, Mapping[str, int]]) -> Mapping[str, Mapping[str, int]]:
    return {key: dict(inner) for key, inner in value.items()}


@attrs.frozen
class Sample:
    """What the sampler saw at ``time`` (the clock's seconds)."""

    time: float
    #: Per topic: the sum of its partitions' high watermarks.
    topic_end_offsets: Mapping[str, int] = attrs.field(converter=_frozen, factory=dict)
    #: Per group: its total lag.
    group_lag: Mapping[str, int] = attrs.field(converter=_frozen, factory=dict)
    #: Per group: the sum of its committed offsets (what a consume rate is derived from).
    group_committed: Mapping[str, int] = attrs.field(converter=_frozen, factory=dict)
    #: Per group, per topic: the lag of the group's partitions of that topic.
    group_topic_lag: Mapping[str, Mapping[str, int]] = attrs.field(
        converter=_frozen_nested, factory=dict
    )
    #: Per group, per topic: the sum of the group's committed offsets of that topic.
    group_topic_committed: Mapping[str, Mapping[str, int]] = attrs.field(
        converter=_frozen_nested, factory=dict
    )


def take_sample(inspector: ConsoleSource, now: float) -> Sample:
    """One sample of every topic and group, now."""
    group_lag: dict[str, int] = {}
    committed: dict[str, int] = {}
    topic_lag: dict[str, dict[str, int]] = {}
    topic_committed: dict[str, dict[str, int]] = {}
    for group in inspector.groups():
        group_lag[group.group_id] = group.total_lag
        committed[group.group_id] = sum(o.committed_offset for o in group.offsets)
        per_topic: dict[str, int] = {}
        committed_per_topic: dict[str, int] = {}
        for offset in group.offsets:
            if offset.lag is not None:
                per_topic[offset.topic] = per_topic.get(offset.topic, 0) + offset.lag
            committed_per_topic[offset.topic] = (
                committed_per_topic.get(offset.topic, 0) + offset.committed_offset
            )
        topic_lag[group.group_id] = per_topic
        topic_committed[group.group_id] = committed_per_topic
    return Sample(
        now,
        {t.name: t.end_offsets for t in inspector.topics()},
        group_lag,
        committed,
        topic_lag,
        topic_committed,
    )


class ConsoleSampler(service.Service):
    """Samples every topic's end offsets and every group's committed offsets and lag at a
    fixed interval while the HTTP endpoint runs, so the console can show rates and lag
    over the last minutes. Keeps :data:`HISTORY_SAMPLES` samples; memory only."""

    def __init__(self, inspector: ConsoleSource, *, clock: IReactorTime) -> None:
        self._inspector = inspector
        self._loop = LoopingCall(self.sample)
        self._loop.clock = clock
        self._clock: Seconds = cast(Seconds, clock)
        #: Oldest first.
        self.samples: deque[Sample] = deque(maxlen=HISTORY_SAMPLES)

    def sample(self) -> None:
        # A failure is logged and the loop goes on: a LoopingCall whose call raises
        # stops for good, and the console would silently lose its history.
        try:
            self.samples.append(take_sample(self._inspector, self._clock.seconds()))
        except Exception:
            _log.failure("console history sample failed")

    def startService(self) -> None:
        super().startService()
        self._loop.start(SAMPLE_SECONDS, now=True)

    def stopService(self) -> None:
        super().stopService()
        if self._loop.running:
            self._loop.stop()


#: Picks one figure of a sample (None: the sample does not know that topic or group).
Figure = Callable[[Sample], "int | None"]


def topic_end(topic: str) -> Figure:
    return lambda s: s.topic_end_offsets.get(topic)


def group_committed(group_id: str) -> Figure:
    return lambda s: s.group_committed.get(group_id)


def group_lag(group_id: str) -> Figure:
    return lambda s: s.group_lag.get(group_id)


def group_topic_lag(group_id: str, topic: str) -> Figure:
    return lambda s: s.group_topic_lag.get(group_id, {}).get(topic)


def rate(samples: Sequence[Sample], figure: Figure) -> float | None:
    """Units per second of ``figure`` over the last :data:`RATE_WINDOW_SECONDS` of
    ``samples`` (fewer if the history is shorter), or None without two samples that
    know the figure."""
    known = [(s.time, v) for s in samples if (v := figure(s)) is not None]
    if len(known) < 2:
        return None
    end_time = known[-1][0]
    window = [(t, v) for t, v in known if end_time - t <= RATE_WINDOW_SECONDS]
    if len(window) < 2:
        window = known[-2:]
    elapsed = window[-1][0] - window[0][0]
    if elapsed <= 0:
        return None
    increase = sum(max(0, b[1] - a[1]) for a, b in itertools.pairwise(window))
    return increase / elapsed


def rate_series(samples: Sequence[Sample], figure: Figure) -> list[tuple[float, float]]:
    """``(time, units per second since the previous sample)`` for every sample after the
    first that knows the figure."""
    known = [(s.time, v) for s in samples if (v := figure(s)) is not None]
    series: list[tuple[float, float]] = []
    for (t0, v0), (t1, v1) in itertools.pairwise(known):
        if t1 > t0:
            series.append((t1, max(0, v1 - v0) / (t1 - t0)))
    return series


def value_series(samples: Sequence[Sample], figure: Figure) -> list[tuple[float, float]]:
    """``(time, value)`` for every sample that knows the figure."""
    return [(s.time, float(v)) for s in samples if (v := figure(s)) is not None]


__all__ = [
    "HISTORY_SAMPLES",
    "RATE_WINDOW_SECONDS",
    "SAMPLE_SECONDS",
    "ConsoleSampler",
    "ConsoleSource",
    "Figure",
    "Sample",
    "group_committed",
    "group_lag",
    "group_topic_lag",
    "rate",
    "rate_series",
    "take_sample",
    "topic_end",
    "value_series",
]
