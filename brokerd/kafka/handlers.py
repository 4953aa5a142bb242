# -*- test-case-name: tests.test_kafka_protocol -*-
"""Kafka request -> broker core / group coordinator calls -> Kafka response message.

One coroutine per API turns a decoded request body (:mod:`brokerd.kafka.apis`) into a
response message, a :data:`NO_RESPONSE` (acks=0 Produce) or :data:`CLOSE_CONNECTION`
(acks=0 Produce that failed: Kafka closes the connection, since it cannot answer).
Errors from the core arrive as ``brokerd.errors`` exceptions and become per-partition
or per-topic Kafka error codes (:mod:`brokerd.kafka.errors`).

It does not parse or build bytes, touch transports, or decide request order: the
protocol (:mod:`brokerd.kafka.protocol`) calls :meth:`KafkaHandlers.handle` for one
request at a time. The core and coordinator are duck-typed by :class:`KafkaCore` and
:class:`GroupCoordinatorLike` so tests can pass fakes.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import attrs
from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.core.waiters import Shortfall, long_poll
from brokerd.errors import InvalidTopic, TooManyWaiters
from brokerd.kafka import apis
from brokerd.kafka.apis import Request
from brokerd.kafka.codec import ApiKey
from brokerd.kafka.errors import ErrorCode, error_code_for
from brokerd.names import validate_topic_name
from brokerd.storage.types import AppendInfo, ReadResult, TopicInfo

T = TypeVar("T")

#: brokerd has one leader epoch forever (shared note 7.5): no client then needs
#: OffsetForLeaderEpoch or starts KIP-320 offset validation.
LEADER_EPOCH = 0
#: Partitions of a topic created by CreateTopics with num_partitions -1, unless the
#: factory is given another (Kafka's ``num.partitions`` default).
DEFAULT_PARTITIONS = 1
#: Errors that concern the whole coordinator, repeated at the top of OffsetFetch v2+.
_COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)
#: ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
#: Compression codec id of zstd in a RecordBatch's attributes (bits 0-2).
ZSTD_CODEC = 4
#: First Produce version allowed to carry zstd batches (KIP-110); Kafka refuses older.
ZSTD_MIN_PRODUCE_VERSION = 7
#: First Produce version that carries RecordBatch v2; 0-2 are only advertised so old
#: librdkafka enables compression (shared note 7.1) and are refused, as Kafka 4 does.
MIN_IMPLEMENTED_PRODUCE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class Outcome(enum.Enum):
    """What the protocol does instead of writing a response."""

    #: acks=0 Produce: write nothing at all.
    NO_RESPONSE = "no-response"
    #: acks=0 Produce that failed: close the connection (the client learns nothing else).
    CLOSE_CONNECTION = "close-connection"


NO_RESPONSE = Outcome.NO_RESPONSE
CLOSE_CONNECTION = Outcome.CLOSE_CONNECTION


# -- what the handlers call ----------------------------------------------------------


class KafkaCore(Protocol):
    """The part of :class:`brokerd.core.Broker` the Kafka listener uses (reactor
    thread; failures carry ``brokerd.errors`` exceptions)."""

    @property
    def auto_create_topics(self) -> bool: ...

    def topics(self) -> Mapping[str, TopicInfo]: ...

    def ensure_topic(self, name: str) -> defer.Deferred[TopicInfo]: ...

    def create_topic(self, name: str, partitions: int) -> defer.Deferred[None]: ...

    def delete_topic(self, name: str) -> defer.Deferred[None]: ...

    def produce_batches(
        self, topic: str, partition: int, data: bytes, *, acks: int
    ) -> defer.Deferred[AppendInfo]: ...

    def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int
    ) -> defer.Deferred[ReadResult]: ...

    def wait_for_data(
        self,
        positions: Sequence[tuple[str, int, int]],
        *,
        min_bytes: int,
        max_wait_ms: int,
        already: int = 0,
        seen: dict[tuple[str, int], int] | None = None,
    ) -> defer.Deferred[None]: ...

    def list_offsets(self, topic: str, partition: int) -> defer.Deferred[tuple[int, int]]: ...

    def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> defer.Deferred[tuple[int, int] | None]: ...

    def init_producer_id(self) -> defer.Deferred[int]: ...


class JoinResultLike(Protocol):
    @property
    def error_code(self) -> int: ...
    @property
    def generation_id(self) -> int: ...
    @property
    def protocol_name(self) -> str | None: ...
    @property
    def leader_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def members(self) -> Sequence[tuple[str, str | None, bytes]]: ...


class SyncResultLike(Protocol):
    @property
    def error_code(self) -> int: ...
    @property
    def assignment(self) -> bytes: ...


class GroupCoordinatorLike(Protocol):
    """The classic group coordinator (:mod:`brokerd.kafka.groups`). Error codes in its
    results are Kafka ints. Deferred results are typed ``Any`` because Deferred is
    invariant; they are :class:`JoinResultLike` / :class:`SyncResultLike` /
    ``dict[(topic, partition), code]``."""

    def join(
        self,
        group_id: str,
        member_id: str,
        /,
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        group_instance_id: str | None,
        require_known_member_id: bool,
    ) -> defer.Deferred[Any]: ...

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: list[tuple[str, bytes]],
        /,
    ) -> defer.Deferred[Any]: ...

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, /) -> int: ...

    def leave(self, group_id: str, member_id: str, /) -> int: ...

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: list[tuple[str, int, int, int, str | None]],
        /,
    ) -> defer.Deferred[Any]: ...

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None, /
    ) -> Sequence[tuple[str, int, int, int, str | None, int]]: ...


class BrokerIdentity(Protocol):
    """Where clients are told to connect (read on every request: the listener's port is
    only known after it binds)."""

    @property
    def node_id(self) -> int: ...
    @property
    def advertised_host(self) -> str: ...
    @property
    def advertised_port(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...


class _DelayedCall(Protocol):
    def active(self) -> bool: ...
    def cancel(self) -> None: ...


class Clock(Protocol):
    """``IReactorTime.callLater`` and ``seconds`` as mypy can check them."""

    def seconds(self) -> float: ...

    def callLater(
        self, delay: float, callable: Callable[..., object], *args: object, **kw: object
    ) -> _DelayedCall: ...


class Connection:
    """Per-connection state the handlers need: the peer, and the waits to cancel when
    the connection goes away (a parked long-poll fetch must not outlive it)."""

    def __init__(self, client_host: str) -> None:
        #: Kafka's form, ``/127.0.0.1`` (JoinGroup passes it to the coordinator).
        self.client_host = client_host
        self.closed = False
        self._waits: set[defer.Deferred[Any]] = set()

    def track(self, d: defer.Deferred[T]) -> defer.Deferred[T]:
        """Remember ``d`` until it fires, to cancel it in :meth:`close` (at once if the
        connection is closed already)."""
        if self.closed:
            d.cancel()
            return d
        self._waits.add(d)

        def forget(result: object) -> object:
            self._waits.discard(d)
            return result

        d.addBoth(forget)
        return d

    def close(self) -> None:
        self.closed = True
        waits, self._waits = self._waits, set()
        for d in waits:
            d.cancel()


class _Timeout(Exception):
    """A produce was not durable within the request's timeout."""


