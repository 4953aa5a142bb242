# -*- test-case-name: tests.kafka.server.test_protocol -*-
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
partitions are answered as they are). Fetch sessions (KIP-227) are answered as a Kafka
broker whose session cache has no room: a full fetch (session epoch 0 or -1) gets every
partition it names and session ID 0, which tells the client to send full fetches again;
an incremental fetch (epoch > 0) names a session that does not exist and gets
FETCH_SESSION_ID_NOT_FOUND with no partitions.

It does not parse or build bytes, touch transports or decide request order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
from brokerd.kafka.server.handler_base import NO_RESPONSE, Connection, unexpected_code
from brokerd.kafka.server.handler_base import gather as _gather
from brokerd.kafka.server.handlers.fetch_catchup import CatchUp
from brokerd.kafka.server.route import Route
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages.fetch import FETCH_TOPIC_IDS_FROM
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import Request
from brokerd.net.answer_budget import AnswerBudget
from brokerd.net.frames import cut_records, records_size, release_records
from brokerd.net.sendfile import RegionLedger
from brokerd.security.acl import Operation
from brokerd.storage.types import Delivery, Isolation, LogRead, ReadSpec, Records, StoredRecords

__all__ = [
    "DEFAULT_FETCH_MAX_BYTES",
    "READ_COMMITTED",
    "FetchHandler",
    "fetch_rule",
    "is_full_fetch",
]

#: Fetch isolation level of a transactional consumer (read_committed).
READ_COMMITTED = 1
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


def is_full_fetch(body: apis.FetchRequest) -> bool:
    """Whether ``body`` is a full fetch (every partition named), not an incremental one
    in a fetch session: brokerd keeps no session, so only full fetches are served."""
    return body.session_epoch in _FULL_FETCH_EPOCHS


def _by_id(
    core: CoreTopics, topics: Sequence[apis.FetchTopic]
) -> tuple[list[apis.FetchTopic], list[apis.FetchTopic]]:
    """``(known, unknown)``: the topics of a request that names them by ID, the known
    ones with their names filled in, and those whose ID no topic has."""
    known: list[apis.FetchTopic] = []
    unknown: list[apis.FetchTopic] = []
    for t in topics:
        info = core.topic_by_id(t.topic_id)
        if info is None:
            unknown.append(t)
        else:
            known.append(attrs.evolve(t, topic=info.name))
    return known, unknown


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
    """

    _log = Logger()

    def __init__(
        self,
        core: CoreApi,
        *,
        clock: Clock,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        answer_budget: AnswerBudget | None = None,
    ) -> None:
        if fetch_max_bytes <= 0:
            raise ValueError(f"fetch_max_bytes must be positive, not {fetch_max_bytes}")
        self._core = core
        self._clock = clock
        self._fetch_max_bytes = fetch_max_bytes
        self._budget = answer_budget
        # Connections that are reading a backlog: their first empty fetch at the end of
        # the log is answered at once (brokerd/kafka/server/handlers/fetch_catchup.py).
        self._catch_up = CatchUp()

    def routes(self) -> tuple[Route, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            Route(ApiKey.FETCH, self.fetch, fetch_rule(self._core)),
        )

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        return unexpected_code(self._log, what, exc)

    async def fetch(self, conn: Connection, req: Request) -> Any:
        """The Fetch API's handler."""
        body: apis.FetchRequest = req.body
        if not is_full_fetch(body):
            # An incremental fetch: its session cannot exist (none is ever created).
            return apis.FetchResponse(
                error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0
            )
        # The topics named by an ID no topic has (None: the request names them by name).
        unknown: list[apis.FetchTopic] | None = None
        if req.api_version >= FETCH_TOPIC_IDS_FROM:
            known, unknown = _by_id(self._core, body.topics)
            body = attrs.evolve(body, topics=tuple(known))
        wanted = [(t.topic, p) for t in body.topics for p in t.partitions]
        keys = [(topic, p.partition) for topic, p in wanted]
        positions = [(topic, p.partition, p.fetch_offset) for topic, p in wanted]

        read_committed = body.isolation_level == READ_COMMITTED
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

        # Otherwise the request parks until enough arrives or MaxWaitMs passes; the core
        # wakes it early when an append landed after the read (the high watermarks in
        # ``seen``), and the loop reads again within the original deadline.
        try:
            results = await long_poll(
                read, short_of, park, clock=self._clock, max_wait_ms=body.max_wait_ms
            )
        except defer.CancelledError:
            drop_last()
            return NO_RESPONSE  # the connection went away; nobody to answer
        except TooManyWaiters:
            results = await read()  # answer now with what there is: stay responsive
        except Exception as e:
            self._unexpected("fetch wait", e)
            results = await read()
        if conn.closed:
            drop_last()
            return NO_RESPONSE
        for (_topic, p), key, r in zip(wanted, keys, results, strict=True):
            if not r.error_code:
                self._catch_up.answered(
                    conn, key, records_size(r.records),
                    min(p.partition_max_bytes, body.max_bytes, self._fetch_max_bytes),
                )
        out: list[apis.FetchTopicResponse] = []
        i = 0
        for t in body.topics:
            n = len(t.partitions)
            parts = results[i : i + n]
            i += n
            if unknown is not None and self._core.topic_by_id(t.topic_id) is None:
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
        return apis.FetchResponse(error_code=0, session_id=0, responses=tuple(out))

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
        try:
            # Most reads of a consumer that keeps up, or reads a backlog in order, are
            # answered at once, without a Deferred.
            answer = self._core.read(topic, p.partition, p.fetch_offset, max_bytes, spec)
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
        try:
            at = await self._core.offsets(topic, p.partition)
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


def fetch_rule(core: CoreTopics) -> Rule:
    """READ on each topic fetched (by name, or by topic ID from version 13: an unknown ID
    passes, to be answered UNKNOWN_TOPIC_ID whatever the ACLs say, as Kafka does). An
    incremental fetch passes unchanged: it is answered with a session error, reading
    nothing."""

    def rule(access: Access, req: Request) -> Gate:
        body: apis.FetchRequest = req.body
        if not is_full_fetch(body):
            return Gate(req)
        by_id = req.api_version >= FETCH_TOPIC_IDS_FROM

        def name_of(t: apis.FetchTopic) -> str | None:
            if not by_id:
                return t.topic
            info = core.topic_by_id(t.topic_id)
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
