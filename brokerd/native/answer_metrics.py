"""What a native request's answer tells the metrics: its request type's name, the native
error it is answered with and, for a fetch, what it sends of which topic.

The native protocol calls :func:`observe_native` on the Deferred of a request's result;
the result passes through unchanged (a failure too). Native requests fail with brokerd's
errors, mapped to the native codes; a native fetch adds its records and value bytes.
The Kafka listener's own observation of its answers is ``brokerd.kafka.server.observe``.

What it does not do: change an answer, keep any state, or know Prometheus (it reports
to a :class:`~brokerd.observers.RequestObserver`).
"""

from __future__ import annotations

from typing import TypeVar

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from brokerd.native.batch_framing import FramedValues
from brokerd.native.messages import ErrorCode as NativeError
from brokerd.native.messages import RequestType, error_code_for
from brokerd.observers import RequestObserver, api_name
from brokerd.storage.types import LogRead

T = TypeVar("T")


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
    started: float,
    d: Deferred[T],
) -> Deferred[T]:
    """Count a native request when its answer ``d`` fires or fails."""
    api = api_name(request_type)

    def answered(result: T) -> T:
        observer.request_done(api, started, ())
        return result

    def failed(failure: Failure) -> Failure:
        observer.request_done(api, started, (native_error(failure),))
        return failure

    return d.addCallbacks(answered, failed)


def observe_records(observer: RequestObserver, topic: str | None, result: object) -> None:
    """Count the records a fetch's result (framed or decoded) sends from ``topic``."""
    if topic is None:
        return
    if isinstance(result, FramedValues):
        if result.count:
            observer.records_out(topic, result.count, result.value_bytes)
    elif isinstance(result, LogRead) and result.decoded:
        size = sum(len(r.value or b"") for r in result.decoded)
        observer.records_out(topic, len(result.decoded), size)


def observe_refusal(observer: RequestObserver, request_type: int, error: NativeError) -> None:
    """A native request the decoder refused (answered without reaching a handler)."""
    observer.request_done(native_api_name(request_type), observer.now(), (error.name,))


__all__ = [
    "native_api_name",
    "native_error",
    "observe_native",
    "observe_records",
    "observe_refusal",
]
