# -*- test-case-name: tests.test_kafka_protocol -*-
"""Kafka request dispatch, and the data path: Produce, Fetch and ListOffsets.

:class:`KafkaHandlers` routes each decoded request (:mod:`brokerd.kafka.apis`) to its
API's handler and answers the data-path APIs itself; administration APIs are in
:mod:`brokerd.kafka.admin_handlers`, consumer-group APIs in
:mod:`brokerd.kafka.group_handlers`, transaction APIs in
:mod:`brokerd.kafka.txn_handlers`. The data path knows two isolation levels:
read_uncommitted reads up to the high watermark; read_committed reads up to the last
stable offset and gets the aborted transactions of the data returned (the core
computes both; see ``docs/kafka.md``). A handler returns a response message, a
:data:`NO_RESPONSE` (acks=0 Produce) or :data:`CLOSE_CONNECTION` (acks=0 Produce that
failed: Kafka closes the connection, since it cannot answer). Errors from the core arrive
as ``brokerd.errors`` exceptions and become per-partition or per-topic Kafka error codes
(:mod:`brokerd.kafka.errors`).

It does not parse or build bytes, touch transports, or decide request order: the
protocol (:mod:`brokerd.kafka.protocol`) calls :meth:`KafkaHandlers.handle` for one
request at a time. The core and coordinators are duck-typed by :class:`KafkaCore`,
:class:`~brokerd.kafka.group_handlers.GroupCoordinatorLike` and
:class:`~brokerd.kafka.txn_types.TransactionCoordinatorLike` so tests can pass fakes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import attrs
from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.core.waiters import Shortfall, long_poll
from brokerd.errors import InvalidRecord, TooManyWaiters
from brokerd.kafka import apis, authorize
from brokerd.kafka.acl_handlers import AclHandlers
from brokerd.kafka.admin_handlers import DEFAULT_PARTITIONS, AdminHandlers
from brokerd.kafka.admin_partition_handlers import PartitionAdminCore, PartitionAdminHandlers
from brokerd.kafka.apis import Request
from brokerd.kafka.codec import ApiKey
from brokerd.kafka.compaction import invalid_record_response
from brokerd.kafka.config_handlers import ConfigHandlers
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.group_admin_handlers import GroupAdminHandlers, HasGroupAdmin
from brokerd.kafka.group_handlers import (
    GroupCoordinatorLike,
    GroupHandlers,
)
from brokerd.kafka.handler_base import (
    CLOSE_CONNECTION,
    LEADER_EPOCH,
    NO_RESPONSE,
    BrokerIdentity,
    Clock,
    Connection,
    Handler,
    Outcome,
    unexpected_code,
)
from brokerd.kafka.handler_base import gather as _gather
from brokerd.kafka.handler_base import message as _message
from brokerd.kafka.sasl_handlers import ScramAdminHandlers, ScramStore
from brokerd.kafka.spliced import StoredRecords, cut_records, records_size, release_records
from brokerd.kafka.txn_handlers import TxnHandlers
from brokerd.kafka.txn_types import TransactionCoordinatorLike
from brokerd.security.acl import AclAuthorizer
from brokerd.sendfile import RegionLedger
from brokerd.storage.stored import StoredRead
from brokerd.storage.types import AppendInfo, ReadResult, TopicInfo

if TYPE_CHECKING:
    from brokerd.storage.types import PartitionOffsets

T = TypeVar("T")

#: ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
#: Compression codec id of zstd in a RecordBatch's attributes (bits 0-2).
ZSTD_CODEC = 4
#: First Produce version allowed to carry zstd batches (KIP-110); Kafka refuses older.
ZSTD_MIN_PRODUCE_VERSION = 7
#: Fetch/ListOffsets isolation level of a transactional consumer (read_committed).
READ_COMMITTED = 1
#: First Produce version that carries RecordBatch v2; 0-2 are only advertised so that
#: librdkafka older than 2.11.1 enables compression (it probes Produce v0 for that), and
#: are refused, as Kafka 4 does.
MIN_IMPLEMENTED_PRODUCE_VERSION = 3

#: Records read into memory at least this long are written as a part of their own
#: (``transport.writeSequence``), not joined into the frame.
_OWN_PART_RECORDS = 16 * 1024

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


# -- what the handlers call ----------------------------------------------------------

class KafkaCore(PartitionAdminCore, Protocol):
    """The part of :class:`brokerd.core.Broker` the Kafka listener uses (reactor
    thread; failures carry ``brokerd.errors`` exceptions)."""

    @property
    def auto_create_topics(self) -> bool: ...

    def topics(self) -> Mapping[str, TopicInfo]: ...

    def ensure_topic(self, name: str) -> defer.Deferred[TopicInfo]: ...

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> defer.Deferred[None]: ...

    def topic_config_defaults(self) -> Mapping[str, str]: ...

    def alter_topic_configs(
        self,
        name: str,
        update: Callable[[Mapping[str, str]], Mapping[str, str | None]],
        *,
        validate_only: bool = False,
    ) -> defer.Deferred[TopicInfo]: ...

    def delete_topic(self, name: str) -> defer.Deferred[None]: ...

    def produce_batches(
        self, topic: str, partition: int, data: bytes, *, acks: int
    ) -> defer.Deferred[AppendInfo]: ...

    def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int,
        *, read_committed: bool = False,
    ) -> defer.Deferred[ReadResult]:
        """From the batch holding ``offset``; with ``read_committed``, never past the
        last stable offset, and ``aborted`` lists the aborted transactions of the data."""
        ...

    def offsets(self, topic: str, partition: int) -> defer.Deferred[PartitionOffsets]:
        """Log start, high watermark and last stable offset (no I/O)."""
        ...

    def wait_for_data(
        self,
        positions: Sequence[tuple[str, int, int]],
        *,
        min_bytes: int,
        max_wait_ms: int,
        already: int = 0,
        seen: dict[tuple[str, int], int] | None = None,
    ) -> defer.Deferred[None]: ...

    def list_offsets(
        self, topic: str, partition: int, *, read_committed: bool = False
    ) -> defer.Deferred[tuple[int, int]]:
        """``(log start, high watermark)``, or the last stable offset for the latter
        with ``read_committed``."""
        ...

    def offset_for_timestamp(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> defer.Deferred[tuple[int, int] | None]: ...

    def init_producer_id(self) -> defer.Deferred[int]: ...


class StoredFetchCore(Protocol):
    """The core's zero-copy fetch (``Broker.fetch_stored``): :meth:`KafkaCore.fetch`
    with bytes checked before handed out by reference, as a file region the caller must
    release."""

    def fetch_stored(
        self, topic: str, partition: int, offset: int, max_bytes: int,
        *, read_committed: bool = False,
    ) -> defer.Deferred[StoredRead]: ...


class _Timeout(Exception):
    """A produce was not durable within the request's timeout."""


