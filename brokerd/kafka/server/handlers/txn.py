# -*- test-case-name: tests.kafka.server.handlers.test_txn -*-
"""Kafka transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
DescribeTransactions and ListTransactions, and InitProducerId's transactional half; and
the partition side of transactions: DescribeProducers and WriteTxnMarkers.

Each handler turns a decoded request body (:mod:`brokerd.kafka.wire.requests.apis`) into a
call of the transaction coordinator
(:class:`~brokerd.kafka.txn.coordinator.TransactionCoordinator`) and its answer into a
response message. What is decided here, on the wire side:

* partitions of topics that do not exist are refused with UNKNOWN_TOPIC_OR_PARTITION
  before the coordinator is asked (the core's topic table is the authority);
* AddPartitionsToTxn is all or nothing, as in Kafka: when any partition fails, every
  other one is answered OPERATION_NOT_ATTEMPTED;
* error codes are adapted to the request version (:func:`code_for_version`): the
  coordinator speaks the newest codes, older clients get the ones they know;
* an empty transactional id is INVALID_REQUEST, as Kafka answers;
* the brokers' forms (AddPartitionsToTxn v4+, WriteTxnMarkers) need CLUSTER_ACTION;
  AddPartitionsToTxn v4+ answers by transaction, VerifyOnly ones without adding;
* EndTxn v5 and TxnOffsetCommit v5 are KIP-890 part 2's (an epoch bump at every end;
  the group added by the commit itself);
* ListTransactions v2's pattern is compiled by :mod:`brokerd.kafka.regex`
  (INVALID_REGULAR_EXPRESSION when refused);
* without a coordinator (transactions disabled), every API that names a transactional
  id answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which every client treats as fatal
  (a retriable code would make it retry forever); DescribeTransactions answers
  TRANSACTIONAL_ID_NOT_FOUND per id and ListTransactions an empty list.

It does not keep transaction state or parse bytes, and writes markers only for
WriteTxnMarkers (through the core, as the coordinator does); dispatch is
:class:`~brokerd.kafka.listener.dispatch.KafkaHandlers`'.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
from twisted.internet import defer
from twisted.logger import Logger

from brokerd.clock import Clock
from brokerd.errors import UnknownTopicOrPartition
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.regex import SLICE_COST, InvalidRegex, Regex, compile_regex
from brokerd.kafka.server.acl_gate import (
    CLUSTER_DENIED,
    GROUP_DENIED,
    TOPIC_DENIED,
    TXN_DENIED,
    Access,
    Gate,
    answer_now,
    by_name,
    itself,
    keep_only,
    split_entries,
    topic_op,
)
from brokerd.kafka.server.handler_base import RequestContext, topic_name_now, unexpected_code
from brokerd.kafka.server.internal_topics import InternalTopics
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.txn.state import TxnState
from brokerd.kafka.txn.types import (
    TopicPartition,
    TxnDescription,
    TxnListing,
    TxnOffset,
)
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import producers as producer_apis
from brokerd.kafka.wire.messages import txn as txn_apis
from brokerd.kafka.wire.messages.producers import DESCRIBE_PRODUCERS
from brokerd.kafka.wire.messages.txn import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    LIST_TRANSACTIONS,
    TXN_OFFSET_COMMIT,
    WRITE_TXN_MARKERS,
)
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import Operation

if TYPE_CHECKING:
    from brokerd.core.api import CoreApi, CoreTopics
    from brokerd.kafka.txn.coordinator import TransactionCoordinator
    from brokerd.storage.log.producer_state import ActiveProducer

#: First version of each API whose clients know PRODUCER_FENCED (KIP-588, as each
#: schema's "adds PRODUCER_FENCED" comment says); older versions get
#: INVALID_PRODUCER_EPOCH, which they treat the same way. TxnOffsetCommit is absent on
#: purpose: no version of its schema adds the code, and Kafka answers a fenced
#: TxnOffsetCommit with INVALID_PRODUCER_EPOCH.
PRODUCER_FENCED_FROM: dict[ApiKey, int] = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
}
#: TxnOffsetCommit clients below this version may crash on COORDINATOR_LOAD_IN_PROGRESS
#: (Kafka answers them COORDINATOR_NOT_AVAILABLE instead).
TXN_OFFSET_COMMIT_LOAD_ERROR_FROM = 2
#: EndTxn from this version bumps the producer epoch at every end (KIP-890 part 2).
BUMPING_END_TXN_FROM = 5
#: The state names ListTransactions filters by.
_STATE_NAMES = frozenset(s.value for s in TxnState)
#: TxnOffsetCommit from this version adds its group to the transaction itself.
IMPLICIT_ADD_OFFSETS_FROM = 5
#: TxnOffsetCommit from this version names topics by ID only (KIP-1319).
TXN_OFFSET_COMMIT_TOPIC_IDS_FROM = 6
#: A WriteTxnMarkers (v2+) marker of this transaction version needs a newer epoch.
STRICT_MARKER_TRANSACTION_VERSION = 2
#: What a broker without a transaction coordinator answers a transactional request.
NO_COORDINATOR = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def code_for_version(api: ApiKey, version: int, code: int) -> int:
    """``code`` as a client of ``api`` at ``version`` understands it."""
    if code == ErrorCode.PRODUCER_FENCED and version < PRODUCER_FENCED_FROM.get(api, 1 << 15):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if (
        api is ApiKey.TXN_OFFSET_COMMIT
        and code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        and version < TXN_OFFSET_COMMIT_LOAD_ERROR_FROM
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return code


def _group(pairs: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partitions by topic, both in first-appearance order, without repeats (in linear
    time: a request may name a great many partitions)."""
    out: dict[str, dict[int, None]] = {}
    for topic, partition in pairs:
        out.setdefault(topic, {})[partition] = None
    return {topic: list(parts) for topic, parts in out.items()}


