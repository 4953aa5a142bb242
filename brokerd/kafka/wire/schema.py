# -*- test-case-name: tests.test_kafka_codec -*-
"""What every message module under :mod:`brokerd.kafka.wire.messages` declares with.

Each message is an attrs frozen class whose ``FIELDS`` describe its wire layout per
version (:class:`~brokerd.kafka.wire.codec.Field`); a class whose versions reach
Kafka's ``flexibleVersions`` sets ``FLEXIBLE_FROM`` (the codec then uses the compact
encodings and tagged fields from that version on). Fields absent at a version take the
class default when decoded and are skipped when encoded.

Each message module ends with ``APIS``: one :class:`ApiSpec` per API it holds, naming
its request and response classes and the version range brokerd answers, so the range
lives with the message (:mod:`brokerd.kafka.wire.registry` collects them).

Pure: no I/O, no Twisted.
"""

from __future__ import annotations

from typing import Any

import attrs

from brokerd.kafka.wire.codec import ApiKey

#: Authorized-operations fields: "not provided" (Kafka's Integer.MIN_VALUE default).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@attrs.frozen
class ApiSpec:
    """One Kafka API as brokerd answers it.

    :param key: its API key.
    :param request: the request body class.
    :param response: the response body class.
    :param min_version: the lowest version answered (and advertised).
    :param max_version: the highest version answered (and advertised).
    :param trailing_bytes_ignored: bytes after the request body are ignored, as Kafka's
        readers ignore them (they never check for the end); otherwise they are an error.
    """

    key: ApiKey
    request: type[Any]
    response: type[Any]
    min_version: int
    max_version: int
    trailing_bytes_ignored: bool = False

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def _tuple(v: Any) -> Any:
    """attrs converter: keep arrays immutable (None stays None)."""
    return None if v is None else tuple(v)


def array(default: Any = ()) -> Any:
    """An array attribute: stored as a tuple (None stays None, for a nullable array)."""
    return attrs.field(default=default, converter=_tuple)


__all__ = ["AUTHORIZED_OPERATIONS_OMITTED", "ApiSpec", "array"]
