"""What the topic configs added for Kafka 4.x do, below the wire: the table's checks
(every config's type and bounds, Kafka's messages), DescribeConfigs' documentation of the
configs without effect, recompression to a topic's ``compression.type``, the timestamp
windows, the per-topic flush rule (``flush.messages`` / ``flush.ms`` against ``--fsync``,
counted on the core's sync calls), and the rolls by ``segment.index.bytes`` and
``segment.jitter.ms`` on a real partition log."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.core.policy import FlushRule, FsyncPolicy, flush_rule
from brokerd.errors import InvalidConfig, InvalidTimestamp
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
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.log.recompress import recompress
from brokerd.storage.log.timestamp_checks import check_timestamps
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches, read_header
from brokerd.storage.types import TopicInfo

from tests import paths
from tests.read_specs import BYTES, COMMITTED_RECORDS

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


# -- compression.type -------------------------------------------------------------------


def _batches(codec: Compression) -> bytes:
    return encode_batch(
        [b"value-%d" % i * 20 for i in range(5)], keys=[b"k%d" % i for i in range(5)],
        timestamp_ms=NOW, compression=codec, producer_id=42, producer_epoch=3,
        base_sequence=10,
    ) + encode_batch([b"second", None], timestamp_ms=NOW + 5, compression=codec)


@pytest.mark.parametrize("source", list(Compression))
@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_batches_are_stored_in_the_topics_codec(source: Compression, target: str) -> None:
    data = _batches(source)
    headers = parse_batches(data, max_batch_bytes=len(data))
    config = to_log_config(LogConfig(), {"compression.type": target})
    out, new_headers = recompress(config, data, headers)
    codec = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[target]
    assert [h.compression for h in new_headers] == [codec, codec]
    assert new_headers == parse_batches(out, max_batch_bytes=len(out))
    first, second = headers
    if source == codec:
        assert out == data  # already in the topic's codec: stored byte for byte
    new_first = new_headers[0]
    assert (new_first.producer_id, new_first.producer_epoch, new_first.base_sequence) == (42, 3, 10)
    assert (new_first.base_timestamp, new_first.max_timestamp) == (NOW, NOW)
    assert new_first.last_offset_delta == first.last_offset_delta
    assert decode_records(out, max_uncompressed=1 << 20) == decode_records(
        data, max_uncompressed=1 << 20
    )
    tail = out[new_first.size :]
    assert decode_records(tail, max_uncompressed=1 << 20) == decode_records(
        data[first.size :], max_uncompressed=1 << 20
    )
    assert second.records_count == new_headers[1].records_count == 2


def test_producer_keeps_the_producers_codec() -> None:
    data = _batches(Compression.GZIP)
    headers = parse_batches(data, max_batch_bytes=len(data))
    out, _ = recompress(LogConfig(), data, headers)
    assert out is data


def test_the_codec_level_is_the_topics() -> None:
    values = [bytes(range(256)) * 4 + b"%d" % i for i in range(50)]
    data = encode_batch(values, timestamp_ms=NOW)
    headers = parse_batches(data, max_batch_bytes=len(data))
    sizes = {}
    for level in ("1", "9"):
        config = to_log_config(LogConfig(), {
            "compression.type": "gzip", "compression.gzip.level": level})
        sizes[level] = len(recompress(config, data, headers)[0])
    assert sizes["9"] < sizes["1"]


# -- message.timestamp.before.max.ms / after.max.ms -------------------------------------


def _check(config: LogConfig, data: bytes) -> None:
    check_timestamps(config, data, parse_batches(data, max_batch_bytes=len(data)), NOW)


def test_timestamps_outside_the_window_are_refused() -> None:
    config = LogConfig(
        message_timestamp_before_max_ms=60_000, message_timestamp_after_max_ms=1_000
    )
    _check(config, encode_batch([b"a"], timestamp_ms=NOW - 60_000))
    _check(config, encode_batch([b"a"], timestamp_ms=NOW + 1_000))
    with pytest.raises(InvalidTimestamp) as info:
        _check(config, encode_batch([b"a"], timestamp_ms=NOW + 1_001))
    assert str(info.value) == (
        f"Timestamp {NOW + 1_001} of message with offset 0 is out of range. "
        f"The timestamp should be within [{NOW - 60_000}, {NOW + 1_000}]"
    )
    with pytest.raises(InvalidTimestamp):
        _check(config, encode_batch([b"a"], timestamp_ms=NOW - 60_001, compression=Compression.LZ4))


def test_the_first_record_too_old_is_named() -> None:
    batch = bytearray(encode_batch([b"a", b"b", b"c"], timestamp_ms=NOW))
    config = LogConfig(message_timestamp_before_max_ms=10)
    _check(config, bytes(batch))
    # A batch whose newest record is fine but whose base timestamp is too old.
    old = encode_batch([b"x"], timestamp_ms=NOW - 11) + encode_batch([b"y"], timestamp_ms=NOW)
    with pytest.raises(InvalidTimestamp) as info:
        _check(config, old)
    assert info.value.record_index == 0


def test_log_append_time_topics_and_missing_timestamps_pass() -> None:
    far = encode_batch([b"a"], timestamp_ms=NOW + 10**9)
    _check(LogConfig(message_timestamp_type="LogAppendTime",
                     message_timestamp_after_max_ms=0), far)
    _check(LogConfig(message_timestamp_before_max_ms=0), encode_batch([b"a"], timestamp_ms=-1))
    _check(LogConfig(), far)  # no window: LogConfig's own default checks nothing


# -- flush.messages / flush.ms ------------------------------------------------------------


def test_flush_rule_follows_kafkas_override_semantics() -> None:
    always, never = FsyncPolicy("always"), FsyncPolicy("never")
    interval = FsyncPolicy("interval", 200)
    assert flush_rule(always, None, None) == FlushRule(True)
    assert flush_rule(never, None, None) == FlushRule(False)
    assert flush_rule(interval, None, None) == FlushRule(False)
    assert flush_rule(never, 1, None) == FlushRule(True)
    assert flush_rule(never, None, 0) == FlushRule(True)
    assert flush_rule(never, 100, 5000) == FlushRule(False, 100, 5000)
    # An override replaces the broker's setting, also when that weakens it.
    assert flush_rule(always, 1000, None) == FlushRule(False, 1000)
    # flush.ms alone leaves the broker's "sync every record" in force.
    assert flush_rule(always, None, 5000) == FlushRule(True)
    assert flush_rule(never, LONG_MAX, LONG_MAX) == FlushRule(False)
    assert always.flush_defaults() == {"flush.messages": "1"}
    assert interval.flush_defaults() == {"flush.ms": "200"}
    assert never.flush_defaults() == {}


# -- segment.index.bytes and segment.jitter.ms ----------------------------------------


class FakeTime:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _open(path: Path, config: LogConfig, clock: FakeTime) -> PartitionLog:
    return PartitionLog.open(str(path), config, recovery_point=None, clock=clock)


def test_a_full_index_rolls_the_segment(tmp_path: Path) -> None:
    # 24 bytes: three offset entries (8 bytes each) but two time entries (12 bytes each);
    # brokerd writes them in pairs, so the time index is full first. With an entry for
    # every batch after a segment's first (index.interval.bytes 0), a segment holds
    # three batches.
    config = to_log_config(LogConfig(), {"segment.index.bytes": "24",
                                         "index.interval.bytes": "0"})
    plog = _open(tmp_path / "t-0", config, FakeTime())
    try:
        for i in range(7):
            plog.append_values([b"v%d" % i], timestamp_ms=NOW + i)
        assert plog.segment_bases == (0, 3, 6)
        assert [len(s.timeindex) for s in plog.segments] == [2, 2, 0]
    finally:
        plog.close()


def test_default_index_size_does_not_roll(tmp_path: Path) -> None:
    plog = _open(tmp_path / "t-0", LogConfig(index_interval_bytes=0), FakeTime())
    try:
        for i in range(50):
            plog.append_values([b"v%d" % i], timestamp_ms=NOW)
        assert plog.segment_bases == (0,)
    finally:
        plog.close()


def test_segment_jitter_rolls_early_by_a_draw_per_segment(tmp_path: Path) -> None:
    clock = FakeTime()
    config = LogConfig(segment_ms=1_000, segment_jitter_ms=5_000)
    plog = _open(tmp_path / "t-0", config, clock)
    bounds: list[int] = []

    def draw(bound: int) -> int:
        bounds.append(bound)
        return 400

    plog.roll_jitter = draw
    try:
        plog.append_values([b"a"], timestamp_ms=NOW)
        clock.now += 0.599
        plog.append_values([b"b"], timestamp_ms=NOW)
        assert plog.segment_bases == (0,)
        clock.now += 0.001  # 600 ms = segment.ms minus the 400 ms drawn
        plog.append_values([b"c"], timestamp_ms=NOW)
        assert plog.segment_bases == (0, 2)
        # Drawn below min(segment.jitter.ms, segment.ms), once per segment.
        clock.now += 0.1
        plog.append_values([b"d"], timestamp_ms=NOW)
        assert bounds == [1_000, 1_000]
    finally:
        plog.close()


def test_no_jitter_rolls_at_segment_ms(tmp_path: Path) -> None:
    clock = FakeTime()
    plog = _open(tmp_path / "t-0", LogConfig(segment_ms=1_000), clock)
    plog.roll_jitter = lambda bound: pytest.fail("no jitter configured: nothing is drawn")
    try:
        plog.append_values([b"a"], timestamp_ms=NOW)
        clock.now += 0.999
        plog.append_values([b"b"], timestamp_ms=NOW)
        assert plog.segment_bases == (0,)
        clock.now += 0.001
        plog.append_values([b"c"], timestamp_ms=NOW)
        assert plog.segment_bases == (0, 2)
    finally:
        plog.close()


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


def test_native_produce_is_encoded_in_the_topics_codec(tmp_path: Path) -> None:
    config = to_log_config(LogConfig(), {"compression.type": "gzip",
                                         "compression.gzip.level": "1"})
    plog = _open(tmp_path / "t-0", config, FakeTime())
    try:
        plog.append_values([b"native %d" % i for i in range(10)], timestamp_ms=NOW)
        plog.publish()
        assert read_header(plog.read(0, 1 << 20, BYTES).records).compression == Compression.GZIP
        assert [r.value for r in plog.read(0, 1 << 20, COMMITTED_RECORDS).decoded] == [
            b"native %d" % i for i in range(10)]
    finally:
        plog.close()
