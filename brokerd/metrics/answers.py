"""What a request's answer tells the metrics: its API's name, the errors it carries and,
for a fetch, what it sends of which topic.

Both protocols call :func:`observe_kafka` / :func:`observe_native` on the Deferred of a
request's answer; the answer passes through unchanged (a failure too: a failed Deferred
is a bug the protocol handles, and is not counted here). Kafka answers carry their
errors as ``error_code`` fields anywhere in the response (top level, per topic, per
partition), found by a walk over the response's attrs classes; native requests fail
with brokerd's errors, mapped to the native codes. A Kafka fetch adds its record bytes
(most are sent from the file and never read); a native fetch its records and value bytes.

What it does not do: change an answer, or keep any state.
"""

from __future__ import annotations

import enum
from typing import TypeVar

import attrs
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from brokerd.kafka.errors import ErrorCode as KafkaError
from brokerd.kafka.wire import apis
from brokerd.metrics.hooks import RequestObserver
from brokerd.native.messages import ErrorCode as NativeError
from brokerd.native.messages import RequestType, error_code_for
from brokerd.net.frames import records_size
from brokerd.storage.types import RecordsResult

T = TypeVar("T")

# Keyed by (enum class, value): members of two IntEnums with equal values compare equal.
_api_names: dict[tuple[type, int], str] = {}


def api_name(key: enum.IntEnum) -> str:
    """``PRODUCE`` -> ``Produce``, ``API_VERSIONS`` -> ``ApiVersions`` (Kafka's names)."""
    cache_key = (type(key), int(key))
    name = _api_names.get(cache_key)
    if name is None:
        name = _api_names[cache_key] = "".join(w.capitalize() for w in key.name.split("_"))
    return name


def _error_name(enum_type: type[enum.IntEnum], code: int) -> str:
    try:
        return enum_type(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


# Per response class: whether it has an error_code field, and its other fields.
_plans: dict[type, tuple[bool, tuple[str, ...]]] = {}
_ERROR_FIELD = "error_code"


def _plan(cls: type) -> tuple[bool, tuple[str, ...]]:
    plan = _plans.get(cls)
    if plan is None:
        names = tuple(f.name for f in attrs.fields(cls))
        plan = _plans[cls] = ("error_code" in names, tuple(n for n in names if n != "error_code"))
    return plan


def _collect_codes(value: object, codes: set[int]) -> None:
    has_error, others = _plan(type(value))
    if has_error:
        code = getattr(value, _ERROR_FIELD)
        if code:
            codes.add(code)
    for name in others:
        child = getattr(value, name)
        if isinstance(child, tuple):
            for item in child:
                if attrs.has(type(item)):
                    _collect_codes(item, codes)
        elif attrs.has(type(child)):
            _collect_codes(child, codes)


def kafka_errors(answer: object) -> list[str]:
    """The names of the error codes anywhere in a Kafka response, each once, sorted."""
    if not attrs.has(type(answer)):
        return []
    codes: set[int] = set()
    _collect_codes(answer, codes)
    return sorted(_error_name(KafkaError, c) for c in codes)


def _kafka_fetch_out(observer: RequestObserver, answer: apis.FetchResponse) -> None:
    # Bytes only: most Kafka fetches send stored batches from the file by sendfile
    # (brokerd.net.frames), never looked at in memory; counting their records would
    # mean reading every batch header again. Kafka's brokers count bytes out only too.
    for topic in answer.responses:
        for part in topic.partitions:
            size = records_size(part.records)
            if size:
                observer.records_out(topic.topic, 0, size)


def observe_kafka(
    observer: RequestObserver, request: apis.Request, started: float, d: Deferred[T]
) -> Deferred[T]:
    """Count ``request`` when its answer ``d`` fires (``started``: ``observer.now()`` at
    dispatch)."""

    def answered(answer: T) -> T:
        if isinstance(answer, apis.FetchResponse):
            _kafka_fetch_out(observer, answer)
        observer.request_done(api_name(request.api_key), started, kafka_errors(answer))
        return answer

    return d.addCallback(answered)


def native_api_name(request_type: int) -> str:
    """A native request type's name (``LongPollFetch``), ``Unknown`` for a number that
    is not one."""
    try:
        return api_name(RequestType(request_type))
    except ValueError:
        return "Unknown"


def native_error(failure: Failure) -> str:
    """The native error name a failed request is answered with."""
    exc = failure.value
    code = error_code_for(exc) if exc is not None else None
    return (code or NativeError.INTERNAL_ERROR).name


def observe_native(
    observer: RequestObserver,
    request_type: RequestType,
    topic: str | None,
    started: float,
    d: Deferred[T],
) -> Deferred[T]:
    """Count a native request when the core's result ``d`` fires or fails (before it is
    encoded); a fetch's records are counted against ``topic``."""
    api = api_name(request_type)

    def answered(result: T) -> T:
        if isinstance(result, RecordsResult) and result.records and topic is not None:
            size = sum(len(r.value or b"") for r in result.records)
            observer.records_out(topic, len(result.records), size)
        observer.request_done(api, started, ())
        return result

    def failed(failure: Failure) -> Failure:
        observer.request_done(api, started, (native_error(failure),))
        return failure

    return d.addCallbacks(answered, failed)


def observe_refusal(observer: RequestObserver, request_type: int, error: NativeError) -> None:
    """A native request the decoder refused (answered without reaching a handler)."""
    observer.request_done(native_api_name(request_type), observer.now(), (error.name,))


__all__ = [
    "api_name",
    "kafka_errors",
    "native_api_name",
    "native_error",
    "observe_kafka",
    "observe_native",
    "observe_refusal",
]