class TxnHandlers:
    """Answers the transaction APIs.

    :param core: the broker core (for its topic table).
    :param transactions: the transaction coordinator, or None when transactions are
        disabled (see the module docstring for what is answered then).
    """

    _log = Logger()

    def __init__(
        self, core: CoreApi, transactions: TransactionCoordinator | None, *, clock: Clock,
        internal_topics: InternalTopics | None = None,
    ) -> None:
        self._core = core
        self._txn = transactions
        self._clock = clock
        self._internal = internal_topics

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(
                ADD_PARTITIONS_TO_TXN,
                self.add_partitions_to_txn,
                add_partitions_to_txn_rule,
            ),
            route(ADD_OFFSETS_TO_TXN, self.add_offsets_to_txn, add_offsets_to_txn_rule),
            route(END_TXN, self.end_txn, end_txn_rule),
            route(TXN_OFFSET_COMMIT, self.txn_offset_commit, self.txn_offset_commit_rule),
            route(
                DESCRIBE_TRANSACTIONS,
                self.describe_transactions,
                describe_transactions_rule,
            ),
            route(LIST_TRANSACTIONS, self.list_transactions, list_transactions_rule),
            route(
                DESCRIBE_PRODUCERS, self.describe_producers, describe_producers_rule
            ),
            route(WRITE_TXN_MARKERS, self.write_txn_markers, write_txn_markers_rule),
        )

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        return unexpected_code(self._log, what, exc)

    def _missing(self, pairs: Iterable[TopicPartition]) -> set[TopicPartition]:
        """The partitions among ``pairs`` that do not exist."""
        known = self._core.topic_registry.topics()
        missing = set()
        for topic, partition in pairs:
            info = known.get(topic)
            if info is None or not 0 <= partition < info.partitions:
                missing.add((topic, partition))
        return missing

    # -- InitProducerId with a transactional id --------------------------------------

    async def init_producer_id(
        self, version: int, body: apis.InitProducerIdRequest
    ) -> apis.InitProducerIdResponse:
        """InitProducerId for a transactional producer (``body.transactional_id`` set)."""
        tid = body.transactional_id
        assert tid is not None
        if self._txn is None:
            return apis.InitProducerIdResponse(error_code=NO_COORDINATOR)
        if not tid:
            return apis.InitProducerIdResponse(error_code=ErrorCode.INVALID_REQUEST)
        try:
            result = await self._txn.init_producer_id(
                tid, body.transaction_timeout_ms, body.producer_id, body.producer_epoch
            )
        except Exception as e:
            return apis.InitProducerIdResponse(
                error_code=self._unexpected("init producer id", e)
            )
        code = code_for_version(ApiKey.INIT_PRODUCER_ID, version, result.error)
        if code:
            return apis.InitProducerIdResponse(error_code=code)
        return apis.InitProducerIdResponse(
            error_code=0, producer_id=result.producer_id, producer_epoch=result.producer_epoch
        )

    # -- AddPartitionsToTxn ----------------------------------------------------------

    async def add_partitions_to_txn(
        self, conn: RequestContext, req: Request[apis.AddPartitionsToTxnRequest]
    ) -> apis.AddPartitionsToTxnResponse:
        body = req.body
        if req.api_version >= 4:
            return apis.AddPartitionsToTxnResponse(
                results_by_transaction=tuple(
                    [
                        txn_apis.AddPartitionsToTxnResult(
                            transactional_id=t.transactional_id,
                            topic_results=await self._add_one_txn(
                                req.api_version, t.transactional_id, t.producer_id,
                                t.producer_epoch, t.topics, verify_only=t.verify_only,
                            ),
                        )
                        for t in body.transactions
                    ]
                )
            )
        return apis.AddPartitionsToTxnResponse(
            results_by_topic=await self._add_one_txn(
                req.api_version, body.transactional_id, body.producer_id,
                body.producer_epoch, body.topics, verify_only=False,
            )
        )

    async def _add_one_txn(
        self,
        version: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        topics: Sequence[apis.AddPartitionsToTxnTopic],
        *,
        verify_only: bool,
    ) -> tuple[apis.AddPartitionsToTxnTopicResult, ...]:
        """One transaction's partitions added (or with ``verify_only`` checked), answered
        by topic."""
        wanted = _group((t.name, p) for t in topics for p in t.partitions)
        pairs = [(topic, p) for topic, parts in wanted.items() for p in parts]
        if verify_only:
            codes = self._verify_partitions(transactional_id, producer_id, producer_epoch, pairs)
        else:
            codes = await self._add_partitions(
                transactional_id, producer_id, producer_epoch, pairs
            )
            if any(codes.values()):
                # All or nothing: Kafka answers the partitions that were fine this way.
                codes = {
                    tp: code or ErrorCode.OPERATION_NOT_ATTEMPTED for tp, code in codes.items()
                }
        return tuple(
            apis.AddPartitionsToTxnTopicResult(
                name=topic,
                results_by_partition=tuple(
                    apis.AddPartitionsToTxnPartitionResult(
                        partition_index=p,
                        partition_error_code=code_for_version(
                            ApiKey.ADD_PARTITIONS_TO_TXN, version, codes[(topic, p)]
                        ),
                    )
                    for p in parts
                ),
            )
            for topic, parts in wanted.items()
        )

    def _verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        pairs: list[TopicPartition],
    ) -> dict[TopicPartition, int]:
        if self._txn is None:
            return dict.fromkeys(pairs, NO_COORDINATOR)
        try:
            answered: Mapping[TopicPartition, int] = self._txn.verify_partitions(
                transactional_id, producer_id, producer_epoch, pairs
            )
        except Exception as e:
            return dict.fromkeys(pairs, self._unexpected("verify partitions in txn", e))
        return {tp: answered.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in pairs}

    async def _add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        pairs: list[TopicPartition],
    ) -> dict[TopicPartition, int]:
        def every(code: int) -> dict[TopicPartition, int]:
            return dict.fromkeys(pairs, code)

        if self._txn is None:
            return every(NO_COORDINATOR)
        if not transactional_id:
            return every(ErrorCode.INVALID_REQUEST)
        missing = self._missing(pairs)
        if missing:
            return {
                tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in missing else ErrorCode.NONE
                for tp in pairs
            }
        if not pairs:
            return {}
        try:
            answered: Mapping[TopicPartition, int] = await self._txn.add_partitions(
                transactional_id, producer_id, producer_epoch, pairs
            )
        except Exception as e:
            return every(self._unexpected("add partitions to txn", e))
        # A partition the coordinator did not answer for was not added.
        return {tp: answered.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in pairs}

    # -- AddOffsetsToTxn and EndTxn --------------------------------------------------

    async def _txn_code(
        self,
        transactional_id: str,
        what: str,
        call: Callable[[TransactionCoordinator], Awaitable[int]],
    ) -> int:
        """The error code of one transaction operation: NOT_COORDINATOR without a
        transaction coordinator, INVALID_REQUEST for an empty transactional id, else
        the coordinator's answer (an unexpected failure logged and mapped)."""
        if self._txn is None:
            return NO_COORDINATOR
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        try:
            return await call(self._txn)
        except Exception as e:
            return self._unexpected(what, e)

    async def add_offsets_to_txn(
        self, conn: RequestContext, req: Request[apis.AddOffsetsToTxnRequest]
    ) -> apis.AddOffsetsToTxnResponse:
        body = req.body
        code = await self._txn_code(
            body.transactional_id, "add offsets to txn",
            lambda txn: txn.add_offsets(
                body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
            ),
        )
        return apis.AddOffsetsToTxnResponse(
            error_code=code_for_version(ApiKey.ADD_OFFSETS_TO_TXN, req.api_version, code)
        )

    async def end_txn(
        self, conn: RequestContext, req: Request[apis.EndTxnRequest]
    ) -> apis.EndTxnResponse:
        body = req.body
        if req.api_version >= BUMPING_END_TXN_FROM and self._txn is not None:
            return await self._end_txn_bumping(body)
        code = await self._txn_code(
            body.transactional_id, "end txn",
            lambda txn: txn.end_txn(
                body.transactional_id, body.producer_id, body.producer_epoch, body.committed
            ),
        )
        return apis.EndTxnResponse(
            error_code=code_for_version(ApiKey.END_TXN, req.api_version, code)
        )

    async def _end_txn_bumping(self, body: apis.EndTxnRequest) -> apis.EndTxnResponse:
        assert self._txn is not None
        if not body.transactional_id:
            return apis.EndTxnResponse(error_code=ErrorCode.INVALID_REQUEST)
        try:
            result = await self._txn.end_txn_bumping(
                body.transactional_id, body.producer_id, body.producer_epoch, body.committed
            )
        except Exception as e:
            return apis.EndTxnResponse(error_code=self._unexpected("end txn", e))
        return apis.EndTxnResponse(
            error_code=result.error,
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
        )

    # -- TxnOffsetCommit -------------------------------------------------------------

    def txn_offset_commit_rule(
        self, access: Access, req: Request[apis.TxnOffsetCommitRequest]
    ) -> Gate[apis.TxnOffsetCommitRequest, apis.TxnOffsetCommitResponse]:
        """TxnOffsetCommit's ACL rule (v6+: on the names of the topics' IDs)."""
        if req.api_version >= TXN_OFFSET_COMMIT_TOPIC_IDS_FROM:
            req = Request(req.header, with_txn_commit_names(req.body, self._core.topic_registry))
        return txn_offset_commit_rule(access, req)

    async def txn_offset_commit(
        self, conn: RequestContext, req: Request[apis.TxnOffsetCommitRequest]
    ) -> apis.TxnOffsetCommitResponse:
        by_id = req.api_version >= TXN_OFFSET_COMMIT_TOPIC_IDS_FROM
        body: apis.TxnOffsetCommitRequest = (
            with_txn_commit_names(req.body, self._core.topic_registry) if by_id else req.body
        )
        codes: dict[TopicPartition, int] = {}
        offsets: dict[TopicPartition, TxnOffset] = {}
        # v6+: a topic ID no topic has is UNKNOWN_TOPIC_ID, answered below.
        named = [t for t in body.topics if t.name or not by_id]
        unnamed = [t for t in body.topics if not (t.name or not by_id)]
        missing = self._missing((t.name, p.partition_index) for t in named
                                for p in t.partitions)
        for t in named:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if self._txn is not None and tp in missing:
                    codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    # A partition named twice: the last offset wins, as in Kafka's map.
                    offsets[tp] = TxnOffset(
                        p.committed_offset, p.committed_leader_epoch, p.committed_metadata
                    )
        if self._txn is None:
            codes.update(dict.fromkeys(offsets, NO_COORDINATOR))
        elif offsets:
            try:
                stored: Mapping[TopicPartition, int] = await self._txn.txn_offset_commit(
                    body.transactional_id, body.group_id, body.producer_id,
                    body.producer_epoch, offsets, generation_id=body.generation_id,
                    member_id=body.member_id, group_instance_id=body.group_instance_id,
                    # v5 (KIP-890 part 2): no AddOffsetsToTxn came first.
                    add_group=req.api_version >= IMPLICIT_ADD_OFFSETS_FROM,
                )
            except Exception as e:
                code = self._unexpected("txn offset commit", e)
                stored = dict.fromkeys(offsets, code)
            for tp in offsets:
                codes[tp] = stored.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
        ids = {t.name: t.topic_id for t in named}
        by_topic = _group(tp for t in named for tp in
                          ((t.name, p.partition_index) for p in t.partitions))
        unknown_ids = _group(
            (t.topic_id.hex, p.partition_index)
            for t in unnamed for p in t.partitions
        )
        return apis.TxnOffsetCommitResponse(
            topics=(
                *(
                    apis.TxnOffsetCommitResponseTopic(
                        name=topic,
                        topic_id=ids[topic],
                        partitions=tuple(
                            apis.TxnOffsetCommitResponsePartition(
                                partition_index=p,
                                error_code=code_for_version(
                                    ApiKey.TXN_OFFSET_COMMIT, req.api_version, codes[(topic, p)]
                                ),
                            )
                            for p in parts
                        ),
                    )
                    for topic, parts in by_topic.items()
                ),
                *(
                    apis.TxnOffsetCommitResponseTopic(
                        topic_id=uuid.UUID(hex=topic_id),
                        partitions=tuple(
                            apis.TxnOffsetCommitResponsePartition(
                                partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_ID
                            )
                            for p in parts
                        ),
                    )
                    for topic_id, parts in unknown_ids.items()
                ),
            )
        )

    # -- DescribeTransactions and ListTransactions -----------------------------------

    async def describe_transactions(
        self, conn: RequestContext, req: Request[apis.DescribeTransactionsRequest]
    ) -> apis.DescribeTransactionsResponse:
        body = req.body
        ids = list(body.transactional_ids)
        if self._txn is None:
            found = [TxnDescription(tid, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND) for tid in ids]
        else:
            try:
                found = list(self._txn.describe(ids))
            except Exception as e:
                code = self._unexpected("describe transactions", e)
                found = [TxnDescription(tid, code) for tid in ids]
        return apis.DescribeTransactionsResponse(
            transaction_states=tuple(_described(d) for d in found)
        )

    async def list_transactions(
        self, conn: RequestContext, req: Request[apis.ListTransactionsRequest]
    ) -> apis.ListTransactionsResponse:
        body = req.body
        unknown = tuple(s for s in body.state_filters if s not in _STATE_NAMES)
        pattern: Regex | None = None
        if body.transactional_id_pattern:
            try:
                pattern = compile_regex(body.transactional_id_pattern)
            except InvalidRegex as e:
                self._log.debug("ListTransactions pattern refused: {why}", why=e)
                return apis.ListTransactionsResponse(
                    error_code=ErrorCode.INVALID_REGULAR_EXPRESSION
                )
        if self._txn is None:
            return apis.ListTransactionsResponse(unknown_state_filters=unknown)
        try:
            listed = self._txn.list_transactions(
                list(body.state_filters),
                list(body.producer_id_filters),
                duration_filter_ms=body.duration_filter,
            )
            if pattern is not None:
                listed = await _matching(listed, pattern, self._clock)
        except Exception as e:
            return apis.ListTransactionsResponse(
                error_code=self._unexpected("list transactions", e),
                unknown_state_filters=unknown,
            )
        return apis.ListTransactionsResponse(
            unknown_state_filters=unknown,
            transaction_states=tuple(
                apis.ListTransactionsState(
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    transaction_state=t.state,
                )
                for t in listed
            ),
        )

    # -- DescribeProducers -----------------------------------------------------------

    async def describe_producers(
        self, conn: RequestContext, req: Request[producer_apis.DescribeProducersRequest]
    ) -> producer_apis.DescribeProducersResponse:
        body = req.body
        topics = []
        for t in body.topics:
            parts = [
                await self._producers_of(t.name, p)
                for p in dict.fromkeys(t.partition_indexes)
            ]
            topics.append(
                producer_apis.DescribeProducersTopicResponse(name=t.name, partitions=tuple(parts))
            )
        return producer_apis.DescribeProducersResponse(topics=tuple(topics))

    async def _producers_of(
        self, topic: str, partition: int
    ) -> producer_apis.DescribeProducersPartitionResponse:
        def refused(code: int) -> producer_apis.DescribeProducersPartitionResponse:
            return producer_apis.DescribeProducersPartitionResponse(
                partition_index=partition, error_code=code
            )

        internal = self._internal.get(topic) if self._internal is not None else None
        if internal is not None:
            # Presented, not stored as a log of produced batches: no producer ever writes
            # to it (transactional offset commits go to the offsets journal), so it has no
            # active producers, and kafka-transactions' find-hanging finds none there.
            if 0 <= partition < internal.partitions:
                return producer_apis.DescribeProducersPartitionResponse(
                    partition_index=partition
                )
            return refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if self._missing([(topic, partition)]):
            return refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            found = await self._core.transactions.describe_producers(topic, partition)
        except UnknownTopicOrPartition:
            return refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        except Exception as e:
            return refused(self._unexpected("describe producers", e))
        return producer_apis.DescribeProducersPartitionResponse(
            partition_index=partition,
            active_producers=tuple(_producer_entry(p, start) for p, start in found),
        )

    # -- WriteTxnMarkers -------------------------------------------------------------

    async def write_txn_markers(
        self, conn: RequestContext, req: Request[txn_apis.WriteTxnMarkersRequest]
    ) -> txn_apis.WriteTxnMarkersResponse:
        body = req.body
        return txn_apis.WriteTxnMarkersResponse(
            markers=tuple([await self._write_marker(m) for m in body.markers])
        )

    async def _write_marker(
        self, marker: txn_apis.WritableTxnMarker
    ) -> txn_apis.WritableTxnMarkerResult:
        wanted = _group((t.name, p) for t in marker.topics for p in t.partition_indexes)
        pairs = [(topic, p) for topic, parts in wanted.items() for p in parts]
        missing = self._missing(pairs)
        codes: dict[TopicPartition, int] = dict.fromkeys(
            missing, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        present = []
        for tp in pairs:
            if tp not in missing:
                code = await self._marker_epoch_error(tp, marker)
                if code:
                    codes[tp] = code
                else:
                    present.append(tp)
        if present:
            try:
                await self._core.transactions.write_txn_markers(
                    present, marker.producer_id, marker.producer_epoch,
                    commit=marker.transaction_result,
                    coordinator_epoch=marker.coordinator_epoch,
                )
            except Exception as e:
                codes.update(dict.fromkeys(present, self._unexpected("write txn markers", e)))
        return txn_apis.WritableTxnMarkerResult(
            producer_id=marker.producer_id,
            topics=tuple(
                txn_apis.WritableTxnMarkerTopicResult(
                    name=topic,
                    partitions=tuple(
                        txn_apis.WritableTxnMarkerPartitionResult(
                            partition_index=p, error_code=codes.get((topic, p), 0)
                        )
                        for p in parts
                    ),
                )
                for topic, parts in wanted.items()
            ),
        )


    async def _marker_epoch_error(
        self, tp: TopicPartition, marker: txn_apis.WritableTxnMarker
    ) -> int:
        """INVALID_PRODUCER_EPOCH when the partition already knows the producer at a newer
        epoch than the marker's (a Kafka partition leader refuses such a marker: it
        would end a newer transaction in the old epoch's name). A v2 marker of
        transaction version 2 (KIP-1228: KIP-890 part 2 ends carry a bumped epoch) must be
        newer than the producer's epoch, unless it repeats the marker that already ended
        the transaction (same epoch, nothing open on the partition)."""
        try:
            found = await self._core.transactions.describe_producers(*tp)
        except UnknownTopicOrPartition:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        except Exception as e:
            return self._unexpected("write txn markers", e)
        strict = marker.transaction_version >= STRICT_MARKER_TRANSACTION_VERSION
        for producer, start in found:
            if producer.producer_id != marker.producer_id:
                continue
            if producer.epoch > marker.producer_epoch or (
                strict and producer.epoch == marker.producer_epoch and start >= 0
            ):
                return ErrorCode.INVALID_PRODUCER_EPOCH
        return ErrorCode.NONE


def _producer_entry(p: ActiveProducer, txn_start: int) -> producer_apis.ProducerStateEntry:
    return producer_apis.ProducerStateEntry(
        producer_id=p.producer_id,
        producer_epoch=p.epoch,
        last_sequence=p.last_sequence,
        last_timestamp=p.last_timestamp,
        # brokerd's one transaction coordinator writes every marker with epoch 0; -1 is
        # Kafka's answer for a producer no marker has been seen for.
        coordinator_epoch=0 if p.marked else -1,
        current_txn_start_offset=txn_start,
    )


def _described(d: TxnDescription) -> apis.DescribeTransactionsState:
    return apis.DescribeTransactionsState(
        error_code=d.error,
        transactional_id=d.transactional_id,
        transaction_state=d.state,
        transaction_timeout_ms=d.timeout_ms,
        transaction_start_time_ms=d.start_time_ms,
        producer_id=d.producer_id,
        producer_epoch=d.producer_epoch,
        topic_partitions=tuple(
            apis.DescribeTransactionsTopicData(name=topic, partition_indexes=tuple(parts))
            for topic, parts in _group(d.partitions).items()
        ),
    )


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


def with_txn_commit_names(
    body: apis.TxnOffsetCommitRequest, core: CoreTopics
) -> apis.TxnOffsetCommitRequest:
    """A TxnOffsetCommit v6+ request with each topic's ``name`` that of its ID ("" for an
    ID no topic has)."""
    return attrs.evolve(body, topics=tuple(
        attrs.evolve(t, name=topic_name_now(core, t.topic_id)) for t in body.topics
    ))


def _txn_commit_topics_denied(
    code: ErrorCode, topics: Sequence[apis.TxnOffsetCommitRequestTopic]
) -> tuple[apis.TxnOffsetCommitResponseTopic, ...]:
    return tuple(
        apis.TxnOffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=tuple(
            apis.TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=code
            )
            for p in t.partitions
        ))
        for t in topics
    )


