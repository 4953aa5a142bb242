"""Kafka's ``__consumer_offsets`` record schemas (OffsetCommitKey/Value,
GroupMetadataKey/Value), decoded as a lag monitor decodes them: written for the tests
from Kafka's message schemas, independently of the broker's encoder."""

from __future__ import annotations

import struct
from typing import Any


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        text = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return text


def java_partition(group: str, partitions: int = 50) -> int:
    """abs(String.hashCode()) % partitions, as Kafka places a group."""
    h = 0
    for ch in group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h & 0x80000000 else h
    return abs(h) % partitions


def decode(key: bytes, value: bytes | None) -> tuple[Any, ...]:
    """One ``__consumer_offsets`` record: ``("offset", group, topic, partition, value)``
    or ``("group", group, value)``, value None for a tombstone."""
    k = _Reader(key)
    version = k.take(">h")
    if version in (0, 1):
        group, topic, partition = k.string(), k.string(), k.take(">i")
        if value is None:
            return ("offset", group, topic, partition, None)
        v = _Reader(value)
        v_version = v.take(">h")
        assert v_version in (1, 3, 4), v_version
        offset = v.take(">q")
        epoch = v.take(">i") if v_version >= 3 else -1
        metadata = v.string()
        commit_ts = v.take(">q")
        return ("offset", group, topic, partition, (offset, epoch, metadata, commit_ts))
    assert version == 2, version
    group = k.string()
    if value is None:
        return ("group", group, None)
    v = _Reader(value)
    v_version = v.take(">h")
    protocol_type, generation = v.string(), v.take(">i")
    protocol, leader = v.string(), v.string()
    if v_version >= 2:
        v.take(">q")  # current state timestamp
    members = []
    for _ in range(v.take(">i")):
        member_id = v.string()
        if v_version >= 3:
            v.string()  # group instance id
        v.string()  # client id
        v.string()  # client host
        if v_version >= 1:
            v.take(">i")  # rebalance timeout
        v.take(">i")  # session timeout
        for _blob in range(2):  # subscription, assignment
            v.pos += v.take(">i")
        members.append(member_id)
    return ("group", group, (protocol_type, generation, protocol, leader, members))


