# -*- test-case-name: tests.kafka.listener.test_protocol -*-
"""The Kafka Fetch API: :class:`FetchHandler`.

It reads every wanted partition within the request's byte limits, each capped by the
broker's ``--fetch-max-bytes`` (Kafka's ``fetch.max.bytes``: a client's ``max_bytes`` and
``partition_max_bytes`` never raise what one answer holds past it; Kafka's KIP-74 rule
still holds: the first partition with data gets at least one whole batch), parks the
request until
MinBytes arrive or MaxWaitMs passes (:func:`~brokerd.core.api.long_poll`), and
answers with the stored batches. read_uncommitted reads up to the high watermark;
read_committed up to the last stable offset, with the aborted transactions of the data
(the core computes both; see ``docs/kafka.md``).

On a connection whose transport takes file regions (``conn.state.regions``: a plain
socket, sent with ``os.sendfile``, or TLS, read and encrypted in bounded chunks) the
records are :class:`~brokerd.net.frames.StoredRecords`: stored bytes checked (before, or
by this read, a batch at a time) handed out by reference (a pinned segment span), or
bytes read now, written as a part of their own. Every span is held in the connection's
ledger, and a read the long poll replaces gives its spans back at once
(docs/performance.md). Elsewhere (tests' string transports) the records are bytes, as
read. While the listener's answer budget (``--max-inflight-answer-bytes``) is full, a
fetch waits for room before it reads.

Versions 13+ name topics by topic ID: each is looked up (``topic_by_id``) and read by
its name; an ID no topic has is answered UNKNOWN_TOPIC_ID for each of its partitions,
before any ACL check (an ID reveals nothing the client did not have), and so is a topic
deleted while the fetch waited (the deletion answers a parked fetch at once; its other
partitions are answered as they are).

Fetch sessions (KIP-227): a full fetch with epoch 0 gets every partition it names and,
when the broker's :class:`~brokerd.kafka.server.fetch_sessions.FetchSessionCache` has or
makes room, a session of them (its ID in the answer). An incremental fetch in that
session names only what changed on the client's side and is answered only what changed
on the broker's; and it reads only the partitions that may have news (see
:meth:`FetchHandler._incremental`), so a quiet consumer of thousands of partitions costs
the broker a look at their offsets per poll, not a read of each. The session rules and
errors are the cache's.

It does not parse or build bytes, touch transports or decide request order.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence

import attrs
from twisted.internet import defer
from twisted.logger import Logger

from brokerd.clock import Clock
from brokerd.core.api import CoreApi, CoreTopics, Shortfall, long_poll
from brokerd.errors import TooManyWaiters
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.acl_gate import (
    TOPIC_DENIED,
    Access,
    Gate,
    Rule,
    split_entries,
)
from brokerd.kafka.server.fetch_sessions import (
    DEFAULT_SESSION_SLOTS,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    Kind,
    SessionKey,
    WantedPartition,
)
from brokerd.kafka.server.handler_base import (
    NO_RESPONSE,
    Outcome,
    RequestContext,
    unexpected_code,
)
from brokerd.kafka.server.handler_base import gather as _gather
from brokerd.kafka.server.handlers.fetch_catchup import CatchUp
from brokerd.kafka.server.handlers.fetch_watch import AppendsWatch
from brokerd.kafka.server.internal_topics import InternalTopics
from brokerd.kafka.server.offsets_topic import OffsetsTopicLog
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.messages.fetch import FETCH, FETCH_TOPIC_IDS_FROM
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import Request
from brokerd.net.answer_budget import AnswerBudget
from brokerd.net.frames import cut_records, records_size, release_records
from brokerd.net.sendfile import RegionLedger
from brokerd.security.acl import Operation
from brokerd.storage.types import (
    Delivery,
    Isolation,
    LogRead,
    ReadSpec,
    Records,
    StoredRecords,
    TopicInfo,
)

__all__ = [
    "DEFAULT_FETCH_MAX_BYTES",
    "FetchHandler",
    "fetch_rule",
    "is_full_fetch",
]

#: Default ``--fetch-max-bytes``: Kafka's broker default of ``fetch.max.bytes`` (55 MiB).
DEFAULT_FETCH_MAX_BYTES = 57_671_680
#: Records read into memory at least this long are written as a part of their own
#: (``transport.writeSequence``), not joined into the frame.
_OWN_PART_RECORDS = 16 * 1024
#: The read of a fetch by (read_committed, by reference): a connection whose transport
#: takes file regions gets the bytes checked before by reference.
_SPECS = {
    (committed, by_reference): ReadSpec(
        Isolation.READ_COMMITTED if committed else Isolation.READ_UNCOMMITTED,
        Delivery.REFERENCE if by_reference else Delivery.BYTES,
    )
    for committed in (False, True)
    for by_reference in (False, True)
}
#: Kafka's fetch-session epochs that ask for a full fetch: 0 opens a session, -1 (also
#: the default of versions without sessions) asks for none.
_FULL_FETCH_EPOCHS = (0, -1)
#: How often an incremental fetch looks at the offsets of every partition of its session,
#: not only those appended to (a log start offset moved by retention is news too).
SCAN_INTERVAL_MS = 1000


def is_full_fetch(body: apis.FetchRequest) -> bool:
    """Whether ``body`` is a full fetch (every partition named), not an incremental one
    in a fetch session."""
    return body.session_epoch in _FULL_FETCH_EPOCHS


def _forgotten(body: apis.FetchRequest, by_id: bool) -> list[SessionKey]:
    """The session partitions an incremental request drops."""
    return [
        (t.topic_id if by_id else t.topic, p)
        for t in body.forgotten_topics_data for p in t.partitions
    ]


def _fetch_partition(c: CachedPartition) -> apis.FetchPartition:
    """A session partition as a request would name it."""
    return apis.FetchPartition(
        partition=c.partition, fetch_offset=c.fetch_offset,
        log_start_offset=c.log_start_offset, partition_max_bytes=c.max_bytes,
    )


def _by_id(
    core: CoreTopics, topics: Sequence[apis.FetchTopic], internal: InternalTopics | None
) -> tuple[list[apis.FetchTopic], list[apis.FetchTopic]]:
    """``(known, unknown)``: the topics of a request that names them by ID, the known
    ones with their names filled in, and those whose ID no topic has."""
    known: list[apis.FetchTopic] = []
    unknown: list[apis.FetchTopic] = []
    for t in topics:
        info = _topic_by_id(core, internal, t.topic_id)
        if info is None:
            unknown.append(t)
        else:
            known.append(attrs.evolve(t, topic=info.name))
    return known, unknown


def _topic_by_id(
    core: CoreTopics, internal: InternalTopics | None, topic_id: uuid.UUID
) -> TopicInfo | None:
    """The topic ``topic_id`` names: a core topic, or a readable internal one."""
    info = core.topic_by_id(topic_id)
    if info is None and internal is not None:
        info = internal.by_id(topic_id)
        if info is not None and internal.readable(info.name) is None:
            info = None
    return info


def _topic_error(t: apis.FetchTopic, code: int) -> apis.FetchTopicResponse:
    """Every partition of ``t`` answered ``code``."""
    return apis.FetchTopicResponse(
        topic=t.topic, topic_id=t.topic_id,
        partitions=tuple(_fetch_error(p.partition, code) for p in t.partitions),
    )


class FetchHandler:
    """Answers Fetch requests for one listener (see the module docstring).

    :param core: the broker core; its ``read`` serves connections that take file
        regions by reference, others by value.
    :param clock: for the long-poll deadline.
    :param fetch_max_bytes: the broker's cap of one answer's records (Kafka's
        ``fetch.max.bytes``), applied to the client's ``max_bytes`` and
        ``partition_max_bytes``.
    :param answer_budget: the listener's budget of answer bytes held in memory; a fetch
        waits for room before reading while it is full (None: no budget).
    :param session_slots: most fetch sessions held (Kafka's
        ``max.incremental.fetch.session.cache.slots``; 0: none).
    :param internal_topics: the internal topics presented; the readable ones
        (``__consumer_offsets``) are read from their logs, not the core.
    """

    _log = Logger()

    def __init__(
        self,
        core: CoreApi,
        *,
        clock: Clock,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        answer_budget: AnswerBudget | None = None,
        session_slots: int = DEFAULT_SESSION_SLOTS,
        internal_topics: InternalTopics | None = None,
    ) -> None:
        if fetch_max_bytes <= 0:
            raise ValueError(f"fetch_max_bytes must be positive, not {fetch_max_bytes}")
        self._core = core
        self._internal = internal_topics
        self._clock = clock
        self._fetch_max_bytes = fetch_max_bytes
        self._budget = answer_budget
        # Connections that are reading a backlog: their first empty fetch at the end of
        # the log is answered at once (brokerd/kafka/server/handlers/fetch_catchup.py).
        self._catch_up = CatchUp()
        #: The broker's fetch sessions (one Kafka listener, so one cache).
        self.sessions = FetchSessionCache(
            session_slots, now_ms=lambda: int(clock.seconds() * 1000)
        )

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(
                FETCH, self.fetch,
                fetch_rule(self._core.topic_registry, self.sessions, self._internal),
            ),
        )

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        return unexpected_code(self._log, what, exc)

    def _readable(self, topic: str) -> OffsetsTopicLog | None:
        return None if self._internal is None else self._internal.readable(topic)

    async def fetch(
        self, conn: RequestContext, req: Request[apis.FetchRequest]
    ) -> apis.FetchResponse | Outcome:
        """The Fetch API's handler: a full fetch (which may open a session), or an
        incremental one in a session (:mod:`brokerd.kafka.server.fetch_sessions`)."""
        body = req.body
        by_id = req.api_version >= FETCH_TOPIC_IDS_FROM
        if is_full_fetch(body):
            context = self.sessions.open(
                body.session_id, body.session_epoch, uses_topic_ids=by_id
            )
        else:
            context = self.sessions.open(
                body.session_id, body.session_epoch, uses_topic_ids=by_id,
                wanted=self._wanted(body, by_id), forgotten=_forgotten(body, by_id),
            )
        if context.kind is Kind.ERROR:
            # Nothing is read: the client starts over with a full fetch.
            return apis.FetchResponse(error_code=context.error or 0, session_id=0)
        if context.session is not None:
            return await self._incremental(conn, body, context.session, by_id)
        return await self._full(conn, req, body, open_session=context.kind is Kind.FULL)

    def _wanted(self, body: apis.FetchRequest, by_id: bool) -> list[WantedPartition]:
        """The partitions an incremental request names (added or moved), their topics'
        names looked up by ID from version 13 ("" for an ID no topic has)."""
        out: list[WantedPartition] = []
        for t in body.topics:
            name = t.topic
            if by_id:
                info = _topic_by_id(self._core.topic_registry, self._internal, t.topic_id)
                name = "" if info is None else info.name
            out.extend(
                WantedPartition(
                    name, t.topic_id, p.partition, p.fetch_offset, p.partition_max_bytes,
                    p.log_start_offset,
                )
                for p in t.partitions
            )
        return out

    async def _full(
        self,
        conn: RequestContext,
        req: Request[apis.FetchRequest],
        body: apis.FetchRequest,
        *,
        open_session: bool,
    ) -> apis.FetchResponse | Outcome:
        """A full fetch: every partition it names is answered; with ``open_session``
        they become a new session if the cache has (or makes) room for it."""
        # The topics named by an ID no topic has (None: the request names them by name).
        unknown: list[apis.FetchTopic] | None = None
        # The topics read (by ID: the known ones, with their names); the request itself
        # is not rebuilt around them (nothing below reads its topics).
        topics: Sequence[apis.FetchTopic] = body.topics
        if req.api_version >= FETCH_TOPIC_IDS_FROM:
            topics, unknown = _by_id(self._core.topic_registry, body.topics, self._internal)
        wanted = [(t.topic, p) for t in topics for p in t.partitions]
        keys = [(topic, p.partition) for topic, p in wanted]
        # Internal topics' logs have no append watch: a wait on them alone runs to
        # MaxWaitMs, and a commit shows at the next poll.
        positions = [
            (topic, p.partition, p.fetch_offset) for topic, p in wanted
            if self._readable(topic) is None
        ]

        read_committed = body.isolation_level == Isolation.READ_COMMITTED
        # On a plain socket, records already checked are sent from the segment files by
        # os.sendfile (docs/performance.md); their regions are tracked per connection.
        ledger = conn.state.regions
        spec = _SPECS[read_committed, ledger is not None]
        last: list[list[apis.FetchPartitionResponse]] = []

        def drop_last() -> None:
            for results in last:
                for r in results:
                    release_records(r.records)
            last.clear()

        async def read() -> list[apis.FetchPartitionResponse]:
            drop_last()  # a read that fell short is replaced by this one
            if self._budget is not None and self._budget.full:
                # Answers already hold the budget: read once some of it is sent.
                await conn.track(self._budget.room())
            results = await self._read_partitions(body, wanted, spec, ledger)
            last.append(results)
            return results

        def short_of(results: list[apis.FetchPartitionResponse]) -> Shortfall | None:
            # Kafka answers at once on any error, or when MinBytes is already there.
            if not wanted or conn.closed or any(r.error_code for r in results):
                return None
            # The bytes actually returned: for read_committed, cut at the last stable
            # offset, so uncommitted data never satisfies MinBytes. A commit marker
            # moves the high watermark, which is what wakes the wait to read again.
            have = sum(records_size(r.records) for r in results)
            if have == 0 and self._catch_up.behind(conn, keys):
                return None  # a backlog read to its end: say so now, not after MaxWaitMs
            seen = {
                (topic, p.partition): r.high_watermark
                for (topic, p), r in zip(wanted, results, strict=True)
            }
            return Shortfall(have, body.min_bytes, seen)

        async def park(short: Shortfall, left_ms: int) -> bool:
            await conn.track(
                self._core.wait_for_data(
                    positions,
                    min_bytes=short.want,
                    max_wait_ms=left_ms,
                    already=short.have,
                    seen=dict(short.seen),
                )
            )
            return not conn.closed

        results = await self._poll(conn, read, short_of, park, body.max_wait_ms, drop_last)
        if results is None:
            return NO_RESPONSE
        self._note_answered(conn, body, [p for _t, p in wanted], keys, results)
        out: list[apis.FetchTopicResponse] = []
        i = 0
        for t in topics:
            n = len(t.partitions)
            parts = results[i : i + n]
            i += n
            if unknown is not None and _topic_by_id(
                self._core.topic_registry, self._internal, t.topic_id
            ) is None:
                # Deleted while the fetch waited: its ID names nothing now, whatever a
                # topic of the same name, created since, holds.
                for r in parts:
                    release_records(r.records)
                out.append(_topic_error(t, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            if read_committed:
                # Kafka sends an (empty) aborted list only to read_committed consumers.
                parts = [_with_aborted(r) for r in parts]
            out.append(apis.FetchTopicResponse(
                topic=t.topic, topic_id=t.topic_id, partitions=tuple(parts)
            ))
        out.extend(_topic_error(t, ErrorCode.UNKNOWN_TOPIC_ID) for t in unknown or ())
        session_id = INVALID_SESSION_ID
        if open_session:
            session_id = self._open_session(body, out, by_id=unknown is not None)
        return apis.FetchResponse(error_code=0, session_id=session_id, responses=tuple(out))

    def _open_session(
        self,
        body: apis.FetchRequest,
        answer: Sequence[apis.FetchTopicResponse],
        *,
        by_id: bool,
    ) -> int:
        """A new session of a full fetch's partitions, told what its answer said."""
        told = {
            (t.topic_id if by_id else t.topic, r.partition_index): r
            for t in answer for r in t.partitions
        }
        cached: list[CachedPartition] = []
        # Read again by the next fetch whatever is appended: an error, or records left
        # past the client's position (a partition the answer's max_bytes cut short).
        pending: list[SessionKey] = []
        read_committed = body.isolation_level == Isolation.READ_COMMITTED
        for t in body.topics:
            name = t.topic
            if by_id:
                info = _topic_by_id(self._core.topic_registry, self._internal, t.topic_id)
                name = "" if info is None else info.name
            for p in t.partitions:
                c = CachedPartition(
                    name, t.topic_id, p.partition, p.fetch_offset, p.partition_max_bytes,
                    p.log_start_offset,
                )
                key = (t.topic_id if by_id else t.topic, p.partition)
                r = told.get(key)
                if r is not None:
                    c.answered(
                        error=bool(r.error_code), has_records=True,
                        high_watermark=r.high_watermark,
                        last_stable_offset=r.last_stable_offset,
                        log_start=r.log_start_offset,
                    )
                    end = r.last_stable_offset if read_committed else r.high_watermark
                    if r.error_code or p.fetch_offset < end:
                        pending.append(key)
                else:
                    pending.append(key)
                cached.append(c)
        session_id = self.sessions.create(
            cached, privileged=body.replica_id >= 0, uses_topic_ids=by_id, size=len(cached),
            watch=AppendsWatch(self._core.waiters, self._clock),
        )
        session = self.sessions.get(session_id)
        if session is not None:
            session.pending.update(pending)
        return session_id

    async def _incremental(
        self, conn: RequestContext, body: apis.FetchRequest, session: FetchSession, by_id: bool
    ) -> apis.FetchResponse | Outcome:
        """An incremental fetch in ``session`` (already updated with the request).

        Only the partitions that may have something to say are looked at and read:
        those the request names, those appended to since the last read (the session's
        :class:`~brokerd.kafka.server.handlers.fetch_watch.AppendsWatch`), and those
        left pending (records past the client's position, or an error). Once every
        :data:`SCAN_INTERVAL_MS` every partition's offsets are looked at as well (a log
        start moved by retention appends nothing). Of those read, the partitions without
        news are left out of the answer, as Kafka leaves them out. The long poll parks
        on the session's watch: no per-partition work while the consumer waits."""
        named = {w.key(by_id) for w in self._wanted(body, by_id)}
        read_committed = body.isolation_level == Isolation.READ_COMMITTED
        ledger = conn.state.regions
        spec = _SPECS[read_committed, ledger is not None]
        last: list[list[apis.FetchPartitionResponse]] = []
        watch = session.watch if isinstance(session.watch, AppendsWatch) else None
        # Per read: the partitions read, in answer order, and the partitions named by a
        # topic ID no topic has now.
        due: list[tuple[SessionKey, CachedPartition]] = []
        gone: list[tuple[SessionKey, CachedPartition]] = []

        def drop_last() -> None:
            for results in last:
                for r in results:
                    release_records(r.records)
            last.clear()

        def candidates() -> list[tuple[SessionKey, CachedPartition]]:
            parts = session.partitions
            now = int(self._clock.seconds() * 1000)
            if watch is None or now - session.scanned_ms >= SCAN_INTERVAL_MS:
                session.scanned_ms = now
                if watch is not None:
                    watch.take_dirty()
                return list(parts.items())
            keys = named | session.pending | watch.take_dirty()
            found = [(k, parts[k]) for k in keys if k in parts]
            found.sort(key=lambda kc: kc[1].order)
            return found

        def select() -> None:
            due.clear()
            gone.clear()
            alive: dict[uuid.UUID, bool] = {}
            open_log = self._core.reads.open_log
            for key, c in candidates():
                if by_id:
                    # The ID still names the topic the session knows by that name
                    # (else it was deleted, whatever was created under its name since).
                    known = alive.get(c.topic_id)
                    if known is None:
                        info = _topic_by_id(self._core.topic_registry, self._internal, c.topic_id)
                        known = alive[c.topic_id] = info is not None and info.name == c.topic
                    if not known:
                        gone.append((key, c))
                        continue
                log = open_log(c.topic, c.partition)
                if log is None or key in named or c.high_watermark < 0:
                    due.append((key, c))
                    continue
                high = log.high_watermark
                lso = log.last_stable_offset
                if (
                    c.fetch_offset < (lso if read_committed else high)
                    or not c.unchanged(high, lso, log.log_start_offset)
                ):
                    due.append((key, c))

        async def read() -> list[apis.FetchPartitionResponse]:
            drop_last()
            if self._budget is not None and self._budget.full:
                await conn.track(self._budget.room())
            select()
            wanted = [(c.topic, _fetch_partition(c)) for _key, c in due]
            results = await self._read_partitions(body, wanted, spec, ledger)
            last.append(results)
            return results

        def short_of(results: list[apis.FetchPartitionResponse]) -> Shortfall | None:
            if conn.closed or gone or watch is None or any(r.error_code for r in results):
                return None
            have = sum(records_size(r.records) for r in results)
            if have == 0 and self._catch_up.behind(
                conn, [(c.topic, c.partition) for _key, c in due]
            ):
                return None
            return Shortfall(have, body.min_bytes, {})

        async def park(short: Shortfall, left_ms: int) -> bool:
            assert watch is not None
            again = await conn.track(watch.park(short.needed, left_ms))
            return again and not conn.closed

        results = await self._poll(conn, read, short_of, park, body.max_wait_ms, drop_last)
        if results is None:
            return NO_RESPONSE
        self._note_answered(
            conn, body, [_fetch_partition(c) for _key, c in due],
            [(c.topic, c.partition) for _key, c in due], results,
        )
        by_topic: dict[uuid.UUID | str, list[apis.FetchPartitionResponse]] = {}
        names: dict[uuid.UUID | str, tuple[str, uuid.UUID]] = {}
        moved: list[SessionKey] = []
        for (key, c), r in zip(due, results, strict=True):
            size = records_size(r.records)
            end = r.last_stable_offset if read_committed else r.high_watermark
            if r.error_code or c.fetch_offset < end:
                session.pending.add(key)  # read it again next time, news or not
            else:
                session.pending.discard(key)
            if not c.answered(
                error=bool(r.error_code), has_records=size > 0,
                high_watermark=r.high_watermark, last_stable_offset=r.last_stable_offset,
                log_start=r.log_start_offset,
            ):
                release_records(r.records)
                continue
            if size > 0:
                moved.append(key)
            if read_committed:
                r = _with_aborted(r)
            by_topic.setdefault(key[0], []).append(r)
            names[key[0]] = (c.topic, c.topic_id)
        for key, c in gone:
            session.pending.add(key)
            c.answered(error=True, has_records=False, high_watermark=-1,
                       last_stable_offset=-1, log_start=-1)
            by_topic.setdefault(key[0], []).append(
                _fetch_error(c.partition, ErrorCode.UNKNOWN_TOPIC_ID)
            )
            names[key[0]] = (c.topic, c.topic_id)
        for key in moved:
            session.to_end(key)  # answered last next time: the others' turn first
        out = tuple(
            apis.FetchTopicResponse(
                topic=names[ref][0], topic_id=names[ref][1], partitions=tuple(parts)
            )
            for ref, parts in by_topic.items()
        )
        return apis.FetchResponse(error_code=0, session_id=session.id, responses=out)

    async def _poll(
        self,
        conn: RequestContext,
        read: Callable[[], Awaitable[list[apis.FetchPartitionResponse]]],
        short_of: Callable[[list[apis.FetchPartitionResponse]], Shortfall | None],
        park: Callable[[Shortfall, int], Awaitable[bool]],
        max_wait_ms: int,
        drop_last: Callable[[], None],
    ) -> list[apis.FetchPartitionResponse] | None:
        """Read, parking until MinBytes arrive or MaxWaitMs passes; None when the
        connection went away (nobody to answer)."""
        # The request parks until enough arrives or MaxWaitMs passes; the core wakes it
        # early when an append landed after the read (the high watermarks in ``seen``),
        # and the loop reads again within the original deadline.
        try:
            results = await long_poll(
                read, short_of, park, clock=self._clock, max_wait_ms=max_wait_ms
            )
        except defer.CancelledError:
            drop_last()
            return None
        except TooManyWaiters:
            results = await read()  # answer now with what there is: stay responsive
        except Exception as e:
            self._unexpected("fetch wait", e)
            results = await read()
        if conn.closed:
            drop_last()
            return None
        return results

    def _note_answered(
        self,
        conn: RequestContext,
        body: apis.FetchRequest,
        partitions: Sequence[apis.FetchPartition],
        keys: Sequence[tuple[str, int]],
        results: Sequence[apis.FetchPartitionResponse],
    ) -> None:
        """Tell the catch-up marks what each partition was answered."""
        for p, key, r in zip(partitions, keys, results, strict=True):
            if not r.error_code:
                self._catch_up.answered(
                    conn, key, records_size(r.records),
                    min(p.partition_max_bytes, body.max_bytes, self._fetch_max_bytes),
                )

    async def _read_partitions(
        self,
        body: apis.FetchRequest,
        wanted: list[tuple[str, apis.FetchPartition]],
        spec: ReadSpec,
        ledger: RegionLedger | None = None,
    ) -> list[apis.FetchPartitionResponse]:
        """Read every wanted partition within the byte limits, in request order.

        The first partition that has data gets at least one whole batch whatever the
        limits (Kafka's KIP-74 rule, so a consumer always progresses); after it, data is
        cut at the response's remaining ``max_bytes`` (a partial trailing batch is fine
        for clients). Reads run concurrently in windows whose partition limits fit in
        the remaining budget, so at most about ``max_bytes`` is read at a time. Once the
        budget is spent, the remaining partitions report offsets only.

        With a ``ledger`` (a plain socket connection) records come as
        :class:`~brokerd.net.frames.StoredRecords`: file regions held in the ledger
        (sent by ``os.sendfile``) or bytes sent as their own part.
        """
        budget = max(min(body.max_bytes, self._fetch_max_bytes), 0)
        out: list[apis.FetchPartitionResponse | None] = [None] * len(wanted)
        got_any = False
        i = 0
        while i < len(wanted) and (budget > 0 or not got_any):
            window: list[tuple[int, int]] = []
            planned = 0
            while i < len(wanted):
                limit = max(min(wanted[i][1].partition_max_bytes, budget), 1)
                if window and planned + limit > budget:
                    break
                window.append((i, limit))
                planned += limit
                i += 1
            if len(window) == 1:
                # The common one-partition fetch: no gathering machinery per request.
                j, limit = window[0]
                reads = [await self._read_one(*wanted[j], limit, spec, ledger)]
            else:
                reads = await _gather(
                    [
                        self._read_one(*wanted[j], limit, spec, ledger)
                        for j, limit in window
                    ]
                )
            for (j, _limit), result in zip(window, reads, strict=True):
                data: Records = result.records if result.records is not None else b""
                size = records_size(data)
                if got_any and size > budget:
                    data = cut_records(data, max(budget, 0))
                    size = records_size(data)
                    result = _with_records(result, data)
                if size:
                    got_any = True
                budget -= size
                out[j] = result
        rest = [j for j in range(len(wanted)) if out[j] is None]
        if rest:
            heads = await _gather([self._offsets_only(*wanted[j]) for j in rest])
            for j, head in zip(rest, heads, strict=True):
                out[j] = head
        return [r for r in out if r is not None]

    async def _read_one(
        self,
        topic: str,
        p: apis.FetchPartition,
        max_bytes: int,
        spec: ReadSpec,
        ledger: RegionLedger | None = None,
    ) -> apis.FetchPartitionResponse:
        """One partition's read; with a ``ledger`` its records are
        :class:`~brokerd.net.frames.StoredRecords` (a held file region, or bytes)."""
        log = self._readable(topic)
        if log is not None:
            return _internal_read(log, p, max_bytes)
        try:
            # Most reads of a consumer that keeps up, or reads a backlog in order, are
            # answered at once, without a Deferred.
            answer = self._core.reads.read(topic, p.partition, p.fetch_offset, max_bytes, spec)
            result = answer if isinstance(answer, LogRead) else await answer
        except Exception as e:
            return _fetch_error(p.partition, self._unexpected("fetch", e))
        records = result.records
        if ledger is not None:
            if isinstance(records, StoredRecords):
                payload = records.payload
                if not isinstance(payload, bytes):
                    ledger.hold(payload)
            elif len(records) >= _OWN_PART_RECORDS:
                records = StoredRecords(records)
        return _answer(p, result, records, spec.committed)

    async def _offsets_only(
        self, topic: str, p: apis.FetchPartition
    ) -> apis.FetchPartitionResponse:
        log = self._readable(topic)
        if log is not None:
            return _internal_read(log, p, 0, offsets_only=True)
        try:
            at = await self._core.reads.offsets(topic, p.partition)
        except Exception as e:
            return _fetch_error(p.partition, self._unexpected("fetch", e))
        # Valid up to the high watermark whatever the isolation level: an offset in
        # [LSO, HW] just has nothing committed to read yet.
        if not at.log_start_offset <= p.fetch_offset <= at.high_watermark:
            return _fetch_error(p.partition, ErrorCode.OFFSET_OUT_OF_RANGE)
        return apis.FetchPartitionResponse(
            partition_index=p.partition,
            high_watermark=at.high_watermark,
            last_stable_offset=at.last_stable_offset,
            log_start_offset=at.log_start_offset,
            records=b"",
        )


