"""The authorized-operations fields of one connection's Kafka answers
(:class:`~brokerd.kafka.server.operations_fields.AuthorizedOperations`): the principal
and host of the connection, with or without an authorizer."""

from __future__ import annotations

from brokerd.kafka.server.handler_base import RequestContext
from brokerd.kafka.server.operations_fields import AuthorizedOperations
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
from brokerd.security.authorized_ops import SUPPORTED_OPERATIONS, operations_field

ANON = "User:ANONYMOUS"
Op = Operation


def allow(rtype: ResourceType, name: str, op: Operation, who: str = "User:alice",
          permission: Permission = Permission.ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, who, host, op, permission)


def alice(host: str = "10.0.0.1") -> RequestContext:
    return RequestContext(f"/{host}", ConnectionState(peer_host=host, principal="User:alice"))


def test_cluster_field_is_empty_without_describe() -> None:
    conn = RequestContext("/10.0.0.1")  # User:ANONYMOUS until TLS or SASL says otherwise
    cluster = ResourceType.CLUSTER
    idempotent = AuthorizedOperations(AclAuthorizer([allow(cluster, CLUSTER_NAME,
                                                           Op.IDEMPOTENT_WRITE, ANON)]))
    assert idempotent.cluster(conn) == 0
    alter = AuthorizedOperations(AclAuthorizer([allow(cluster, CLUSTER_NAME, Op.ALTER, ANON)]))
    assert alter.cluster(conn) == operations_field([Op.ALTER, Op.DESCRIBE])
    assert AuthorizedOperations().cluster(conn) == operations_field(
        SUPPORTED_OPERATIONS[cluster])


def test_topic_fields_follow_the_connections_principal() -> None:
    ops = AuthorizedOperations(AclAuthorizer([allow(ResourceType.TOPIC, "t", Op.READ)]))
    assert ops.topic(alice(), "t") == operations_field([Op.READ, Op.DESCRIBE])
    assert ops.topic_visible(alice(), "t")
    assert ops.topic(alice(), "other") == 0
    assert not ops.topic_visible(alice(), "other")
    anonymous = RequestContext("/10.0.0.1")
    assert ops.topic(anonymous, "t") == 0 and not ops.topic_visible(anonymous, "t")


def test_the_connections_host_is_checked() -> None:
    ops = AuthorizedOperations(AclAuthorizer([
        allow(ResourceType.GROUP, "g", Op.READ, host="10.0.0.1")]))
    assert ops.group(alice("10.0.0.1"), "g") == operations_field([Op.READ, Op.DESCRIBE])
    assert ops.group(alice("10.0.0.2"), "g") == 0


def test_without_an_authorizer_every_operation_of_the_type() -> None:
    ops = AuthorizedOperations()
    assert ops.topic(alice(), "t") == operations_field(SUPPORTED_OPERATIONS[ResourceType.TOPIC])
    assert ops.group(alice(), "g") == operations_field(SUPPORTED_OPERATIONS[ResourceType.GROUP])
    assert ops.topic_visible(alice(), "anything")
