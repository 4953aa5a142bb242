# -*- test-case-name: tests.test_kafka_protocol -*-
"""Kafka request dispatch, and the data path: Produce and ListOffsets (Fetch in
:mod:`brokerd.kafka.server.handlers.fetch`).

:class:`KafkaHandlers` routes each decoded request (:mod:`brokerd.kafka.wire.apis`) to its
API's handler and answers Produce and ListOffsets itself; administration APIs are in
:mod:`brokerd.kafka.server.handlers.admin`, consumer-group APIs in
:mod:`brokerd.kafka.server.handlers.groups`, transaction APIs in
:mod:`brokerd.kafka.server.handlers.txn`. The data path knows two isolation levels:
read_uncommitted reads up to the high watermark; read_committed reads up to the last
stable offset and gets the aborted transactions of the data returned (the core
computes both; see ``docs/kafka.md``). A handler returns a response message, a
:data:`NO_RESPONSE` (acks=0 Produce) or :data:`CLOSE_CONNECTION` (acks=0 Produce that
failed: Kafka closes the connection, since it cannot answer). Errors from the core arrive
as ``brokerd.errors`` exceptions and become per-partition or per-topic Kafka error codes
(:mod:`brokerd.kafka.errors`).

It does not parse or build bytes, touch transports, or decide request order: the
protocol (:mod:`brokerd.kafka.server.protocol`) calls :meth:`KafkaHandlers.handle` for one
request at a time. The core and coordinators are duck-typed by :class:`KafkaCore`,
:class:`~brokerd.kafka.server.handlers.groups.GroupCoordinatorLike` and
:class:`~brokerd.kafka.txn.types.TransactionCoordinatorLike` so tests can pass fakes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.errors import InvalidRecord
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server import authorize
from brokerd.kafka.server.handler_base import (
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
from brokerd.kafka.server.handler_base import gather as _gather
from brokerd.kafka.server.handler_base import message as _message
from brokerd.kafka.server.handlers.acl import AclHandlers
from brokerd.kafka.server.handlers.admin import DEFAULT_PARTITIONS, AdminHandlers
from brokerd.kafka.server.handlers.compaction import invalid_record_response
from brokerd.kafka.server.handlers.configs import ConfigHandlers
from brokerd.kafka.server.handlers.fetch import (
    DEFAULT_FETCH_MAX_BYTES,
    READ_COMMITTED,
    FetchHandler,
)
from brokerd.kafka.server.handlers.group_admin import GroupAdminHandlers, HasGroupAdmin
from brokerd.kafka.server.handlers.groups import (
    GroupCoordinatorLike,
    GroupHandlers,
)
from brokerd.kafka.server.handlers.partitions import PartitionAdminCore, PartitionAdminHandlers
from brokerd.kafka.server.handlers.sasl import ScramAdminHandlers, ScramStore
from brokerd.kafka.server.handlers.txn import TxnHandlers
from brokerd.kafka.txn.types import TransactionCoordinatorLike
from brokerd.kafka.wire import apis
from brokerd.kafka.wire.apis import Request
from brokerd.kafka.wire.codec import ApiKey
from brokerd.net.answer_budget import AnswerBudget
from brokerd.security.acl import AclAuthorizer
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
#: First Produce version that carries RecordBatch v2; 0-2 are only advertised so that
#: librdkafka older than 2.11.1 enables compression (it probes Produce v0 for that), and
#: are refused, as Kafka 4 does.
MIN_IMPLEMENTED_PRODUCE_VERSION = 3

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
        (:class:`~brokerd.kafka.server.handlers.groups.GroupCoordinatorLike`).
    :param identity: node id, advertised host/port and cluster id (read live).
    :param clock: for the acks=all produce timeout and the long-poll deadline.
    :param default_partitions: partitions for CreateTopics with num_partitions -1.
    :param transactions: the transaction coordinator; None = transactions disabled
        (see :mod:`brokerd.kafka.server.handlers.txn` for what is answered then).
    :param authorizer: checks every request (:mod:`brokerd.kafka.server.authorize`); None =
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
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        answer_budget: AnswerBudget | None = None,
    ) -> None:
        self._core = core
        self._clock = clock
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
            ApiKey.FETCH: FetchHandler(
                core, clock=clock, fetch_max_bytes=fetch_max_bytes, answer_budget=answer_budget
            ).fetch,
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
