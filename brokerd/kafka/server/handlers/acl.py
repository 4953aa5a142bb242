# -*- test-case-name: tests.kafka.server.handlers.test_acl -*-
"""CreateAcls, DescribeAcls and DeleteAcls: managing the ACL set over the Kafka protocol.

Changes are applied to a copy of the set, written to ``acls.json``
(:class:`~brokerd.security.acl_store.AclStore`, in the injected blocking runner), and
only then given to the authorizer: a failed write changes nothing and is answered
UNKNOWN_SERVER_ERROR. Changes are serialised (one at a time), so two connections never
overwrite each other's. With no authorizer configured every request is answered
SECURITY_DISABLED, as Kafka does.

Who may call these APIs (ALTER or DESCRIBE on the cluster) is checked before the handler
runs, by the rules at the end of this module (the gate is
:mod:`brokerd.kafka.server.acl_gate`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.acl_gate import (
    CLUSTER_DENIED,
    DENIED_TEXT,
    Access,
    Gate,
    answer_now,
)
from brokerd.kafka.server.handler_base import RequestContext
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.messages import acl as acl_apis
from brokerd.kafka.wire.messages.acl import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import (
    AclAuthorizer,
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    make_binding,
    make_filter,
    sorted_acls,
)
from brokerd.security.acl_store import MAX_ACLS, AclStore

T = TypeVar("T")
#: Runs a blocking call off the reactor thread (the broker's write pool).
RunBlocking = Callable[..., defer.Deferred[Any]]

_DISABLED = "no authorizer is configured (--authorizer acl enables ACLs)"
#: Kafka's resource types that brokerd keeps no ACLs on: their ACLs govern delegation
#: tokens (v3 added USER for creating tokens on another user's behalf), which brokerd
#: does not have. A filter on one matches nothing; creating one is refused.
_NOT_KEPT = {6: "DELEGATION_TOKEN", 7: "USER"}
#: Kafka's ANY resource type: validates a filter's other fields before it matches nothing.
_ANY_RESOURCE = 1


def _run_here(f: Callable[..., T], *args: object) -> defer.Deferred[T]:
    return defer.maybeDeferred(f, *args)


class AclHandlers:
    """The three ACL APIs over one authorizer and its store (None: ACLs disabled)."""

    _log = Logger()

    def __init__(
        self,
        authorizer: AclAuthorizer | None,
        store: AclStore | None,
        *,
        run_blocking: RunBlocking = _run_here,
    ) -> None:
        self._authorizer = authorizer
        self._store = store
        self._run_blocking = run_blocking
        self._lock = defer.DeferredLock()

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(CREATE_ACLS, self.create_acls, create_acls_rule),
            route(DESCRIBE_ACLS, self.describe_acls, describe_acls_rule),
            route(DELETE_ACLS, self.delete_acls, delete_acls_rule),
        )

    async def _replace(self, acls: frozenset[AclBinding]) -> bool:
        """Store ``acls`` and make them current; False (logged) if the write failed."""
        assert self._authorizer is not None
        if self._store is not None:
            try:
                await self._run_blocking(self._store.save, acls)
            except Exception as e:
                self._log.failure(
                    "writing the ACLs failed; nothing changed",
                    failure=Failure(e),  # type: ignore[no-untyped-call]
                )
                return False
        self._authorizer.replace(acls)
        return True

    async def _change(
        self, change: Callable[[frozenset[AclBinding]], frozenset[AclBinding]]
    ) -> tuple[ErrorCode, str] | None:
        """Make the ACLs ``change(current ACLs)``, stored, under the lock (one change at
        a time); None when done (or nothing changed), else the error every entry of the
        request is answered: a change that grows the ACLs past MAX_ACLS, or a failed
        write (nothing changed then)."""
        assert self._authorizer is not None
        async with self._lock:
            current = self._authorizer.acls
            new = change(current)
            if len(new) > MAX_ACLS and len(new) > len(current):
                return ErrorCode.INVALID_REQUEST, f"more than {MAX_ACLS} ACLs"
            if new == current or await self._replace(new):
                return None
            return ErrorCode.UNKNOWN_SERVER_ERROR, "the ACLs could not be stored"

    # -- CreateAcls ------------------------------------------------------------------

    async def create_acls(
        self, conn: RequestContext, req: Request[acl_apis.CreateAclsRequest]
    ) -> acl_apis.CreateAclsResponse:
        body = req.body
        if self._authorizer is None:
            return _creations_refused(body, ErrorCode.SECURITY_DISABLED, _DISABLED)
        parsed = _each(body.creations, _binding)
        added = frozenset(b for b in parsed if isinstance(b, AclBinding))
        failure = await self._change(lambda current: current | added)
        results = []
        for p in parsed:
            if isinstance(p, InvalidAcl):
                results.append(acl_apis.AclCreationResult(
                    error_code=ErrorCode.INVALID_REQUEST, error_message=str(p)
                ))
            elif failure is None:
                results.append(acl_apis.AclCreationResult())
            else:
                results.append(acl_apis.AclCreationResult(
                    error_code=failure[0], error_message=failure[1]
                ))
        return acl_apis.CreateAclsResponse(results=tuple(results))

    # -- DescribeAcls ----------------------------------------------------------------

    async def describe_acls(
        self, conn: RequestContext, req: Request[acl_apis.DescribeAclsRequest]
    ) -> acl_apis.DescribeAclsResponse:
        body = req.body
        if self._authorizer is None:
            return acl_apis.DescribeAclsResponse(
                error_code=ErrorCode.SECURITY_DISABLED, error_message=_DISABLED
            )
        try:
            f = _filter(body)
        except InvalidAcl as e:
            return acl_apis.DescribeAclsResponse(
                error_code=ErrorCode.INVALID_REQUEST, error_message=str(e)
            )
        if body.resource_type_filter in _NOT_KEPT:
            return acl_apis.DescribeAclsResponse()
        return acl_apis.DescribeAclsResponse(
            resources=_by_resource(b for b in self._authorizer.acls if f.matches(b))
        )

    # -- DeleteAcls ------------------------------------------------------------------

    async def delete_acls(
        self, conn: RequestContext, req: Request[acl_apis.DeleteAclsRequest]
    ) -> acl_apis.DeleteAclsResponse:
        body = req.body
        if self._authorizer is None:
            return _filters_refused(body, ErrorCode.SECURITY_DISABLED, _DISABLED)
        filters = _each(body.filters, _filter)
        matched: list[list[AclBinding]] = []

        def remove(current: frozenset[AclBinding]) -> frozenset[AclBinding]:
            matched[:] = [
                sorted_acls(b for b in current if f.matches(b))
                if isinstance(f, AclFilter) and raw.resource_type_filter not in _NOT_KEPT
                else []
                for f, raw in zip(filters, body.filters, strict=True)
            ]
            return current - frozenset(b for m in matched for b in m)

        failure = await self._change(remove)
        results = []
        for f, m in zip(filters, matched, strict=True):
            if isinstance(f, InvalidAcl):
                results.append(acl_apis.DeleteAclsFilterResult(
                    error_code=ErrorCode.INVALID_REQUEST, error_message=str(f)
                ))
            elif failure is not None:
                results.append(acl_apis.DeleteAclsFilterResult(
                    error_code=failure[0], error_message=failure[1]
                ))
            else:
                results.append(acl_apis.DeleteAclsFilterResult(
                    matching_acls=tuple(_matching(b) for b in m)
                ))
        return acl_apis.DeleteAclsResponse(filter_results=tuple(results))


def _creations_refused(
    body: acl_apis.CreateAclsRequest, code: ErrorCode, message: str
) -> acl_apis.CreateAclsResponse:
    """CreateAcls answered ``code`` for every creation."""
    return acl_apis.CreateAclsResponse(results=tuple(
        acl_apis.AclCreationResult(error_code=code, error_message=message)
        for _ in body.creations
    ))


def _filters_refused(
    body: acl_apis.DeleteAclsRequest, code: ErrorCode, message: str
) -> acl_apis.DeleteAclsResponse:
    """DeleteAcls answered ``code`` for every filter."""
    return acl_apis.DeleteAclsResponse(filter_results=tuple(
        acl_apis.DeleteAclsFilterResult(error_code=code, error_message=message)
        for _ in body.filters
    ))


X = TypeVar("X")


def _each(entries: Iterable[X], parse: Callable[[X], T]) -> list[T | InvalidAcl]:
    """Each entry parsed, or the :class:`InvalidAcl` that refused it."""
    parsed: list[T | InvalidAcl] = []
    for entry in entries:
        try:
            parsed.append(parse(entry))
        except InvalidAcl as e:
            parsed.append(e)
    return parsed


def _binding(c: acl_apis.AclCreation) -> AclBinding:
    if c.resource_type in _NOT_KEPT:
        raise InvalidAcl(
            f"brokerd keeps no ACLs on {_NOT_KEPT[c.resource_type]} resources "
            f"(it has no delegation tokens)"
        )
    return make_binding(
        c.resource_type, c.resource_name, c.resource_pattern_type,
        c.principal, c.host, c.operation, c.permission_type,
    )


def _filter(raw: acl_apis.DescribeAclsRequest | acl_apis.DeleteAclsFilter) -> AclFilter:
    """The filter ``raw`` asks for; for a resource type brokerd keeps no ACLs on, the
    same filter on any type (its other fields still checked; the caller matches none)."""
    rtype = _ANY_RESOURCE if raw.resource_type_filter in _NOT_KEPT else raw.resource_type_filter
    return make_filter(
        rtype, raw.resource_name_filter, raw.pattern_type_filter,
        raw.principal_filter, raw.host_filter, raw.operation, raw.permission_type,
    )


def _by_resource(acls: Iterable[AclBinding]) -> tuple[acl_apis.DescribeAclsResource, ...]:
    """Kafka's answer shape: one entry per resource pattern, with its entries."""
    groups: dict[tuple[int, str, int], list[acl_apis.AclDescription]] = {}
    for b in sorted_acls(acls):
        groups.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            acl_apis.AclDescription(
                principal=b.principal, host=b.host, operation=b.operation,
                permission_type=b.permission,
            )
        )
    return tuple(
        acl_apis.DescribeAclsResource(
            resource_type=rtype, resource_name=name, pattern_type=ptype, acls=tuple(entries)
        )
        for (rtype, name, ptype), entries in groups.items()
    )


