"""Tests for the Kafka transaction handlers (brokerd.kafka.server.handlers.txn) through the
listener: requests are encoded with the codec, fed to a KafkaProtocol over a
StringTransport, and the responses decoded. The transaction coordinator is a fake that
records its calls and answers what each test sets (a TransactionCoordinator subclass;
the real one is tested on its own).
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from twisted.internet import defer, task

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.coordinator import GroupCoordinator
from brokerd.kafka.listener.protocol import KafkaFactory
from brokerd.kafka.regex import SLICE_COST, compile_regex
from brokerd.kafka.server.coordinators import KafkaCoordinators
from brokerd.kafka.server.handlers.txn import code_for_version
from brokerd.kafka.txn.coordinator import TransactionCoordinator
from brokerd.kafka.txn.types import (
    EndTxnResult,
    InitProducerIdResult,
    TopicPartition,
    TxnDescription,
    TxnListing,
    TxnOffset,
)
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import producers as producer_apis
from brokerd.kafka.wire.messages import txn as txn_apis
from brokerd.kafka.wire.requests import apis
from brokerd.security.acl import Operation, ResourceType
from brokerd.storage.log.producer_state import ActiveProducer
from brokerd.storage.stores.txn_log import TxnLog

from tests.fake_core import FakeCore
from tests.kafka.listener.test_protocol import KafkaTestCase, temp_dir
from tests.kafka.server.handlers.test_acl import AclTestCase


class FakeTransactions(TransactionCoordinator):
    """A transaction coordinator (over a transaction log in ``directory``, never
    started) whose operations are scripted: it records every call and answers with the
    codes a test puts in its attributes. :meth:`close` closes its log."""

    def __init__(self, directory: str, core: FakeCore, groups: GroupCoordinator) -> None:
        os.makedirs(directory, exist_ok=True)
        self.log = TxnLog.open(directory)
        super().__init__(
            clock=task.Clock(), log=self.log, run_blocking=defer.maybeDeferred,
            allocate_producer_id=itertools.count(4000).__next__, core=core, groups=groups,
        )
        self.calls: list[tuple[Any, ...]] = []
        self.init_result = InitProducerIdResult(ErrorCode.NONE, 4000, 2)
        self.partition_codes: dict[TopicPartition, ErrorCode] = {}
        self.code = ErrorCode.NONE
        self.offset_codes: dict[TopicPartition, ErrorCode] = {}
        self.fail: Exception | None = None
        self.hold: defer.Deferred[Any] | None = None
        self.descriptions: dict[str, TxnDescription] = {}
        self.listings: list[TxnListing] = []
        self.end_result = EndTxnResult(ErrorCode.NONE, 4000, 3)

    def _answer(self, value: Any) -> defer.Deferred[Any]:
        if self.fail is not None:
            return defer.fail(self.fail)
        if self.hold is not None:
            self.hold.addCallback(lambda _: value)
            return self.hold
        return defer.succeed(value)

    def init_producer_id(
        self, transactional_id: str, transaction_timeout_ms: int,
        producer_id: int = -1, producer_epoch: int = -1,
    ) -> defer.Deferred[InitProducerIdResult]:
        self.calls.append(("init", transactional_id, transaction_timeout_ms, producer_id,
                           producer_epoch))
        return self._answer(self.init_result)

    def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> defer.Deferred[dict[TopicPartition, ErrorCode]]:
        self.calls.append(("add_partitions", transactional_id, producer_id, producer_epoch,
                           list(partitions)))
        return self._answer({tp: self.partition_codes.get(tp, ErrorCode.NONE)
                             for tp in partitions})

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> defer.Deferred[ErrorCode]:
        self.calls.append(("add_offsets", transactional_id, producer_id, producer_epoch,
                           group_id))
        return self._answer(self.code)

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> defer.Deferred[ErrorCode]:
        self.calls.append(("end_txn", transactional_id, producer_id, producer_epoch, commit))
        return self._answer(self.code)

    def end_txn_bumping(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> defer.Deferred[EndTxnResult]:
        self.calls.append(("end_txn_bumping", transactional_id, producer_id, producer_epoch,
                           commit))
        return self._answer(self.end_result)

    def txn_offset_commit(
        self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
        offsets: Mapping[TopicPartition, TxnOffset], *, generation_id: int = -1,
        member_id: str = "", group_instance_id: str | None = None, add_group: bool = False,
    ) -> defer.Deferred[dict[TopicPartition, ErrorCode]]:
        self.calls.append(("txn_offset_commit", transactional_id, group_id, producer_id,
                           producer_epoch, dict(offsets), generation_id, member_id,
                           group_instance_id))
        if add_group:
            self.calls.append(("add_group", group_id))
        return self._answer({tp: self.offset_codes.get(tp, ErrorCode.NONE) for tp in offsets})

    def describe(self, transactional_ids: Sequence[str]) -> list[TxnDescription]:
        self.calls.append(("describe", list(transactional_ids)))
        if self.fail is not None:
            raise self.fail
        return [self.descriptions.get(t, TxnDescription(t, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
                for t in transactional_ids]

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        self.calls.append(("verify", transactional_id, producer_id, producer_epoch,
                           list(partitions)))
        if self.fail is not None:
            raise self.fail
        return {tp: self.partition_codes.get(tp, ErrorCode.NONE) for tp in partitions}

    def list_transactions(
        self, state_filters: Sequence[str], producer_id_filters: Sequence[int], *,
        duration_filter_ms: int = -1,
    ) -> list[TxnListing]:
        self.calls.append(("list", list(state_filters), list(producer_id_filters)))
        if duration_filter_ms != -1:
            self.calls.append(("list_filters", duration_filter_ms))
        if self.fail is not None:
            raise self.fail
        return [t for t in self.listings
                if (not state_filters or t.state in state_filters)
                and (not producer_id_filters or t.producer_id in producer_id_filters)]

    def close(self) -> None:
        self.log.close()


class TxnTestCase(KafkaTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.txn = FakeTransactions(temp_dir(self), self.core, self.groups)
        self.addCleanup(self.txn.close)
        self.factory = KafkaFactory(
            self.core, KafkaCoordinators(self.groups, transactions=self.txn), clock=self.clock,  # type: ignore[arg-type]
            advertised_host="broker.example", advertised_port=19092,
        )
        self.proto, self.tr = self.connect()
        self.core.add_topic("t", 2)
        self.core.add_topic("u", 1)

    def add_partitions(self, version: int, *topics: tuple[str, tuple[int, ...]],
                       tid: str = "tx") -> list[tuple[str, list[tuple[int, int]]]]:
        self.send(ApiKey.ADD_PARTITIONS_TO_TXN, version, apis.AddPartitionsToTxnRequest(
            transactional_id=tid, producer_id=4000, producer_epoch=2,
            topics=tuple(apis.AddPartitionsToTxnTopic(name=n, partitions=ps)
                         for n, ps in topics)))
        return [(r.name, [(p.partition_index, p.partition_error_code)
                          for p in r.results_by_partition])
                for r in self.one().results_by_topic]


# -- InitProducerId ------------------------------------------------------------------


class InitProducerIdTests(TxnTestCase):
    def test_transactional_id_goes_to_the_coordinator_with_its_timeout(self) -> None:
        self.send(ApiKey.INIT_PRODUCER_ID, 1, apis.InitProducerIdRequest(
            transactional_id="tx", transaction_timeout_ms=12345))
        resp = self.one()
        self.assertEqual((resp.error_code, resp.producer_id, resp.producer_epoch),
                         (0, 4000, 2))
        self.assertEqual(self.txn.calls, [("init", "tx", 12345, -1, -1)])

    def test_v3_passes_the_current_id_and_epoch(self) -> None:
        self.send(ApiKey.INIT_PRODUCER_ID, 3, apis.InitProducerIdRequest(
            transactional_id="tx", transaction_timeout_ms=60000, producer_id=4000,
            producer_epoch=1))
        self.assertEqual(self.one().error_code, 0)
        # v2 has no such fields on the wire: the coordinator sees -1.
        self.send(ApiKey.INIT_PRODUCER_ID, 2, apis.InitProducerIdRequest(
            transactional_id="tx", transaction_timeout_ms=60000, producer_id=4000,
            producer_epoch=1))
        self.one()
        self.assertEqual([c[3:] for c in self.txn.calls], [(4000, 1), (-1, -1)])

    def test_idempotent_producer_never_reaches_the_coordinator(self) -> None:
        self.send(ApiKey.INIT_PRODUCER_ID, 4, apis.InitProducerIdRequest(
            transactional_id=None, producer_id=77, producer_epoch=5))
        resp = self.one()
        self.assertEqual((resp.error_code, resp.producer_id, resp.producer_epoch),
                         (0, 1001, 0))
        self.assertEqual(self.txn.calls, [])

    def test_producer_fenced_per_version(self) -> None:
        self.txn.init_result = InitProducerIdResult(ErrorCode.PRODUCER_FENCED)
        got = []
        for version in range(5):
            self.send(ApiKey.INIT_PRODUCER_ID, version,
                      apis.InitProducerIdRequest(transactional_id="tx"))
            resp = self.one()
            got.append((resp.error_code, resp.producer_id, resp.producer_epoch))
        epoch = (ErrorCode.INVALID_PRODUCER_EPOCH, -1, -1)
        self.assertEqual(got, [epoch] * 4 + [(ErrorCode.PRODUCER_FENCED, -1, -1)])

    def test_other_errors_pass_through_without_an_id(self) -> None:
        for code in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.INVALID_TRANSACTION_TIMEOUT):
            self.txn.init_result = InitProducerIdResult(code, 5, 5)
            self.send(ApiKey.INIT_PRODUCER_ID, 4,
                      apis.InitProducerIdRequest(transactional_id="tx"))
            resp = self.one()
            self.assertEqual((resp.error_code, resp.producer_id, resp.producer_epoch),
                             (code, -1, -1))

    def test_empty_transactional_id_is_an_invalid_request(self) -> None:
        self.send(ApiKey.INIT_PRODUCER_ID, 4, apis.InitProducerIdRequest(transactional_id=""))
        self.assertEqual(self.one().error_code, ErrorCode.INVALID_REQUEST)
        self.assertEqual(self.txn.calls, [])

    def test_coordinator_failure_is_logged_and_answered(self) -> None:
        self.txn.fail = RuntimeError("bug")
        self.send(ApiKey.INIT_PRODUCER_ID, 4, apis.InitProducerIdRequest(transactional_id="tx"))
        self.assertEqual(self.one().error_code, ErrorCode.UNKNOWN_SERVER_ERROR)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_answer_waits_for_the_coordinator(self) -> None:
        self.txn.hold = defer.Deferred()
        self.send(ApiKey.INIT_PRODUCER_ID, 4, apis.InitProducerIdRequest(transactional_id="tx"))
        self.assertEqual(self.tr.value(), b"")
        self.txn.hold.callback(None)
        self.assertEqual(self.one().producer_id, 4000)


# -- AddPartitionsToTxn ---------------------------------------------------------------


class AddPartitionsTests(TxnTestCase):
    def test_adds_every_partition_in_one_call(self) -> None:
        got = self.add_partitions(3, ("t", (0, 1)), ("u", (0,)))
        self.assertEqual(got, [("t", [(0, 0), (1, 0)]), ("u", [(0, 0)])])
        self.assertEqual(self.txn.calls,
                         [("add_partitions", "tx", 4000, 2, [("t", 0), ("t", 1), ("u", 0)])])

    def test_unknown_partition_fails_the_request_and_the_rest_is_not_attempted(self) -> None:
        got = self.add_partitions(3, ("t", (0, 5)), ("nope", (0,)), ("u", (0,)))
        not_attempted = ErrorCode.OPERATION_NOT_ATTEMPTED
        unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        self.assertEqual(got, [("t", [(0, not_attempted), (5, unknown)]),
                               ("nope", [(0, unknown)]), ("u", [(0, not_attempted)])])
        self.assertEqual(self.txn.calls, [])

    def test_one_coordinator_error_makes_the_others_not_attempted(self) -> None:
        self.txn.partition_codes = {("t", 1): ErrorCode.CONCURRENT_TRANSACTIONS}
        got = self.add_partitions(2, ("t", (0, 1)))
        self.assertEqual(got, [("t", [(0, ErrorCode.OPERATION_NOT_ATTEMPTED),
                                      (1, ErrorCode.CONCURRENT_TRANSACTIONS)])])

    def test_producer_fenced_per_version(self) -> None:
        self.txn.partition_codes = {("t", 0): ErrorCode.PRODUCER_FENCED}
        got = [self.add_partitions(v, ("t", (0,)))[0][1][0][1] for v in range(4)]
        self.assertEqual(got, [ErrorCode.INVALID_PRODUCER_EPOCH] * 2
                         + [ErrorCode.PRODUCER_FENCED] * 2)

    def test_repeated_partitions_are_answered_once(self) -> None:
        got = self.add_partitions(0, ("t", (1, 1, 0)), ("t", (1,)))
        self.assertEqual(got, [("t", [(1, 0), (0, 0)])])
        self.assertEqual(self.txn.calls[0][4], [("t", 1), ("t", 0)])

    def test_empty_request(self) -> None:
        self.assertEqual(self.add_partitions(3), [])
        self.assertEqual(self.txn.calls, [])

    def test_empty_transactional_id(self) -> None:
        got = self.add_partitions(3, ("t", (0,)), tid="")
        self.assertEqual(got, [("t", [(0, ErrorCode.INVALID_REQUEST)])])

    def test_coordinator_failure(self) -> None:
        self.txn.fail = RuntimeError("bug")
        got = self.add_partitions(3, ("t", (0, 1)))
        self.assertEqual(got, [("t", [(0, ErrorCode.UNKNOWN_SERVER_ERROR),
                                      (1, ErrorCode.UNKNOWN_SERVER_ERROR)])])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)


# -- AddOffsetsToTxn and EndTxn --------------------------------------------------------


class AddOffsetsAndEndTxnTests(TxnTestCase):
    def add_offsets(self, version: int, tid: str = "tx") -> int:
        self.send(ApiKey.ADD_OFFSETS_TO_TXN, version, apis.AddOffsetsToTxnRequest(
            transactional_id=tid, producer_id=4000, producer_epoch=2, group_id="g"))
        return int(self.one().error_code)

    def end(self, version: int, commit: bool = True, tid: str = "tx") -> int:
        self.send(ApiKey.END_TXN, version, apis.EndTxnRequest(
            transactional_id=tid, producer_id=4000, producer_epoch=2, committed=commit))
        return int(self.one().error_code)

    def test_calls_reach_the_coordinator(self) -> None:
        self.assertEqual(self.add_offsets(3), 0)
        self.assertEqual(self.end(3, commit=True), 0)
        self.assertEqual(self.end(0, commit=False), 0)
        self.assertEqual(self.txn.calls, [
            ("add_offsets", "tx", 4000, 2, "g"),
            ("end_txn", "tx", 4000, 2, True),
            ("end_txn", "tx", 4000, 2, False),
        ])

    def test_producer_fenced_per_version(self) -> None:
        self.txn.code = ErrorCode.PRODUCER_FENCED
        expected = [ErrorCode.INVALID_PRODUCER_EPOCH] * 2 + [ErrorCode.PRODUCER_FENCED] * 2
        self.assertEqual([self.add_offsets(v) for v in range(4)], expected)
        self.assertEqual([self.end(v) for v in range(4)], expected)

    def test_other_codes_pass_through(self) -> None:
        self.txn.code = ErrorCode.INVALID_TXN_STATE
        self.assertEqual((self.add_offsets(0), self.end(0)),
                         (ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_TXN_STATE))

    def test_end_txn_answers_when_the_coordinator_is_done(self) -> None:
        self.txn.hold = defer.Deferred()
        self.send(ApiKey.END_TXN, 3, apis.EndTxnRequest(
            transactional_id="tx", producer_id=4000, producer_epoch=2, committed=True))
        self.assertEqual(self.tr.value(), b"")
        self.txn.hold.callback(None)
        self.assertEqual(self.one().error_code, 0)

    def test_empty_transactional_id(self) -> None:
        self.assertEqual((self.add_offsets(3, tid=""), self.end(3, tid="")),
                         (ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST))
        self.assertEqual(self.txn.calls, [])

    def test_coordinator_failure(self) -> None:
        self.txn.fail = RuntimeError("bug")
        self.assertEqual((self.add_offsets(3), self.end(3)),
                         (ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 2)


# -- TxnOffsetCommit ------------------------------------------------------------------


class TxnOffsetCommitTests(TxnTestCase):
    def commit(self, version: int, *topics: tuple[str, tuple[tuple[int, int], ...]],
               **kw: Any) -> list[tuple[str, list[tuple[int, int]]]]:
        self.send(ApiKey.TXN_OFFSET_COMMIT, version, apis.TxnOffsetCommitRequest(
            transactional_id="tx", group_id="g", producer_id=4000, producer_epoch=2,
            topics=tuple(apis.TxnOffsetCommitRequestTopic(name=n, partitions=tuple(
                apis.TxnOffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_leader_epoch=0,
                    committed_metadata=f"m{o}")
                for p, o in ps)) for n, ps in topics), **kw))
        return [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in self.one().topics]

    def test_v3_passes_offsets_and_the_group_member(self) -> None:
        got = self.commit(3, ("t", ((0, 10), (1, 11))), generation_id=5, member_id="m1",
                          group_instance_id="i1")
        self.assertEqual(got, [("t", [(0, 0), (1, 0)])])
        self.assertEqual(self.txn.calls, [(
            "txn_offset_commit", "tx", "g", 4000, 2,
            {("t", 0): TxnOffset(10, 0, "m10"), ("t", 1): TxnOffset(11, 0, "m11")},
            5, "m1", "i1",
        )])

    def test_v0_has_no_leader_epoch_or_member(self) -> None:
        self.commit(0, ("t", ((0, 10),)), generation_id=5, member_id="m1")
        (call,) = self.txn.calls
        self.assertEqual(call[5:], ({("t", 0): TxnOffset(10, -1, "m10")}, -1, "", None))

    def test_unknown_partitions_are_refused_the_rest_committed(self) -> None:
        got = self.commit(3, ("t", ((0, 1), (7, 1))), ("nope", ((0, 1),)))
        unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        self.assertEqual(got, [("t", [(0, 0), (7, unknown)]), ("nope", [(0, unknown)])])
        self.assertEqual(list(self.txn.calls[0][5]), [("t", 0)])

    def test_nothing_known_does_not_call_the_coordinator(self) -> None:
        self.commit(3, ("nope", ((0, 1),)))
        self.assertEqual(self.txn.calls, [])

    def test_per_partition_codes_and_version_mapping(self) -> None:
        self.txn.offset_codes = {("t", 0): ErrorCode.PRODUCER_FENCED,
                                 ("t", 1): ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
        got = [self.commit(v, ("t", ((0, 1), (1, 1))))[0][1] for v in range(4)]
        old = [(0, ErrorCode.INVALID_PRODUCER_EPOCH), (1, ErrorCode.COORDINATOR_NOT_AVAILABLE)]
        new = [(0, ErrorCode.INVALID_PRODUCER_EPOCH), (1, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)]
        self.assertEqual(got, [old, old, new, new])

    def test_group_errors_pass_through(self) -> None:
        self.txn.offset_codes = {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        got = self.commit(3, ("t", ((0, 1),)), generation_id=1, member_id="m")
        self.assertEqual(got, [("t", [(0, ErrorCode.ILLEGAL_GENERATION)])])

    def test_repeated_partition_last_offset_wins_answered_once(self) -> None:
        got = self.commit(3, ("t", ((0, 1), (0, 2))))
        self.assertEqual(got, [("t", [(0, 0)])])
        self.assertEqual(self.txn.calls[0][5], {("t", 0): TxnOffset(2, 0, "m2")})

    def test_v6_names_topics_by_id(self) -> None:
        """KIP-1319: the topic's ID resolves to its name for the coordinator; the answer
        carries the ID back; an ID no topic has is UNKNOWN_TOPIC_ID, each one answered."""
        t_id = self.core.topics()["t"].topic_id
        ghosts = (uuid.UUID(int=1), uuid.UUID(int=2))

        def topic(topic_id: uuid.UUID, partition: int) -> apis.TxnOffsetCommitRequestTopic:
            return apis.TxnOffsetCommitRequestTopic(topic_id=topic_id, partitions=(
                apis.TxnOffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=9, committed_metadata=None),))

        self.send(ApiKey.TXN_OFFSET_COMMIT, 6, apis.TxnOffsetCommitRequest(
            transactional_id="tx", group_id="g", producer_id=4000, producer_epoch=2,
            generation_id=5, member_id="m1",
            topics=(topic(t_id, 1), topic(ghosts[0], 0), topic(ghosts[1], 0))))
        answered = [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
                    for t in self.one().topics]
        self.assertEqual(answered, [
            (t_id, [(1, 0)]),
            (ghosts[0], [(0, ErrorCode.UNKNOWN_TOPIC_ID)]),
            (ghosts[1], [(0, ErrorCode.UNKNOWN_TOPIC_ID)]),
        ])
        call, add_group = self.txn.calls
        self.assertEqual(call[5], {("t", 1): TxnOffset(9, -1, None)})
        self.assertEqual(add_group, ("add_group", "g"))  # v5+: KIP-890 part 2

    def test_coordinator_failure(self) -> None:
        self.txn.fail = RuntimeError("bug")
        got = self.commit(3, ("t", ((0, 1),)))
        self.assertEqual(got, [("t", [(0, ErrorCode.UNKNOWN_SERVER_ERROR)])])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)


# -- DescribeTransactions and ListTransactions -------------------------------------------


class DescribeAndListTests(TxnTestCase):
    def test_describe(self) -> None:
        self.txn.descriptions["tx"] = TxnDescription(
            "tx", ErrorCode.NONE, state="Ongoing", producer_id=4000, producer_epoch=2,
            timeout_ms=60000, start_time_ms=1234,
            partitions=(("t", 1), ("u", 0), ("t", 0)),
        )
        self.send(ApiKey.DESCRIBE_TRANSACTIONS, 0, apis.DescribeTransactionsRequest(
            transactional_ids=("tx", "other")))
        found, missing = self.one().transaction_states
        self.assertEqual(found, apis.DescribeTransactionsState(
            error_code=0, transactional_id="tx", transaction_state="Ongoing",
            transaction_timeout_ms=60000, transaction_start_time_ms=1234, producer_id=4000,
            producer_epoch=2, topic_partitions=(
                apis.DescribeTransactionsTopicData(name="t", partition_indexes=(1, 0)),
                apis.DescribeTransactionsTopicData(name="u", partition_indexes=(0,)),
            )))
        self.assertEqual((missing.transactional_id, missing.error_code),
                         ("other", ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))

    def test_list_with_filters_and_unknown_states(self) -> None:
        self.txn.listings = [TxnListing("a", 1, "Ongoing"), TxnListing("b", 2, "Empty")]
        self.send(ApiKey.LIST_TRANSACTIONS, 0, apis.ListTransactionsRequest())
        self.assertEqual([t.transactional_id for t in self.one().transaction_states],
                         ["a", "b"])
        self.send(ApiKey.LIST_TRANSACTIONS, 0, apis.ListTransactionsRequest(
            state_filters=("Ongoing", "Bogus"), producer_id_filters=(1, 2)))
        resp = self.one()
        self.assertEqual(resp.unknown_state_filters, ("Bogus",))
        self.assertEqual(resp.transaction_states, (apis.ListTransactionsState(
            transactional_id="a", producer_id=1, transaction_state="Ongoing"),))
        self.assertEqual(self.txn.calls[-1], ("list", ["Ongoing", "Bogus"], [1, 2]))

    def test_failures(self) -> None:
        self.txn.fail = RuntimeError("bug")
        self.send(ApiKey.LIST_TRANSACTIONS, 0, apis.ListTransactionsRequest())
        self.assertEqual(self.one().error_code, ErrorCode.UNKNOWN_SERVER_ERROR)
        self.send(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                  apis.DescribeTransactionsRequest(transactional_ids=("x",)))
        self.assertEqual(self.one().transaction_states[0].error_code,
                         ErrorCode.UNKNOWN_SERVER_ERROR)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 2)


class KIP890Part2Tests(TxnTestCase):
    def test_end_txn_v5_bumps_and_answers_the_next_id_and_epoch(self) -> None:
        self.send(ApiKey.END_TXN, 5, apis.EndTxnRequest(
            transactional_id="tx", producer_id=4000, producer_epoch=2, committed=True))
        resp = self.one()
        self.assertEqual((resp.error_code, resp.producer_id, resp.producer_epoch),
                         (0, 4000, 3))
        self.assertEqual(self.txn.calls, [("end_txn_bumping", "tx", 4000, 2, True)])

    def test_end_txn_v5_errors_answer_no_id(self) -> None:
        self.txn.end_result = EndTxnResult(ErrorCode.PRODUCER_FENCED)
        self.send(ApiKey.END_TXN, 5, apis.EndTxnRequest(
            transactional_id="tx", producer_id=4000, producer_epoch=1, committed=False))
        resp = self.one()
        self.assertEqual((resp.error_code, resp.producer_id, resp.producer_epoch),
                         (ErrorCode.PRODUCER_FENCED, -1, -1))
        self.send(ApiKey.END_TXN, 5, apis.EndTxnRequest(
            transactional_id="", producer_id=4000, producer_epoch=1, committed=False))
        self.assertEqual(self.one().error_code, ErrorCode.INVALID_REQUEST)

    def test_end_txn_v4_does_not_bump(self) -> None:
        self.send(ApiKey.END_TXN, 4, apis.EndTxnRequest(
            transactional_id="tx", producer_id=4000, producer_epoch=2, committed=True))
        self.assertEqual(self.one().error_code, 0)
        self.assertEqual(self.txn.calls, [("end_txn", "tx", 4000, 2, True)])

    def test_txn_offset_commit_v5_adds_the_group(self) -> None:
        body = apis.TxnOffsetCommitRequest(
            transactional_id="tx", group_id="g", producer_id=4000, producer_epoch=2,
            topics=(apis.TxnOffsetCommitRequestTopic(name="t", partitions=(
                apis.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5),
            )),))
        self.send(ApiKey.TXN_OFFSET_COMMIT, 4, body)
        self.one()
        self.assertNotIn(("add_group", "g"), self.txn.calls)
        self.send(ApiKey.TXN_OFFSET_COMMIT, 5, body)
        self.assertEqual(self.one().topics[0].partitions[0].error_code, 0)
        self.assertEqual(self.txn.calls[-1], ("add_group", "g"))


class ListFilterTests(TxnTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.txn.listings = [TxnListing("orders-1", 1, "Ongoing"),
                             TxnListing("billing-1", 2, "Ongoing")]

    def listed(self, version: int, **filters: Any) -> list[str]:
        self.send(ApiKey.LIST_TRANSACTIONS, version, apis.ListTransactionsRequest(**filters))
        for _ in range(len(self.txn.listings) + 1):
            self.clock.advance(0)  # the pattern is matched in slices, a turn between
        resp = self.one()
        self.assertEqual(resp.error_code, 0)
        return [t.transactional_id for t in resp.transaction_states]

    def test_v1_duration_filter_reaches_the_coordinator(self) -> None:
        self.listed(1, duration_filter=5000)
        self.assertEqual(self.txn.calls[-1], ("list_filters", 5000))

    def test_v0_has_no_duration_filter(self) -> None:
        self.listed(0, duration_filter=5000)  # not on the wire at v0
        self.assertEqual(self.txn.calls[-1][0], "list")

    def test_v2_pattern_matches_the_whole_id(self) -> None:
        self.assertEqual(self.listed(2, transactional_id_pattern="orders-.*"), ["orders-1"])
        self.assertEqual(self.listed(2, transactional_id_pattern="orders"), [])

    def test_empty_or_null_pattern_lists_everything(self) -> None:
        self.assertEqual(len(self.listed(2, transactional_id_pattern="")), 2)
        self.assertEqual(len(self.listed(2, transactional_id_pattern=None)), 2)

    def test_a_pattern_that_stalls_backtracking_is_matched_in_linear_time(self) -> None:
        # 19.5 s for one id with a backtracking engine; RE2 takes microseconds.
        self.txn.listings = [TxnListing("a" * 60, 1, "Ongoing"),
                             TxnListing("a" * 59 + "x", 2, "Ongoing")]
        started = time.monotonic()
        listed = self.listed(2, transactional_id_pattern="^" + ".{0,249}" * 8 + "x")
        self.assertEqual(listed, ["a" * 59 + "x"])
        self.assertLess(time.monotonic() - started, 10)

    def test_a_costly_pattern_is_matched_in_slices_with_turns_between(self) -> None:
        # A pattern near the program bound against many ids: each slice of matching
        # work waits for a reactor turn, so other connections are served in between.
        self.txn.listings = [TxnListing(f"id-{n:04d}-" + "a" * 40, n, "Ongoing")
                             for n in range(200)]
        pattern = "^" + ".{0,249}" * 8 + "x"
        turns: list[float] = []
        call_later = self.clock.callLater

        def counting(delay: float, f: Any, *args: Any, **kw: Any) -> Any:
            turns.append(delay)
            return call_later(delay, f, *args, **kw)

        self.clock.callLater = counting  # type: ignore[method-assign]
        self.send(ApiKey.LIST_TRANSACTIONS, 2,
                  apis.ListTransactionsRequest(transactional_id_pattern=pattern))
        self.assertEqual(self.tr.value(), b"")  # not answered in one go
        self.clock.advance(0)  # (task.Clock runs the turns scheduled meanwhile too)
        work = compile_regex(pattern).work("id-0000-" + "a" * 40)
        # A slice ends once its work reaches SLICE_COST: at most one id past it.
        self.assertGreaterEqual(turns.count(0), 200 * work // (SLICE_COST + work) - 1)
        resp = self.one()
        self.assertEqual((resp.error_code, resp.transaction_states), (0, ()))

    def test_bad_patterns_are_invalid_regular_expressions(self) -> None:
        for bad in ("[", "a*+", "x(?=y)", "(a)\\1", "a" * 5000, ".{0,249}" * 40):
            self.send(ApiKey.LIST_TRANSACTIONS, 2,
                      apis.ListTransactionsRequest(transactional_id_pattern=bad))
            resp = self.one()
            self.assertEqual(resp.error_code, ErrorCode.INVALID_REGULAR_EXPRESSION, bad)
            self.assertEqual(resp.transaction_states, ())


class AddPartitionsBrokerFormTests(TxnTestCase):
    """AddPartitionsToTxn v4+: several transactions, each added or only verified."""

    def send_v4(self, version: int, *txns: txn_apis.AddPartitionsToTxnTransaction) -> Any:
        self.send(ApiKey.ADD_PARTITIONS_TO_TXN, version,
                  apis.AddPartitionsToTxnRequest(transactions=txns))
        return self.one()

    @staticmethod
    def txn_of(tid: str, *, verify: bool, parts: tuple[int, ...] = (0, 1),
               ) -> txn_apis.AddPartitionsToTxnTransaction:
        return txn_apis.AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=4000, producer_epoch=2, verify_only=verify,
            topics=(apis.AddPartitionsToTxnTopic(name="t", partitions=parts),))

    @staticmethod
    def codes(result: txn_apis.AddPartitionsToTxnResult) -> list[tuple[int, int]]:
        (topic,) = result.topic_results
        return [(p.partition_index, p.partition_error_code) for p in topic.results_by_partition]

    def test_verify_only_asks_without_adding(self) -> None:
        self.txn.partition_codes[("t", 1)] = ErrorCode.INVALID_TXN_STATE
        resp = self.send_v4(4, self.txn_of("a", verify=True))
        self.assertEqual(resp.error_code, 0)
        (result,) = resp.results_by_transaction
        self.assertEqual(result.transactional_id, "a")
        # Verification is per partition: no all-or-nothing.
        self.assertEqual(self.codes(result), [(0, 0), (1, ErrorCode.INVALID_TXN_STATE)])
        self.assertEqual(self.txn.calls, [("verify", "a", 4000, 2, [("t", 0), ("t", 1)])])

    def test_several_transactions_added_and_verified(self) -> None:
        resp = self.send_v4(5, self.txn_of("a", verify=False), self.txn_of("b", verify=True))
        self.assertEqual([r.transactional_id for r in resp.results_by_transaction], ["a", "b"])
        self.assertEqual([c[0] for c in self.txn.calls], ["add_partitions", "verify"])
        self.assertEqual([self.codes(r) for r in resp.results_by_transaction],
                         [[(0, 0), (1, 0)], [(0, 0), (1, 0)]])

    def test_an_added_transaction_is_all_or_nothing(self) -> None:
        resp = self.send_v4(4, self.txn_of("a", verify=False, parts=(0, 7)))
        self.assertEqual(self.codes(resp.results_by_transaction[0]),
                         [(0, ErrorCode.OPERATION_NOT_ATTEMPTED),
                          (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
        self.assertEqual(self.txn.calls, [])

    def test_v3_still_answers_by_topic(self) -> None:
        self.assertEqual(self.add_partitions(3, ("t", (0,))), [("t", [(0, 0)])])


class DescribeProducersTests(TxnTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.asked: list[tuple[str, int]] = []
        self.core.transactions.describe_producers = self.fake_describe  # type: ignore[attr-defined]

    def fake_describe(self, topic: str, partition: int) -> defer.Deferred[Any]:
        self.asked.append((topic, partition))
        if topic == "u":
            return defer.fail(RuntimeError("disk on fire"))
        return defer.succeed([
            (ActiveProducer(7, 3, 41, 1700000000000, marked=True), 120),
            (ActiveProducer(9, 0, 4, 1700000000500, marked=False), -1),
        ])

    def test_each_partition_with_its_producers(self) -> None:
        self.send(ApiKey.DESCRIBE_PRODUCERS, 0, producer_apis.DescribeProducersRequest(
            topics=(producer_apis.DescribeProducersTopicRequest(
                name="t", partition_indexes=(1, 5, 1)),)))
        (topic,) = self.one().topics
        self.assertEqual(topic.name, "t")
        found, missing = topic.partitions
        self.assertEqual((found.partition_index, found.error_code), (1, 0))
        self.assertEqual(found.active_producers, (
            producer_apis.ProducerStateEntry(
                producer_id=7, producer_epoch=3, last_sequence=41,
                last_timestamp=1700000000000, coordinator_epoch=0,
                current_txn_start_offset=120),
            producer_apis.ProducerStateEntry(
                producer_id=9, producer_epoch=0, last_sequence=4,
                last_timestamp=1700000000500, coordinator_epoch=-1,
                current_txn_start_offset=-1),
        ))
        self.assertEqual((missing.partition_index, missing.error_code),
                         (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        self.assertEqual(self.asked, [("t", 1)])

    def test_unknown_topic_and_core_failure(self) -> None:
        asked = producer_apis.DescribeProducersTopicRequest
        self.send(ApiKey.DESCRIBE_PRODUCERS, 0, producer_apis.DescribeProducersRequest(
            topics=(asked(name="nope", partition_indexes=(0,)),
                    asked(name="u", partition_indexes=(0,)))))
        nope, u = self.one().topics
        self.assertEqual(nope.partitions[0].error_code, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self.assertEqual(u.partitions[0].error_code, ErrorCode.UNKNOWN_SERVER_ERROR)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)


class WriteTxnMarkersTests(TxnTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.written: list[tuple[Any, ...]] = []
        self.core.transactions.write_txn_markers = self.fake_write  # type: ignore[attr-defined]
        self.known: list[tuple[ActiveProducer, int]] = []
        self.core.transactions.describe_producers = (  # type: ignore[attr-defined]
            lambda topic, partition: defer.succeed(self.known))

    def fake_write(self, partitions: Sequence[tuple[str, int]], producer_id: int,
                   producer_epoch: int, *, commit: bool, coordinator_epoch: int = 0,
                   ) -> defer.Deferred[None]:
        self.written.append((list(partitions), producer_id, producer_epoch, commit,
                             coordinator_epoch))
        return defer.succeed(None)

    def test_abort_marker_for_existing_partitions(self) -> None:
        self.send(ApiKey.WRITE_TXN_MARKERS, 1, txn_apis.WriteTxnMarkersRequest(markers=(
            txn_apis.WritableTxnMarker(
                producer_id=7, producer_epoch=3, transaction_result=False, coordinator_epoch=0,
                topics=(txn_apis.WritableTxnMarkerTopic(name="t", partition_indexes=(0, 9)),)),
        )))
        (marker,) = self.one().markers
        self.assertEqual(marker.producer_id, 7)
        (topic,) = marker.topics
        self.assertEqual([(p.partition_index, p.error_code) for p in topic.partitions],
                         [(0, 0), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
        self.assertEqual(self.written, [([("t", 0)], 7, 3, False, 0)])

    def test_a_marker_older_than_the_partitions_epoch_is_refused(self) -> None:
        self.known = [(ActiveProducer(7, 4, 0, 1, marked=False), 0)]
        self.send(ApiKey.WRITE_TXN_MARKERS, 1, txn_apis.WriteTxnMarkersRequest(markers=(
            txn_apis.WritableTxnMarker(
                producer_id=7, producer_epoch=3, transaction_result=False, coordinator_epoch=0,
                topics=(txn_apis.WritableTxnMarkerTopic(name="t", partition_indexes=(0,)),)),
        )))
        part = self.one().markers[0].topics[0].partitions[0]
        self.assertEqual(part.error_code, ErrorCode.INVALID_PRODUCER_EPOCH)
        self.assertEqual(self.written, [])

    def test_a_transaction_version_2_marker_needs_a_newer_epoch(self) -> None:
        def mark(epoch: int) -> int:
            self.send(ApiKey.WRITE_TXN_MARKERS, 2, txn_apis.WriteTxnMarkersRequest(markers=(
                txn_apis.WritableTxnMarker(
                    producer_id=7, producer_epoch=epoch, transaction_result=True,
                    coordinator_epoch=0, transaction_version=2,
                    topics=(txn_apis.WritableTxnMarkerTopic(name="t", partition_indexes=(0,)),),
                ),
            )))
            code: int = self.one().markers[0].topics[0].partitions[0].error_code
            return code

        self.known = [(ActiveProducer(7, 4, 0, 1, marked=False), 30)]  # open at epoch 4
        self.assertEqual(mark(4), ErrorCode.INVALID_PRODUCER_EPOCH)
        self.assertEqual(mark(5), 0)
        self.known = [(ActiveProducer(7, 5, -1, 1, marked=True), -1)]  # ended at epoch 5
        self.assertEqual(mark(5), 0)  # the same marker again
        self.assertEqual(len(self.written), 2)


# -- without a transaction coordinator ---------------------------------------------------


class NoCoordinatorTests(KafkaTestCase):
    """The default factory (no ``transactions``): transactions are disabled."""

    def setUp(self) -> None:
        super().setUp()
        self.core.add_topic("t", 1)

    def test_every_transactional_api_answers_a_fatal_error(self) -> None:
        refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        self.send(ApiKey.ADD_PARTITIONS_TO_TXN, 3, apis.AddPartitionsToTxnRequest(
            transactional_id="tx", producer_id=1, producer_epoch=0,
            topics=(apis.AddPartitionsToTxnTopic(name="t", partitions=(0,)),)))
        part = self.one().results_by_topic[0].results_by_partition[0]
        self.assertEqual(part.partition_error_code, refused)
        self.send(ApiKey.ADD_OFFSETS_TO_TXN, 3, apis.AddOffsetsToTxnRequest(
            transactional_id="tx", producer_id=1, producer_epoch=0, group_id="g"))
        self.assertEqual(self.one().error_code, refused)
        self.send(ApiKey.END_TXN, 3, apis.EndTxnRequest(
            transactional_id="tx", producer_id=1, producer_epoch=0, committed=True))
        self.assertEqual(self.one().error_code, refused)
        self.send(ApiKey.TXN_OFFSET_COMMIT, 3, apis.TxnOffsetCommitRequest(
            transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0,
            topics=(apis.TxnOffsetCommitRequestTopic(name="nope", partitions=(
                apis.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1),
            )),)))
        self.assertEqual(self.one().topics[0].partitions[0].error_code, refused)

    def test_describe_and_list_find_nothing(self) -> None:
        self.send(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                  apis.DescribeTransactionsRequest(transactional_ids=("tx",)))
        self.assertEqual(self.one().transaction_states[0].error_code,
                         ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        self.send(ApiKey.LIST_TRANSACTIONS, 0, apis.ListTransactionsRequest(
            state_filters=("Nope",)))
        resp = self.one()
        self.assertEqual((resp.error_code, resp.transaction_states,
                          resp.unknown_state_filters), (0, (), ("Nope",)))


# -- the version table itself -----------------------------------------------------------


class VersionMappingTests(KafkaTestCase):
    def test_api_versions_advertises_the_transaction_apis(self) -> None:
        self.send(ApiKey.API_VERSIONS, 2, apis.ApiVersionsRequest())
        got = {r.api_key: (r.min_version, r.max_version) for r in self.one().api_keys}
        self.assertEqual(
            {k: got[k] for k in (22, 24, 25, 26, 27, 28, 61, 65, 66)},
            {22: (0, 5), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 6),
             61: (0, 0), 65: (0, 0), 66: (0, 2)},
        )

    def test_code_for_version(self) -> None:
        fenced, epoch = ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH
        table = {
            ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2,
            ApiKey.ADD_OFFSETS_TO_TXN: 2, ApiKey.END_TXN: 2, ApiKey.TXN_OFFSET_COMMIT: 99,
        }
        for api, first in table.items():
            for version in range(5):
                want = fenced if version >= first else epoch
                self.assertEqual(code_for_version(api, version, fenced), want, (api, version))
                self.assertEqual(code_for_version(api, version, ErrorCode.INVALID_TXN_STATE),
                                 ErrorCode.INVALID_TXN_STATE)


class TxnOffsetCommitV6AclTests(AclTestCase):
    def test_read_on_the_topic_its_id_names(self) -> None:
        """v6's ACL check is READ on the topic the ID names now; an ID no topic has is
        answered UNKNOWN_TOPIC_ID, not refused (there is no name to check)."""
        self.core.add_topic("open")
        self.core.add_topic("closed")
        ids = {n: i.topic_id for n, i in self.core.topics().items()}
        self.grant(ResourceType.TRANSACTIONAL_ID, "tx", Operation.WRITE)
        self.grant(ResourceType.GROUP, "g", Operation.READ)
        self.grant(ResourceType.TOPIC, "open", Operation.READ)
        ghost = uuid.UUID(int=7)
        self.send(ApiKey.TXN_OFFSET_COMMIT, 6, apis.TxnOffsetCommitRequest(
            transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0,
            topics=tuple(apis.TxnOffsetCommitRequestTopic(topic_id=t, partitions=(
                apis.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1),))
                for t in (ids["open"], ids["closed"], ghost))))
        codes = {t.topic_id: t.partitions[0].error_code for t in self.one().topics}
        self.assertEqual(codes, {
            # No transaction coordinator in this harness: what a broker without one answers.
            ids["open"]: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            ids["closed"]: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ghost: ErrorCode.UNKNOWN_TOPIC_ID,
        })
