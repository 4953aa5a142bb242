# -*- test-case-name: tests.kafka.server.test_fetch_sessions -*-
"""Incremental fetch sessions (KIP-227): :class:`FetchSessionCache` and the rules a Fetch
request's session ID and epoch are judged by (:meth:`FetchSessionCache.open`).

A consumer of many partitions sends them all once (a *full* fetch, epoch 0); the broker
keeps them in a session and answers with its ID. Later requests (*incremental*, epoch 1,
2, ...) name only the partitions whose fetch position changed, and forget those the
client dropped; the answer names only the partitions with something to say: records, a
moved high watermark, last stable offset or log start offset, or an error. So neither
side sends thousands of unchanged partitions on every poll.

The rules, as a Kafka broker keeps them:

- Epoch 0 (INITIAL) is a full fetch that asks for a new session; a session ID in it is
  closed first. Epoch -1 (FINAL, and every request before version 7) is a full fetch
  without a session, closing the one named.
- An incremental fetch names a session: one the cache does not hold is
  FETCH_SESSION_ID_NOT_FOUND; an epoch other than the one the session expects is
  INVALID_FETCH_SESSION_EPOCH; a session opened with topic IDs (version 13+) continued
  by a request without them, or the other way round, is FETCH_SESSION_TOPIC_ID_ERROR.
  Each of those answers carries no partitions and session ID 0; the client starts over
  with a full fetch. A request that empties its session closes it (session ID 0).
- The cache holds at most ``slots`` sessions (Kafka's
  ``max.incremental.fetch.session.cache.slots``, 1000). When it is full a new session
  may take the place of one that was not used for :data:`EVICTION_MS` (the least
  recently used first); failing that, of the least valuable session old enough to be
  evicted (older than :data:`EVICTION_MS`): an unprivileged one before a privileged one
  (a follower's), then the one with fewer partitions. A new session that is worth less
  than every evictable one is not created: its full fetch is answered with session ID 0
  and the client goes on with full fetches.

Pure state, with an injected millisecond clock and random source: no I/O, no Twisted. The
Fetch handler (:mod:`brokerd.kafka.server.handlers.fetch`) reads the logs.
"""

from __future__ import annotations

import enum
import random
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

import attrs

from brokerd.kafka.errors import ErrorCode

__all__ = [
    "DEFAULT_SESSION_SLOTS",
    "EVICTION_MS",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "MAX_CACHED_PARTITIONS",
    "CachedPartition",
    "FetchContext",
    "FetchSession",
    "FetchSessionCache",
    "Kind",
    "SessionKey",
    "SessionWatch",
    "Update",
    "WantedPartition",
    "next_epoch",
]

#: The session ID of "no session".
INVALID_SESSION_ID = 0
#: The epoch of a full fetch that asks for a new session.
INITIAL_EPOCH = 0
#: The epoch of a full fetch without a session (and of every request before version 7).
FINAL_EPOCH = -1
#: Kafka's default of ``max.incremental.fetch.session.cache.slots``.
DEFAULT_SESSION_SLOTS = 1000
#: How long a session must be unused before any new session may take its place, and
#: how old it must be before a larger one may (Kafka's fixed 120 s).
EVICTION_MS = 120_000
#: Most partitions all sessions together hold (about 600 bytes each, watch included:
#: ~300 MiB). A full fetch that would pass it opens no session; an incremental one that
#: adds partitions past it closes its session and is answered as a full fetch without one
#: (session ID 0: the client goes back to full fetches). Kafka bounds only the sessions.
MAX_CACHED_PARTITIONS = 500_000
#: Largest session ID (a positive int32).
_MAX_SESSION_ID = 0x7FFFFFFF

