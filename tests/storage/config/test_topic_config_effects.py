"""What the topic configs added for Kafka 4.x are in the table: every config's type and
bounds, Kafka's messages, DescribeConfigs' documentation of the configs without effect, the
documented defaults. What they do is tested where they act: tests/storage/log/
(test_recompress.py, test_timestamp_checks.py, test_partition_log_topic_configs.py) and
tests/core/test_policy.py (the flush rule)."""

from __future__ import annotations

import pytest

from brokerd.errors import InvalidConfig
from brokerd.kafka.server.handlers.configs import topic_entries
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.config.topic_config import (
    LONG_MAX,
    TOPIC_CONFIGS,
    broker_values,
    to_log_config,
    validate,
    validate_overrides,
)
from brokerd.storage.types import TopicInfo

from tests import paths

NOW = 1_700_000_000_000


# -- the table: Kafka's types, bounds and messages ------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "normal"),
    [
        ("compression.type", "zstd", "zstd"),
        ("compression.gzip.level", "-1", "-1"),
        ("compression.gzip.level", "9", "9"),
        ("compression.zstd.level", "-131072", "-131072"),
        ("flush.messages", "1", "1"),
        ("flush.ms", "0", "0"),
        ("segment.index.bytes", "4", "4"),
        ("segment.jitter.ms", "0", "0"),
        ("unclean.leader.election.enable", " TRUE ", "true"),
        ("preallocate", "False", "false"),
        ("min.insync.replicas", "2", "2"),
        ("message.format.version", "2.8-IV1", "2.8-IV1"),
        ("message.format.version", "0.10.2", "0.10.2"),
        ("message.format.version", "3.0", "3.0"),
        ("leader.replication.throttled.replicas", "0:1, 1:2", "0:1,1:2"),
        ("follower.replication.throttled.replicas", "*", "*"),
        ("leader.replication.throttled.replicas", "", ""),
        ("remote.storage.enable", "false", "false"),
        ("local.retention.ms", "-2", "-2"),
        ("message.timestamp.after.max.ms", "0", "0"),
    ],
)
def test_new_configs_take_kafkas_values(name: str, value: str, normal: str) -> None:
    assert validate(name, value) == normal


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("compression.type", "brotli",
         "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
        ("compression.gzip.level", "10", "Value must be between 1 and 9 or equal to -1"),
        ("compression.lz4.level", "18", "Value must be no more than 17"),
        ("compression.zstd.level", "23", "Value must be no more than 22"),
        ("flush.messages", "0", "Value must be at least 1"),
        ("flush.ms", "-1", "Value must be at least 0"),
        ("segment.index.bytes", "3", "Value must be at least 4"),
        ("segment.jitter.ms", "soon", "Not a number of type LONG"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("unclean.leader.election.enable", "yes", "Expected value to be either true or false"),
        ("message.format.version", "4.0", "Version `4.0` is not a valid version"),
        ("message.format.version", "2.x", "Version `2.x` is not a valid version"),
        ("leader.replication.throttled.replicas", "0-1",
         "must be the literal '*' or a list of replicas in the following format: "
         "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
        ("remote.storage.enable", "true",
         "Tiered Storage functionality is disabled in the broker. Topic cannot be "
         "configured with remote log storage."),
        ("local.retention.bytes", "-3", "Value must be at least -2"),
        ("message.timestamp.before.max.ms", "-1", "Value must be at least 0"),
    ],
)
def test_new_configs_refuse_with_kafkas_message(name: str, value: str, why: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        validate(name, value)
    assert str(info.value) == f"Invalid value {value} for configuration {name}: {why}"


@pytest.mark.parametrize(
    "name", ["message.downconversion.enable", "message.timestamp.difference.max.ms", "x"]
)
def test_names_kafka_4_removed_are_unknown(name: str) -> None:
    with pytest.raises(InvalidConfig, match=f"^Unknown topic config name: {name}$"):
        validate(name, "1")


def test_message_format_version_is_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    overrides = validate_overrides([("message.format.version", "2.8")])
    assert to_log_config(LogConfig(), overrides) == LogConfig()
    assert "message.format.version" in caplog.text and "ignored" in caplog.text


def test_applied_configs_reach_the_log_config() -> None:
    config = to_log_config(LogConfig(), {
        "compression.type": "lz4", "compression.lz4.level": "12",
        "flush.messages": "5", "flush.ms": "100", "segment.index.bytes": "24",
        "segment.jitter.ms": "7", "message.timestamp.before.max.ms": "1000",
        "message.timestamp.after.max.ms": str(LONG_MAX), "index.interval.bytes": "0",
        "min.insync.replicas": "3",
    })
    assert (config.compression_type, config.compression_lz4_level) == ("lz4", 12)
    assert (config.flush_messages, config.flush_ms) == (5, 100)
    assert (config.segment_index_bytes, config.segment_jitter_ms) == (24, 7)
    assert config.message_timestamp_before_max_ms == 1000
    assert config.message_timestamp_after_max_ms is None
    assert config.index_interval_bytes == 0
    values = broker_values(config)
    assert values["compression.type"] == "lz4" and values["segment.index.bytes"] == "24"
    assert values["message.timestamp.after.max.ms"] == str(LONG_MAX)
    # No effect, no field: the broker-wide value is Kafka's default.
    assert values["min.insync.replicas"] == "1"


def test_describe_documents_the_configs_without_effect() -> None:
    info = TopicInfo("t", 1, {"min.insync.replicas": "2"})
    entries = {
        e.name: e for e in topic_entries(
            info, broker_values(LogConfig()), None, synonyms=True, documentation=True
        )
    }
    assert set(entries) == set(TOPIC_CONFIGS)
    mir = entries["min.insync.replicas"]
    assert (mir.value, mir.config_source) == ("2", 1)
    assert mir.documentation is not None and "No effect on brokerd" in mir.documentation
    assert entries["compression.type"].documentation is not None
    assert "No effect" not in entries["compression.type"].documentation
    # A config Kafka gives no broker synonym: its default, with no synonyms.
    remote = entries["remote.storage.enable"]
    assert (remote.value, remote.config_source, remote.synonyms) == ("false", 5, ())



def test_docs_table_lists_every_config_and_its_default() -> None:
    doc = (paths.REPO / "docs" / "kafka.md").read_text()
    section = doc.split("## Topic configs\n", 1)[1].split("\n\n**DescribeConfigs**", 1)[0]
    rows = {
        cells[1].strip("` "): cells[4].strip("` ")
        for line in section.splitlines()
        if line.startswith("| `") and (cells := line.split("|"))
    }
    assert list(rows) == list(TOPIC_CONFIGS)
    for name, definition in TOPIC_CONFIGS.items():
        assert rows[name] == (definition.default or "empty"), name


def test_the_new_topic_default_flags_are_checked_as_kafka_checks_them() -> None:
    from twisted.python import usage

    from brokerd.tap import Options

    options = Options()
    options.parseOptions(["--compression-type", "zstd", "--log-roll-jitter-ms", "50",
                          "--log-message-timestamp-after-max-ms", str(LONG_MAX)])
    topic_defaults = options.settings.storage.topic_defaults
    assert topic_defaults["compression.type"] == "zstd"
    assert topic_defaults["message.timestamp.after.max.ms"] == str(LONG_MAX)
    config = to_log_config(LogConfig(), topic_defaults)
    assert (config.compression_type, config.segment_jitter_ms) == ("zstd", 50)
    assert config.message_timestamp_after_max_ms is None
    defaults = Options()
    defaults.parseOptions([])
    assert defaults.settings.storage.topic_defaults["message.timestamp.after.max.ms"] == "3600000"
    with pytest.raises(usage.UsageError, match=r"compression\.type"):
        Options().parseOptions(["--compression-type", "brotli"])
    with pytest.raises(usage.UsageError, match=r"segment\.index\.bytes: Value must be at least 4"):
        Options().parseOptions(["--log-index-size-max-bytes", "2"])
