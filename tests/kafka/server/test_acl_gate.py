"""The ACL gate (:mod:`brokerd.kafka.server.acl_gate`): what a rule sees of the
connection, how refused entries are taken out of a request and added to its answer, the
filters of list answers, and a handler put behind its rule. With plain attrs messages,
a real :class:`~brokerd.security.acl.AclAuthorizer` and the fake core."""

from __future__ import annotations

import uuid

import attrs
from twisted.internet import defer
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.server import acl_gate as gate
from brokerd.kafka.server.handler_base import NO_RESPONSE, Outcome, RequestContext
from brokerd.kafka.wire.codec import RequestHeader
from brokerd.kafka.wire.requests.apis import Request
from brokerd.net.connection import ConnectionState
from brokerd.security.acl import (
    CLUSTER_NAME,
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

from tests.fake_core import FakeCore

ALICE = "User:alice"
Op = Operation
HEADER = RequestHeader(3, 12, 1, "test")


def allow(rtype: ResourceType, name: str, op: Operation, who: str = ALICE) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, who, "*", op, Permission.ALLOW)


@attrs.frozen
class Body:
    names: tuple[str, ...]


@attrs.frozen
class Entry:
    name: str
    error: int = 0


@attrs.frozen
class Answer:
    entries: tuple[Entry, ...] = ()


@attrs.frozen
class GroupsRequest:
    group_ids: tuple[str, ...]


@attrs.frozen
class GroupsAnswer:
    groups: tuple[Entry, ...] = ()


def access(*acls: AclBinding, core: FakeCore | None = None) -> gate.Access:
    return gate.Access(AclAuthorizer(acls), ALICE, "10.0.0.1", core or FakeCore())


def split(acc: gate.Access, *names: str) -> gate.Gate[Body, Answer]:
    req = Request(HEADER, Body(names))
    return gate.split_entries(
        req, req.body.names, gate.itself, gate.topic_op(Op.READ, acc),
        lambda name, code: Entry(name, int(code)),
        narrow=lambda kept: Body(kept),
        widen=lambda r, denied: Answer((*r.entries, *denied)),
    )


class AccessTests(SynchronousTestCase):
    def test_a_topic_to_be_auto_created_needs_create_too(self) -> None:
        core = FakeCore()
        core.add_topic("there")
        reader = access(allow(ResourceType.TOPIC, "new", Op.READ),
                        allow(ResourceType.TOPIC, "there", Op.READ), core=core)
        self.assertIsNone(reader.topic_error(Op.READ, "there"))
        self.assertIs(reader.topic_error(Op.READ, "new"), gate.TOPIC_DENIED)
        self.assertIs(reader.topic_error(Op.READ, "other"), gate.TOPIC_DENIED)
        creator = access(allow(ResourceType.TOPIC, "new", Op.READ),
                         allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.CREATE), core=core)
        self.assertIsNone(creator.topic_error(Op.READ, "new"))
        core.auto_create_topics = False
        self.assertIsNone(reader.topic_error(Op.READ, "new"))

    def test_topic_names_by_id_and_the_connections_principal(self) -> None:
        core = FakeCore()
        core.add_topic("t")
        acc = access(core=core)
        self.assertEqual(acc.topic_name(core.topics()["t"].topic_id), "t")
        self.assertIsNone(acc.topic_name(uuid.uuid4()))
        conn = RequestContext("/10.9.8.7", ConnectionState(peer_host="10.9.8.7",
                                                           principal=ALICE))
        seen = gate.access_of(AclAuthorizer(), core, conn)
        self.assertEqual((seen.principal, seen.host), (ALICE, "10.9.8.7"))
        anonymous = gate.access_of(AclAuthorizer(), core, RequestContext("/h"))
        self.assertEqual(anonymous.principal, "User:ANONYMOUS")


class SplitEntriesTests(SynchronousTestCase):
    def test_nothing_refused_passes_the_request_unchanged(self) -> None:
        acc = access(allow(ResourceType.TOPIC, "a", Op.READ))
        g = split(acc, "a")
        self.assertFalse(g.changed)
        self.assertIsNone(g.answer)
        self.assertEqual(g.request.body, Body(("a",)))
        self.assertEqual(g.finish(Answer()), Answer())

    def test_refused_entries_leave_the_request_and_join_the_answer(self) -> None:
        acc = access(allow(ResourceType.TOPIC, "a", Op.READ))
        g = split(acc, "b", "a", "c")
        self.assertTrue(g.changed)
        self.assertEqual(g.request.body, Body(("a",)))
        self.assertEqual(g.request.header, HEADER)
        denied = int(gate.TOPIC_DENIED)
        self.assertEqual(g.finish(Answer((Entry("a"),))),
                         Answer((Entry("a"), Entry("b", denied), Entry("c", denied))))
        self.assertIs(g.finish(NO_RESPONSE), NO_RESPONSE)

    def test_keep_only_filters_an_answer(self) -> None:
        finish = gate.keep_only(lambda r: r.entries, lambda r, kept: Answer(kept),
                                lambda e: e.name != "hidden")
        self.assertEqual(finish(Answer((Entry("a"), Entry("hidden"), Entry("b")))),
                         Answer((Entry("a"), Entry("b"))))
        self.assertIs(finish(Outcome.CLOSE_CONNECTION), Outcome.CLOSE_CONNECTION)


