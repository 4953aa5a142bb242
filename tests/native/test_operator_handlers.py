"""The native admin requests through NativeProtocol (StringTransport, ``task.Clock``) over a
real core, group coordinator and OperatorOps: answers, error codes, ordering with the other
request types, a listener without admin operations, and the ACL checks (the mapping of
each admin type to Kafka's operation, and ListGroups filtered to what may be described)."""

from __future__ import annotations

import struct

import pytest
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from brokerd.errors import AuthorizationFailed
from brokerd.native.acl_checks import NativeAccess
from brokerd.native.client_codec import ResponseDecoder, encode_request
from brokerd.native.commands import authorize
from brokerd.native.messages import ErrorCode, ErrorResponse, ListTopicsResponse, RequestType
from brokerd.native.operator_messages import (
    AlterTopicConfigsRequest,
    CreatePartitionsRequest,
    DeleteGroupRequest,
    DeleteTopicRequest,
    DescribeGroupRequest,
    DescribeTopicRequest,
    ListGroupsRequest,
    OperatorRequest,
    OperatorResponse,
    ResetMode,
    ResetOffsetsRequest,
)
from brokerd.native.operator_wire import TYPE_OF_CLASS
from brokerd.native.protocol import NativeFactory, NativeProtocol
from brokerd.operator.errors import GroupAuthorizationFailed
from brokerd.operator.views import GroupView
from brokerd.security.acl import (
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

from tests.native_helpers import list_topics_frame
from tests.operator_room.test_operations import AdminCase

ANONYMOUS = "User:ANONYMOUS"


class NativeAdminCase(AdminCase):
    authorizer: AclAuthorizer | None = None

    def setUp(self) -> None:
        super().setUp()
        self.factory = NativeFactory(
            self.broker, clock=self.clock,  # type: ignore[arg-type]
            authorizer=self.authorizer, operator=self.ops,
        )
        self.proto = self.factory.buildProtocol(None)
        assert isinstance(self.proto, NativeProtocol)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)
        self.addCleanup(self.proto.connectionLost, Failure(ConnectionDone()))

    def call(self, *requests: OperatorRequest) -> list[object]:
        decoder = ResponseDecoder()
        for r in requests:
            decoder.expect(TYPE_OF_CLASS[type(r)])
        self.proto.dataReceived(b"".join(encode_request(r) for r in requests))
        out = decoder.feed(self.transport.value())
        self.transport.clear()
        self.assertEqual(len(out), len(requests))
        return list(out)

    def one(self, request: OperatorRequest) -> object:
        (answer,) = self.call(request)
        return answer

    def document(self, request: OperatorRequest) -> object:
        answer = self.one(request)
        assert isinstance(answer, OperatorResponse), answer
        return answer.document

    def error(self, request: OperatorRequest) -> tuple[int, str]:
        answer = self.one(request)
        assert isinstance(answer, ErrorResponse), answer
        return answer.code, answer.message


