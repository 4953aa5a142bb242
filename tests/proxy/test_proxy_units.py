"""brokerd.proxy's pure parts: Kafka's partitioner, the embedded formats, the consumer
configs, the error answers."""

from __future__ import annotations

import pytest

from brokerd.errors import InvalidConfig, RecordTooLarge, UnknownTopicOrPartition
from brokerd.proxy.embedded import (
    EmbeddedFormat,
    accepted_formats,
    decode,
    encode_plain,
    produce_format,
)
from brokerd.proxy.errors import ProxyError, from_broker
from brokerd.proxy.http import parse_json, too_deep
from brokerd.proxy.instances import OffsetReset, parse_config
from brokerd.proxy.produce import key_partition, murmur2


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        # Kafka's own vectors of Utils.murmur2 (clients' UtilsTest).
        ("21", -973932308),
        ("foobar", -790332482),
        ("a-little-bit-long-string", -985981536),
        ("a-little-bit-longer-string", -1486304829),
        ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        ("abc", 479470107),
    ],
)
def test_murmur2_is_kafkas(key: str, expected: int) -> None:
    assert murmur2(key.encode()) == expected


def test_a_keyed_record_goes_where_a_kafka_producer_puts_it() -> None:
    assert key_partition(b"21", 3) == (-973932308 & 0x7FFFFFFF) % 3
    assert {key_partition(b"k%d" % i, 4) for i in range(100)} == {0, 1, 2, 3}


def test_content_types() -> None:
    assert produce_format("application/vnd.kafka.json.v2+json") is EmbeddedFormat.JSON
    assert produce_format("application/vnd.kafka.avro.v2+json; charset=utf-8") is (
        EmbeddedFormat.AVRO)
    with pytest.raises(ProxyError) as refused:
        produce_format("application/json")
    assert (refused.value.http_status, refused.value.error_code) == (415, 40601)
    assert accepted_formats("application/vnd.kafka.binary.v2+json, */*") == [
        EmbeddedFormat.BINARY, None]
    assert EmbeddedFormat.JSONSCHEMA.content_type == "application/vnd.kafka.jsonschema.v2+json"


def test_plain_formats_both_ways() -> None:
    assert encode_plain(EmbeddedFormat.JSON, {"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    assert encode_plain(EmbeddedFormat.JSON, None) is None
    assert encode_plain(EmbeddedFormat.BINARY, "AAEC") == b"\x00\x01\x02"
    assert decode(EmbeddedFormat.BINARY, b"\x00\x01\x02", None) == "AAEC"
    assert decode(EmbeddedFormat.JSON, b'{"a":1}', None) == {"a": 1}
    with pytest.raises(ProxyError, match="not base64"):
        encode_plain(EmbeddedFormat.BINARY, "not base64!")
    with pytest.raises(ProxyError, match="not JSON"):
        decode(EmbeddedFormat.JSON, b"\xff", None)
    with pytest.raises(ProxyError, match="not framed"):
        decode(EmbeddedFormat.AVRO, b"plain", None)


def test_consumer_configs() -> None:
    config = parse_config({"format": "json", "auto.offset.reset": "earliest",
                           "auto.commit.enable": "false", "fetch.min.bytes": "10"})
    assert config.format is EmbeddedFormat.JSON
    assert config.auto_offset_reset is OffsetReset.EARLIEST
    assert not config.auto_commit and config.fetch_min_bytes == 10
    assert parse_config({}).auto_offset_reset is OffsetReset.LATEST
    for bad in ({"format": "xml"}, {"auto.offset.reset": "middle"},
                {"auto.commit.enable": "maybe"}, {"consumer.request.timeout.ms": "-1"}):
        with pytest.raises(ProxyError) as refused:
            parse_config(bad)
        assert refused.value.error_code == 42204


def test_broker_errors_answer_confluents_codes() -> None:
    assert from_broker(UnknownTopicOrPartition("x")).error_code == 40401
    assert from_broker(RecordTooLarge("x")).http_status == 413
    assert from_broker(InvalidConfig("x")).http_status == 400
    internal = from_broker(KeyError("secret"))
    assert (internal.http_status, internal.message) == (500, "internal error")


def test_json_bodies_are_bounded_in_depth() -> None:
    assert not too_deep(b'{"a": "[[[[[[[["}')
    assert too_deep(b"[" * 65 + b"]" * 65)
    with pytest.raises(ProxyError, match="nested deeper"):
        parse_json(b"[" * 100_000)
    with pytest.raises(ProxyError, match="not JSON"):
        parse_json(b"{")
