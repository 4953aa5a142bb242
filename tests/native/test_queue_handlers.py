"""The native queue requests through NativeProtocol (StringTransport, ``task.Clock``) over a
real core and a real share service with its journal: one member per connection,
acquisition and acknowledgement, the release when a connection closes, lock expiry on
the clock, a parked fetch woken by a produce and cancelled by a close, describe and
list, the error codes, a listener without share groups, and the ACL checks."""

from __future__ import annotations

import os
from unittest import mock

from twisted.internet import defer
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from brokerd.core.share.service import ShareService
from brokerd.errors import TooManyWaiters
from brokerd.native.client_codec import ResponseDecoder, encode_request
from brokerd.native.messages import ErrorCode, ErrorResponse
from brokerd.native.operator_messages import OperatorResponse
from brokerd.native.protocol import NativeFactory, NativeProtocol
from brokerd.native.queue_handlers import QueueOps, records_of
from brokerd.native.queue_messages import (
    AckKind,
    AckRange,
    DescribeShareGroupRequest,
    ListShareGroupsRequest,
    QueueAckRequest,
    QueueAckResponse,
    QueueFetchRequest,
    QueueFetchResponse,
    QueueRequest,
)
from brokerd.native.queue_wire import TYPE_OF_CLASS
from brokerd.operator.share_groups import ShareGroupInspector
from brokerd.security.acl import (
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from brokerd.storage.stores.share_state import ShareStateStore

from tests.operator_room.test_operations import AdminCase

ANONYMOUS = "User:ANONYMOUS"


class Connection:
    """One client connection: its protocol, transport and response decoder."""

    def __init__(self, factory: NativeFactory) -> None:
        proto = factory.buildProtocol(None)
        assert isinstance(proto, NativeProtocol)
        self.proto = proto
        self.transport = StringTransport()
        proto.makeConnection(self.transport)
        self.decoder = ResponseDecoder()

    def send(self, request: QueueRequest) -> None:
        self.decoder.expect(TYPE_OF_CLASS[type(request)])
        self.proto.dataReceived(encode_request(request))

    def answers(self) -> list[object]:
        out = self.decoder.feed(self.transport.value())
        self.transport.clear()
        return list(out)

    def call(self, request: QueueRequest) -> object:
        self.send(request)
        (answer,) = self.answers()
        return answer

    def close(self) -> None:
        self.proto.connectionLost(Failure(ConnectionDone()))


class QueueCase(AdminCase):
    with_groups = False
    authorizer: AclAuthorizer | None = None

    def setUp(self) -> None:
        super().setUp()
        path = os.path.join(self.logdir.path, os.pardir, "share-state.log")
        self.share_store = ShareStateStore.open(path)
        self.addCleanup(self.share_store.close)
        self.service = ShareService(
            self.broker, self.share_store, run_write=self.broker.pools.run_write,
            clock=self.clock,
        )
        self.service.start()
        self.addCleanup(self.service.stop)
        self.factory = NativeFactory(
            self.broker, clock=self.clock,  # type: ignore[arg-type]
            authorizer=self.authorizer,
            queues=QueueOps(self.service, ShareGroupInspector(self.service.engine,
                                                              self.broker.logdir.logs)),
        )
        self.create("jobs")
        # Initialise the share-partition at offset 0 (the default reset is "latest").
        init = self.connect()
        assert init.call(QueueFetchRequest("g", "jobs", 0, 1)) == QueueFetchResponse()
        init.close()
        self.produce("jobs", 0, 6)

    def connect(self) -> Connection:
        conn = Connection(self.factory)
        self.addCleanup(conn.close)
        return conn

    def fetch(self, conn: Connection, n: int = 10, wait: int = 0) -> list[tuple[int, int]]:
        answer = conn.call(QueueFetchRequest("g", "jobs", 0, n, wait))
        assert isinstance(answer, QueueFetchResponse), answer
        return [(r.offset, r.delivery_count) for r in answer.records]

    def ack(self, conn: Connection, *ranges: tuple[int, int, AckKind]) -> object:
        return conn.call(QueueAckRequest("g", "jobs", 0,
                                         tuple(AckRange(*r) for r in ranges)))

    def describe(self) -> dict[str, object]:
        answer = self.connect().call(DescribeShareGroupRequest("g"))
        assert isinstance(answer, OperatorResponse)
        assert isinstance(answer.document, dict)
        return answer.document

    def partition(self) -> dict[str, object]:
        parts = self.describe()["partitions"]
        assert isinstance(parts, list) and isinstance(parts[0], dict)
        return parts[0]


class QueueProtocolTests(QueueCase):
    def test_two_connections_are_two_members_and_never_get_the_same_record(self) -> None:
        a, b = self.connect(), self.connect()
        self.assertNotEqual(a.proto.queue_member.member_id, b.proto.queue_member.member_id)
        self.assertEqual(self.fetch(a, 2), [(0, 1), (1, 1)])
        self.assertEqual(self.fetch(b, 10), [(2, 1), (3, 1), (4, 1), (5, 1)])
        self.assertEqual(self.fetch(a), [])

    def test_values_and_keys_come_with_the_records(self) -> None:
        answer = self.connect().call(QueueFetchRequest("g", "jobs", 0, 2))
        assert isinstance(answer, QueueFetchResponse)
        self.assertEqual([(r.key, r.value) for r in answer.records], [(b"", b"v0"), (b"", b"v1")])

    def test_accept_release_reject(self) -> None:
        a = self.connect()
        self.assertEqual(len(self.fetch(a, 3)), 3)
        self.assertEqual(
            self.ack(a, (0, 0, AckKind.ACCEPT), (1, 1, AckKind.RELEASE), (2, 2, AckKind.REJECT)),
            QueueAckResponse(),
        )
        # The released record comes back first, delivered a second time.
        self.assertEqual(self.fetch(self.connect(), 1), [(1, 2)])
        part = self.partition()
        self.assertEqual((part["archived"], part["redelivered_total"]), (1, 1))
        self.assertEqual(part["start_offset"], 1)

    def test_another_connections_records_cannot_be_acknowledged(self) -> None:
        a, b = self.connect(), self.connect()
        self.fetch(a, 1)
        answer = self.ack(b, (0, 0, AckKind.ACCEPT))
        assert isinstance(answer, ErrorResponse)
        self.assertEqual(answer.code, ErrorCode.INVALID_RECORD_STATE)
        # All or nothing: a good range beside a bad one changes nothing.
        answer = self.ack(a, (0, 0, AckKind.ACCEPT), (1, 1, AckKind.ACCEPT))
        assert isinstance(answer, ErrorResponse)
        self.assertEqual(answer.code, ErrorCode.INVALID_RECORD_STATE)
        self.assertEqual(self.ack(a, (0, 0, AckKind.ACCEPT)), QueueAckResponse())

    def test_closing_a_connection_releases_what_it_holds(self) -> None:
        a = self.connect()
        self.assertEqual(len(self.fetch(a, 6)), 6)
        self.assertEqual(self.fetch(self.connect()), [])
        a.close()
        self.assertEqual(self.fetch(self.connect(), 2), [(0, 2), (1, 2)])

    def test_a_lock_that_times_out_releases_the_record(self) -> None:
        a = self.connect()
        self.fetch(a, 1)
        self.clock.advance(31)  # the default lock is 30 s
        self.assertEqual(self.fetch(self.connect(), 1), [(0, 2)])
        answer = self.ack(a, (0, 0, AckKind.ACCEPT))
        assert isinstance(answer, ErrorResponse)
        self.assertEqual(answer.code, ErrorCode.INVALID_RECORD_STATE)

    def test_the_delivery_count_limit_archives_a_released_record(self) -> None:
        for delivery in range(1, 6):
            conn = self.connect()
            self.assertEqual(self.fetch(conn, 1), [(0, delivery)])
            self.assertEqual(self.ack(conn, (0, 0, AckKind.RELEASE)), QueueAckResponse())
        self.assertEqual(self.fetch(self.connect(), 1), [(1, 1)])
        self.assertEqual(self.partition()["archived"], 1)

    def test_a_parked_fetch_is_woken_by_a_produce(self) -> None:
        a = self.connect()
        self.assertEqual(len(self.fetch(a, 6)), 6)
        a.send(QueueFetchRequest("g", "jobs", 0, 10, 5000))
        self.assertEqual(a.answers(), [])
        self.produce("jobs", 0, 1)
        self.clock.advance(0.2)
        (answer,) = a.answers()
        assert isinstance(answer, QueueFetchResponse)
        self.assertEqual([r.offset for r in answer.records], [6])

    def test_a_parked_fetch_answers_empty_when_its_wait_ends(self) -> None:
        a = self.connect()
        self.fetch(a, 6)
        a.send(QueueFetchRequest("g", "jobs", 0, 10, 1000))
        for _ in range(12):
            self.clock.advance(0.1)
        self.assertEqual(a.answers(), [QueueFetchResponse()])

    def test_a_fetch_the_waiter_limit_refuses_answers_too_many_waiters(self) -> None:
        a = self.connect()
        self.fetch(a, 6)

        def refuse(*args: object, **kwargs: object) -> defer.Deferred[None]:
            return defer.fail(TooManyWaiters("too many parked fetches"))

        with mock.patch.object(self.broker, "wait_for_data", refuse):
            answer = a.call(QueueFetchRequest("g", "jobs", 0, 10, 5000))
        assert isinstance(answer, ErrorResponse), answer
        self.assertEqual(answer.code, ErrorCode.TOO_MANY_WAITERS)
        # The connection goes on: what it held is still its own.
        self.assertEqual(self.ack(a, (0, 5, AckKind.ACCEPT)), QueueAckResponse())
        self.produce("jobs", 0, 1)
        self.assertEqual(self.fetch(a), [(6, 1)])

    def test_a_parked_fetch_is_cancelled_by_a_close_and_acquires_nothing(self) -> None:
        a = self.connect()
        self.fetch(a, 6)
        self.ack(a, (0, 5, AckKind.ACCEPT))
        b = self.connect()
        b.send(QueueFetchRequest("g", "jobs", 0, 10, 5000))
        b.close()
        self.produce("jobs", 0, 1)
        self.clock.advance(1)
        self.assertEqual(self.fetch(self.connect()), [(6, 1)])

    def test_describe_and_list(self) -> None:
        a = self.connect()
        self.fetch(a, 2)
        part = self.partition()
        self.assertEqual(
            {k: part[k] for k in ("topic", "partition", "start_offset", "end_offset",
                                  "backlog", "in_flight", "acquired")},
            {"topic": "jobs", "partition": 0, "start_offset": 0, "end_offset": 6,
             "backlog": 6, "in_flight": 2, "acquired": 2},
        )
        answer = self.connect().call(ListShareGroupsRequest())
        assert isinstance(answer, OperatorResponse)
        self.assertEqual(answer.document, [{
            "group_id": "g", "partitions": 1, "backlog": 6, "in_flight": 2,
            "redelivered_total": 0, "archived": 0,
        }])

    def test_errors(self) -> None:
        conn = self.connect()
        for request, code in [
            (QueueFetchRequest("g", "nope", 0, 1), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (QueueFetchRequest("g", "jobs", 7, 1), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (DescribeShareGroupRequest("other"), ErrorCode.GROUP_ID_NOT_FOUND),
            (QueueAckRequest("other", "jobs", 0, (AckRange(0, 0, AckKind.ACCEPT),)),
             ErrorCode.INVALID_RECORD_STATE),
        ]:
            answer = conn.call(request)
            assert isinstance(answer, ErrorResponse), (request, answer)
            self.assertEqual(answer.code, code, request)

    def test_records_of_leaves_out_the_batch_neighbours(self) -> None:
        from brokerd.core.share.partition import AcquiredRange
        from brokerd.core.share.service import AcquireResult
        from brokerd.storage.record.encode import encode_batch

        result = AcquireResult("t", 0, (AcquiredRange(1, 1, 3),), encode_batch([b"a", b"b", b"c"],
                                                                           timestamp_ms=1))
        self.assertEqual([(r.offset, r.delivery_count, r.value) for r in records_of(result)],
                         [(1, 3, b"b")])


class WithoutShareGroupsTests(AdminCase):
    with_groups = False

    def test_queue_requests_are_unsupported(self) -> None:
        factory = NativeFactory(self.broker, clock=self.clock)  # type: ignore[arg-type]
        conn = Connection(factory)
        self.addCleanup(conn.close)
        for request in (QueueFetchRequest("g", "t", 0, 1), ListShareGroupsRequest()):
            answer = conn.call(request)
            assert isinstance(answer, ErrorResponse)
            self.assertEqual(answer.code, ErrorCode.UNSUPPORTED_REQUEST)


def allow(authorizer: AclAuthorizer, rtype: ResourceType, name: str, op: Operation) -> None:
    authorizer.replace([*authorizer.acls, AclBinding(rtype, name, PatternType.LITERAL,
                                                     ANONYMOUS, "*", op, Permission.ALLOW)])


class AclTests(QueueCase):
    def setUp(self) -> None:
        self.authorizer = AclAuthorizer([], frozenset())
        allow(self.authorizer, ResourceType.TOPIC, "jobs", Operation.ALL)
        allow(self.authorizer, ResourceType.GROUP, "g", Operation.ALL)
        super().setUp()

    def test_fetch_and_acknowledge_need_read_on_group_and_topic(self) -> None:
        conn = self.connect()
        answer = conn.call(QueueFetchRequest("h", "jobs", 0, 1))
        assert isinstance(answer, ErrorResponse)
        self.assertEqual(answer.code, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        self.create("secret")
        answer = conn.call(QueueFetchRequest("g", "secret", 0, 1))
        assert isinstance(answer, ErrorResponse)
        self.assertEqual(answer.code, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        answer = conn.call(QueueAckRequest("h", "jobs", 0, (AckRange(0, 0, AckKind.ACCEPT),)))
        assert isinstance(answer, ErrorResponse)
        self.assertEqual(answer.code, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        self.assertEqual(len(self.fetch(conn, 1)), 1)

    def test_describe_needs_describe_and_list_shows_only_describable_groups(self) -> None:
        # Group h has records (through the service), but no ACL names it.
        self.successResultOf(defer.Deferred.fromCoroutine(
            self.service.acquire("h", "jobs", 0, "someone", max_records=1)))
        conn = self.connect()
        answer = conn.call(DescribeShareGroupRequest("h"))
        assert isinstance(answer, ErrorResponse)
        self.assertEqual(answer.code, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        answer = conn.call(ListShareGroupsRequest())
        assert isinstance(answer, OperatorResponse)
        assert isinstance(answer.document, list)
        self.assertEqual([g["group_id"] for g in answer.document], ["g"])  # type: ignore[index]

    def test_answers_leave_out_partitions_of_topics_it_may_not_describe(self) -> None:
        self.create("hidden")
        self.successResultOf(defer.Deferred.fromCoroutine(
            self.service.acquire("g", "hidden", 0, "someone", max_records=1)))
        conn = self.connect()
        answer = conn.call(DescribeShareGroupRequest("g"))
        assert isinstance(answer, OperatorResponse) and isinstance(answer.document, dict)
        self.assertEqual([p["topic"] for p in answer.document["partitions"]], ["jobs"])  # type: ignore[index,union-attr]
        answer = conn.call(ListShareGroupsRequest())
        assert isinstance(answer, OperatorResponse) and isinstance(answer.document, list)
        self.assertEqual(answer.document[0]["partitions"], 1)  # type: ignore[index,call-overload]
