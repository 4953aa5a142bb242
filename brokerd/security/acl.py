"""Kafka's ACL model: bindings, filters and the authorization decision. Pure.

An ACL binding grants or denies one operation on a resource pattern to a principal
connecting from a host. The rules (Kafka's ``StandardAuthorizer``), see
``docs/security.md``:

* a resource pattern is LITERAL (the name, or ``*`` for every resource of its type) or
  PREFIXED (every name starting with it);
* principals are ``User:<name>``; ``User:*`` is every principal; host ``*`` is every host;
* a matching DENY wins over any ALLOW; DENY only applies to the operation it names (or
  ALL); an ALLOW of ALL grants everything, of READ/WRITE/DELETE/ALTER also grants
  DESCRIBE, of ALTER_CONFIGS also DESCRIBE_CONFIGS;
* super users are allowed everything; with no matching ALLOW the answer is no.

:class:`AclFilter` is the filter of DescribeAcls/DeleteAcls (ANY and MATCH pattern
types, None fields match anything). This module does no I/O: the durable set lives in
:mod:`brokerd.security.acl_store`, the per-API checks in :mod:`brokerd.kafka.server.acl_gate`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: A LITERAL resource name, principal or host that stands for every one.
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
#: Kafka's name of the one CLUSTER resource.
CLUSTER_NAME = "kafka-cluster"
#: The principal of a connection nobody authenticated.
ANONYMOUS = "User:ANONYMOUS"
#: Principal types brokerd knows (Kafka's default principal builder makes only these).
PRINCIPAL_TYPE = "User"
#: Longest resource name, principal or host accepted in a binding.
MAX_NAME_CHARS = 1024

#: An ALLOW of one of these also allows the key (Kafka's implied operations).
_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}
_CONCRETE_RESOURCES = frozenset(
    {ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID}
)


class InvalidAcl(ValueError):
    """A binding or filter that cannot be stored or used (Kafka: INVALID_REQUEST)."""


@attrs.frozen
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def covers(self, resource_type: ResourceType, name: str) -> bool:
        """Whether the pattern of this binding applies to resource ``name``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)

    def applies_to(self, principal: str, host: str) -> bool:
        return self.principal in (principal, WILDCARD_PRINCIPAL) and self.host in (host, WILDCARD)


def _enum(cls: type[enum.IntEnum], value: int, what: str) -> int:
    try:
        return int(cls(value))
    except ValueError:
        raise InvalidAcl(f"unknown {what} {value}") from None


def valid_principal(principal: str) -> bool:
    kind, sep, name = principal.partition(":")
    return sep == ":" and kind == PRINCIPAL_TYPE and bool(name)


def make_binding(
    resource_type: int,
    resource_name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission: int,
) -> AclBinding:
    """A validated binding from wire or file values.

    :raises InvalidAcl: a value that is unknown, a filter-only value (ANY, MATCH) or a
        malformed principal, name or host.
    """
    rtype = ResourceType(_enum(ResourceType, resource_type, "resource type"))
    ptype = PatternType(_enum(PatternType, pattern_type, "pattern type"))
    op = Operation(_enum(Operation, operation, "operation"))
    perm = Permission(_enum(Permission, permission, "permission type"))
    if rtype not in _CONCRETE_RESOURCES:
        raise InvalidAcl(f"resource type {rtype.name} cannot be used in an ACL")
    if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"pattern type {ptype.name} cannot be used in an ACL")
    if op in (Operation.UNKNOWN, Operation.ANY):
        raise InvalidAcl(f"operation {op.name} cannot be used in an ACL")
    if perm in (Permission.UNKNOWN, Permission.ANY):
        raise InvalidAcl(f"permission type {perm.name} cannot be used in an ACL")
    for what, text in (("resource name", resource_name), ("principal", principal),
                       ("host", host)):
        if not text or len(text) > MAX_NAME_CHARS:
            raise InvalidAcl(f"{what} must have 1 to {MAX_NAME_CHARS} characters")
    if not valid_principal(principal):
        raise InvalidAcl(f"principal {principal!r} is not of the form User:<name>")
    if rtype == ResourceType.CLUSTER and resource_name != CLUSTER_NAME:
        raise InvalidAcl(f"the CLUSTER resource is named {CLUSTER_NAME!r}")
    return AclBinding(rtype, resource_name, ptype, principal, host, op, perm)


