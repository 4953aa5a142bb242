"""Kafka's topic config table: its own checks (gzip level, throttled replicas, the old
message format version, tiered storage) and that every default is a valid value."""

from __future__ import annotations

import pytest

from brokerd.errors import InvalidConfig
from brokerd.storage.config.table import DEFS, MESSAGE_FORMAT_VERSION_DEFAULT

BY_NAME = {d.name: d for d in DEFS}


def test_names_are_unique_and_every_default_parses() -> None:
    assert len(BY_NAME) == len(DEFS)
    for definition in DEFS:
        definition.parse(definition.default)


def test_gzip_level_is_minus_one_or_one_to_nine() -> None:
    gzip = BY_NAME["compression.gzip.level"]
    assert [gzip.parse(v) for v in ("-1", "1", "9")] == [-1, 1, 9]
    for bad in ("0", "10", "-2"):
        with pytest.raises(InvalidConfig, match="between 1 and 9 or equal to -1"):
            gzip.parse(bad)


def test_throttled_replicas_are_star_or_partition_broker_pairs() -> None:
    throttled = BY_NAME["leader.replication.throttled.replicas"]
    assert throttled.parse("*") == ("*",)
    assert throttled.parse("0:1,1:1") == ("0:1", "1:1")
    with pytest.raises(InvalidConfig, match="literal '\\*'"):
        throttled.parse("0-1")


def test_message_format_version_accepts_kafka_3_release_lines_only() -> None:
    version = BY_NAME["message.format.version"]
    for good in (MESSAGE_FORMAT_VERSION_DEFAULT, "0.10.2", "2.8", "3.9-IV0"):
        assert version.parse(good) == good
    for bad in ("4.0", "0.7", "3.10", "three"):
        with pytest.raises(InvalidConfig, match="is not a valid version"):
            version.parse(bad)


def test_remote_storage_cannot_be_enabled() -> None:
    remote = BY_NAME["remote.storage.enable"]
    assert remote.parse("false") is False
    with pytest.raises(InvalidConfig, match="Tiered Storage functionality is disabled"):
        remote.parse("true")
