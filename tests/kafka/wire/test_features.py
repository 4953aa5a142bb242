"""The feature flags announced in ApiVersions v3+ (:mod:`brokerd.kafka.wire.features`),
read back byte by byte."""

from __future__ import annotations

import struct

from brokerd.kafka.wire.features import FINALIZED_EPOCH, api_versions_tags


def _uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _features(data: bytes) -> list[tuple[str, int, int]]:
    count, at = _uvarint(data, 0)
    out = []
    for _ in range(count - 1):
        size, at = _uvarint(data, at)
        name = data[at : at + size - 1].decode()
        at += size - 1
        a, b = struct.unpack_from(">hh", data, at)
        at += 4
        assert data[at] == 0  # no tagged fields
        at += 1
        out.append((name, a, b))
    assert at == len(data)
    return out


def test_no_tags_before_v3() -> None:
    assert api_versions_tags(0) == ()
    assert api_versions_tags(2) == ()


def test_v4_announces_share_version_supported_and_finalized() -> None:
    tags = dict(api_versions_tags(4))
    assert sorted(tags) == [0, 1, 2]
    assert _features(tags[0]) == [("share.version", 0, 2)]
    assert struct.unpack(">q", tags[1]) == (FINALIZED_EPOCH,)
    assert _features(tags[2]) == [("share.version", 2, 2)]
    assert api_versions_tags(5) == api_versions_tags(4)


def test_v3_leaves_out_a_supported_feature_whose_minimum_is_zero() -> None:
    tags = dict(api_versions_tags(3))
    assert _features(tags[0]) == []
    assert _features(tags[2]) == [("share.version", 2, 2)]