def txn_offset_commit_rule(
    access: Access, req: Request[apis.TxnOffsetCommitRequest]
) -> Gate[apis.TxnOffsetCommitRequest, apis.TxnOffsetCommitResponse]:
    """TxnOffsetCommit's ACL rule on topic names (v6+ requests come with the names of
    their IDs filled in; an entry without one, an ID no topic has, passes for the handler
    to answer UNKNOWN_TOPIC_ID)."""
    body = req.body
    by_id = req.api_version >= TXN_OFFSET_COMMIT_TOPIC_IDS_FROM
    for ok, code in (
        (access.txn(Operation.WRITE, body.transactional_id), TXN_DENIED),
        (access.group(Operation.READ, body.group_id), GROUP_DENIED),
    ):
        if not ok:
            return answer_now(req, apis.TxnOffsetCommitResponse(
                topics=_txn_commit_topics_denied(code, body.topics)
            ))
    topic_allowed = topic_op(Operation.READ, access)

    def error_of(name: str) -> ErrorCode | None:
        if by_id and not name:
            return None
        return topic_allowed(name)

    return split_entries(
        req, body.topics, by_name, error_of,
        lambda t, code: _txn_commit_topics_denied(code, (t,))[0],
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )


def add_partitions_to_txn_rule(
    access: Access, req: Request[apis.AddPartitionsToTxnRequest]
) -> Gate[apis.AddPartitionsToTxnRequest, apis.AddPartitionsToTxnResponse]:
    body = req.body
    if req.api_version >= 4:
        # The brokers' form: the sending broker is trusted with every transaction it
        # names (Kafka checks CLUSTER_ACTION only, for the whole request).
        if access.cluster(Operation.CLUSTER_ACTION):
            return Gate(req)
        return answer_now(req, apis.AddPartitionsToTxnResponse(error_code=CLUSTER_DENIED))

    def answer(
        code_of: Callable[[str], ErrorCode],
    ) -> Gate[apis.AddPartitionsToTxnRequest, apis.AddPartitionsToTxnResponse]:
        return answer_now(req, apis.AddPartitionsToTxnResponse(results_by_topic=tuple(
            apis.AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=tuple(
                apis.AddPartitionsToTxnPartitionResult(
                    partition_index=i, partition_error_code=code_of(t.name)
                )
                for i in t.partitions
            ))
            for t in body.topics
        )))

    if not access.txn(Operation.WRITE, body.transactional_id):
        return answer(lambda _name: TXN_DENIED)
    denied = {t.name for t in body.topics if access.topic_error(Operation.WRITE, t.name)}
    if denied:
        # Kafka adds nothing when one partition is refused; the rest are not attempted.
        return answer(
            lambda n: TOPIC_DENIED if n in denied else ErrorCode.OPERATION_NOT_ATTEMPTED
        )
    return Gate(req)