def _internal_read(
    log: OffsetsTopicLog, p: apis.FetchPartition, max_bytes: int, *, offsets_only: bool = False
) -> apis.FetchPartitionResponse:
    """One partition of a readable internal topic: its log holds no transactions, so
    its last stable offset is its high watermark."""
    bounds = log.bounds(p.partition)
    if bounds is None:
        return _fetch_error(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    start, end = bounds
    data = b"" if offsets_only else log.read(p.partition, p.fetch_offset, max_bytes)
    if data is None or not start <= p.fetch_offset <= end:
        return _fetch_error(p.partition, ErrorCode.OFFSET_OUT_OF_RANGE)
    return apis.FetchPartitionResponse(
        partition_index=p.partition,
        high_watermark=end,
        last_stable_offset=end,
        log_start_offset=start,
        preferred_read_replica=-1,
        records=data,
    )


def _fetch_error(partition: int, code: int) -> apis.FetchPartitionResponse:
    return apis.FetchPartitionResponse(
        partition_index=partition, error_code=code, records=b""
    )


def _answer(
    p: apis.FetchPartition, result: LogRead, records: Records, read_committed: bool
) -> apis.FetchPartitionResponse:
    """One partition's answer to a read (by value or by reference: ``records``)."""
    return apis.FetchPartitionResponse(
        partition_index=p.partition,
        error_code=0,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        aborted_transactions=_aborted(result) if read_committed else None,
        preferred_read_replica=-1,
        records=records,
    )


def _aborted(result: LogRead) -> tuple[apis.AbortedTransaction, ...]:
    """Kafka sends this list to read_committed consumers only (null to the others); they
    skip each listed producer's records from its first offset to its ABORT marker."""
    return tuple(
        apis.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
        for a in result.aborted
    )


def _with_records(r: apis.FetchPartitionResponse, data: Records) -> apis.FetchPartitionResponse:
    return attrs.evolve(r, records=data)


def _with_aborted(r: apis.FetchPartitionResponse) -> apis.FetchPartitionResponse:
    if r.aborted_transactions is not None:
        return r
    return attrs.evolve(r, aborted_transactions=())


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


def fetch_rule(
    core: CoreTopics,
    sessions: FetchSessionCache | None = None,
    internal: InternalTopics | None = None,
) -> Rule[apis.FetchRequest, apis.FetchResponse]:
    """READ on each topic fetched (by name, or by topic ID from version 13: an unknown ID
    passes, to be answered UNKNOWN_TOPIC_ID whatever the ACLs say, as Kafka does). An
    incremental fetch is checked on the topics it adds or moves (a denied one is not
    added to the session); one its session refuses passes unchanged, to be answered
    with the session error alone, as Kafka answers it."""

    def rule(
        access: Access, req: Request[apis.FetchRequest]
    ) -> Gate[apis.FetchRequest, apis.FetchResponse]:
        body = req.body
        by_id = req.api_version >= FETCH_TOPIC_IDS_FROM
        if not is_full_fetch(body) and (
            sessions is None
            or sessions.refusal(body.session_id, body.session_epoch, uses_topic_ids=by_id)
        ):
            return Gate(req)

        def name_of(t: apis.FetchTopic) -> str | None:
            if not by_id:
                return t.topic
            info = _topic_by_id(core, internal, t.topic_id)
            return None if info is None else info.name

        def error(name: str | None) -> ErrorCode | None:
            if name is None or access.topic(Operation.READ, name):
                return None
            return TOPIC_DENIED

        return split_entries(
            req, body.topics, name_of, error, _topic_error,
            narrow=lambda kept: attrs.evolve(body, topics=kept),
            widen=lambda r, denied: attrs.evolve(r, responses=(*r.responses, *denied)),
        )

    return rule
