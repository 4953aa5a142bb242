# -*- test-case-name: tests.kafka.server.handlers.test_quotas -*-
"""Client quota enforcement at the Kafka listener: each answered request charged to the
connection's (user, client id) share, the answer's ``throttle_time_ms`` set, and how
long the listener then keeps the connection muted (KIP-219: the answer goes out at
once, the client backs off on its own, and the broker reads nothing more from the
connection for that long, so a client that does not back off gains nothing).

What is charged, as Kafka charges it (:class:`~brokerd.core.quotas.manager.
QuotaManager` measures):

* a Produce request's size in bytes against ``producer_byte_rate`` (an acks=0 produce
  has no answer to carry the time, but the connection is muted all the same);
* a Fetch answer's size against ``consumer_byte_rate``; a fetch that violates it is
  answered *empty* with the throttle time, its bytes taken back from the rate (the
  client fetches them again after backing off), and the fetch's ``max_bytes`` is first
  cut to what the quota allows in its window (:meth:`QuotaEnforcer.fetch_cap`);
* every request's reactor time (decoding, handling, encoding) against
  ``request_percentage``, except ApiVersions and the SASL exchange (Kafka exempts them
  too); the answer carries the larger of the two throttle times.

The controller mutation quota is charged by the admin handlers, per topic
(:meth:`QuotaEnforcer.mutations`): they refuse a topic with THROTTLING_QUOTA_EXCEEDED
while the share's bucket is empty (strict versions) and set the answer's throttle time,
for which the listener then mutes the connection.
The listener calls :meth:`QuotaEnforcer.charge` only while some quota is set
(``QuotaManager.keys_set`` non-empty): with none, the hot path pays one attribute test.
"""

from __future__ import annotations

from typing import Any

import attrs

from brokerd.clock import Seconds
from brokerd.core.quotas.entities import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)
from brokerd.core.quotas.manager import QuotaManager
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages.fetch import FetchResponse
from brokerd.net.tls import ANONYMOUS

#: Requests never charged to the request time quota (Kafka exempts them: a client must
#: be able to learn versions and authenticate whatever it used).
_EXEMPT = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_PRINCIPAL_PREFIX = "User:"
#: The requests the controller mutation quota charges.
_MUTATING = frozenset({ApiKey.CREATE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.DELETE_TOPICS})


def quota_user(principal: str | None) -> str:
    """The user name a quota entity names: the principal's name (``ANONYMOUS`` for an
    unauthenticated connection), as Kafka's ``KafkaPrincipal.getName``."""
    name = principal or ANONYMOUS
    return name[len(_PRINCIPAL_PREFIX):] if name.startswith(_PRINCIPAL_PREFIX) else name


@attrs.frozen
class Charged:
    """A request's answer after charging: possibly rewritten, and the mute time in ms."""

    answer: Any
    throttle_ms: int


def _with_throttle(answer: Any, throttle_ms: int) -> Any:
    if "throttle_time_ms" in attrs.fields_dict(type(answer)):
        return attrs.evolve(answer, throttle_time_ms=throttle_ms)
    return answer


