"""What a console request's principal may do: everything without an authorizer, nothing
without a principal, else Kafka's operation on Kafka's resource."""

from __future__ import annotations

from twisted.internet.task import Clock

from brokerd.operator.visibility import Visibility
from brokerd.security.acl import (
    CLUSTER_NAME,
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from brokerd.web.permits import DataPages, may_create_topic, may_see_subject, permits
from brokerd.web.scope import RequestScope

ALICE = "User:alice"


def allow(operation: Operation, rtype: ResourceType, name: str) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, ALICE, "*", operation, Permission.ALLOW)


def scope(*acls: AclBinding) -> RequestScope:
    return RequestScope(Visibility(AclAuthorizer(list(acls)), ALICE, "h"), ALICE)


def test_without_an_authorizer_everything_and_without_a_principal_nothing() -> None:
    everything = RequestScope(None, ALICE)
    nobody = RequestScope(None, None)
    assert permits(everything, Operation.DELETE, ResourceType.TOPIC, "t")
    assert not permits(nobody, Operation.READ, ResourceType.TOPIC, "t")
    assert not may_create_topic(nobody, "t")


def test_operations_are_checked_on_their_resource() -> None:
    alice = scope(allow(Operation.READ, ResourceType.TOPIC, "t"))
    assert permits(alice, Operation.READ, ResourceType.TOPIC, "t")
    assert not permits(alice, Operation.WRITE, ResourceType.TOPIC, "t")
    assert not permits(alice, Operation.READ, ResourceType.TOPIC, "u")


def test_creating_needs_create_on_the_cluster_or_on_the_topic() -> None:
    assert may_create_topic(scope(allow(Operation.CREATE, ResourceType.TOPIC, "new")), "new")
    on_topic = scope(allow(Operation.CREATE, ResourceType.TOPIC, "new"))
    assert not may_create_topic(on_topic, "other")
    on_cluster = scope(allow(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME))
    assert may_create_topic(on_cluster, "any")


def test_a_subject_is_seen_with_read_on_its_topic() -> None:
    alice = scope(allow(Operation.READ, ResourceType.TOPIC, "orders"))
    assert may_see_subject(alice, "orders-value") and may_see_subject(alice, "orders-key")
    assert may_see_subject(alice, "orders")
    assert not may_see_subject(alice, "payments-value")


def test_time_is_the_injected_one_or_the_clocks() -> None:
    clock = Clock()
    clock.advance(12.5)
    pages = DataPages(None, None, clock, None, None, None)  # type: ignore[arg-type]
    assert pages.time_ms() == 12_500
    fixed = DataPages(None, None, clock, None, None, None, now_ms=lambda: 7)  # type: ignore[arg-type]
    assert fixed.time_ms() == 7
