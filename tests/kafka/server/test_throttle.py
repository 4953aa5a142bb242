"""Client quota enforcement at the Kafka listener (:mod:`brokerd.kafka.server.throttle`):
what each answered request is charged, the answer's throttle time, the fetch cap and the
controller mutation charge, over a real quota manager and a ``task.Clock``."""

from __future__ import annotations

from twisted.internet import task

from brokerd.core.quotas.entities import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaConfigs,
    QuotaEntity,
)
from brokerd.core.quotas.manager import QuotaManager
from brokerd.kafka.server.throttle import (
    NO_MUTATION_QUOTA,
    QuotaEnforcer,
    mutation_charge,
    quota_user,
)
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages.api_versions import ApiVersionsResponse
from brokerd.kafka.wire.messages.fetch import FetchResponse, FetchTopicResponse
from brokerd.kafka.wire.messages.produce import ProduceResponse
from brokerd.kafka.wire.messages.topics import CreateTopicsResponse


def enforcer(key: str, bound: float, client: str = "app") -> QuotaEnforcer:
    quotas = QuotaManager(QuotaConfigs({QuotaEntity(None, client): {key: bound}}))
    return QuotaEnforcer(quotas, task.Clock())


def test_quota_user_is_the_principals_name() -> None:
    assert quota_user(None) == "ANONYMOUS"
    assert quota_user("User:alice") == "alice"
    assert quota_user("alice") == "alice"


def test_a_produce_over_its_rate_carries_the_throttle_time() -> None:
    quotas = enforcer(PRODUCER_BYTE_RATE, 1000.0)
    first = quotas.charge(ApiKey.PRODUCE, None, "app", ProduceResponse(), 10_000, 50, 0.0)
    assert first.throttle_ms == 0 and first.answer == ProduceResponse()
    second = quotas.charge(ApiKey.PRODUCE, None, "app", ProduceResponse(), 10_000, 50, 0.0)
    assert second.throttle_ms > 0
    assert second.answer == ProduceResponse(throttle_time_ms=second.throttle_ms)
    # acks=0: no answer to carry it, the connection is muted all the same.
    silent = quotas.charge(ApiKey.PRODUCE, None, "app", None, 10_000, 0, 0.0)
    assert silent.answer is None and silent.throttle_ms > 0
    # Another client id is another share, with no quota.
    other = quotas.charge(ApiKey.PRODUCE, None, "other", ProduceResponse(), 10**9, 50, 0.0)
    assert other.throttle_ms == 0


def test_a_fetch_over_its_rate_is_answered_empty_and_its_bytes_given_back() -> None:
    quotas = enforcer(CONSUMER_BYTE_RATE, 1000.0)
    answer = FetchResponse(responses=(FetchTopicResponse(topic="t"),))
    manager = quotas.quotas
    # What the quota allows over the windows it measures (all but the current one).
    assert quotas.fetch_cap(None, "app") == 1000 * (manager.samples - 1) * manager.window_ms // 1000
    assert quotas.fetch_cap(None, "other") is None
    assert quotas.charge(ApiKey.FETCH, None, "app", answer, 50, 10_000, 0.0).throttle_ms == 0
    throttled = quotas.charge(ApiKey.FETCH, None, "app", answer, 50, 10_000, 0.0)
    assert throttled.throttle_ms > 0
    assert throttled.answer == FetchResponse(throttle_time_ms=throttled.throttle_ms)
    # The refused bytes were taken back: the same throttle again, not a longer one.
    again = quotas.charge(ApiKey.FETCH, None, "app", answer, 50, 10_000, 0.0)
    assert again.throttle_ms == throttled.throttle_ms


def test_request_time_is_charged_except_for_api_versions() -> None:
    quotas = enforcer(REQUEST_PERCENTAGE, 1.0)
    assert quotas.measures_time()
    exempt = quotas.charge(ApiKey.API_VERSIONS, None, "app", ApiVersionsResponse(), 0, 0, 5.0)
    assert exempt.throttle_ms == 0
    busy = quotas.charge(ApiKey.METADATA, None, "app", None, 0, 0, 5.0)
    assert busy.throttle_ms > 0
    assert not enforcer(PRODUCER_BYTE_RATE, 1.0).measures_time()


def test_mutations_are_free_without_a_mutation_quota() -> None:
    assert mutation_charge(None, None, "app", strict=True) is NO_MUTATION_QUOTA
    assert enforcer(PRODUCER_BYTE_RATE, 1.0).mutations(None, "app", True) is NO_MUTATION_QUOTA
    NO_MUTATION_QUOTA.charge(1000)
    assert not NO_MUTATION_QUOTA.refused()
    assert NO_MUTATION_QUOTA.throttle_ms() == 0


def test_a_mutation_quota_throttles_and_refuses_only_strict_requests() -> None:
    quotas = enforcer(CONTROLLER_MUTATION_RATE, 1.0)
    lenient = mutation_charge(quotas, None, "app", strict=False)
    assert not lenient.refused() and lenient.throttle_ms() == 0
    lenient.charge(100)
    assert lenient.throttle_ms() > 0
    assert not lenient.refused()  # only throttled
    strict = mutation_charge(quotas, "User:someone", "app", strict=True)
    assert strict.refused()
    # The listener mutes for the throttle time the admin handler put in its answer.
    charged = quotas.charge(ApiKey.CREATE_TOPICS, None, "app",
                            CreateTopicsResponse(throttle_time_ms=1234), 0, 0, 0.0)
    assert charged.throttle_ms == 1234
