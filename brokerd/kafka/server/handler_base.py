# -*- test-case-name: tests.kafka.listener.test_protocol -*-
"""What every Kafka API handler module shares: outcomes, the request context, typed views.

:class:`Outcome` is what a handler returns instead of a response message (acks=0
Produce); :class:`RequestContext` is what a handler knows of where a request came from
(the peer's address and principal, and waits to cancel when the client goes away);
:class:`BrokerIdentity` is the duck type of what the listener injects (with a
:class:`brokerd.clock.Clock`).
:func:`gather`, :func:`message`, :func:`topic_name_now` and :func:`unexpected_code` are
small helpers of the handler modules (:func:`topic_name_now` for the two commits that
name topics by ID).

It holds no API logic: the handlers live in the modules of
``brokerd/kafka/server/handlers/``, one per API family.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.kafka.errors import ErrorCode, error_code_for
from brokerd.kafka.wire.codec import ZERO_UUID
from brokerd.kafka.wire.requests.apis import Request
from brokerd.net.connection import ConnectionState

if TYPE_CHECKING:
    from brokerd.core.api import CoreTopics

T = TypeVar("T")
#: An API's request and response message classes.
Q = TypeVar("Q")
P = TypeVar("P")

#: brokerd has one leader epoch forever (it is a single node that never changes
#: leadership): OffsetForLeaderEpoch answers from it, so a client's KIP-320 offset
#: validation never finds a log truncated under it.
LEADER_EPOCH = 0


class Outcome(enum.Enum):
    """What the protocol does instead of writing a response."""

    #: acks=0 Produce: write nothing at all.
    NO_RESPONSE = "no-response"
    #: acks=0 Produce that failed: close the connection (the client learns nothing else).
    CLOSE_CONNECTION = "close-connection"


NO_RESPONSE = Outcome.NO_RESPONSE
CLOSE_CONNECTION = Outcome.CLOSE_CONNECTION


class BrokerIdentity(Protocol):
    """Where clients are told to connect (read on every request: the listener's port is only
    known after it binds). Implemented by
    :class:`~brokerd.kafka.listener.protocol.KafkaFactory`; a Protocol because ``server/``
    sits below ``listener/``."""

    @property
    def node_id(self) -> int: ...
    @property
    def advertised_host(self) -> str: ...
    @property
    def advertised_port(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...


class RequestContext:
    """What a handler knows of the connection a request came on: the peer, and the
    waits to cancel when the connection goes away (a parked long-poll fetch must not
    outlive it). One per connection, handed to every handler with each request."""

    def __init__(self, client_host: str, state: ConnectionState | None = None) -> None:
        #: Kafka's form, ``/127.0.0.1`` (JoinGroup passes it to the coordinator).
        self.client_host = client_host
        #: The protocol's connection state (peer host; the principal once TLS or SASL
        #: set it), read by the authorization checks.
        self.state = (
            state if state is not None else ConnectionState(peer_host=client_host.lstrip("/"))
        )
        #: The peer's port (0 when the transport has none).
        self.client_port = 0
        #: The software name and version of the client's ApiVersions v3+ request.
        self.client_software = ("", "")
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


#: One API's handler: the request context and the decoded request in, a response message
#: or an :class:`Outcome` out. ``Handler[CreateTopicsRequest, CreateTopicsResponse]``
#: answers CreateTopics (:class:`~brokerd.kafka.server.route.Route` ties it to its API's
#: :class:`~brokerd.kafka.wire.schema.ApiSpec`, so mypy checks it against both classes).
Handler: TypeAlias = Callable[[RequestContext, Request[Q]], Awaitable[P | Outcome]]


def gather(coros: Sequence[Coroutine[Any, Any, T]]) -> defer.Deferred[list[T]]:
    """Run coroutines concurrently; results in order. They must not raise."""
    if len(coros) == 1:
        # The common produce or fetch of one partition: no DeferredList to build.
        return defer.Deferred.fromCoroutine(coros[0]).addCallback(lambda result: [result])
    ds = [defer.Deferred.fromCoroutine(c) for c in coros]
    d: defer.Deferred[list[T]] = defer.gatherResults(ds, consumeErrors=True)
    return d


def repeated(names: Iterable[str]) -> set[str]:
    """The names that occur more than once: Kafka refuses every entry of a topic named
    twice in one admin request (INVALID_REQUEST), not only the second."""
    seen: set[str] = set()
    twice: set[str] = set()
    for name in names:
        (twice if name in seen else seen).add(name)
    return twice


def topic_name_now(core: CoreTopics, topic_id: uuid.UUID) -> str:
    """The name of the topic with ``topic_id`` now, or "" (none has it): how a commit
    that names its topics by ID (OffsetCommit v10+, TxnOffsetCommit v6+) is read."""
    if topic_id == ZERO_UUID:
        return ""
    info = core.topic_by_id(topic_id)
    return "" if info is None else info.name


def message(exc: BaseException) -> str:
    """The text of an error message field for ``exc``."""
    return str(exc) or type(exc).__name__


def unexpected_code(log: Logger, what: str, exc: BaseException) -> ErrorCode:
    """Map ``exc`` to its Kafka error code; log it when it is not one of brokerd's own
    errors (that is a bug, or an environment failure worth seeing)."""
    code = error_code_for(exc)
    if code is ErrorCode.UNKNOWN_SERVER_ERROR:
        log.failure(
            "kafka {what} failed unexpectedly",
            failure=Failure(exc),  # type: ignore[no-untyped-call]
            what=what,
        )
    return code