# -- helpers -------------------------------------------------------------------------


def _gather(coros: Sequence[Coroutine[Any, Any, T]]) -> defer.Deferred[list[T]]:
    """Run coroutines concurrently; results in order. They must not raise."""
    ds = [defer.Deferred.fromCoroutine(c) for c in coros]
    d: defer.Deferred[list[T]] = defer.gatherResults(ds, consumeErrors=True)
    return d


def _deadline(d: defer.Deferred[T], seconds: float, clock: Clock) -> defer.Deferred[T]:
    """``d``'s result, or a :class:`_Timeout` failure after ``seconds``. ``d`` itself is
    not cancelled (the core still completes the append; an idempotent retry of it is
    then answered from the producer state)."""
    out: defer.Deferred[T] = defer.Deferred()

    def expire() -> None:
        if not out.called:
            out.errback(_Timeout(f"not durable within {seconds:.3f}s"))

    call = clock.callLater(seconds, expire)

    def done(result: T | Failure) -> None:
        if call.active():
            call.cancel()
        if out.called:
            return  # timed out already; a late failure is dropped here on purpose
        if isinstance(result, Failure):
            out.errback(result)
        else:
            out.callback(result)

    d.addBoth(done)
    return out


def batch_codecs(records: bytes) -> list[int]:
    """The compression codec of each RecordBatch in ``records``, read from the headers
    only. Stops quietly at anything malformed: validating is the core's job."""
    codecs: list[int] = []
    pos = 0
    while pos + 23 <= len(records):
        (length,) = _I32.unpack_from(records, pos + 8)
        (attributes,) = _I16.unpack_from(records, pos + 21)
        codecs.append(attributes & 0x07)
        if length <= 0:
            break
        pos += 12 + length
    return codecs


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


