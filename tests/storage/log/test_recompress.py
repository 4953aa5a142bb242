"""Recompression to a topic's ``compression.type`` (Kafka's ``LogValidator``): batches stored in
the topic's codec from every codec, ``producer`` keeping the producer's, the codec's level
the topic's."""

from __future__ import annotations

import pytest

from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.config.topic_config import (
    to_log_config,
)
from brokerd.storage.log.recompress import recompress
from brokerd.storage.record.compression import Compression
from brokerd.storage.record.decode import decode_records
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches

NOW = 1_700_000_000_000



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
