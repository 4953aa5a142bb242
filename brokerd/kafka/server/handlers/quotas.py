# -*- test-case-name: tests.kafka.server.handlers.test_quotas -*-
"""DescribeClientQuotas (48) and AlterClientQuotas (49): the client quotas by user and
client id (:mod:`brokerd.core.quotas`), as ``kafka-configs --entity-type users|clients``
reads and changes them.

Describe answers the entities a filter selects (exact name, default, any; ``strict``
leaves out entities naming a type the filter does not); a bad filter is answered
INVALID_REQUEST as a whole. Alter validates each entry on its own (a bad entity, key or
value fails that entry alone, INVALID_REQUEST with Kafka's reason), writes the new set
to ``client-quotas.json`` before answering (``validate_only`` changes nothing) and then
makes it current: the next request of every connection is measured against it.

ACLs as Kafka's: DESCRIBE_CONFIGS on the cluster to describe, ALTER_CONFIGS to alter.
Enforcement is not here: the listener measures and throttles
(:mod:`brokerd.kafka.server.throttle`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.core.quotas.entities import (
    Change,
    Component,
    InvalidQuota,
    QuotaConfigs,
    QuotaEntity,
    describe,
)
from brokerd.core.quotas.manager import QuotaManager
from brokerd.core.quotas.store import QuotaStore
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.acl_gate import CLUSTER_DENIED, DENIED_TEXT, Access, Gate, answer_now
from brokerd.kafka.server.handler_base import RequestContext
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.wire.messages import quotas as m
from brokerd.kafka.wire.messages.quotas import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS
from brokerd.kafka.wire.requests.apis import Request
from brokerd.security.acl import Operation

T = TypeVar("T")
#: Runs a blocking call off the reactor thread (the broker's write pool).
RunBlocking = Callable[..., defer.Deferred[Any]]
#: Entries of one AlterClientQuotas or filter components of one describe, at most.
MAX_ENTRIES = 10_000


def _run_here(f: Callable[..., T], *args: object) -> defer.Deferred[T]:
    return defer.maybeDeferred(f, *args)


def _wire_entity(entity: QuotaEntity) -> tuple[m.QuotaEntityPart, ...]:
    return tuple(m.QuotaEntityPart(entity_type=t, entity_name=n) for t, n in entity.parts())


class ClientQuotaHandlers:
    """The two client quota APIs over the broker's :class:`QuotaManager` and its store
    (None: kept in memory only, as in tests without a data directory)."""

    _log = Logger()

    def __init__(
        self,
        quotas: QuotaManager,
        store: QuotaStore | None = None,
        *,
        run_blocking: RunBlocking = _run_here,
    ) -> None:
        self._quotas = quotas
        self._store = store
        self._run_blocking = run_blocking
        self._lock = defer.DeferredLock()

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(DESCRIBE_CLIENT_QUOTAS, self.describe, describe_client_quotas_rule),
            route(ALTER_CLIENT_QUOTAS, self.alter, alter_client_quotas_rule),
        )

    async def describe(
        self, conn: RequestContext, req: Request[m.DescribeClientQuotasRequest]
    ) -> m.DescribeClientQuotasResponse:
        body = req.body
        try:
            if len(body.components) > MAX_ENTRIES:
                raise InvalidQuota(f"more than {MAX_ENTRIES} filter components")
            found = describe(
                self._quotas.configs,
                [Component(c.entity_type, c.match_type, c.match) for c in body.components],
                body.strict,
            )
        except InvalidQuota as e:
            return m.DescribeClientQuotasResponse(
                error_code=ErrorCode.INVALID_REQUEST, error_message=str(e), entries=None)
        return m.DescribeClientQuotasResponse(entries=tuple(
            m.DescribedQuotaEntry(
                entity=_wire_entity(entity),
                values=tuple(m.QuotaValue(key=k, value=v) for k, v in sorted(values.items())),
            )
            for entity, values in found
        ))

    async def alter(
        self, conn: RequestContext, req: Request[m.AlterClientQuotasRequest]
    ) -> m.AlterClientQuotasResponse:
        body = req.body
        if len(body.entries) > MAX_ENTRIES:
            return m.AlterClientQuotasResponse(entries=tuple(
                m.QuotaAlterationResult(
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message=f"more than {MAX_ENTRIES} entries", entity=e.entity)
                for e in body.entries
            ))
        await self._lock.acquire()
        try:
            checked = self._quotas.configs.check([
                (
                    [(p.entity_type, p.entity_name) for p in entry.entity],
                    [(op.key, op.value, op.remove) for op in entry.ops],
                )
                for entry in body.entries
            ])
            changes = [c for c in checked if isinstance(c, Change)]
            stored = True
            if changes and not body.validate_only:
                stored = await self._store_and_apply(changes)
        finally:
            self._lock.release()
        results = []
        for entry, outcome in zip(body.entries, checked, strict=True):
            if isinstance(outcome, InvalidQuota):
                results.append(m.QuotaAlterationResult(
                    error_code=ErrorCode.INVALID_REQUEST, error_message=str(outcome),
                    entity=entry.entity))
            elif not stored:
                results.append(m.QuotaAlterationResult(
                    error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                    error_message="the client quotas could not be stored",
                    entity=entry.entity))
            else:
                results.append(m.QuotaAlterationResult(entity=entry.entity))
        return m.AlterClientQuotasResponse(entries=tuple(results))

    async def _store_and_apply(self, changes: list[Change]) -> bool:
        """Write the quotas with ``changes`` applied, then make them current; False
        (logged, nothing changed) when the write failed."""
        if self._store is not None:
            future = QuotaConfigs(self._quotas.configs.snapshot())
            future.apply(changes)
            try:
                await self._run_blocking(self._store.save, future.snapshot())
            except Exception as e:
                self._log.failure(
                    "writing the client quotas failed; nothing changed",
                    failure=Failure(e),  # type: ignore[no-untyped-call]
                )
                return False
        self._quotas.apply(changes)
        return True


def describe_client_quotas_rule(
    access: Access, req: Request[m.DescribeClientQuotasRequest]
) -> Gate[m.DescribeClientQuotasRequest, m.DescribeClientQuotasResponse]:
    if access.cluster(Operation.DESCRIBE_CONFIGS):
        return Gate(req)
    return answer_now(req, m.DescribeClientQuotasResponse(
        error_code=CLUSTER_DENIED, error_message=DENIED_TEXT, entries=None))


def alter_client_quotas_rule(
    access: Access, req: Request[m.AlterClientQuotasRequest]
) -> Gate[m.AlterClientQuotasRequest, m.AlterClientQuotasResponse]:
    if access.cluster(Operation.ALTER_CONFIGS):
        return Gate(req)
    return answer_now(req, m.AlterClientQuotasResponse(entries=tuple(
        m.QuotaAlterationResult(
            error_code=CLUSTER_DENIED, error_message=DENIED_TEXT, entity=e.entity)
        for e in req.body.entries
    )))


__all__ = [
    "ClientQuotaHandlers",
    "alter_client_quotas_rule",
    "describe_client_quotas_rule",
]
