# -*- test-case-name: tests.test_native_authorize -*-
"""ACL checks of native requests, with the connection's TLS client-certificate principal.

The native protocol has topics only, so its checks are the topic part of Kafka's
(``docs/security.md``): Produce needs WRITE on the topic (and CREATE on the topic or the
cluster when the produce would auto-create it), Fetch and LongPollFetch READ, ListOffsets
DESCRIBE, CreateTopic CREATE (topic or cluster), and ListTopics lists only the topics the
principal may DESCRIBE. A refusal is :class:`~brokerd.errors.AuthorizationFailed`
(native ``TOPIC_AUTHORIZATION_FAILED``) whether the topic exists or not, so a client
learns nothing about topics it may not describe.

Without a client certificate a native connection is ``User:ANONYMOUS``. Pure: no
Twisted, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

import attrs

from brokerd.errors import AuthorizationFailed
from brokerd.native.messages import (
    CreateTopicRequest,
    FetchRequest,
    ListOffsetsRequest,
    ListTopicsRequest,
    LongPollFetchRequest,
    ProduceRequest,
    Request,
)
from brokerd.security.acl import CLUSTER_NAME, AclAuthorizer, Operation, ResourceType
from brokerd.storage.types import TopicInfo


@attrs.frozen
class NativeAccess:
    """One connection's principal and host against the authorizer; ``existing`` gives
    the names of the topics that exist now (auto-creation needs CREATE)."""

    authorizer: AclAuthorizer
    principal: str
    host: str
    existing: Callable[[], Container[str]]

    def _allows(self, op: Operation, rtype: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, op, rtype, name)

    def _topic(self, op: Operation, name: str) -> bool:
        return self._allows(op, ResourceType.TOPIC, name)

    def _may_create(self, name: str) -> bool:
        return self._allows(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or self._topic(
            Operation.CREATE, name
        )

    def check(self, request: Request) -> None:
        """Raise :class:`AuthorizationFailed` unless ``request`` is allowed (ListTopics
        always is: its answer is filtered by :meth:`visible`)."""
        match request:
            case ProduceRequest():
                allowed = self._topic(Operation.WRITE, request.topic) and (
                    request.topic in self.existing() or self._may_create(request.topic)
                )
            case FetchRequest() | LongPollFetchRequest():
                allowed = self._topic(Operation.READ, request.topic)
            case ListOffsetsRequest():
                allowed = self._topic(Operation.DESCRIBE, request.topic)
            case CreateTopicRequest():
                allowed = self._may_create(request.topic)
            case ListTopicsRequest():
                allowed = True
            case _:
                allowed = False
        if not allowed:
            raise AuthorizationFailed(f"{self.principal} is not authorized for this topic")

    def visible(self, topics: Sequence[TopicInfo]) -> list[TopicInfo]:
        """The topics of a ListTopics answer the principal may DESCRIBE."""
        return [t for t in topics if self._topic(Operation.DESCRIBE, t.name)]