@attrs.frozen
class AclFilter:
    """Selects bindings: ANY enum values and None strings match anything.

    Pattern type ANY matches every pattern with exactly this name; LITERAL or PREFIXED
    only patterns of that type with exactly this name; MATCH every pattern that would
    apply to a resource of this name (LITERAL equal or ``*``, PREFIXED a prefix of it).
    """

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, b.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, b.pattern_type):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation not in (Operation.ANY, b.operation):
            return False
        if self.permission not in (Permission.ANY, b.permission):
            return False
        name = self.resource_name
        if name is None:
            return True
        if self.pattern_type != PatternType.MATCH:
            return name == b.resource_name
        if b.pattern_type == PatternType.LITERAL:
            return b.resource_name in (name, WILDCARD)
        return name.startswith(b.resource_name)


def make_filter(
    resource_type: int,
    resource_name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission: int,
) -> AclFilter:
    """A validated filter from wire values.

    :raises InvalidAcl: an unknown or UNKNOWN value (Kafka refuses those filters).
    """
    parts = (
        ResourceType(_enum(ResourceType, resource_type, "resource type")),
        PatternType(_enum(PatternType, pattern_type, "pattern type")),
        Operation(_enum(Operation, operation, "operation")),
        Permission(_enum(Permission, permission, "permission type")),
    )
    if any(p == 0 for p in parts):
        raise InvalidAcl("a filter cannot use UNKNOWN")
    rtype, ptype, op, perm = parts
    return AclFilter(
        ResourceType(rtype), resource_name, PatternType(ptype), principal, host,
        Operation(op), Permission(perm),
    )


class AclAuthorizer:
    """The decision on a set of bindings and super users (no I/O; the set is replaced
    as a whole by :meth:`replace`, so a decision never sees a half-applied change)."""

    def __init__(
        self, acls: Iterable[AclBinding] = (), super_users: Iterable[str] = ()
    ) -> None:
        self._acls: frozenset[AclBinding] = frozenset(acls)
        self.super_users = frozenset(super_users)
        # Bindings by resource type: a decision scans only the type it asks about.
        self._by_type: dict[ResourceType, tuple[AclBinding, ...]] = {}
        self._index()

    @property
    def acls(self) -> frozenset[AclBinding]:
        return self._acls

    def replace(self, acls: Iterable[AclBinding]) -> None:
        self._acls = frozenset(acls)
        self._index()

    def _index(self) -> None:
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for b in sorted(self._acls, key=_sort_key):
            by_type.setdefault(b.resource_type, []).append(b)
        self._by_type = {k: tuple(v) for k, v in by_type.items()}

    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on the resource."""
        if principal in self.super_users:
            return True
        granting = _IMPLIED_BY.get(operation, frozenset()) | {operation, Operation.ALL}
        allowed = False
        for b in self._by_type.get(resource_type, ()):
            if not (b.covers(resource_type, name) and b.applies_to(principal, host)):
                continue
            if b.permission == Permission.DENY:
                if b.operation in (operation, Operation.ALL):
                    return False
            elif b.operation in granting:
                allowed = True
        return allowed

    def authorize_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of ``resource_type`` allows ``operation`` (Kafka's
        by-resource-type check, e.g. an idempotent producer allowed to WRITE some topic).

        An ALLOW counts unless a DENY of the same principal/host covers every resource
        of the type (LITERAL ``*``) for that operation.
        """
        if principal in self.super_users:
            return True
        granting = _IMPLIED_BY.get(operation, frozenset()) | {operation, Operation.ALL}
        allowed = False
        for b in self._by_type.get(resource_type, ()):
            if not b.applies_to(principal, host):
                continue
            if b.permission == Permission.DENY:
                everything = (b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD)
                if everything and b.operation in (operation, Operation.ALL):
                    return False
            elif b.operation in granting:
                allowed = True
        return allowed


def _sort_key(b: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    return (
        b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host,
        b.operation, b.permission,
    )


def sorted_acls(acls: Iterable[AclBinding]) -> list[AclBinding]:
    """A stable order (file contents, DescribeAcls answers)."""
    return sorted(acls, key=_sort_key)
