# -*- test-case-name: tests.kafka.server.handlers.test_share_clients -*-
"""The feature flags brokerd announces in ApiVersions v3+ (its tagged SupportedFeatures,
FinalizedFeaturesEpoch and FinalizedFeatures), encoded once.

Kafka gates share groups behind the ``share.version`` feature (level 1 enables them, level 2
adds their dead-letter topics, KIP-1191); brokerd finalizes it at 2 and supports 0-2. No
other feature is announced: a client then takes every other feature at level 0, as before
(for example ``transaction.version`` 0, so Java producers keep the transaction protocol
brokerd answers). Pure.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

__all__ = ["FINALIZED", "FINALIZED_EPOCH", "SUPPORTED", "api_versions_tags"]

#: Feature name -> (min version, max version) this broker supports.
SUPPORTED: Mapping[str, tuple[int, int]] = {"share.version": (0, 2)}
#: Feature name -> finalized level (one node: what it supports at most, once enabled).
FINALIZED: Mapping[str, int] = {"share.version": 2}
#: The epoch of the finalized levels (never changes: they are fixed at start-up).
FINALIZED_EPOCH = 1

_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _compact_string(text: str) -> bytes:
    raw = text.encode()
    return _uvarint(len(raw) + 1) + raw


def _features(entries: Sequence[tuple[str, int, int]]) -> bytes:
    parts = [_uvarint(len(entries) + 1)]
    for name, a, b in entries:
        parts += [_compact_string(name), _I16.pack(a), _I16.pack(b), b"\x00"]
    return b"".join(parts)


#: The first ApiVersions version whose SupportedFeatures may hold a minimum version of 0
#: (KAFKA-17011: older clients fail to read one, so Kafka leaves such features out).
_MIN_VERSION_ZERO_FROM = 4


def _tags(version: int) -> tuple[tuple[int, bytes], ...]:
    supported = [
        (n, lo, hi) for n, (lo, hi) in sorted(SUPPORTED.items())
        if lo != 0 or version >= _MIN_VERSION_ZERO_FROM
    ]
    return (
        (0, _features(supported)),
        (1, _I64.pack(FINALIZED_EPOCH)),
        # FinalizedFeatures entries are (name, max level, min level).
        (2, _features([(n, level, level) for n, level in sorted(FINALIZED.items())])),
    )


_TAGS_V3 = _tags(3)
_TAGS = _tags(_MIN_VERSION_ZERO_FROM)


def api_versions_tags(version: int) -> Sequence[tuple[int, bytes]]:
    """ApiVersionsResponse's tagged fields at ``version`` (v3+; none before). At v3 a
    supported feature whose minimum is 0 (``share.version``) is left out, as Kafka does."""
    if version < 3:
        return ()
    return _TAGS if version >= _MIN_VERSION_ZERO_FROM else _TAGS_V3
