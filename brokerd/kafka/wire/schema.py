# -*- test-case-name: tests.kafka.wire.test_codec -*-
"""What every message module under :mod:`brokerd.kafka.wire.messages` declares with.

Each message is an attrs frozen class decorated with :func:`wire_message`; each of its
attributes is declared once, its wire type and versions in its annotation::

    rack: Annotated[str | None, Wire(STRING, 1, nullable_from=1)] = None

(type, first version, last version, first nullable version, as in Kafka's JSON message
schemas). The attribute order is the wire order. :func:`wire_message` turns the
annotations into the class's ``FIELDS`` (the codec's :class:`~brokerd.kafka.wire.codec.Field`
tuple); the codec plans each version (which fields, nullable or not) once, the first time
the class is read or written, so decoding and encoding never interpret the declarations
per call and a start does not plan the hundreds of classes of APIs no client has used yet.
A class whose versions reach Kafka's ``flexibleVersions`` sets ``FLEXIBLE_FROM`` (the
codec then uses the compact encodings and tagged fields from that version on, in that
message and every struct inside it). Fields absent at a version take the class default
when decoded and are skipped when encoded.

Each message module ends with ``APIS``: one :class:`ApiSpec` per API it holds, naming
its request and response classes and the version range brokerd answers, so the range
lives with the message (:mod:`brokerd.kafka.wire.requests.registry` collects them).

Pure: no I/O, no Twisted.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any, Generic, TypeVar

import attrs

from brokerd.kafka.wire.codec import ApiKey, Field, WireType

C = TypeVar("C", bound=type)
#: An API's request and response message classes.
Q = TypeVar("Q")
P = TypeVar("P")

#: Authorized-operations fields: "not provided" (Kafka's Integer.MIN_VALUE default).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@attrs.frozen
class ApiSpec(Generic[Q, P]):
    """One Kafka API as brokerd answers it, typed by its request and response classes
    (a handler routed to it is checked against them).

    :param key: its API key.
    :param request: the request body class.
    :param response: the response body class.
    :param min_version: the lowest version answered (and advertised).
    :param max_version: the highest version answered (and advertised).
    :param trailing_bytes_ignored: bytes after the request body are ignored, as Kafka's
        readers ignore them (they never check for the end); otherwise they are an error.
    """

    key: ApiKey
    request: type[Q]
    response: type[P]
    min_version: int
    max_version: int
    trailing_bytes_ignored: bool = False

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


@attrs.frozen
class Wire:
    """How one attribute is on the wire (its annotation's metadata).

    :param type: the wire type (``INT32``, ``STRING``, ``Array(Struct(X))`` ...).
    :param min_version: first version the field is on the wire.
    :param max_version: last version it is on the wire (inclusive).
    :param nullable_from: first version from which null is allowed; None = never.
    """

    type: WireType
    min_version: int = 0
    max_version: int = 0x7FFF
    nullable_from: int | None = None


def wire_message(cls: C) -> C:
    """Give an attrs message class its ``FIELDS`` from its annotations (attribute order
    is wire order). Every attribute must carry a :class:`Wire`: a message has no
    attribute that is not on the wire."""
    fields: list[Field] = []
    for attribute in attrs.fields(cls):
        wire = [m for m in _metadata(cls, attribute.name) if isinstance(m, Wire)]
        if len(wire) != 1:
            raise TypeError(f"{cls.__name__}.{attribute.name} has no Wire(...) declaration")
        (w,) = wire
        fields.append(Field(attribute.name, w.type, w.min_version, w.max_version, w.nullable_from))
    target: Any = cls
    target.FIELDS = tuple(fields)
    return cls


#: Compiled annotation strings: most messages repeat the same few declarations
#: (``Annotated[int, Wire(INT32)]``), and compiling them was most of the start.
_COMPILED: dict[str, types.CodeType] = {}


class _Metadata(tuple[Any, ...]):
    """An ``Annotated[...]``'s metadata, as :class:`_AnnotatedMetadata` evaluates it."""


class _AnnotatedMetadata:
    """Stands in for ``typing.Annotated`` while a message's annotation string is
    evaluated: ``Annotated[T, Wire(...)]`` gives the metadata alone. The real ``typing``
    object (its parameter checks and caches), built for each of the 1,100 attributes
    of some 300 classes at every start, is not needed: only the ``Wire`` is read."""

    def __class_getitem__(cls, params: Any) -> _Metadata:
        return _Metadata(params[1:] if isinstance(params, tuple) else ())


def _metadata(cls: type[Any], name: str) -> tuple[Any, ...]:
    """The ``Annotated`` metadata of attribute ``name``'s annotation (empty when it is
    not ``Annotated``), evaluated in the module and class that declare it (as
    ``typing.get_type_hints`` would, for this one attribute: resolving every hint of
    each class through ``typing`` took a third of a second of the start)."""
    for klass in cls.__mro__:
        declared = inspect.get_annotations(klass)
        if name in declared:
            hint = declared[name]
            if not isinstance(hint, str):
                return tuple(getattr(hint, "__metadata__", ()))
            code = _COMPILED.get(hint)
            if code is None:
                code = _COMPILED[hint] = compile(hint, "<annotation>", "eval")
            scope = {**vars(klass), "Annotated": _AnnotatedMetadata}
            value = eval(code, vars(sys.modules[klass.__module__]), scope)
            return value if isinstance(value, _Metadata) else ()
    raise TypeError(f"{cls.__name__}.{name} has no annotation")


def _tuple(v: Any) -> Any:
    """attrs converter: keep arrays immutable (None stays None)."""
    return None if v is None else tuple(v)


def array(default: Any = ()) -> Any:
    """An array attribute: stored as a tuple (None stays None, for a nullable array)."""
    return attrs.field(default=default, converter=_tuple)


__all__ = ["AUTHORIZED_OPERATIONS_OMITTED", "ApiSpec", "Wire", "array", "wire_message"]
