"""What the console's data pages and actions ask of the broker: records of one
partition, its offsets, a produce, and the admin operations (topic create, config edit,
delete, a consumer group's offset reset).

:class:`BrokerData` is the broker as the pages see it, built by the service wiring from
the core (:class:`~brokerd.core.api.CoreApi`) and the admin operations
(:class:`~brokerd.operator.operations.OperatorOps`, the same rules as ``brokerctl`` and
Kafka's admin client). Tests of the pages build it over a fake core, or pass an object
with the methods they call.

Reads are of committed records, decoded (:data:`~brokerd.storage.types.COMMITTED_RECORDS`,
the native fetch's read): the browser shows what a read_committed consumer would see,
control records and aborted transactions' records being gaps in the offsets.

The default partitioner is Kafka's: a keyed record goes to ``murmur2(key) % partitions``
(the Java client's and librdkafka's ``murmur2_random``), so the form lands a key where a
Kafka producer would; a record without a key goes round-robin.

What it does not do: check ACLs or CSRF tokens (:mod:`brokerd.web.actions` does), render.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from twisted.internet import defer
from twisted.internet.defer import Deferred

from brokerd.core.api import CoreApi, CoreReads
from brokerd.errors import BrokerError, UnknownTopicOrPartition
from brokerd.operator.operations import OperatorOps
from brokerd.storage.record.encode import encode_records
from brokerd.storage.types import (
    COMMITTED_RECORDS,
    AppendInfo,
    LogRead,
    Record,
)

__all__ = ["BrokerData", "murmur2", "partition_for"]


class BrokerData:
    """The broker as the console's data pages and actions see it (reactor thread): the
    core's reads for offsets, the admin operations for topic and group changes, and the
    two calls shaped for the console (a bounded committed read, a produce of records)."""

    def __init__(self, broker: CoreApi, admin: OperatorOps) -> None:
        self._broker = broker
        self.admin = admin

    @property
    def reads(self) -> CoreReads:
        return self._broker.reads

    def read(self, topic: str, partition: int, offset: int, max_bytes: int) -> Deferred[LogRead]:
        # The core answers from memory directly, else with a Deferred of the read pool;
        # an OffsetOutOfRange raised at once becomes a failure like a later one.
        try:
            answer = self._broker.reads.read(topic, partition, offset, max_bytes, COMMITTED_RECORDS)
        except BrokerError:
            return defer.fail()
        return answer if isinstance(answer, Deferred) else defer.succeed(answer)

    def produce(
        self, topic: str, partition: int, records: Sequence[Record], timestamp_ms: int
    ) -> Deferred[AppendInfo]:
        info = self._broker.topics().get(topic)
        if info is None or not 0 <= partition < info.partitions:
            # The core would create a missing topic or partition on a produce.
            return defer.fail(
                UnknownTopicOrPartition(f"topic {topic!r} has no partition {partition}")
            )
        batch = encode_records(records, timestamp_ms=timestamp_ms)
        return self._broker.produce_batches(topic, partition, batch, acks=-1)

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str]
    ) -> Deferred[None]:
        return self._broker.create_topic(name, partitions, dict(configs))


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data`` (seed 0x9747b28c), as a signed int."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    rest = data[whole:]
    if len(rest) >= 3:
        h ^= rest[2] << 16
    if len(rest) >= 2:
        h ^= rest[1] << 8
    if rest:
        h ^= rest[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


_round_robin = itertools.count()


def partition_for(key: bytes | None, partitions: int) -> int:
    """Kafka's default partition of a record: by the key's murmur2, positive part
    (``& 0x7fffffff``), else round-robin."""
    if key is None:
        return next(_round_robin) % partitions
    return (murmur2(key) & 0x7FFFFFFF) % partitions