# -- helpers -------------------------------------------------------------------------


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


# -- the handlers --------------------------------------------------------------------


class KafkaHandlers:
    """Answers decoded requests. One instance per listener, shared by its connections.

    :param core: the broker core (:class:`KafkaCore`).
    :param coordinator: the group coordinator
        (:class:`~brokerd.kafka.group_handlers.GroupCoordinatorLike`).
    :param identity: node id, advertised host/port and cluster id (read live).
    :param clock: for the acks=all produce timeout and the long-poll deadline.
    :param default_partitions: partitions for CreateTopics with num_partitions -1.
    :param transactions: the transaction coordinator; None = transactions disabled
        (see :mod:`brokerd.kafka.txn_handlers` for what is answered then).
    :param authorizer: checks every request (:mod:`brokerd.kafka.authorize`); None =
        everything allowed. ``acls`` answers the ACL APIs (default: ACLs disabled).
    :param credentials: the SCRAM credentials store of the credential admin APIs; None
        = no ``--credentials`` (they answer SECURITY_DISABLED). SaslHandshake and
        SaslAuthenticate are answered by the protocol (they change connection state).
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
        transactions: TransactionCoordinatorLike | None = None,
        authorizer: AclAuthorizer | None = None,
        acls: AclHandlers | None = None,
        credentials: ScramStore | None = None,
    ) -> None:
        self._core = core
        self._clock = clock
        # The zero-copy read (brokerd.core.Broker has it; a test's fake core may not).
        self._stored: StoredFetchCore | None = (
            cast(StoredFetchCore, core) if hasattr(core, "fetch_stored") else None
        )
        txn = TxnHandlers(core, transactions)
        admin = AdminHandlers(
            core, identity, default_partitions=default_partitions, transactional=txn
        )
        groups = GroupHandlers(core, coordinator, identity)
        configs = ConfigHandlers(core, identity, default_partitions=default_partitions)
        group_admin = GroupAdminHandlers(core, cast(HasGroupAdmin, coordinator))
        partition_admin = PartitionAdminHandlers(core, identity, clock=clock)
        scram_admin = ScramAdminHandlers(credentials)
        self._handlers: dict[ApiKey, Handler] = {
            ApiKey.API_VERSIONS: admin.api_versions,
            ApiKey.METADATA: admin.metadata,
            ApiKey.PRODUCE: self._produce,
            ApiKey.FETCH: self._fetch,
            ApiKey.LIST_OFFSETS: self._list_offsets,
            ApiKey.FIND_COORDINATOR: groups.find_coordinator,
            ApiKey.JOIN_GROUP: groups.join_group,
            ApiKey.SYNC_GROUP: groups.sync_group,
            ApiKey.HEARTBEAT: groups.heartbeat,
            ApiKey.LEAVE_GROUP: groups.leave_group,
            ApiKey.OFFSET_COMMIT: groups.offset_commit,
            ApiKey.OFFSET_FETCH: groups.offset_fetch,
            ApiKey.CREATE_TOPICS: admin.create_topics,
            ApiKey.DELETE_TOPICS: admin.delete_topics,
            ApiKey.INIT_PRODUCER_ID: admin.init_producer_id,
            ApiKey.DESCRIBE_CONFIGS: configs.describe_configs,
            ApiKey.ALTER_CONFIGS: configs.alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
            # Group admin APIs.
            ApiKey.LIST_GROUPS: group_admin.list_groups,
            ApiKey.DESCRIBE_GROUPS: group_admin.describe_groups,
            ApiKey.DELETE_GROUPS: group_admin.delete_groups,
            ApiKey.OFFSET_DELETE: group_admin.offset_delete,
            ApiKey.CREATE_PARTITIONS: partition_admin.create_partitions,
            ApiKey.DELETE_RECORDS: partition_admin.delete_records,
            ApiKey.DESCRIBE_LOG_DIRS: partition_admin.describe_log_dirs,
            ApiKey.ADD_PARTITIONS_TO_TXN: txn.add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: txn.add_offsets_to_txn,
            ApiKey.END_TXN: txn.end_txn,
            ApiKey.TXN_OFFSET_COMMIT: txn.txn_offset_commit,
            ApiKey.DESCRIBE_TRANSACTIONS: txn.describe_transactions,
            ApiKey.LIST_TRANSACTIONS: txn.list_transactions,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram_admin.describe,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram_admin.alter,
        }
        acl = acls if acls is not None else AclHandlers(None, None)
        self._handlers[ApiKey.CREATE_ACLS] = acl.create_acls
        self._handlers[ApiKey.DESCRIBE_ACLS] = acl.describe_acls
        self._handlers[ApiKey.DELETE_ACLS] = acl.delete_acls
        self._handlers = authorize.guard(self._handlers, authorizer, core)

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
        return unexpected_code(self._log, what, exc)

    # -- Produce ---------------------------------------------------------------------

    async def _produce(self, conn: Connection, req: Request) -> Any:
        body: apis.ProduceRequest = req.body
        version = req.api_version
        acks = body.acks
        refusal: tuple[ErrorCode, str] | None = None
        # A transactional produce (transactional_id set) is admitted like any other: the
        # core checks its batches against the transaction coordinator's verifier.
        if version < MIN_IMPLEMENTED_PRODUCE_VERSION:
            refusal = (ErrorCode.UNSUPPORTED_VERSION, "Produce v0-2 (message format 0/1) is "
                       "not supported; use v3+")
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
        except InvalidRecord as e:  # keyless record, compacted topic (docs/compaction.md)
            return invalid_record_response(part.index, version, e)
        except Exception as e:
            return refuse(self._unexpected("produce", e), _message(e))
        return apis.ProducePartitionResponse(
            index=part.index,
            error_code=0,
            base_offset=info.base_offset,
            log_append_time_ms=info.log_append_time,  # -1 unless a LogAppendTime topic
            log_start_offset=info.log_start_offset,
        )

    # -- Fetch -----------------------------------------------------------------------

    async def _fetch(self, conn: Connection, req: Request) -> Any:
        body: apis.FetchRequest = req.body
        wanted = [(t.topic, p) for t in body.topics for p in t.partitions]
        positions = [(topic, p.partition, p.fetch_offset) for topic, p in wanted]

        read_committed = body.isolation_level == READ_COMMITTED
        # On a plain socket, records already checked are sent from the segment files by
        # os.sendfile (docs/performance.md); their regions are tracked per connection.
        ledger = conn.state.regions if self._stored is not None else None
        last: list[list[apis.FetchPartitionResponse]] = []

        def drop_last() -> None:
            for results in last:
                for r in results:
                    release_records(r.records)
            last.clear()

        async def read() -> list[apis.FetchPartitionResponse]:
            drop_last()  # a read that fell short is replaced by this one
            results = await self._read_partitions(body, wanted, read_committed, ledger)
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
        self,
        body: apis.FetchRequest,
        wanted: list[tuple[str, apis.FetchPartition]],
        read_committed: bool,
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
        :class:`~brokerd.kafka.spliced.StoredRecords`: file regions held in the ledger
        (sent by ``os.sendfile``) or bytes sent as their own part.
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
            reads = await _gather(
                [
                    self._read_one(*wanted[j], limit, read_committed, ledger)
                    for j, limit in window
                ]
            )
            for (j, _limit), result in zip(window, reads, strict=True):
                data = result.records if result.records is not None else b""
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
        read_committed: bool,
        ledger: RegionLedger | None = None,
    ) -> apis.FetchPartitionResponse:
        if ledger is not None and self._stored is not None:
            return await self._read_stored(
                self._stored, topic, p, max_bytes, read_committed, ledger
            )
        try:
            result = await self._core.fetch(
                topic, p.partition, p.fetch_offset, max_bytes, read_committed=read_committed
            )
        except Exception as e:
            return _fetch_error(p.partition, self._unexpected("fetch", e))
        return apis.FetchPartitionResponse(
            partition_index=p.partition,
            error_code=0,
            high_watermark=result.high_watermark,
            last_stable_offset=result.last_stable_offset,
            log_start_offset=result.log_start_offset,
            aborted_transactions=_aborted(result) if read_committed else None,
            preferred_read_replica=-1,
            records=result.data,
        )

    async def _read_stored(
        self,
        core: StoredFetchCore,
        topic: str,
        p: apis.FetchPartition,
        max_bytes: int,
        read_committed: bool,
        ledger: RegionLedger,
    ) -> apis.FetchPartitionResponse:
        """:meth:`_read_one` on a plain socket: the same answer, its records as
        :class:`~brokerd.kafka.spliced.StoredRecords` (a held file region, or bytes)."""
        try:
            result = await core.fetch_stored(
                topic, p.partition, p.fetch_offset, max_bytes, read_committed=read_committed
            )
        except Exception as e:
            return _fetch_error(p.partition, self._unexpected("fetch", e))
        records: bytes = result.data
        if result.span is not None:
            records = StoredRecords(ledger.hold(result.span))
        elif len(records) >= _OWN_PART_RECORDS:
            records = StoredRecords(records)
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

    # -- ListOffsets -----------------------------------------------------------------

    async def _list_offsets(self, conn: Connection, req: Request) -> Any:
        body: apis.ListOffsetsRequest = req.body
        # v0-1 have no isolation level (it decodes as 0, read_uncommitted).
        read_committed = body.isolation_level == READ_COMMITTED
        topics = []
        for t in body.topics:
            parts = await _gather(
                [self._list_one(t.name, p, read_committed) for p in t.partitions]
            )
            topics.append(apis.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
        return apis.ListOffsetsResponse(topics=tuple(topics))

    async def _list_one(
        self, topic: str, p: apis.ListOffsetsPartition, read_committed: bool
    ) -> apis.ListOffsetsPartitionResponse:
        try:
            if p.timestamp in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
                # Latest is the last stable offset for read_committed, else the HW.
                start, latest = await self._core.list_offsets(
                    topic, p.partition_index, read_committed=read_committed
                )
                offset = latest if p.timestamp == LATEST_TIMESTAMP else start
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


def _fetch_error(partition: int, code: int) -> apis.FetchPartitionResponse:
    return apis.FetchPartitionResponse(
        partition_index=partition, error_code=code, records=b""
    )


def _aborted(result: ReadResult | StoredRead) -> tuple[apis.AbortedTransaction, ...]:
    """Kafka sends this list to read_committed consumers only (null to the others); they
    skip each listed producer's records from its first offset to its ABORT marker."""
    return tuple(
        apis.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
        for a in result.aborted
    )


def _with_records(r: apis.FetchPartitionResponse, data: bytes) -> apis.FetchPartitionResponse:
    return attrs.evolve(r, records=data)


def _with_aborted(r: apis.FetchPartitionResponse) -> apis.FetchPartitionResponse:
    if r.aborted_transactions is not None:
        return r
    return attrs.evolve(r, aborted_transactions=())


__all__ = [
    "CLOSE_CONNECTION",
    "DEFAULT_PARTITIONS",
    "NO_RESPONSE",
    "BrokerIdentity",
    "Clock",
    "Connection",
    "GroupCoordinatorLike",
    "KafkaCore",
    "KafkaHandlers",
    "Outcome",
]