def _matching(b: AclBinding) -> acl_apis.DeleteAclsMatchingAcl:
    return acl_apis.DeleteAclsMatchingAcl(
        resource_type=b.resource_type, resource_name=b.resource_name,
        pattern_type=b.pattern_type, principal=b.principal, host=b.host,
        operation=b.operation, permission_type=b.permission,
    )


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


def create_acls_rule(
    access: Access, req: Request[acl_apis.CreateAclsRequest]
) -> Gate[acl_apis.CreateAclsRequest, acl_apis.CreateAclsResponse]:
    if access.cluster(Operation.ALTER):
        return Gate(req)
    return answer_now(req, _creations_refused(req.body, CLUSTER_DENIED, DENIED_TEXT))


def describe_acls_rule(
    access: Access, req: Request[acl_apis.DescribeAclsRequest]
) -> Gate[acl_apis.DescribeAclsRequest, acl_apis.DescribeAclsResponse]:
    if access.cluster(Operation.DESCRIBE):
        return Gate(req)
    return answer_now(req, acl_apis.DescribeAclsResponse(
        error_code=CLUSTER_DENIED, error_message=DENIED_TEXT
    ))


def delete_acls_rule(
    access: Access, req: Request[acl_apis.DeleteAclsRequest]
) -> Gate[acl_apis.DeleteAclsRequest, acl_apis.DeleteAclsResponse]:
    if access.cluster(Operation.ALTER):
        return Gate(req)
    return answer_now(req, _filters_refused(req.body, CLUSTER_DENIED, DENIED_TEXT))
