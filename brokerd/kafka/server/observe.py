# -*- test-case-name: tests.kafka.server.test_observe, tests.metrics.test_collectors -*-
"""What a Kafka answer tells the metrics: its API's name, the errors it carries and, for
a Fetch, the record bytes it sends of each topic.

The protocol calls :func:`observe_kafka` on the Deferred of each request's answer; the
answer passes through unchanged (a failure too: a failed Deferred is a bug the protocol
handles, and is not counted here). Kafka answers carry their errors as ``error_code``
fields anywhere in the response (top level, per topic, per partition), found by a walk
over the response's attrs classes and named by :class:`~brokerd.kafka.errors.ErrorCode`.
A Fetch adds its record bytes (most are sent from the file and never read).

What it does not do: change an answer, or keep any state (beyond the per-class plans).
"""

from __future__ import annotations

import enum
from typing import TypeVar, cast

import attrs
from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

from brokerd.kafka.errors import ErrorCode as KafkaError
from brokerd.kafka.wire import codec
from brokerd.kafka.wire.requests import apis
from brokerd.net.frames import records_size
from brokerd.observers import RequestObserver, api_name

T = TypeVar("T")


def _error_name(enum_type: type[enum.IntEnum], code: int) -> str:
    try:
        return enum_type(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


# Per response class: whether it has an error_code field, and its other fields.
_plans: dict[type, tuple[bool, tuple[str, ...]]] = {}
_ERROR_FIELD = "error_code"
# Per type met in a response: whether it is an attrs class to walk into. A dictionary
# look-up instead of ``attrs.has`` on every field value: the walk runs for every answer,
# and most values it meets are ints and strings.
_walked: dict[type, bool] = {}


def _is_message(kind: type) -> bool:
    walk = _walked.get(kind)
    if walk is None:
        walk = _walked[kind] = attrs.has(kind)
    return walk


#: Wire types whose values are never a message to walk into.
_SCALARS = (codec.INT8, codec.INT16, codec.INT32, codec.INT64, codec.UINT16, codec.BOOL,
            codec.FLOAT64, codec.STRING, codec.BYTES, codec.UUID)


def _scalar_fields(cls: type) -> set[str]:
    """The fields ``cls``'s wire layout declares as scalars (or arrays of scalars): the
    walk skips them without looking at their values. Fields it does not declare (or
    declares with another type) are looked at, as before."""
    scalar: set[str] = set()
    for field in getattr(cls, "FIELDS", ()):
        kind = field.type
        if isinstance(kind, codec.Array):
            kind = kind.item
        if any(kind is s for s in _SCALARS):
            scalar.add(field.name)
    return scalar


def _barren_fields(cls: type) -> set[str]:
    """The fields ``cls``'s wire layout declares as a struct (or an array of structs)
    in which no error code can be, at any depth (a Produce answer's ``record_errors``,
    a Fetch answer's ``aborted_transactions``): the walk skips them too."""
    barren: set[str] = set()
    for field in getattr(cls, "FIELDS", ()):
        kind = field.type
        if isinstance(kind, codec.Array):
            kind = kind.item
        if isinstance(kind, codec.Struct) and not _may_hold_errors(kind.cls, set()):
            barren.add(field.name)
    return barren


def _may_hold_errors(cls: type, seen: set[type]) -> bool:
    """Whether a value of ``cls`` may carry an error code, itself or in a field the walk
    looks at (a class met again on the way is taken to: a cycle, if any, is walked)."""
    if cls in seen or not attrs.has(cls):
        return cls in seen
    seen.add(cls)
    has_error, others = _plan(cls)
    if has_error:
        return True
    declared = {f.name: f.type for f in getattr(cls, "FIELDS", ())}
    for name in others:
        kind = declared.get(name)
        if isinstance(kind, codec.Array):
            kind = kind.item
        if not isinstance(kind, codec.Struct) or _may_hold_errors(kind.cls, seen):
            return True  # undeclared, or a struct that may
    return False


def _plan(cls: type) -> tuple[bool, tuple[str, ...]]:
    plan = _plans.get(cls)
    if plan is None:
        names = tuple(f.name for f in attrs.fields(cls))
        # Only the fields that may hold a message are looked at on every answer (a
        # Produce answer's partition has 7 fields; one, record_errors, may).
        skip = _scalar_fields(cls) | {_ERROR_FIELD}
        plan = _plans[cls] = (_ERROR_FIELD in names, tuple(n for n in names if n not in skip))
        # Then the struct fields in which no error can be, once this plan is known
        # (their own plans may come back to this class).
        barren = _barren_fields(cls)
        if barren:
            plan = _plans[cls] = (plan[0], tuple(n for n in plan[1] if n not in barren))
    return plan


def _collect_codes(value: object, codes: set[int]) -> None:
    has_error, others = _plan(type(value))
    if has_error:
        code = getattr(value, _ERROR_FIELD)
        if code:
            codes.add(code)
    for name in others:
        child = getattr(value, name)
        kind = type(child)
        if kind is tuple:
            for item in child:
                if _is_message(type(item)):
                    _collect_codes(item, codes)
        elif _is_message(kind):
            _collect_codes(child, codes)


def kafka_errors(answer: object) -> list[str]:
    """The names of the error codes anywhere in a Kafka response, each once, sorted."""
    if not _is_message(type(answer)):
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
    observer: RequestObserver, request: apis.AnyRequest, started: float, d: Deferred[T]
) -> Deferred[T]:
    """Count ``request`` when its answer ``d`` fires (``started``: ``observer.now()`` at
    dispatch)."""

    def answered(answer: T) -> T:
        if isinstance(answer, apis.FetchResponse):
            _kafka_fetch_out(observer, answer)
        observer.request_done(api_name(request.api_key), started, kafka_errors(answer))
        return answer

    if d.called and not d.paused:
        # Answered already (a small Produce, a Fetch with records at hand): counted now,
        # without a callback added to a fired Deferred and run through its machinery.
        result = d.result
        if not isinstance(result, (Failure, Deferred)):
            try:
                answered(cast(T, result))
            except Exception:
                return fail()  # as the callback's failure would have been
            return d
    return d.addCallback(answered)


__all__ = ["kafka_errors", "observe_kafka"]