def add_offsets_to_txn_rule(
    access: Access, req: Request[apis.AddOffsetsToTxnRequest]
) -> Gate[apis.AddOffsetsToTxnRequest, apis.AddOffsetsToTxnResponse]:
    body = req.body
    if not access.txn(Operation.WRITE, body.transactional_id):
        return answer_now(req, apis.AddOffsetsToTxnResponse(error_code=TXN_DENIED))
    if not access.group(Operation.READ, body.group_id):
        return answer_now(req, apis.AddOffsetsToTxnResponse(error_code=GROUP_DENIED))
    return Gate(req)


def end_txn_rule(
    access: Access, req: Request[apis.EndTxnRequest]
) -> Gate[apis.EndTxnRequest, apis.EndTxnResponse]:
    if access.txn(Operation.WRITE, req.body.transactional_id):
        return Gate(req)
    return answer_now(req, apis.EndTxnResponse(error_code=TXN_DENIED))


def describe_transactions_rule(
    access: Access, req: Request[apis.DescribeTransactionsRequest]
) -> Gate[apis.DescribeTransactionsRequest, apis.DescribeTransactionsResponse]:
    return split_entries(
        req, req.body.transactional_ids, itself,
        lambda t: None if access.txn(Operation.DESCRIBE, t) else TXN_DENIED,
        lambda t, code: apis.DescribeTransactionsState(error_code=code, transactional_id=t),
        narrow=lambda kept: attrs.evolve(req.body, transactional_ids=kept),
        widen=lambda r, denied: attrs.evolve(
            r, transaction_states=(*r.transaction_states, *denied)
        ),
    )