class QuotaEnforcer:
    """Charges answered requests to their shares (see the module docstring)."""

    def __init__(self, quotas: QuotaManager, clock: Seconds) -> None:
        self.quotas = quotas
        self._clock = clock

    def _now_ms(self) -> float:
        return self._clock.seconds() * 1000.0

    def measures_time(self) -> bool:
        return REQUEST_PERCENTAGE in self.quotas.keys_set

    def charge(
        self,
        api_key: ApiKey,
        principal: str | None,
        client_id: str | None,
        answer: Any,
        request_bytes: int,
        answer_bytes: int,
        busy_seconds: float,
    ) -> Charged:
        """Charge one request; the answer to send (None: none is sent) and the mute."""
        quotas = self.quotas
        keys = quotas.keys_set
        user = quota_user(principal)
        client = client_id or ""
        now = self._now_ms()
        throttle = 0
        if api_key is ApiKey.PRODUCE and PRODUCER_BYTE_RATE in keys:
            throttle = quotas.record(PRODUCER_BYTE_RATE, user, client, request_bytes, now)
        elif (
            api_key is ApiKey.FETCH and CONSUMER_BYTE_RATE in keys
            and isinstance(answer, FetchResponse)
        ):
            throttle = quotas.record(CONSUMER_BYTE_RATE, user, client, answer_bytes, now)
            if throttle > 0:
                quotas.unrecord(CONSUMER_BYTE_RATE, user, client, answer_bytes, now)
                answer = attrs.evolve(answer, responses=())
        if api_key in _MUTATING and CONTROLLER_MUTATION_RATE in keys and answer is not None:
            # The admin handler set the answer's throttle time (its bucket's deficit).
            throttle = int(getattr(answer, "throttle_time_ms", 0))
        if REQUEST_PERCENTAGE in keys and api_key not in _EXEMPT:
            # Kafka's unit: percent of one thread, over a second.
            spent = quotas.record(REQUEST_PERCENTAGE, user, client, busy_seconds * 100.0, now)
            throttle = max(throttle, spent)
        if throttle > 0 and answer is not None:
            answer = _with_throttle(answer, throttle)
        return Charged(answer, throttle)

    def fetch_cap(self, principal: str | None, client_id: str | None) -> int | None:
        """The most one fetch answer may hold under the consumer byte rate quota (None:
        no quota applies)."""
        if CONSUMER_BYTE_RATE not in self.quotas.keys_set:
            return None
        return self.quotas.window_bytes(quota_user(principal), client_id or "")

    def mutations(self, conn_principal: str | None, client_id: str | None,
                  strict: bool) -> MutationCharge:
        """The controller mutation quota of one CreateTopics/CreatePartitions/DeleteTopics
        request's share (:data:`NO_MUTATION_QUOTA` when no such quota is set)."""
        if CONTROLLER_MUTATION_RATE not in self.quotas.keys_set:
            return NO_MUTATION_QUOTA
        return MutationCharge(self.quotas, quota_user(conn_principal), client_id or "",
                              self._now_ms(), strict)


def mutation_charge(
    quotas: QuotaEnforcer | None, principal: str | None, client_id: str | None, *, strict: bool
) -> MutationCharge:
    """What a topic-mutating request is charged (:meth:`QuotaEnforcer.mutations`; free
    without quotas)."""
    return NO_MUTATION_QUOTA if quotas is None else quotas.mutations(principal, client_id, strict)


#: Kafka's message beside THROTTLING_QUOTA_EXCEEDED.
THROTTLED_TEXT = "The throttling quota has been exceeded."


class MutationCharge:
    """One admin request's view of the controller mutation quota. ``strict`` (the
    versions that know THROTTLING_QUOTA_EXCEEDED: CreateTopics v6+, DeleteTopics v5+,
    CreatePartitions v3+): a topic is refused while the share's bucket is below zero;
    otherwise every mutation is done and only throttled."""

    def __init__(self, quotas: QuotaManager | None, user: str, client_id: str, now_ms: float,
                 strict: bool) -> None:
        self._quotas = quotas
        self._user = user
        self._client = client_id
        self._now = now_ms
        self.strict = strict

    def refused(self) -> bool:
        """Whether the next topic of a strict request is refused."""
        if not self.strict or self._quotas is None:
            return False
        delay = self._quotas.mutation_throttle(self._user, self._client, self._now)
        if delay > 0:
            self._quotas.note_refused(self._user, self._client, delay)
        return delay > 0

    def charge(self, count: int) -> None:
        """Charge ``count`` partitions created or deleted."""
        if self._quotas is not None:
            self._quotas.record_mutations(self._user, self._client, count, self._now)

    def throttle_ms(self) -> int:
        """The answer's throttle time: how long until the share's bucket is back at 0."""
        if self._quotas is None:
            return 0
        return self._quotas.mutation_throttle(self._user, self._client, self._now)


#: The charge of a request when no controller mutation quota is set: nothing refused,
#: nothing charged, no throttle.
NO_MUTATION_QUOTA = MutationCharge(None, "", "", 0.0, strict=False)


__all__ = [
    "NO_MUTATION_QUOTA",
    "THROTTLED_TEXT",
    "Charged",
    "MutationCharge",
    "QuotaEnforcer",
    "mutation_charge",
    "quota_user",
]