# -- the handlers --------------------------------------------------------------------

Handler = Callable[[Connection, Request], Awaitable[Any]]


class KafkaHandlers:
    """Answers decoded requests. One instance per listener, shared by its connections.

    :param core: the broker core (:class:`KafkaCore`).
    :param coordinator: the group coordinator (:class:`GroupCoordinatorLike`).
    :param identity: node id, advertised host/port and cluster id (read live).
    :param clock: for the acks=all produce timeout.
    :param default_partitions: partitions for CreateTopics with num_partitions -1.
    """

    _log = Logger()

    def __init__(
        self,
        core: KafkaCore,
        coordinator: GroupCoordinatorLike,
        identity: BrokerIdentity,
        *,
        clock: Clock,
        default_partitions: int = DEFAULT_PARTITIONS,
    ) -> None:
        self._core = core
        self._default_partitions = default_partitions
        self._groups = coordinator
        self._id = identity
        self._clock = clock
        self._handlers: dict[ApiKey, Handler] = {
            ApiKey.API_VERSIONS: self._api_versions,
            ApiKey.METADATA: self._metadata,
            ApiKey.PRODUCE: self._produce,
            ApiKey.FETCH: self._fetch,
            ApiKey.LIST_OFFSETS: self._list_offsets,
            ApiKey.FIND_COORDINATOR: self._find_coordinator,
            ApiKey.JOIN_GROUP: self._join_group,
            ApiKey.SYNC_GROUP: self._sync_group,
            ApiKey.HEARTBEAT: self._heartbeat,
            ApiKey.LEAVE_GROUP: self._leave_group,
            ApiKey.OFFSET_COMMIT: self._offset_commit,
            ApiKey.OFFSET_FETCH: self._offset_fetch,
            ApiKey.CREATE_TOPICS: self._create_topics,
            ApiKey.DELETE_TOPICS: self._delete_topics,
            ApiKey.INIT_PRODUCER_ID: self._init_producer_id,
        }

    def handle(self, conn: Connection, request: Request) -> defer.Deferred[Any]:
        """Answer ``request``: fires with a response message or an :class:`Outcome`.

        A failure means a bug (every expected error becomes an error code); the
        protocol then logs it and closes the connection.
        """
        handler = self._handlers[request.api_key]

        async def run() -> Any:
            return await handler(conn, request)

        return defer.Deferred.fromCoroutine(run())

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        """Map ``exc``; log it when it is not one of brokerd's own errors."""
        code = error_code_for(exc)
        if code is ErrorCode.UNKNOWN_SERVER_ERROR:
            self._log.failure(
                "kafka {what} failed unexpectedly",
                failure=Failure(exc),  # type: ignore[no-untyped-call]
                what=what,
            )
        return code

    # -- ApiVersions, Metadata, FindCoordinator ---------------------------------------

    async def _api_versions(self, conn: Connection, req: Request) -> Any:
        return apis.api_versions_response(req.api_version)

    def _topic_metadata(self, info: TopicInfo) -> apis.MetadataTopic:
        node = self._id.node_id
        return apis.MetadataTopic(
            error_code=0,
            name=info.name,
            is_internal=False,
            partitions=tuple(
                apis.MetadataPartition(
                    error_code=0,
                    partition_index=i,
                    leader_id=node,
                    leader_epoch=LEADER_EPOCH,
                    replica_nodes=(node,),
                    isr_nodes=(node,),
                    offline_replicas=(),
                )
                for i in range(info.partitions)
            ),
        )

    async def _metadata(self, conn: Connection, req: Request) -> Any:
        body: apis.MetadataRequest = req.body
        known = self._core.topics()
        entries: list[apis.MetadataTopic] = []
        # v0: an empty list means every topic; v1+: null means every topic and an empty
        # list means none (librdkafka asks for brokers only that way).
        if body.topics is None or (req.api_version == 0 and not body.topics):
            entries = [self._topic_metadata(known[name]) for name in sorted(known)]
        else:
            # v0-3 have no flag: Kafka auto-creates for them whenever it may.
            allow = body.allow_auto_topic_creation if req.api_version >= 4 else True
            seen: set[str] = set()
            for wanted in body.topics:
                name = wanted.name
                if name in seen:
                    continue
                seen.add(name)
                entries.append(await self._one_topic_metadata(name, known, allow))
        ident = self._id
        return apis.MetadataResponse(
            brokers=(
                apis.MetadataBroker(
                    node_id=ident.node_id, host=ident.advertised_host,
                    port=ident.advertised_port, rack=None,
                ),
            ),
            cluster_id=ident.cluster_id,
            controller_id=ident.node_id,
            topics=tuple(entries),
        )

    async def _one_topic_metadata(
        self, name: str, known: Mapping[str, TopicInfo], allow_create: bool
    ) -> apis.MetadataTopic:
        info = known.get(name)
        if info is not None:
            return self._topic_metadata(info)
        try:
            validate_topic_name(name)
        except InvalidTopic:
            return apis.MetadataTopic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name)
        if not (allow_create and self._core.auto_create_topics):
            return apis.MetadataTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name)
        try:
            info = await self._core.ensure_topic(name)
        except Exception as e:
            return apis.MetadataTopic(
                error_code=self._unexpected("auto-create", e), name=name
            )
        return self._topic_metadata(info)

    async def _find_coordinator(self, conn: Connection, req: Request) -> Any:
        body: apis.FindCoordinatorRequest = req.body
        ident = self._id
        if body.key_type not in (0, 1):
            return apis.FindCoordinatorResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"unknown coordinator key type {body.key_type}",
                node_id=-1, host="", port=-1,
            )
        # Groups and (key type 1) transactional ids: this node. A transactional client
        # then gets InitProducerId's fatal error, which says why.
        return apis.FindCoordinatorResponse(
            error_code=0, error_message=None,
            node_id=ident.node_id, host=ident.advertised_host, port=ident.advertised_port,
        )

    # -- Produce ---------------------------------------------------------------------

    async def _produce(self, conn: Connection, req: Request) -> Any:
        body: apis.ProduceRequest = req.body
        version = req.api_version
        acks = body.acks
        refusal: tuple[ErrorCode, str] | None = None
        if version < MIN_IMPLEMENTED_PRODUCE_VERSION:
            refusal = (ErrorCode.UNSUPPORTED_VERSION, "Produce v0-2 (message format 0/1) is "
                       "not supported; use v3+")
        elif body.transactional_id is not None:
            refusal = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                       "transactions are not supported by brokerd")
        elif acks not in (-1, 0, 1):
            refusal = (ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, not {acks}")
        if refusal is not None:
            if acks == 0:
                self._log.info("kafka: acks=0 produce refused ({why}); closing", why=refusal[1])
                return CLOSE_CONNECTION
            code, text = refusal
            return apis.ProduceResponse(
                responses=tuple(
                    apis.ProduceTopicResponse(
                        name=t.name,
                        partition_responses=tuple(
                            apis.ProducePartitionResponse(
                                index=p.index, error_code=code, error_message=text
                            )
                            for p in t.partition_data
                        ),
                    )
                    for t in body.topic_data
                )
            )
        timeout = body.timeout_ms / 1000.0 if acks == -1 and body.timeout_ms > 0 else None
        # Every partition at once: each has its own append queue and sync.
        flat = await _gather(
            [
                self._produce_one(t.name, p, acks, version, timeout)
                for t in body.topic_data
                for p in t.partition_data
            ]
        )
        per_topic: list[list[apis.ProducePartitionResponse]] = []
        for t in body.topic_data:
            per_topic.append(flat[: len(t.partition_data)])
            del flat[: len(t.partition_data)]
        if acks == 0:
            failed = [
                r for rs in per_topic for r in rs if r.error_code != ErrorCode.NONE
            ]
            if failed:
                self._log.info(
                    "kafka: acks=0 produce failed (error {code}: {text}); closing",
                    code=failed[0].error_code, text=failed[0].error_message,
                )
                return CLOSE_CONNECTION
            return NO_RESPONSE
        return apis.ProduceResponse(
            responses=tuple(
                apis.ProduceTopicResponse(name=t.name, partition_responses=tuple(rs))
                for t, rs in zip(body.topic_data, per_topic, strict=True)
            )
        )

    async def _produce_one(
        self,
        topic: str,
        part: apis.ProducePartitionData,
        acks: int,
        version: int,
        timeout: float | None,
    ) -> apis.ProducePartitionResponse:
        def refuse(code: ErrorCode, text: str) -> apis.ProducePartitionResponse:
            return apis.ProducePartitionResponse(
                index=part.index, error_code=code, error_message=text
            )

        records = part.records
        if not records:
            return refuse(ErrorCode.CORRUPT_MESSAGE, "a produce must carry a record batch")
        if version < ZSTD_MIN_PRODUCE_VERSION and ZSTD_CODEC in batch_codecs(records):
            return refuse(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later"
            )
        try:
            d = self._core.produce_batches(topic, part.index, records, acks=acks)
            if timeout is not None:
                d = _deadline(d, timeout, self._clock)
            info = await d
        except _Timeout as e:
            return refuse(ErrorCode.REQUEST_TIMED_OUT, str(e))
        except Exception as e:
            return refuse(self._unexpected("produce", e), _message(e))
        return apis.ProducePartitionResponse(
            index=part.index,
            error_code=0,
            base_offset=info.base_offset,
            log_append_time_ms=-1,  # CreateTime: clients keep their own timestamps
            log_start_offset=info.log_start_offset,
        )

    # -- Fetch -----------------------------------------------------------------------

    async def _fetch(self, conn: Connection, req: Request) -> Any:
        body: apis.FetchRequest = req.body
        wanted = [(t.topic, p) for t in body.topics for p in t.partitions]
        positions = [(topic, p.partition, p.fetch_offset) for topic, p in wanted]

        def read() -> Coroutine[Any, Any, list[apis.FetchPartitionResponse]]:
            return self._read_partitions(body, wanted)

        def short_of(results: list[apis.FetchPartitionResponse]) -> Shortfall | None:
            # Kafka answers at once on any error, or when MinBytes is already there.
            if not wanted or conn.closed or any(r.error_code for r in results):
                return None
            have = sum(len(r.records or b"") for r in results)
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
            return NO_RESPONSE  # the connection went away; nobody to answer
        except TooManyWaiters:
            results = await read()  # answer now with what there is: stay responsive
        except Exception as e:
            self._unexpected("fetch wait", e)
            results = await read()
        if conn.closed:
            return NO_RESPONSE
        read_committed = body.isolation_level == 1
        out: list[apis.FetchTopicResponse] = []
        i = 0
        for t in body.topics:
            n = len(t.partitions)
            parts = results[i : i + n]
            i += n
            if read_committed:
                # Kafka sends an (empty) aborted list only to read_committed consumers.
                parts = [_with_aborted(r) for r in parts]
            out.append(apis.FetchTopicResponse(topic=t.topic, partitions=tuple(parts)))
        return apis.FetchResponse(error_code=0, session_id=0, responses=tuple(out))

    async def _read_partitions(
        self, body: apis.FetchRequest, wanted: list[tuple[str, apis.FetchPartition]]
    ) -> list[apis.FetchPartitionResponse]:
        """Read every wanted partition within the byte limits, in request order.

        The first partition that has data gets at least one whole batch whatever the
        limits (Kafka's KIP-74 rule, so a consumer always progresses); after it, data is
        cut at the response's remaining ``max_bytes`` (a partial trailing batch is fine
        for clients). Reads run concurrently in windows whose partition limits fit in
        the remaining budget, so at most about ``max_bytes`` is read at a time. Once the
        budget is spent, the remaining partitions report offsets only.
        """
        budget = max(body.max_bytes, 0)
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
            reads = await _gather([self._read_one(*wanted[j], limit) for j, limit in window])
            for (j, _limit), result in zip(window, reads, strict=True):
                data = result.records or b""
                if got_any and len(data) > budget:
                    data = data[: max(budget, 0)]
                    result = _with_records(result, data)
                if data:
                    got_any = True
                budget -= len(data)
                out[j] = result
        rest = [j for j in range(len(wanted)) if out[j] is None]
        if rest:
            heads = await _gather([self._offsets_only(*wanted[j]) for j in rest])
            for j, head in zip(rest, heads, strict=True):
                out[j] = head
        return [r for r in out if r is not None]

    async def _read_one(
        self, topic: str, p: apis.FetchPartition, max_bytes: int
    ) -> apis.FetchPartitionResponse:
        try:
            result = await self._core.fetch(topic, p.partition, p.fetch_offset, max_bytes)
        except Exception as e:
            return _fetch_error(p.partition, self._unexpected("fetch", e))
        return apis.FetchPartitionResponse(
            partition_index=p.partition,
            error_code=0,
            high_watermark=result.high_watermark,
            # No transactions: everything below the high watermark is stable. Never
            # report less, or read_committed consumers (librdkafka's default) stall.
            last_stable_offset=result.high_watermark,
            log_start_offset=result.log_start_offset,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=result.data,
        )

    async def _offsets_only(
        self, topic: str, p: apis.FetchPartition
    ) -> apis.FetchPartitionResponse:
        try:
            start, high = await self._core.list_offsets(topic, p.partition)
        except Exception as e:
            return _fetch_error(p.partition, self._unexpected("fetch", e))
        if not start <= p.fetch_offset <= high:
            return _fetch_error(p.partition, ErrorCode.OFFSET_OUT_OF_RANGE)
        return apis.FetchPartitionResponse(
            partition_index=p.partition,
            high_watermark=high,
            last_stable_offset=high,
            log_start_offset=start,
            records=b"",
        )

    # -- ListOffsets -----------------------------------------------------------------

    async def _list_offsets(self, conn: Connection, req: Request) -> Any:
        body: apis.ListOffsetsRequest = req.body
        topics = []
        for t in body.topics:
            parts = await _gather([self._list_one(t.name, p) for p in t.partitions])
            topics.append(apis.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
        return apis.ListOffsetsResponse(topics=tuple(topics))

    async def _list_one(
        self, topic: str, p: apis.ListOffsetsPartition
    ) -> apis.ListOffsetsPartitionResponse:
        try:
            if p.timestamp in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
                start, high = await self._core.list_offsets(topic, p.partition_index)
                offset = high if p.timestamp == LATEST_TIMESTAMP else start
                timestamp = -1
            else:
                found = await self._core.offset_for_timestamp(
                    topic, p.partition_index, p.timestamp
                )
                offset, timestamp = found if found is not None else (-1, -1)
        except Exception as e:
            return apis.ListOffsetsPartitionResponse(
                partition_index=p.partition_index,
                error_code=self._unexpected("list offsets", e),
            )
        return apis.ListOffsetsPartitionResponse(
            partition_index=p.partition_index,
            error_code=0,
            timestamp=timestamp,
            offset=offset,
            leader_epoch=LEADER_EPOCH,
        )

    # -- groups ----------------------------------------------------------------------

    async def _join_group(self, conn: Connection, req: Request) -> Any:
        body: apis.JoinGroupRequest = req.body
        rebalance = body.rebalance_timeout_ms
        if rebalance < 0:
            rebalance = body.session_timeout_ms  # v0 has no rebalance timeout (Kafka)
        # Tracked: a JoinGroup held for a rebalance is cancelled if the client goes
        # away (the coordinator keeps the member until its session times out).
        joining = conn.track(self._groups.join(
            body.group_id,
            body.member_id,
            client_id=req.header.client_id or "",
            client_host=conn.client_host,
            session_timeout_ms=body.session_timeout_ms,
            rebalance_timeout_ms=rebalance,
            protocol_type=body.protocol_type,
            protocols=[(p.name, p.metadata) for p in body.protocols],
            group_instance_id=body.group_instance_id,
            require_known_member_id=req.api_version >= 4,
        ))
        try:
            result: JoinResultLike = await joining
        except defer.CancelledError:
            return NO_RESPONSE
        return apis.JoinGroupResponse(
            error_code=result.error_code,
            generation_id=result.generation_id,
            protocol_name=result.protocol_name or "",
            leader=result.leader_id,
            member_id=result.member_id,
            members=tuple(
                apis.JoinGroupMember(member_id=m, group_instance_id=g, metadata=md)
                for m, g, md in result.members
            ),
        )

    async def _sync_group(self, conn: Connection, req: Request) -> Any:
        body: apis.SyncGroupRequest = req.body
        syncing = conn.track(self._groups.sync(
            body.group_id,
            body.generation_id,
            body.member_id,
            [(a.member_id, a.assignment) for a in body.assignments],
        ))
        try:
            result: SyncResultLike = await syncing
        except defer.CancelledError:
            return NO_RESPONSE
        return apis.SyncGroupResponse(
            error_code=result.error_code, assignment=result.assignment or b""
        )

    async def _heartbeat(self, conn: Connection, req: Request) -> Any:
        body: apis.HeartbeatRequest = req.body
        code = self._groups.heartbeat(body.group_id, body.generation_id, body.member_id)
        return apis.HeartbeatResponse(error_code=code)

    async def _leave_group(self, conn: Connection, req: Request) -> Any:
        body: apis.LeaveGroupRequest = req.body
        code = self._groups.leave(body.group_id, body.member_id)
        return apis.LeaveGroupResponse(error_code=code)

    async def _offset_commit(self, conn: Connection, req: Request) -> Any:
        body: apis.OffsetCommitRequest = req.body
        codes: dict[tuple[str, int], int] = {}
        # Group ids and membership are the coordinator's to judge; topic existence is
        # the core's (Kafka refuses commits for partitions that do not exist).
        known = self._core.topics()
        offsets: list[tuple[str, int, int, int, str | None]] = []
        for t in body.topics:
            info = known.get(t.name)
            for p in t.partitions:
                if info is None or not 0 <= p.partition_index < info.partitions:
                    codes[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    offsets.append(
                        (t.name, p.partition_index, p.committed_offset,
                         p.committed_leader_epoch, p.committed_metadata)
                    )
        if offsets:
            try:
                stored: Mapping[tuple[str, int], int] = await self._groups.commit_offsets(
                    body.group_id, body.generation_id, body.member_id, offsets
                )
            except Exception as e:
                code = self._unexpected("offset commit", e)
                stored = {(o[0], o[1]): code for o in offsets}
            for o in offsets:
                # A partition the coordinator did not answer for was not stored.
                codes[(o[0], o[1])] = stored.get((o[0], o[1]), ErrorCode.UNKNOWN_SERVER_ERROR)
        return apis.OffsetCommitResponse(
            topics=tuple(
                apis.OffsetCommitTopicResponse(
                    name=t.name,
                    partitions=tuple(
                        apis.OffsetCommitPartitionResponse(
                            partition_index=p.partition_index,
                            error_code=codes[(t.name, p.partition_index)],
                        )
                        for p in t.partitions
                    ),
                )
                for t in body.topics
            )
        )

    async def _offset_fetch(self, conn: Connection, req: Request) -> Any:
        body: apis.OffsetFetchRequest = req.body
        wanted = (
            None
            if body.topics is None
            else [(t.name, p) for t in body.topics for p in t.partition_indexes]
        )
        rows: Sequence[tuple[str, int, int, int, str | None, int]]
        top: int
        try:
            rows = self._groups.fetch_offsets(body.group_id, wanted)
        except Exception as e:
            code = self._unexpected("offset fetch", e)
            rows = [(t, p, -1, -1, "", int(code)) for t, p in wanted or ()]
            top = code
        else:
            # Coordinator-level errors go at the top too (v2+ clients look there).
            top = next(
                (r[5] for r in rows if r[5] in _COORDINATOR_ERRORS), ErrorCode.NONE
            )
        by_topic: dict[str, list[apis.OffsetFetchPartitionResponse]] = {}
        for topic, partition, offset, epoch, metadata, row_code in rows:
            by_topic.setdefault(topic, []).append(
                apis.OffsetFetchPartitionResponse(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=epoch,
                    metadata=metadata,
                    error_code=row_code,
                )
            )
        return apis.OffsetFetchResponse(
            topics=tuple(
                apis.OffsetFetchTopicResponse(name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
            error_code=top,
        )

    # -- topics admin ----------------------------------------------------------------

    async def _create_topics(self, conn: Connection, req: Request) -> Any:
        body: apis.CreateTopicsRequest = req.body
        counts: dict[str, int] = {}
        for t in body.topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        results = []
        for t in body.topics:
            if counts[t.name] > 1:
                code, text = ErrorCode.INVALID_REQUEST, "topic named more than once"
            else:
                code, text = await self._create_one(t, body.validate_only)
            results.append(
                apis.CreatableTopicResult(
                    name=t.name, error_code=code, error_message=text if code else None
                )
            )
        return apis.CreateTopicsResponse(topics=tuple(results))

    async def _create_one(
        self, t: apis.CreatableTopic, validate_only: bool
    ) -> tuple[ErrorCode, str]:
        try:
            validate_topic_name(t.name)
        except InvalidTopic as e:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)
        if t.configs:
            names = ", ".join(sorted(c.name for c in t.configs))
            return ErrorCode.INVALID_CONFIG, f"topic configs are not supported ({names})"
        node = self._id.node_id
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return ErrorCode.INVALID_REQUEST, (
                    "set either assignments or num_partitions/replication_factor"
                )
            indexes = sorted(a.partition_index for a in t.assignments)
            if indexes != list(range(len(indexes))) or any(
                tuple(a.broker_ids) != (node,) for a in t.assignments
            ):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"partitions must be 0..n-1, each on broker {node} alone"
                )
            partitions = len(indexes)
        else:
            if t.replication_factor not in (-1, 1):
                return ErrorCode.INVALID_REPLICATION_FACTOR, (
                    f"brokerd is a single node: replication factor must be 1, "
                    f"not {t.replication_factor}"
                )
            partitions = (
                self._default_partitions if t.num_partitions == -1 else t.num_partitions
            )
            if partitions <= 0:
                return ErrorCode.INVALID_PARTITIONS, (
                    f"number of partitions must be positive, not {t.num_partitions}"
                )
        if validate_only:
            if t.name in self._core.topics():
                return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} already exists"
            return ErrorCode.NONE, ""
        try:
            await self._core.create_topic(t.name, partitions)
        except Exception as e:
            return self._unexpected("create topic", e), _message(e)
        return ErrorCode.NONE, ""

    async def _delete_topics(self, conn: Connection, req: Request) -> Any:
        body: apis.DeleteTopicsRequest = req.body
        results = []
        for name in body.topic_names:
            code: int = ErrorCode.NONE
            if name not in self._core.topics():
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                try:
                    await self._core.delete_topic(name)
                except Exception as e:
                    code = self._unexpected("delete topic", e)
            results.append(apis.DeletableTopicResult(name=name, error_code=code))
        return apis.DeleteTopicsResponse(responses=tuple(results))

    async def _init_producer_id(self, conn: Connection, req: Request) -> Any:
        body: apis.InitProducerIdRequest = req.body
        if body.transactional_id is not None:
            # Transactions are out of scope. A fatal (non-retriable) error, so the
            # client fails fast instead of retrying a coordinator error forever.
            return apis.InitProducerIdResponse(
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            )
        try:
            producer_id = await self._core.init_producer_id()
        except Exception as e:
            return apis.InitProducerIdResponse(
                error_code=self._unexpected("init producer id", e)
            )
        return apis.InitProducerIdResponse(
            error_code=0, producer_id=producer_id, producer_epoch=0
        )


def _fetch_error(partition: int, code: int) -> apis.FetchPartitionResponse:
    return apis.FetchPartitionResponse(
        partition_index=partition, error_code=code, records=b""
    )


def _with_records(r: apis.FetchPartitionResponse, data: bytes) -> apis.FetchPartitionResponse:
    return attrs.evolve(r, records=data)


def _with_aborted(r: apis.FetchPartitionResponse) -> apis.FetchPartitionResponse:
    if r.aborted_transactions is not None:
        return r
    return attrs.evolve(r, aborted_transactions=())


__all__ = [
    "CLOSE_CONNECTION",
    "NO_RESPONSE",
    "BrokerIdentity",
    "Connection",
    "GroupCoordinatorLike",
    "KafkaCore",
    "KafkaHandlers",
    "Outcome",
]