async def _matching(
    listed: Sequence[TxnListing], pattern: Regex, clock: Clock
) -> list[TxnListing]:
    """The listings whose transactional id ``pattern`` matches, matched in slices of
    :data:`~brokerd.kafka.regex.SLICE_COST` work with a reactor turn between them: a
    costly pattern against thousands of ids would otherwise hold every connection."""
    kept: list[TxnListing] = []
    spent = 0
    for listing in listed:
        if spent >= SLICE_COST:
            await _next_turn(clock)
            spent = 0
        spent += pattern.work(listing.transactional_id)
        if pattern.fullmatch(listing.transactional_id):
            kept.append(listing)
    return kept


def _next_turn(clock: Clock) -> defer.Deferred[None]:
    """Fires on the reactor's next turn, after what is ready to run now."""
    d: defer.Deferred[None] = defer.Deferred()
    clock.callLater(0, d.callback, None)
    return d


def list_transactions_rule(
    access: Access, req: Request[apis.ListTransactionsRequest]
) -> Gate[apis.ListTransactionsRequest, apis.ListTransactionsResponse]:
    return Gate(req, finish=keep_only(
        lambda r: r.transaction_states,
        lambda r, kept: attrs.evolve(r, transaction_states=kept),
        lambda s: access.txn(Operation.DESCRIBE, s.transactional_id),
    ))