class CountingAuthorizer(AclAuthorizer):
    def __init__(self, *acls: AclBinding) -> None:
        super().__init__(acls)
        self.asked: list[str] = []

    def authorize(self, principal: str, host: str, op: Operation, rtype: ResourceType,
                  name: str) -> bool:
        self.asked.append(name)
        return super().authorize(principal, host, op, rtype, name)


class GroupRulesTests(SynchronousTestCase):
    def test_each_topic_is_asked_once(self) -> None:
        authorizer = CountingAuthorizer(allow(ResourceType.TOPIC, "a", Op.DESCRIBE))
        acc = gate.Access(authorizer, ALICE, "h", FakeCore())
        may = gate.topic_check(acc, Op.DESCRIBE)
        self.assertEqual([may(t) for t in ("a", "b", "a", "b")], [True, False, True, False])
        self.assertEqual(authorizer.asked, ["a", "b"])

    def test_a_group_using_a_hidden_topic_is_refused_without_its_members(self) -> None:
        acc = access(allow(ResourceType.TOPIC, "seen", Op.DESCRIBE))
        topics = {"open": ["seen"], "secret": ["seen", "hidden"]}
        refuse = gate.refuse_groups_with_denied_topics(
            acc, lambda g: topics[g.name],
            lambda g, text: Entry(g.name + ": " + text, int(gate.TOPIC_DENIED)))
        open_group, secret = refuse([Entry("open"), Entry("secret")])
        self.assertEqual(open_group, Entry("open"))
        self.assertEqual(secret.error, gate.TOPIC_DENIED)
        self.assertIn(gate.GROUP_TOPICS_DENIED_TEXT, secret.name)

    def test_describe_each_group_once_and_refuse_the_others(self) -> None:
        acc = access(allow(ResourceType.GROUP, "g1", Op.DESCRIBE))
        req = Request(HEADER, GroupsRequest(("g1", "g2", "g1", "g2")))
        g: gate.Gate[GroupsRequest, GroupsAnswer] = gate.describe_each_group(
            acc, req, lambda gid, code: Entry(gid, int(code)))
        self.assertEqual(g.request.body, GroupsRequest(("g1",)))
        self.assertEqual(g.finish(GroupsAnswer((Entry("g1"),))), GroupsAnswer(
            (Entry("g1"), Entry("g2", int(gate.GROUP_DENIED)))))


class GuardTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.seen: list[Body] = []
        self.conn = RequestContext("/h", ConnectionState(peer_host="h", principal=ALICE))

    async def handler(self, conn: RequestContext, req: Request[Body]) -> Answer:
        self.seen.append(req.body)
        return Answer(tuple(Entry(n) for n in req.body.names))

    def rule(self, acc: gate.Access, req: Request[Body]) -> gate.Gate[Body, Answer]:
        if not req.body.names:
            return gate.answer_now(req, Answer((Entry("refused", 1),)))
        return split(acc, *req.body.names)

    def answer(self, guarded: object, *names: str) -> Answer:
        d = defer.ensureDeferred(guarded(self.conn, Request(HEADER, Body(names))))  # type: ignore[operator]
        return self.successResultOf(d)

    def test_without_an_authorizer_or_a_rule_the_handler_itself(self) -> None:
        core, handler = FakeCore(), self.handler
        self.assertIs(gate.guard(handler, self.rule, None, core), handler)
        self.assertIs(gate.guard(handler, None, AclAuthorizer(), core), handler)

    def test_the_rule_narrows_the_request_or_answers_at_once(self) -> None:
        authorizer = AclAuthorizer([allow(ResourceType.TOPIC, "a", Op.READ)])
        guarded = gate.guard(self.handler, self.rule, authorizer, FakeCore())
        self.assertEqual(self.answer(guarded, "a", "b"), Answer(
            (Entry("a"), Entry("b", int(gate.TOPIC_DENIED)))))
        self.assertEqual(self.seen, [Body(("a",))])
        self.assertEqual(self.answer(guarded), Answer((Entry("refused", 1),)))
        self.assertEqual(len(self.seen), 1)  # answered without the handler
