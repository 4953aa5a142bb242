# -*- test-case-name: tests.proxy.test_produce -*-
"""Appending the records of a produce request (v2 and v3 alike): the partition of each
record, one batch per partition, and each record's offset or error.

A record names its partition, or is placed by its key as Kafka's default partitioner
places it (murmur2 of the key bytes, so a Java or librdkafka producer with the same key
lands on the same partition), or, without a key, round robin. The records of one
partition go in one RecordBatch appended through the core's produce path, so they get
consecutive offsets and the topic's checks (``max.message.bytes``, schema validation,
ACL-free internal-topic refusal) as a Kafka producer's batch would.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import attrs
from twisted.internet.defer import Deferred, DeferredList

from brokerd.core.api import CoreApi
from brokerd.errors import UnknownTopicOrPartition
from brokerd.proxy.errors import PARTITION_NOT_FOUND, ProxyError, from_broker, topic_not_found
from brokerd.storage.record.encode import encode_batch, rebuild_batch
from brokerd.storage.record.header import read_header
from brokerd.storage.types import AppendInfo, Record, TopicInfo


@attrs.frozen
class OutRecord:
    """One record to append."""

    key: bytes | None
    value: bytes | None
    partition: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    #: Milliseconds since the epoch (None: now).
    timestamp_ms: int | None = None


@attrs.frozen
class Placed:
    """Where a record landed, or why it did not."""

    partition: int
    offset: int | None = None
    error: ProxyError | None = None
    timestamp_ms: int = -1


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of a key (``Utils.murmur2``), as a signed 32-bit value."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner's choice for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class Appender:
    """Appends produce requests' records. Reactor thread only.

    :param core: the broker core.
    :param now_ms: the wall clock in milliseconds (record timestamps).
    """

    def __init__(self, core: CoreApi, now_ms: Callable[[], int]) -> None:
        self._core = core
        self._now_ms = now_ms
        self._round_robin = itertools.count()

    async def topic(self, name: str) -> TopicInfo:
        """The topic, auto-created when the broker does that; else 40401."""
        try:
            return await self._core.topic_registry.ensure_topic(name)
        except UnknownTopicOrPartition:
            raise topic_not_found(name) from None
        except Exception as e:
            raise from_broker(e) from None

    async def append(
        self, topic: str, records: Sequence[OutRecord], *, partition: int | None = None
    ) -> list[Placed]:
        """Append ``records`` (all to ``partition`` when given); one :class:`Placed`
        per record, in order."""
        info = await self.topic(topic)
        if partition is not None and not 0 <= partition < info.partitions:
            raise ProxyError(404, PARTITION_NOT_FOUND,
                             f"Partition {partition} of topic {topic} not found.")
        chosen: list[int] = []
        for record in records:
            p = partition if partition is not None else record.partition
            if p is None:
                p = (key_partition(record.key, info.partitions) if record.key is not None
                     else next(self._round_robin) % info.partitions)
            chosen.append(p)
        placed: list[Placed | None] = [None] * len(records)
        by_partition: dict[int, list[int]] = {}
        for index, p in enumerate(chosen):
            if 0 <= p < info.partitions:
                by_partition.setdefault(p, []).append(index)
            else:
                placed[index] = Placed(p, error=ProxyError(
                    404, PARTITION_NOT_FOUND, f"Partition {p} of topic {topic} not found."))
        now = self._now_ms()
        appends: list[Deferred[AppendInfo]] = []
        order: list[tuple[int, list[int], int]] = []
        for p, indexes in by_partition.items():
            batch_records = [records[i] for i in indexes]
            timestamp = batch_records[0].timestamp_ms or now
            appends.append(self._core.produce_batches(topic, p, _batch(batch_records, timestamp)))
            order.append((p, indexes, timestamp))
        results = await DeferredList(appends, consumeErrors=True)
        for (p, indexes, timestamp), (ok, result) in zip(order, results, strict=True):
            for n, index in enumerate(indexes):
                if ok:
                    stamp = result.log_append_time if result.log_append_time >= 0 else timestamp
                    placed[index] = Placed(p, result.base_offset + n, timestamp_ms=stamp)
                else:
                    placed[index] = Placed(p, error=from_broker(result.value))  # type: ignore[attr-defined]
        return [p for p in placed if p is not None]


def _batch(records: Sequence[OutRecord], timestamp_ms: int) -> bytes:
    """One RecordBatch of ``records`` (offsets from 0; the log assigns the real ones)."""
    batch = encode_batch(
        [r.value for r in records], keys=[r.key for r in records], timestamp_ms=timestamp_ms
    )
    if not any(r.headers for r in records):
        return batch
    # Headers: the same batch rebuilt with them (the encoder of the log cleaner).
    return rebuild_batch(read_header(batch), [
        Record(offset=i, timestamp=timestamp_ms, key=r.key, value=r.value, headers=r.headers)
        for i, r in enumerate(records)
    ])
