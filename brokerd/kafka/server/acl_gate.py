# -*- test-case-name: tests.kafka.server.test_acl_gate, tests.kafka.server.handlers.test_acl -*-
"""The ACL gate: what a per-API check (a :data:`Rule`) sees and answers, and how the
dispatch puts a handler behind its rule (:func:`guard`). Each rule lives next to its
handler, in the handler module of its API family (``brokerd/kafka/server/handlers/``),
and reaches the dispatch in that module's :class:`~brokerd.kafka.server.route.Route`.

A check looks at a decoded request with the connection's principal and host
(:class:`Access`) and returns a :class:`Gate`: pass the request on unchanged; answer it
at once (every resource denied, e.g. JoinGroup without READ on its group); or pass on a
request with the denied topics/groups taken out, and add their error entries to the
handler's response (``finish``). Lists of everything (Metadata for all topics,
ListGroups, ListTransactions, OffsetFetch of all topics) are filtered to what the
principal may DESCRIBE; a described group whose members use a topic the principal may
not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED without its members
(:func:`refuse_groups_with_denied_topics`). Whether a denied topic exists is never
revealed: a topic the principal may not use gets TOPIC_AUTHORIZATION_FAILED whether it
exists or not.

The rules follow Kafka's ``KafkaApis`` (summarised in ``docs/security.md``). A route
without a rule is not checked (ApiVersions: a client learns the versions before anything
else); a test fails when any other route has none. The helpers here build the common
answers: :func:`split_entries` takes refused entries out of a request and adds their
error entries to the response, :func:`keep_only` filters a list answer; both are given
typed functions that read and rebuild the messages.

It does not decide (:class:`brokerd.security.acl.AclAuthorizer` does) or change any
state; it only reads the current topic names (to refuse an auto-creation).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeAlias, TypeVar, cast

import attrs

from brokerd.core.api import CoreTopics
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.handler_base import Handler, Outcome, RequestContext
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import (
    ANONYMOUS,
    CLUSTER_NAME,
    AclAuthorizer,
    Operation,
    ResourceType,
)

TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

DENIED_TEXT = "not authorized"
#: Kafka's message for a described group that uses a topic the client may not DESCRIBE.
GROUP_TOPICS_DENIED_TEXT = (
    "The group has described topic(s) that the client is not authorized to describe."
)


@attrs.frozen
class Access:
    """One connection's principal and host, checked against the authorizer."""

    authorizer: AclAuthorizer
    principal: str
    host: str
    core: CoreTopics

    def allows(self, op: Operation, rtype: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, op, rtype, name)

    def topic(self, op: Operation, name: str) -> bool:
        return self.allows(op, ResourceType.TOPIC, name)

    def group(self, op: Operation, name: str) -> bool:
        return self.allows(op, ResourceType.GROUP, name)

    def txn(self, op: Operation, name: str) -> bool:
        return self.allows(op, ResourceType.TRANSACTIONAL_ID, name)

    def cluster(self, op: Operation) -> bool:
        return self.allows(op, ResourceType.CLUSTER, CLUSTER_NAME)

    def may_create(self, name: str) -> bool:
        """CREATE on the topic or on the cluster (Kafka accepts either)."""
        return self.cluster(Operation.CREATE) or self.topic(Operation.CREATE, name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic that has ``topic_id`` now, or None (no such topic: the
        handler answers UNKNOWN_TOPIC_ID, as Kafka does before any ACL check)."""
        info = self.core.topic_by_id(topic_id)
        return None if info is None else info.name

    def topic_error(self, op: Operation, name: str) -> ErrorCode | None:
        """Why ``op`` on topic ``name`` is refused, or None. A topic that would be
        auto-created needs CREATE too."""
        if not self.topic(op, name):
            return TOPIC_DENIED
        if (
            self.core.auto_create_topics
            and name not in self.core.topics()
            and not self.may_create(name)
        ):
            return TOPIC_DENIED
        return None


#: What identifies a request entry to its check (a name, or a config resource).
K = TypeVar("K")
#: The API's request and response message classes.
Q = TypeVar("Q")
P = TypeVar("P")
#: What the dispatch does with a handler's answer to a narrowed request: the answer
#: with the refused entries added (an :class:`Outcome` passes through).
Finish: TypeAlias = Callable[[P | Outcome], P | Outcome]


def _same(response: P | Outcome) -> P | Outcome:
    return response


@attrs.frozen
class Gate(Generic[Q, P]):
    """What the dispatch does with a request: answer now (``answer`` set), or run the
    handler on ``request`` and pass its response through ``finish``."""

    request: Request[Q]
    answer: P | Outcome | None = None
    finish: Finish[P] = _same

    @property
    def changed(self) -> bool:
        """Whether the handler's response is changed (some entries were refused)."""
        return self.finish is not _same


#: An API's check: the access of the connection and the request in, a :class:`Gate` out.
Rule: TypeAlias = Callable[[Access, Request[Q]], Gate[Q, P]]


def answer_now(req: Request[Q], response: P | Outcome) -> Gate[Q, P]:
    return Gate(req, answer=response)


E = TypeVar("E")
D = TypeVar("D")


def split_entries(
    req: Request[Q],
    entries: Sequence[E],
    key_of: Callable[[E], K],
    error_of: Callable[[K], ErrorCode | None],
    denied_entry: Callable[[E, ErrorCode], D],
    *,
    narrow: Callable[[tuple[E, ...]], Q],
    widen: Callable[[P, tuple[D, ...]], P],
) -> Gate[Q, P]:
    """Take the ``entries`` that ``error_of`` refuses out of the request (``narrow``
    builds its body from the allowed ones) and add ``denied_entry`` for each to the
    handler's response (``widen`` builds it from the response and the denied entries)."""
    allowed: list[E] = []
    denied: list[D] = []
    for entry in entries:
        code = error_of(key_of(entry))
        if code is None:
            allowed.append(entry)
        else:
            denied.append(denied_entry(entry, code))
    if not denied:
        return Gate(req)
    refused = tuple(denied)

    def finish(response: P | Outcome) -> P | Outcome:
        if isinstance(response, Outcome):
            return response
        return widen(response, refused)

    return Gate(Request(req.header, narrow(tuple(allowed))), finish=finish)


def keep_only(
    select: Callable[[P], Sequence[E]],
    rebuild: Callable[[P, tuple[E, ...]], P],
    keep: Callable[[E], bool],
) -> Finish[P]:
    """A finish that keeps the response entries ``select`` names for which ``keep``
    holds (``rebuild`` builds the response from them)."""

    def finish(response: P | Outcome) -> P | Outcome:
        if isinstance(response, Outcome):
            return response
        return rebuild(response, tuple(e for e in select(response) if keep(e)))

    return finish


G = TypeVar("G")


def topic_check(access: Access, op: Operation) -> Callable[[str], bool]:
    """Whether ``op`` on a topic is allowed, asked of the authorizer once per name (an
    answer may name a topic many times)."""
    seen: dict[str, bool] = {}

    def allowed(name: str) -> bool:
        if name not in seen:
            seen[name] = access.topic(op, name)
        return seen[name]

    return allowed


def refuse_groups_with_denied_topics(
    access: Access,
    topics_of: Callable[[G], Iterable[str]],
    refusal: Callable[[G, str], G],
) -> Callable[[Sequence[G]], tuple[G, ...]]:
    """What the group describe APIs answer (Kafka's ``KafkaApis`` rule): each described
    group that names, in its members' subscriptions or assignments (``topics_of``), a
    topic the principal may not DESCRIBE is replaced by ``refusal(group, message)``, a
    TOPIC_AUTHORIZATION_FAILED entry without members (the members would show the
    topic's name and partitions). Each topic is checked once per response."""

    def refuse(groups: Sequence[G]) -> tuple[G, ...]:
        may_describe = topic_check(access, Operation.DESCRIBE)
        return tuple(
            g if all(may_describe(t) for t in topics_of(g))
            else refusal(g, GROUP_TOPICS_DENIED_TEXT)
            for g in groups
        )

    return refuse


class GroupIdsBody(Protocol):
    """A describe request naming groups by ``group_ids``."""

    @property
    def group_ids(self) -> tuple[str, ...]: ...


class GroupsBody(Protocol):
    """A describe response answering per group in ``groups``."""

    @property
    def groups(self) -> tuple[object, ...]: ...


GQ = TypeVar("GQ", bound=GroupIdsBody)
GP = TypeVar("GP", bound=GroupsBody)
_A = TypeVar("_A")


def _evolve(inst: _A, **changes: object) -> _A:
    """``attrs.evolve`` of a message known here by a Protocol (the attrs mypy plugin
    asks for an attrs class; every message class is one)."""
    return cast(_A, attrs.evolve(cast(Any, inst), **changes))


def describe_each_group(
    access: Access, req: Request[GQ], denied_entry: Callable[[str, ErrorCode], object]
) -> Gate[GQ, GP]:
    """The group describe APIs' rule: DESCRIBE on each group; the others are answered
    ``denied_entry(group id, GROUP_AUTHORIZATION_FAILED)``, once per group id (the
    handler sees each allowed id once)."""
    body = req.body
    distinct = _evolve(body, group_ids=tuple(dict.fromkeys(body.group_ids)))
    return split_entries(
        Request(req.header, distinct), distinct.group_ids, itself,
        lambda g: None if access.group(Operation.DESCRIBE, g) else GROUP_DENIED,
        denied_entry,
        narrow=lambda kept: _evolve(distinct, group_ids=kept),
        widen=lambda r, denied: _evolve(r, groups=(*r.groups, *denied)),
    )


class Named(Protocol):
    """A request entry named by its ``name`` (a topic, a group)."""

    @property
    def name(self) -> str: ...


def by_name(entry: Named) -> str:
    return entry.name


def itself(entry: str) -> str:
    return entry


def topic_op(op: Operation, access: Access) -> Callable[[str], ErrorCode | None]:
    return lambda name: None if access.topic(op, name) else TOPIC_DENIED


def access_of(authorizer: AclAuthorizer, core: CoreTopics, conn: RequestContext) -> Access:
    """The connection's principal (``User:ANONYMOUS`` until TLS or SASL set one) and
    host, as seen by ``authorizer``."""
    state = conn.state
    principal = str(getattr(state, "principal", ANONYMOUS))
    return Access(authorizer, principal, state.peer_host, core)


def guard(
    handler: Handler[Q, P],
    rule: Rule[Q, P] | None,
    authorizer: AclAuthorizer | None,
    core: CoreTopics,
) -> Handler[Q, P]:
    """``handler`` behind ``rule`` (the handler itself when ``authorizer`` is None, the
    broker then allowing everything, or when there is no rule)."""
    if authorizer is None or rule is None:
        return handler
    check: Rule[Q, P] = rule

    async def guarded(conn: RequestContext, req: Request[Q]) -> P | Outcome:
        g = check(access_of(authorizer, core, conn), req)
        if g.answer is not None:
            return g.answer
        return g.finish(await handler(conn, g.request))

    return guarded
