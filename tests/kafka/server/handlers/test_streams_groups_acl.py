"""Who may make a streams group's internal topics: with ACLs, a heartbeat creates them
only for a principal with CREATE on the cluster or on the topic (Kafka's rule); without
an authorizer, anyone whose heartbeat is let in."""

from __future__ import annotations

from typing import Any, cast

import attrs

from brokerd.kafka.server.handlers.streams_groups import StreamsGroupHandlers
from brokerd.kafka.server.operations_fields import AuthorizedOperations
from brokerd.security.acl import (
    CLUSTER_NAME,
    AclAuthorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    make_binding,
)


@attrs.frozen
class _State:
    principal: str = "User:alice"
    peer_host: str = "10.1.2.3"


@attrs.frozen
class _Conn:
    state: _State = _State()


def _handlers(authorizer: AclAuthorizer | None) -> StreamsGroupHandlers:
    return StreamsGroupHandlers(
        cast(Any, None), cast(Any, None), AuthorizedOperations(authorizer),
        is_share_group=lambda _g: False,
    )


def _grant(authorizer: AclAuthorizer, rtype: ResourceType, name: str) -> None:
    authorizer.replace(authorizer.acls | {make_binding(
        rtype, name, PatternType.LITERAL, "User:alice", "*", Operation.CREATE,
        Permission.ALLOW)})


def test_create_needs_cluster_or_topic_create() -> None:
    conn = cast(Any, _Conn())
    assert _handlers(None)._may_create(conn, "app-x-changelog")
    authorizer = AclAuthorizer([], ["User:root"])
    handlers = _handlers(authorizer)
    assert not handlers._may_create(conn, "app-x-changelog")
    _grant(authorizer, ResourceType.TOPIC, "app-x-changelog")
    assert handlers._may_create(conn, "app-x-changelog")
    assert not handlers._may_create(conn, "app-y-changelog")
    _grant(authorizer, ResourceType.CLUSTER, CLUSTER_NAME)
    assert handlers._may_create(conn, "app-y-changelog")
