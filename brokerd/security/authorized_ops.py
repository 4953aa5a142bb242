"""Which operations a principal may perform on one resource, as the Kafka APIs report
them (Metadata's ``topic_authorized_operations`` and ``cluster_authorized_operations``,
DescribeGroups' ``authorized_operations``). Pure.

The answer is a 32-bit field with bit ``1 << code`` set for each operation allowed
(Kafka's AclOperation codes: READ 3, WRITE 4, ... ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12).
Only the operations that apply to the resource's type are ever reported (Kafka's list
per type, :data:`SUPPORTED_OPERATIONS`): eight for a topic, seven for the cluster, five
for a group (its DESCRIBE_CONFIGS and ALTER_CONFIGS, as Kafka 4 lists them). Each one is
decided as a request needing it would be (``acl.AclAuthorizer.authorize``), so implied
operations count (READ, WRITE, DELETE or ALTER allow DESCRIBE; ALTER_CONFIGS allows
DESCRIBE_CONFIGS), an ALLOW of ALL allows all of them, a DENY removes what it names,
and a super user has every one. A broker without an authorizer allows everything, so it
reports every operation of the type, as Kafka does.

What it does not do: decide whether the field is asked for (the handlers do: the field
keeps :data:`OMITTED` otherwise), or hold any state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from brokerd.security.acl import AclAuthorizer, Operation, ResourceType

__all__ = [
    "OMITTED",
    "SUPPORTED_OPERATIONS",
    "allowed_operations",
    "authorized_operations",
    "operations_field",
]

#: The wire's "not asked for" (Kafka's Integer.MIN_VALUE).
OMITTED = -(2**31)

#: The operations that apply to each concrete resource type (Kafka's lists).
SUPPORTED_OPERATIONS: Mapping[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({
        Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE,
        Operation.DELETE, Operation.ALTER, Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    }),
    ResourceType.GROUP: frozenset({
        Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    }),
    ResourceType.CLUSTER: frozenset({
        Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER,
        Operation.DESCRIBE,
    }),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE}),
}


def operations_field(operations: Iterable[Operation]) -> int:
    """The 32-bit field naming ``operations`` (bit ``1 << code`` each)."""
    field = 0
    for op in operations:
        if not 0 <= op < 32:
            raise ValueError(f"operation code {int(op)} does not fit the field")
        field |= 1 << op
    return field


def allowed_operations(
    authorizer: AclAuthorizer | None,
    principal: str,
    host: str,
    resource_type: ResourceType,
    name: str,
) -> frozenset[Operation]:
    """The operations of :data:`SUPPORTED_OPERATIONS` for ``resource_type`` that
    ``principal`` from ``host`` may perform on resource ``name`` (all of them when
    ``authorizer`` is None: no ACLs, everything allowed)."""
    supported = SUPPORTED_OPERATIONS.get(resource_type)
    if supported is None:
        raise ValueError(f"{resource_type.name} is not a concrete resource type")
    if authorizer is None:
        return supported
    return frozenset(
        op for op in supported
        if authorizer.authorize(principal, host, op, resource_type, name)
    )


def authorized_operations(
    authorizer: AclAuthorizer | None,
    principal: str,
    host: str,
    resource_type: ResourceType,
    name: str,
) -> int:
    """:func:`allowed_operations` as the wire's field."""
    return operations_field(allowed_operations(authorizer, principal, host, resource_type, name))