class AnswerTests(NativeAdminCase):
    def test_topic_requests(self) -> None:
        self.create("t", 2)
        self.produce("t", 0, 3)
        doc = self.document(DescribeTopicRequest("t"))
        assert isinstance(doc, dict)
        self.assertEqual(doc["name"], "t")
        self.assertEqual([p["high_watermark"] for p in doc["partitions"]], [3, 0])
        doc = self.document(AlterTopicConfigsRequest("t", (("retention.ms", "60000"),)))
        assert isinstance(doc, dict)
        self.assertEqual((doc["overrides"], doc["configs"]["retention.ms"]),
                         (["retention.ms"], "60000"))
        doc = self.document(CreatePartitionsRequest("t", 3))
        assert isinstance(doc, dict)
        self.assertEqual(len(doc["partitions"]), 3)
        self.assertIsNone(self.document(DeleteTopicRequest("t")))
        self.assertNotIn("t", self.broker.topic_registry.topics())

    def test_group_requests(self) -> None:
        self.create("t", 1)
        self.produce("t", 0, 4)
        rows = self.document(ResetOffsetsRequest("g", "t", ResetMode.OFFSET, 1))
        self.assertEqual(rows, [{
            "group_id": "g", "topic": "t", "partition": 0, "previous_offset": None,
            "new_offset": 1, "log_start_offset": 0, "high_watermark": 4,
        }])
        self.assertEqual(self.document(ListGroupsRequest()), [{
            "group_id": "g", "group_type": "classic", "state": "Empty", "protocol_type": "",
            "protocol": "", "member_count": 0, "partitions": 1, "total_lag": 3,
        }])
        doc = self.document(DescribeGroupRequest("g"))
        assert isinstance(doc, dict)
        self.assertEqual((doc["state"], doc["total_lag"], doc["offsets"][0]["committed_offset"]),
                         ("Empty", 3, 1))
        dry = self.document(
            ResetOffsetsRequest("g", "t", ResetMode.EARLIEST, 0, (0,), dry_run=True))
        self.assertEqual(dry[0]["new_offset"], 0)  # type: ignore[index]
        self.assertEqual(self.committed("g"), {("t", 0): 1})
        self.assertIsNone(self.document(DeleteGroupRequest("g")))
        self.assertEqual(self.document(ListGroupsRequest()), [])

    def test_error_codes(self) -> None:
        self.create("t", 1)
        self.commit("busy", "t", {0: 0})
        self.join_member("busy", "t")
        cases: list[tuple[OperatorRequest, ErrorCode]] = [
            (DescribeTopicRequest("nosuch"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (AlterTopicConfigsRequest("t", (("bogus", "1"),)), ErrorCode.INVALID_CONFIG),
            (AlterTopicConfigsRequest("t", (("retention.ms", "x"),)), ErrorCode.INVALID_CONFIG),
            (CreatePartitionsRequest("t", 1), ErrorCode.INVALID_PARTITIONS),
            (DeleteTopicRequest("nosuch"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (DescribeGroupRequest("nosuch"), ErrorCode.GROUP_ID_NOT_FOUND),
            (DeleteGroupRequest("nosuch"), ErrorCode.GROUP_ID_NOT_FOUND),
            (DeleteGroupRequest("busy"), ErrorCode.NON_EMPTY_GROUP),
            (ResetOffsetsRequest("busy", "t", ResetMode.LATEST), ErrorCode.NON_EMPTY_GROUP),
            (ResetOffsetsRequest("g", "t", ResetMode.LATEST, 0, (5,)),
             ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        answers = self.call(*(request for request, _ in cases))  # pipelined, in order
        for (request, code), answer in zip(cases, answers, strict=True):
            assert isinstance(answer, ErrorResponse), (request, answer)
            self.assertEqual(answer.code, code, (request, answer.message))
            self.assertTrue(answer.message)
        self.assertFalse(self.transport.disconnecting)

    def test_admin_requests_keep_order_with_the_others(self) -> None:
        self.create("t", 1)
        decoder = ResponseDecoder()
        decoder.expect(RequestType.DESCRIBE_TOPIC)
        decoder.expect(RequestType.LIST_TOPICS)
        decoder.expect(RequestType.DELETE_TOPIC)
        decoder.expect(RequestType.LIST_TOPICS)
        self.proto.dataReceived(
            encode_request(DescribeTopicRequest("t")) + list_topics_frame()
            + encode_request(DeleteTopicRequest("t")) + list_topics_frame())
        first, listed, deleted, after = decoder.feed(self.transport.value())
        assert isinstance(listed, ListTopicsResponse) and isinstance(after, ListTopicsResponse)
        self.assertEqual(first.document["name"], "t")  # type: ignore[union-attr, index, call-overload]
        self.assertEqual([t.name for t in listed.topics], ["t"])
        self.assertEqual(deleted, OperatorResponse(RequestType.DELETE_TOPIC))
        self.assertEqual(after.topics, ())

    def test_refused_body_is_answered_and_the_connection_kept(self) -> None:
        body = b"\x00\x01t!"  # a topic, then a stray byte
        self.proto.dataReceived(struct.pack(">HI", RequestType.DELETE_TOPIC, len(body)) + body)
        code, _length = struct.unpack_from(">HH", self.transport.value())
        self.assertEqual(code, ErrorCode.MALFORMED_REQUEST)
        self.assertFalse(self.transport.disconnecting)


class WithoutGroupsTests(NativeAdminCase):
    with_groups = False

    def test_group_requests_say_there_is_no_group_coordinator(self) -> None:
        self.create("t")
        for request in (ListGroupsRequest(), DescribeGroupRequest("g"),
                        ResetOffsetsRequest("g", "t", ResetMode.LATEST), DeleteGroupRequest("g")):
            code, message = self.error(request)
            self.assertEqual(code, ErrorCode.GROUPS_UNAVAILABLE)
            self.assertIn("no group coordinator", message)


class WithoutAdminTests(NativeAdminCase):
    def setUp(self) -> None:
        super().setUp()
        self.factory.operator = None
        self.proto = self.factory.buildProtocol(None)
        assert isinstance(self.proto, NativeProtocol)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)

    def test_admin_requests_are_unsupported(self) -> None:
        code, _ = self.error(ListGroupsRequest())
        self.assertEqual(code, ErrorCode.UNSUPPORTED_REQUEST)


# --------------------------------------------------------------------------- ACLs


def allow(rtype: ResourceType, name: str, op: Operation) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, ANONYMOUS, "*", op, Permission.ALLOW)


T, G = ResourceType.TOPIC, ResourceType.GROUP


@pytest.mark.parametrize(
    "request_, needed",
    [
        (DescribeTopicRequest("t"), [(T, Operation.DESCRIBE)]),
        (AlterTopicConfigsRequest("t"), [(T, Operation.ALTER_CONFIGS)]),
        (DeleteTopicRequest("t"), [(T, Operation.DELETE)]),
        (CreatePartitionsRequest("t", 2), [(T, Operation.ALTER)]),
        (DescribeGroupRequest("g"), [(G, Operation.DESCRIBE)]),
        (DeleteGroupRequest("g"), [(G, Operation.DELETE)]),
        (ResetOffsetsRequest("g", "t", ResetMode.LATEST),
         [(G, Operation.READ), (T, Operation.READ)]),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, list) else "",
)
def test_each_admin_type_needs_kafkas_operation(
    request_: OperatorRequest, needed: list[tuple[ResourceType, Operation]]
) -> None:
    def access(bindings: list[AclBinding]) -> NativeAccess:
        return NativeAccess(AclAuthorizer(bindings, frozenset()), ANONYMOUS, "127.0.0.1",
                            lambda: {"t"})

    names = {T: "t", G: "g"}
    everything = [allow(rtype, names[rtype], op) for rtype, op in needed]
    authorize(access(everything), request_)
    for missing, (rtype, _op) in enumerate(needed):
        partial = [b for i, b in enumerate(everything) if i != missing]
        with pytest.raises(AuthorizationFailed) as refused:
            authorize(access(partial), request_)
        # A group refusal says GROUP_AUTHORIZATION_FAILED, a topic one the topic's code.
        assert isinstance(refused.value, GroupAuthorizationFailed) == (rtype is G)
    # Another operation on the same resource is not enough.
    with pytest.raises(AuthorizationFailed):
        authorize(
            access([allow(rtype, names[rtype], Operation.CREATE) for rtype, _ in needed]),
            request_,
        )


def test_group_refusal_is_a_group_error() -> None:
    access = NativeAccess(AclAuthorizer([], frozenset()), ANONYMOUS, "h", lambda: set())
    with pytest.raises(GroupAuthorizationFailed):
        authorize(access, ResetOffsetsRequest("g", "t", ResetMode.LATEST))
    authorize(access, ListGroupsRequest())  # always allowed: filtered instead
    views = [GroupView("a", "Empty"), GroupView("b", "Empty")]
    self_access = NativeAccess(AclAuthorizer([allow(G, "b", Operation.DESCRIBE)], frozenset()),
                               ANONYMOUS, "h", lambda: set())
    assert self_access.visible_groups(views) == [views[1]]


class AuthorizedListenerTests(NativeAdminCase):
    authorizer = AclAuthorizer(
        [allow(G, "seen", Operation.DESCRIBE), allow(T, "t", Operation.DESCRIBE)], frozenset())

    def test_codes_and_filtered_group_list(self) -> None:
        self.create("t")
        self.create("hidden")
        self.commit("seen", "t", {0: 0})
        self.commit("unseen", "t", {0: 0})
        listed = self.document(ListGroupsRequest())
        self.assertEqual([g["group_id"] for g in listed], ["seen"])  # type: ignore[union-attr, index]
        self.assertEqual(self.error(DescribeGroupRequest("unseen"))[0],
                         ErrorCode.GROUP_AUTHORIZATION_FAILED)
        self.assertEqual(self.error(DescribeGroupRequest("nosuch"))[0],
                         ErrorCode.GROUP_AUTHORIZATION_FAILED)  # the same whether it exists
        self.assertEqual(self.error(DescribeTopicRequest("hidden"))[0],
                         ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        self.assertEqual(self.error(DeleteTopicRequest("t"))[0],
                         ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        self.assertIn("t", self.broker.topic_registry.topics())
        doc = self.document(DescribeTopicRequest("t"))
        self.assertEqual(doc["name"], "t")  # type: ignore[index]
