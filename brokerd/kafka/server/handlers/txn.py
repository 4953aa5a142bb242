# -*- test-case-name: tests.test_txn_wire_handlers -*-
"""Kafka transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
DescribeTransactions and ListTransactions, and InitProducerId's transactional half.

Each handler turns a decoded request body (:mod:`brokerd.kafka.wire.apis`) into a call of the
transaction coordinator (duck-typed by
:class:`~brokerd.kafka.txn.types.TransactionCoordinatorLike`) and its answer into a
response message. What is decided here, on the wire side:

* partitions of topics that do not exist are refused with UNKNOWN_TOPIC_OR_PARTITION
  before the coordinator is asked (the core's topic table is the authority);
* AddPartitionsToTxn is all or nothing, as in Kafka: when any partition fails, every
  other one is answered OPERATION_NOT_ATTEMPTED;
* error codes are adapted to the request version (:func:`code_for_version`): the
  coordinator speaks the newest codes, older clients get the ones they know;
* an empty transactional id is INVALID_REQUEST, as Kafka answers;
* without a coordinator (transactions disabled), every API that names a transactional
  id answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which every client treats as fatal
  (a retriable code would make it retry forever); DescribeTransactions answers
  TRANSACTIONAL_ID_NOT_FOUND per id and ListTransactions an empty list.

It does not keep transaction state, write markers or parse bytes; dispatch is
:class:`~brokerd.kafka.server.dispatch.KafkaHandlers`'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
from twisted.logger import Logger

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.authorize import (
    GROUP_DENIED,
    TOPIC_DENIED,
    TXN_DENIED,
    Access,
    Gate,
    answer_now,
    by_name,
    commit_topics_denied,
    itself,
    keep_only,
    split_entries,
    topic_op,
)
from brokerd.kafka.server.handler_base import Connection, unexpected_code
from brokerd.kafka.server.route import Route
from brokerd.kafka.txn.types import (
    TXN_STATE_NAMES,
    TopicPartition,
    TransactionCoordinatorLike,
    TxnDescription,
    TxnOffset,
)
from brokerd.kafka.wire import apis
from brokerd.kafka.wire.apis import Request
from brokerd.kafka.wire.codec import ApiKey
from brokerd.security.acl import Operation

if TYPE_CHECKING:
    from brokerd.kafka.server.core_face import KafkaCore

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

    def __init__(self, core: KafkaCore, transactions: TransactionCoordinatorLike | None) -> None:
        self._core = core
        self._txn = transactions

    def routes(self) -> tuple[Route, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            Route(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                self.add_partitions_to_txn,
                add_partitions_to_txn_rule,
            ),
            Route(ApiKey.ADD_OFFSETS_TO_TXN, self.add_offsets_to_txn, add_offsets_to_txn_rule),
            Route(ApiKey.END_TXN, self.end_txn, end_txn_rule),
            Route(ApiKey.TXN_OFFSET_COMMIT, self.txn_offset_commit, txn_offset_commit_rule),
            Route(
                ApiKey.DESCRIBE_TRANSACTIONS,
                self.describe_transactions,
                describe_transactions_rule,
            ),
            Route(ApiKey.LIST_TRANSACTIONS, self.list_transactions, list_transactions_rule),
        )

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        return unexpected_code(self._log, what, exc)

    def _missing(self, pairs: Iterable[TopicPartition]) -> set[TopicPartition]:
        """The partitions among ``pairs`` that do not exist."""
        known = self._core.topics()
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

    async def add_partitions_to_txn(self, conn: Connection, req: Request) -> Any:
        body: apis.AddPartitionsToTxnRequest = req.body
        wanted = _group((t.name, p) for t in body.topics for p in t.partitions)
        pairs = [(topic, p) for topic, parts in wanted.items() for p in parts]
        codes = await self._add_partitions(body, pairs)
        if any(codes.values()):
            # All or nothing: Kafka answers the partitions that were fine this way.
            codes = {
                tp: code or ErrorCode.OPERATION_NOT_ATTEMPTED for tp, code in codes.items()
            }
        return apis.AddPartitionsToTxnResponse(
            results_by_topic=tuple(
                apis.AddPartitionsToTxnTopicResult(
                    name=topic,
                    results_by_partition=tuple(
                        apis.AddPartitionsToTxnPartitionResult(
                            partition_index=p,
                            partition_error_code=code_for_version(
                                ApiKey.ADD_PARTITIONS_TO_TXN, req.api_version, codes[(topic, p)]
                            ),
                        )
                        for p in parts
                    ),
                )
                for topic, parts in wanted.items()
            )
        )

    async def _add_partitions(
        self, body: apis.AddPartitionsToTxnRequest, pairs: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        def every(code: int) -> dict[TopicPartition, int]:
            return dict.fromkeys(pairs, code)

        if self._txn is None:
            return every(NO_COORDINATOR)
        if not body.transactional_id:
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
                body.transactional_id, body.producer_id, body.producer_epoch, pairs
            )
        except Exception as e:
            return every(self._unexpected("add partitions to txn", e))
        # A partition the coordinator did not answer for was not added.
        return {tp: answered.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in pairs}

    # -- AddOffsetsToTxn and EndTxn --------------------------------------------------

    async def add_offsets_to_txn(self, conn: Connection, req: Request) -> Any:
        body: apis.AddOffsetsToTxnRequest = req.body
        if self._txn is None:
            code: int = NO_COORDINATOR
        elif not body.transactional_id:
            code = ErrorCode.INVALID_REQUEST
        else:
            try:
                code = await self._txn.add_offsets(
                    body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
                )
            except Exception as e:
                code = self._unexpected("add offsets to txn", e)
        return apis.AddOffsetsToTxnResponse(
            error_code=code_for_version(ApiKey.ADD_OFFSETS_TO_TXN, req.api_version, code)
        )

    async def end_txn(self, conn: Connection, req: Request) -> Any:
        body: apis.EndTxnRequest = req.body
        if self._txn is None:
            code: int = NO_COORDINATOR
        elif not body.transactional_id:
            code = ErrorCode.INVALID_REQUEST
        else:
            try:
                code = await self._txn.end_txn(
                    body.transactional_id, body.producer_id, body.producer_epoch,
                    body.committed,
                )
            except Exception as e:
                code = self._unexpected("end txn", e)
        return apis.EndTxnResponse(
            error_code=code_for_version(ApiKey.END_TXN, req.api_version, code)
        )

    # -- TxnOffsetCommit -------------------------------------------------------------

    async def txn_offset_commit(self, conn: Connection, req: Request) -> Any:
        body: apis.TxnOffsetCommitRequest = req.body
        codes: dict[TopicPartition, int] = {}
        offsets: dict[TopicPartition, TxnOffset] = {}
        missing = self._missing((t.name, p.partition_index) for t in body.topics
                                for p in t.partitions)
        for t in body.topics:
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
                )
            except Exception as e:
                code = self._unexpected("txn offset commit", e)
                stored = dict.fromkeys(offsets, code)
            for tp in offsets:
                codes[tp] = stored.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
        by_topic = _group(tp for t in body.topics for tp in
                          ((t.name, p.partition_index) for p in t.partitions))
        return apis.TxnOffsetCommitResponse(
            topics=tuple(
                apis.TxnOffsetCommitResponseTopic(
                    name=topic,
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
            )
        )

    # -- DescribeTransactions and ListTransactions -----------------------------------

    async def describe_transactions(self, conn: Connection, req: Request) -> Any:
        body: apis.DescribeTransactionsRequest = req.body
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

    async def list_transactions(self, conn: Connection, req: Request) -> Any:
        body: apis.ListTransactionsRequest = req.body
        unknown = tuple(s for s in body.state_filters if s not in TXN_STATE_NAMES)
        if self._txn is None:
            return apis.ListTransactionsResponse(unknown_state_filters=unknown)
        try:
            listed = self._txn.list_transactions(
                list(body.state_filters), list(body.producer_id_filters)
            )
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


# -- ACL rules (brokerd.kafka.server.authorize) ----------------------------------------


def txn_offset_commit_rule(access: Access, req: Request) -> Gate:
    body: apis.TxnOffsetCommitRequest = req.body
    topic_cls = apis.TxnOffsetCommitResponseTopic
    part_cls = apis.TxnOffsetCommitResponsePartition
    for ok, code in (
        (access.txn(Operation.WRITE, body.transactional_id), TXN_DENIED),
        (access.group(Operation.READ, body.group_id), GROUP_DENIED),
    ):
        if not ok:
            return answer_now(req, apis.TxnOffsetCommitResponse(
                topics=commit_topics_denied(code, body.topics, topic_cls, part_cls)
            ))
    return split_entries(
        req, body.topics, by_name, topic_op(Operation.READ, access),
        lambda t, code: commit_topics_denied(code, (t,), topic_cls, part_cls)[0],
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )


def add_partitions_to_txn_rule(access: Access, req: Request) -> Gate:
    body: apis.AddPartitionsToTxnRequest = req.body

    def answer(code_of: Callable[[str], ErrorCode]) -> Gate:
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


def add_offsets_to_txn_rule(access: Access, req: Request) -> Gate:
    body: apis.AddOffsetsToTxnRequest = req.body
    if not access.txn(Operation.WRITE, body.transactional_id):
        return answer_now(req, apis.AddOffsetsToTxnResponse(error_code=TXN_DENIED))
    if not access.group(Operation.READ, body.group_id):
        return answer_now(req, apis.AddOffsetsToTxnResponse(error_code=GROUP_DENIED))
    return Gate(req)


def end_txn_rule(access: Access, req: Request) -> Gate:
    if access.txn(Operation.WRITE, req.body.transactional_id):
        return Gate(req)
    return answer_now(req, apis.EndTxnResponse(error_code=TXN_DENIED))


def describe_transactions_rule(access: Access, req: Request) -> Gate:
    return split_entries(
        req, req.body.transactional_ids, itself,
        lambda t: None if access.txn(Operation.DESCRIBE, t) else TXN_DENIED,
        lambda t, code: apis.DescribeTransactionsState(error_code=code, transactional_id=t),
        narrow=lambda kept: attrs.evolve(req.body, transactional_ids=kept),
        widen=lambda r, denied: attrs.evolve(
            r, transaction_states=(*r.transaction_states, *denied)
        ),
    )


def list_transactions_rule(access: Access, req: Request) -> Gate:
    return Gate(req, finish=keep_only(
        lambda r: r.transaction_states,
        lambda r, kept: attrs.evolve(r, transaction_states=kept),
        lambda s: access.txn(Operation.DESCRIBE, s.transactional_id),
    ))



__all__ = [
    "NO_COORDINATOR",
    "PRODUCER_FENCED_FROM",
    "TxnHandlers",
    "code_for_version",
]