def describe_producers_rule(
    access: Access, req: Request[producer_apis.DescribeProducersRequest]
) -> Gate[producer_apis.DescribeProducersRequest, producer_apis.DescribeProducersResponse]:
    body = req.body
    return split_entries(
        req, body.topics, by_name, topic_op(Operation.READ, access),
        lambda t, code: producer_apis.DescribeProducersTopicResponse(
            name=t.name,
            partitions=tuple(
                producer_apis.DescribeProducersPartitionResponse(
                    partition_index=p, error_code=code
                )
                for p in dict.fromkeys(t.partition_indexes)
            ),
        ),
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )


def write_txn_markers_rule(
    access: Access, req: Request[txn_apis.WriteTxnMarkersRequest]
) -> Gate[txn_apis.WriteTxnMarkersRequest, txn_apis.WriteTxnMarkersResponse]:
    if access.cluster(Operation.CLUSTER_ACTION):
        return Gate(req)
    body = req.body
    return answer_now(req, txn_apis.WriteTxnMarkersResponse(markers=tuple(
        txn_apis.WritableTxnMarkerResult(producer_id=m.producer_id, topics=tuple(
            txn_apis.WritableTxnMarkerTopicResult(name=t.name, partitions=tuple(
                txn_apis.WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=CLUSTER_DENIED
                )
                for p in t.partition_indexes
            ))
            for t in m.topics
        ))
        for m in body.markers
    )))


__all__ = [
    "NO_COORDINATOR",
    "PRODUCER_FENCED_FROM",
    "TxnHandlers",
    "code_for_version",
]
