"""Topic configs: the definitions and Kafka's value syntax, validation messages, the
mapping to LogConfig, incremental alteration, persistence with the topic (across reopen,
and from a version-1 registry), run-time reconfiguration of open logs, retention under
cleanup.policy, and the per-topic max.message.bytes on produce (LogAppendTime stamping:
tests/storage/record/test_append_time.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer
from twisted.internet.task import Clock

from brokerd.core import Broker
from brokerd.errors import InvalidConfig, RecordTooLarge, StorageError, UnknownTopicOrPartition
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.config.topic_config import (
    LONG_MAX,
    TOPIC_CONFIGS,
    AlterOp,
    apply_incremental,
    broker_values,
    kafka_default,
    to_log_config,
    validate,
    validate_overrides,
)
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.layout import REGISTRY_FILE
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.record.encode import encode_batch

BIG = 1 << 20


# -- definitions and validation ------------------------------------------------------


def test_names_and_defaults_are_kafkas() -> None:
    # Every topic config of Kafka 4.x (its LogConfig), in Kafka's order, plus Kafka
    # 3.x's message.format.version and Confluent Server's schema validation.
    assert list(TOPIC_CONFIGS) == [
        "segment.bytes", "segment.ms", "segment.jitter.ms", "segment.index.bytes",
        "flush.messages", "flush.ms", "retention.bytes", "retention.ms",
        "max.message.bytes", "index.interval.bytes", "delete.retention.ms",
        "min.compaction.lag.ms", "max.compaction.lag.ms", "file.delete.delay.ms",
        "min.cleanable.dirty.ratio", "cleanup.policy", "unclean.leader.election.enable",
        "min.insync.replicas", "compression.type", "compression.gzip.level",
        "compression.lz4.level", "compression.zstd.level", "preallocate",
        "message.format.version", "message.timestamp.type",
        "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
        "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
        "remote.storage.enable", "local.retention.ms", "local.retention.bytes",
        "remote.log.copy.disable", "remote.log.delete.on.disable",
        "errors.deadletterqueue.group.enable",
        # Confluent Server's schema validation (docs/schema-registry.md).
        "confluent.key.schema.validation", "confluent.value.schema.validation",
    ]
    assert kafka_default("retention.ms") == "604800000"
    assert kafka_default("max.message.bytes") == "1048588"
    assert kafka_default("max.compaction.lag.ms") == str(LONG_MAX)
    assert TOPIC_CONFIGS["retention.ms"].broker_name == "log.retention.ms"
    assert TOPIC_CONFIGS["segment.ms"].broker_name == "log.roll.ms"
    # Kafka's defaults describe a LogConfig built with them exactly.
    kafka = LogConfig(
        retention_ms=604_800_000, segment_ms=604_800_000,
        message_timestamp_after_max_ms=3_600_000,
    )
    assert broker_values(kafka) == {n: d.default for n, d in TOPIC_CONFIGS.items()}


@pytest.mark.parametrize(
    ("name", "value", "normal"),
    [
        ("cleanup.policy", "compact", "compact"),
        ("cleanup.policy", " compact , delete ", "compact,delete"),
        ("retention.ms", "-1", "-1"),
        ("retention.ms", " 60000 ", "60000"),
        ("retention.bytes", "-5", "-5"),
        ("segment.bytes", "14", "14"),
        ("min.cleanable.dirty.ratio", "0.1", "0.1"),
        ("min.cleanable.dirty.ratio", "1", "1.0"),
        ("max.compaction.lag.ms", str(LONG_MAX), str(LONG_MAX)),
        ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
    ],
)
def test_valid_values_and_their_normal_form(name: str, value: str, normal: str) -> None:
    assert validate(name, value) == normal


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("retention.mss", "1", "Unknown topic config name: retention.mss"),
        ("retention.ms", None, "Null value not supported for topic configs: retention.ms"),
        ("retention.ms", "1h",
         "Invalid value 1h for configuration retention.ms: Not a number of type LONG"),
        ("retention.ms", "-2",
         "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        ("segment.bytes", "3000000000",
         "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"),
        ("segment.bytes", "13",
         "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
        ("segment.ms", "0",
         "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
        ("min.cleanable.dirty.ratio", "1.5",
         "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: "
         "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "nan",
         "Invalid value nan for configuration min.cleanable.dirty.ratio: "
         "Not a number of type DOUBLE"),
        ("cleanup.policy", "compact,forever",
         "Invalid value compact,forever for configuration cleanup.policy: "
         "String must be one of: compact, delete"),
        ("cleanup.policy", "",
         "Invalid value  for configuration cleanup.policy: String must be one of: compact, delete"),
        ("message.timestamp.type", "createtime",
         "Invalid value createtime for configuration message.timestamp.type: "
         "String must be one of: CreateTime, LogAppendTime"),
    ],
)
def test_invalid_values_name_the_key(name: str, value: str | None, message: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        validate(name, value)
    assert str(info.value) == message


def test_checks_across_names() -> None:
    with pytest.raises(InvalidConfig, match=r"min\.compaction\.lag\.ms \(10\) > max"):
        validate_overrides([("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")])
    with pytest.raises(InvalidConfig, match=r"Duplicate topic config name: retention\.ms"):
        validate_overrides([("retention.ms", "1"), ("retention.ms", "2")])


def test_mapping_to_log_config() -> None:
    base = LogConfig(segment_bytes=5000, retention_ms=1000)
    assert to_log_config(base, {}) == base
    config = to_log_config(base, {
        "cleanup.policy": "compact,delete", "retention.ms": "-1", "retention.bytes": "100",
        "segment.bytes": "2048", "segment.ms": str(LONG_MAX), "max.message.bytes": "500",
        "min.cleanable.dirty.ratio": "0.25", "min.compaction.lag.ms": "7",
        "max.compaction.lag.ms": "9", "delete.retention.ms": "11",
        "message.timestamp.type": "LogAppendTime",
    })
    assert config == LogConfig(
        segment_bytes=2048, segment_ms=None, retention_ms=None, retention_bytes=100,
        cleanup_policy=frozenset({"compact", "delete"}), max_message_bytes=500,
        min_cleanable_dirty_ratio=0.25, min_compaction_lag_ms=7, max_compaction_lag_ms=9,
        delete_retention_ms=11, message_timestamp_type="LogAppendTime",
    )
    assert broker_values(config)["segment.ms"] == str(LONG_MAX)
    assert broker_values(config)["retention.ms"] == "-1"


def test_incremental_operations() -> None:
    defaults = broker_values(LogConfig())
    current = {"retention.ms": "1000"}
    assert apply_incremental(current, defaults, [("cleanup.policy", AlterOp.APPEND, "compact")]) \
        == {"retention.ms": "1000", "cleanup.policy": "delete,compact"}
    assert apply_incremental(
        {"cleanup.policy": "compact,delete"}, defaults,
        [("cleanup.policy", AlterOp.SUBTRACT, "delete"), ("retention.ms", AlterOp.SET, "5")],
    ) == {"cleanup.policy": "compact", "retention.ms": "5"}
    assert apply_incremental(current, defaults, [("retention.ms", AlterOp.DELETE, None)]) == {}
    with pytest.raises(InvalidConfig, match=r"append is not allowed for config key: retention\.ms"):
        apply_incremental(current, defaults, [("retention.ms", AlterOp.APPEND, "1")])
    with pytest.raises(InvalidConfig, match=r"cleanup\.policy"):
        apply_incremental(current, defaults, [("cleanup.policy", AlterOp.SUBTRACT, "delete")])
    with pytest.raises(InvalidConfig, match="Unknown topic config name: nope"):
        apply_incremental(current, defaults, [("nope", AlterOp.DELETE, None)])


# -- persistence and run-time application -------------------------------------------


def open_dir(path: Path, **config: Any) -> LogDirectory:
    return LogDirectory.open(str(path), LogConfig(**{"segment_bytes": 1000, **config}))


def test_configs_persist_with_the_topic_across_reopen(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("c", 2, {"cleanup.policy": "compact", "segment.bytes": "4096"})
    ld.topic_changes.create_topic("plain", 1)
    ld.close()
    doc = json.loads((tmp_path / REGISTRY_FILE).read_text())
    assert doc["version"] == 2
    entry = dict(doc["topics"]["c"])
    assert entry.pop("topic_id")  # see tests/storage/test_topic_ids.py
    assert entry == {
        "partitions": 2, "configs": {"cleanup.policy": "compact", "segment.bytes": "4096"}
    }
    ld = open_dir(tmp_path)
    assert dict(ld.topics()["c"].configs) == {"cleanup.policy": "compact", "segment.bytes": "4096"}
    assert ld.get("c", 1).config.cleanup_policy == {"compact"}
    assert ld.get("c", 1).config.segment_bytes == 4096
    assert ld.get("plain", 0).config.segment_bytes == 1000
    ld.close()


def test_a_version_1_registry_still_opens(tmp_path: Path) -> None:
    (tmp_path / REGISTRY_FILE).write_text(json.dumps({"version": 1, "topics": {
        "old": {"partitions": 1, "retention_bytes": 5000, "retention_ms": None},
        "older": {"partitions": 2},
    }}))
    ld = open_dir(tmp_path)
    assert dict(ld.topics()["old"].configs) == {"retention.bytes": "5000"}
    assert dict(ld.topics()["older"].configs) == {}
    assert ld.get("old", 0).config.retention_bytes == 5000
    ld.close()
    # Rewritten once, to give the topics their IDs (tests/storage/test_topic_ids.py); the old
    # fields now read as configs.
    doc = json.loads((tmp_path / REGISTRY_FILE).read_text())
    assert doc["version"] == 2
    assert doc["topics"]["old"]["configs"] == {"retention.bytes": "5000"}
    assert all(entry["topic_id"] for entry in doc["topics"].values())
    ld = open_dir(tmp_path)
    assert ld.get("old", 0).config.retention_bytes == 5000
    ld.close()


def test_a_registry_with_a_bad_config_is_refused(tmp_path: Path) -> None:
    (tmp_path / REGISTRY_FILE).write_text(json.dumps({"version": 2, "topics": {
        "t": {"partitions": 1, "configs": {"retention.ms": "soon"}}}}))
    with pytest.raises(StorageError, match=r"corrupt topic registry.*retention\.ms"):
        open_dir(tmp_path)


def test_create_refuses_bad_configs_and_validate_only_creates_nothing(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    with pytest.raises(InvalidConfig, match="Unknown topic config name: bogus"):
        ld.topic_changes.create_topic("t", 1, {"bogus": "1"})
    info = ld.topic_changes.create_topic("t", 1, {"retention.ms": "5"}, validate_only=True)
    assert dict(info.configs) == {"retention.ms": "5"}
    assert ld.topics() == {}
    assert not (tmp_path / "t-0").exists()
    ld.close()


def test_alter_applies_to_open_logs_and_persists(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("t", 2, {"retention.ms": "1000"})
    plog = ld.get("t", 1)
    info = ld.topic_changes.alter_topic_configs(
        "t", lambda cur: {**cur, "cleanup.policy": "compact"}
    )
    assert dict(info.configs) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert plog.config.cleanup_policy == {"compact"} and plog.config.retention_ms == 1000
    ld.topic_changes.alter_topic_configs(
        "t", lambda cur: {"segment.bytes": "99"}, validate_only=True
    )
    assert plog.config.segment_bytes == 1000
    with pytest.raises(InvalidConfig):
        ld.topic_changes.alter_topic_configs("t", lambda cur: {"segment.bytes": "1"})
    with pytest.raises(UnknownTopicOrPartition):
        ld.topic_changes.alter_topic_configs("nope", lambda cur: {})
    ld.close()
    ld = open_dir(tmp_path)
    assert dict(ld.topics()["t"].configs) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    ld.topic_changes.alter_topic_configs("t", lambda cur: {})
    assert ld.get("t", 0).config == ld.default_config
    ld.close()


def fill(plog: PartitionLog, count: int, timestamp_ms: int) -> None:
    for _ in range(count):
        plog.append_values([b"z" * 80], timestamp_ms=timestamp_ms)
    plog.publish()


def test_retention_follows_cleanup_policy(tmp_path: Path) -> None:
    ld = open_dir(tmp_path, segment_bytes=200, retention_ms=1000)
    ld.topic_changes.create_topic("deleted", 1)
    ld.topic_changes.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    ld.topic_changes.create_topic("both", 1, {"cleanup.policy": "compact,delete"})
    for name in ("deleted", "compacted", "both"):
        fill(ld.get(name, 0), 10, timestamp_ms=1)
    now = 10_000.0
    ld.enforce_retention(now)
    assert ld.get("deleted", 0).log_start_offset > 0
    assert ld.get("both", 0).log_start_offset > 0
    assert ld.get("compacted", 0).log_start_offset == 0
    # Switching the compacted topic to delete applies at once.
    ld.topic_changes.alter_topic_configs("compacted", lambda cur: {"cleanup.policy": "delete"})
    assert ld.enforce_retention(now) > 0
    assert ld.get("compacted", 0).log_start_offset > 0
    ld.close()


# -- max.message.bytes on produce ------------------------------------------------------


def test_max_message_bytes_is_per_topic(tmp_path: Path) -> None:
    ld = open_dir(tmp_path)
    ld.topic_changes.create_topic("small", 1, {"max.message.bytes": "100"})
    ld.topic_changes.create_topic("large", 1, {"max.message.bytes": str(3 * BIG)})
    broker = Broker(
        ld, reactor=Clock(), run_read=defer.maybeDeferred, run_write=defer.maybeDeferred
    )
    big = encode_batch([b"v" * 200], timestamp_ms=1)
    results: list[Any] = []
    broker.produce_batches("small", 0, big).addBoth(results.append)
    failure = results.pop()
    assert failure.check(RecordTooLarge)
    assert "exceeds the maximum configured value of 100" in str(failure.value)
    huge = encode_batch([b"v" * (2 * BIG)], timestamp_ms=1)
    broker.produce_batches("large", 0, huge).addBoth(results.append)
    assert results.pop().base_offset == 0
    # The broker-wide default (Kafka's 1048588) applies to topics without an override.
    broker.produce_batches("plain", 0, huge).addBoth(results.append)
    assert results.pop().check(RecordTooLarge)
    ld.close()