#: A partition of a session: ``(topic, partition)``, the topic by ID from version 13
#: (a UUID), by name before.
SessionKey = tuple[uuid.UUID | str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: a session's epochs run 1, 2, ... and wrap to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_SESSION_ID else epoch + 1


@attrs.frozen
class WantedPartition:
    """One partition as a request names it. ``topic`` is the name ("" for a topic ID no
    topic has); ``topic_id`` is the ID from version 13 (the zero UUID before)."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    log_start_offset: int = -1

    def key(self, by_id: bool) -> SessionKey:
        return (self.topic_id if by_id else self.topic, self.partition)


@attrs.define(slots=True, eq=False)
class CachedPartition:
    """A partition of a session: where the client reads from, and what the broker last
    told it (so an incremental answer names the partition only when that changed).

    ``high_watermark`` -1 means "not told yet, or last told an error": the partition is
    named again in the next answer whatever it holds."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    log_start_offset: int = -1
    high_watermark: int = -1
    last_stable_offset: int = -1
    broker_log_start_offset: int = -1
    #: Answer order within the session: lower first (:meth:`FetchSession.to_end`).
    order: int = 0

    def wanted(self) -> WantedPartition:
        return WantedPartition(
            self.topic, self.topic_id, self.partition, self.fetch_offset, self.max_bytes,
            self.log_start_offset,
        )

    def update(self, w: WantedPartition) -> None:
        """The client's new position and limits (it names a partition whose position
        moved); what the broker told it stays."""
        self.topic = w.topic
        self.fetch_offset = w.fetch_offset
        self.max_bytes = w.max_bytes
        self.log_start_offset = w.log_start_offset

    def unchanged(self, high_watermark: int, last_stable_offset: int, log_start: int) -> bool:
        """Whether offsets the broker has now are what it last told the client."""
        return (
            self.high_watermark == high_watermark
            and self.last_stable_offset == last_stable_offset
            and self.broker_log_start_offset == log_start
            and high_watermark >= 0
        )

    def answered(
        self,
        *,
        error: bool,
        has_records: bool,
        high_watermark: int,
        last_stable_offset: int,
        log_start: int,
    ) -> bool:
        """Record what an answer tells the client; True when the partition must be in
        an incremental answer (records, an error, or an offset the client has not
        seen). An error forgets the told offsets, so the partition is named again
        once the error is gone."""
        if error:
            self.high_watermark = -1
            return True
        if not has_records and self.unchanged(high_watermark, last_stable_offset, log_start):
            return False
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.broker_log_start_offset = log_start
        return True


class SessionWatch(Protocol):
    """What the Fetch handler attaches to a session (its standing watch on the partitions'
    appends), told of the partitions that join and leave. Implemented by
    :class:`~brokerd.kafka.server.handlers.fetch_watch.AppendsWatch`; a Protocol because
    ``server/`` sits below ``server/handlers/``."""

    def add(self, key: SessionKey, partition: CachedPartition) -> None: ...
    def remove(self, partition: CachedPartition) -> None: ...
    def close(self) -> None: ...


@attrs.frozen
class Update:
    """What an incremental request changed in its session."""

    added: tuple[CachedPartition, ...]
    updated: int
    removed: tuple[CachedPartition, ...]


@attrs.define(eq=False)
class FetchSession:
    """One client's session: its partitions in answer order (a partition that returned
    records moves to the end, so a full answer does not always favour the same ones),
    the epoch its next request must carry, and its use times.

    ``pending`` (kept by the Fetch handler) holds the partitions that must be read
    again whatever is appended: records left past the client's position, or an error;
    ``scanned_ms`` is when every partition's offsets were last looked at."""

    id: int
    privileged: bool
    uses_topic_ids: bool
    created_ms: int
    last_used_ms: int
    epoch: int
    partitions: OrderedDict[SessionKey, CachedPartition] = attrs.field(factory=OrderedDict)
    pending: set[SessionKey] = attrs.field(factory=set)
    scanned_ms: int = 0
    watch: SessionWatch | None = None
    _next_order: int = 0

    @property
    def size(self) -> int:
        return len(self.partitions)

    def add(self, key: SessionKey, partition: CachedPartition) -> None:
        partition.order = self._next_order
        self._next_order += 1
        self.partitions[key] = partition
        if self.watch is not None:
            self.watch.add(key, partition)

    def update(self, wanted: Iterable[WantedPartition], forgotten: Iterable[SessionKey]) -> Update:
        """Apply an incremental request: the partitions it adds, moves and forgets."""
        added: list[CachedPartition] = []
        removed: list[CachedPartition] = []
        updated = 0
        by_id = self.uses_topic_ids
        for w in wanted:
            key = w.key(by_id)
            cached = self.partitions.get(key)
            if cached is None:
                cached = CachedPartition(
                    w.topic, w.topic_id, w.partition, w.fetch_offset, w.max_bytes,
                    w.log_start_offset,
                )
                self.add(key, cached)
                added.append(cached)
            else:
                cached.update(w)
                updated += 1
        for key in forgotten:
            gone = self.partitions.pop(key, None)
            if gone is not None:
                self.pending.discard(key)
                removed.append(gone)
                if self.watch is not None:
                    self.watch.remove(gone)
        return Update(tuple(added), updated, tuple(removed))

    def to_end(self, key: SessionKey) -> None:
        """Answer ``key`` last from now on (it just returned records)."""
        self.partitions.move_to_end(key)
        self.partitions[key].order = self._next_order
        self._next_order += 1

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
            self.watch = None


class Kind(enum.Enum):
    """How a Fetch request is served (:meth:`FetchSessionCache.open`)."""

    #: A full fetch without a session (epoch -1, or any request before version 7).
    SESSIONLESS = "sessionless"
    #: A full fetch that asks for a new session (epoch 0): created after it is read.
    FULL = "full"
    #: An incremental fetch in an open session.
    INCREMENTAL = "incremental"
    #: A session error: answered with ``error`` alone.
    ERROR = "error"


@attrs.frozen
class FetchContext:
    """How to serve one Fetch: ``kind``, the session of an incremental fetch, the error
    of a refused one."""

    kind: Kind
    session: FetchSession | None = None
    error: ErrorCode | None = None


_SESSIONLESS = FetchContext(Kind.SESSIONLESS)
_FULL = FetchContext(Kind.FULL)


class FetchSessionCache:
    """The broker's fetch sessions, at most ``slots`` of them (see the module docstring
    for the eviction rules).

    :param slots: Kafka's ``max.incremental.fetch.session.cache.slots``; 0 turns
        sessions off (every full fetch is answered with session ID 0).
    :param now_ms: the clock, in milliseconds.
    :param eviction_ms: see :data:`EVICTION_MS`.
    :param rng: picks session IDs (a seeded one in tests).
    :param max_partitions: see :data:`MAX_CACHED_PARTITIONS`.
    """

    def __init__(
        self,
        slots: int = DEFAULT_SESSION_SLOTS,
        *,
        now_ms: Callable[[], int],
        eviction_ms: int = EVICTION_MS,
        rng: random.Random | None = None,
        max_partitions: int = MAX_CACHED_PARTITIONS,
    ) -> None:
        if slots < 0:
            raise ValueError(f"fetch session slots must be at least 0, not {slots}")
        self.slots = slots
        self.max_partitions = max_partitions
        self._now_ms = now_ms
        self._eviction_ms = eviction_ms
        self._rng = rng if rng is not None else random.Random()
        # By last use, least recent first: the stale session to evict is the first.
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        #: Sessions created, sessions evicted to make room, and incremental fetches
        #: served (for ``/metrics``).
        self.created = 0
        self.evicted = 0
        self.incremental = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[FetchSession]:
        return iter(self._sessions.values())

    @property
    def partitions(self) -> int:
        """Partitions held across every session (the cache's memory is about this)."""
        return sum(s.size for s in self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def open(
        self,
        session_id: int,
        epoch: int,
        *,
        uses_topic_ids: bool,
        wanted: Sequence[WantedPartition] = (),
        forgotten: Sequence[SessionKey] = (),
    ) -> FetchContext:
        """Judge a request's session ID and epoch (the module docstring's rules). An
        incremental fetch updates its session with ``wanted`` and ``forgotten`` and
        moves it to the next epoch; a full one closes the session it names."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            return _FULL if epoch == INITIAL_EPOCH and self.slots > 0 else _SESSIONLESS
        error = self.refusal(session_id, epoch, uses_topic_ids=uses_topic_ids)
        if error is not None:
            return FetchContext(Kind.ERROR, error=error)
        session = self._sessions[session_id]
        update = session.update(wanted, forgotten)
        if not session.partitions or (
            update.added and self.partitions > self.max_partitions
        ):
            # Nothing left to fetch (or too much to hold): the session ends, the
            # answer is sessionless.
            self.remove(session_id)
            return _SESSIONLESS
        self._touch(session)
        session.epoch = next_epoch(session.epoch)
        self.incremental += 1
        return FetchContext(Kind.INCREMENTAL, session=session)

    def refusal(self, session_id: int, epoch: int, *, uses_topic_ids: bool) -> ErrorCode | None:
        """The session error an incremental fetch gets, or None (changes nothing)."""
        session = self._sessions.get(session_id)
        if session is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if session.epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        if session.uses_topic_ids != uses_topic_ids:
            return ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        return None

    def create(
        self,
        partitions: Iterable[CachedPartition],
        *,
        privileged: bool,
        uses_topic_ids: bool,
        size: int,
        watch: SessionWatch | None = None,
    ) -> int:
        """A new session of ``partitions`` (``size`` of them) after a full fetch, if
        there is room or a session may be evicted for it; its ID, else
        :data:`INVALID_SESSION_ID`. ``watch`` is told of its partitions."""
        now = self._now_ms()
        if self.slots <= 0:
            return INVALID_SESSION_ID
        if self.partitions + size > self.max_partitions:
            return INVALID_SESSION_ID
        if len(self._sessions) >= self.slots and not self._evict_for(privileged, size, now):
            return INVALID_SESSION_ID
        session = FetchSession(
            self._new_id(), privileged, uses_topic_ids, now, now, next_epoch(INITIAL_EPOCH),
            scanned_ms=now, watch=watch,
        )
        by_id = uses_topic_ids
        for p in partitions:
            session.add((p.topic_id if by_id else p.topic, p.partition), p)
        self._sessions[session.id] = session
        self.created += 1
        return session.id

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()
        return session

    def _touch(self, session: FetchSession) -> None:
        session.last_used_ms = self._now_ms()
        self._sessions.move_to_end(session.id)

    def _evict_for(self, privileged: bool, size: int, now: int) -> bool:
        """Make room for a new session (``privileged``, of ``size`` partitions): evict
        the least recently used session if it is stale, else the least valuable one
        old enough to be evicted, if it is worth less than the new one."""
        oldest = next(iter(self._sessions.values()))
        if now - oldest.last_used_ms > self._eviction_ms:
            self._evict(oldest)
            return True
        victim: FetchSession | None = None
        for s in self._sessions.values():
            old_enough = now - s.created_ms > self._eviction_ms
            # A privileged session is evictable by an unprivileged one only once old;
            # an unprivileged one by a privileged one at any time.
            if not (old_enough or (privileged and not s.privileged)):
                continue
            if victim is None or _worth(s) < _worth(victim):
                victim = s
        if victim is None or (privileged, size, 0) < _worth(victim):
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self._sessions[session.id]
        session.close()
        self.evicted += 1

    def _new_id(self) -> int:
        while True:
            sid = self._rng.randint(1, _MAX_SESSION_ID)
            if sid not in self._sessions:
                return sid


def _worth(s: FetchSession) -> tuple[bool, int, int]:
    """How much a session is worth keeping: privileged first, then larger; the ID only
    breaks ties (Kafka's eviction key)."""
    return (s.privileged, s.size, s.id)
