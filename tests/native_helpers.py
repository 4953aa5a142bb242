"""Test helpers for the native protocol: raw frame builders written straight from the wire
tables (plain ``struct``, independent of the codec under test) and a fake broker core
whose Deferreds the tests fire by hand."""

from __future__ import annotations

import struct
from typing import Any

import attrs
from twisted.internet import defer

from brokerd.after_answer import AfterAnswer
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.types import AppendInfo, LogRead, ReadSpec, Record, TopicInfo


def topic_field(topic: str | bytes, *, length: int | None = None) -> bytes:
    raw = topic.encode() if isinstance(topic, str) else topic
    return struct.pack(">H", len(raw) if length is None else length) + raw


def produce_frame(
    topic: str | bytes, partition: int, values: list[bytes], *, count: int | None = None
) -> bytes:
    body = b"".join(struct.pack(">I", len(v)) + v for v in values)
    n = len(values) if count is None else count
    return struct.pack(">H", 1) + topic_field(topic) + struct.pack(">II", partition, n) + body


def fetch_frame(topic: str | bytes, partition: int, offset: int) -> bytes:
    return struct.pack(">H", 2) + topic_field(topic) + struct.pack(">IQ", partition, offset)


def create_topic_frame(topic: str | bytes, partitions: int) -> bytes:
    return struct.pack(">H", 3) + topic_field(topic) + struct.pack(">I", partitions)


def list_offsets_frame(topic: str | bytes, partition: int) -> bytes:
    return struct.pack(">H", 4) + topic_field(topic) + struct.pack(">I", partition)


def list_topics_frame() -> bytes:
    return struct.pack(">H", 5)


def long_poll_frame(
    topic: str | bytes,
    partition: int,
    offset: int,
    *,
    max_wait_ms: int,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
) -> bytes:
    return (
        struct.pack(">H", 6)
        + topic_field(topic)
        + struct.pack(">IQIII", partition, offset, max_wait_ms, min_bytes, max_bytes)
    )


def error_body(code: int, message: str) -> bytes:
    raw = message.encode()
    return struct.pack(">HH", code, len(raw)) + raw


def fetch_error(code: int, message: str) -> bytes:
    return struct.pack(">I", 0xFFFFFFFF) + error_body(code, message)


def produce_ok(base_offset: int) -> bytes:
    return struct.pack(">HQ", 0, base_offset)


def fetch_ok(values: list[bytes]) -> bytes:
    return struct.pack(">I", len(values)) + b"".join(struct.pack(">I", len(v)) + v for v in values)


def records(
    start: int, values: list[bytes | None], *, high_watermark: int | None = None
) -> LogRead:
    """A read holding ``values`` at offsets from ``start``: as one stored batch (what a
    type-2 Fetch frames) and as decoded records (what the other reads answer)."""
    recs = tuple(Record(start + i, 0, None, v) for i, v in enumerate(values))
    hw = start + len(values) if high_watermark is None else high_watermark
    stored = encode_batch(values, timestamp_ms=0, base_offset=start) if values else b""
    return LogRead(stored, hw, 0, hw, decoded=recs)


def append_info(base: int, count: int = 1) -> AppendInfo:
    return AppendInfo(base, base + count - 1, 0)


@attrs.define
class Call:
    """One call the protocol made on the fake core."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    deferred: defer.Deferred[Any]
    cancelled: bool = False


class FakeCore:
    """What the native protocol calls of ``brokerd.core.api.CoreApi``; every call
    returns a new unfired, cancellable Deferred recorded in :attr:`calls` (or an
    already-fired one from :attr:`auto`)."""

    @property
    def reads(self) -> Any:
        """The fake plays the face's reads and transactions roles itself."""
        return self

    @property
    def transactions(self) -> Any:
        return self

    @property
    def topic_registry(self) -> Any:
        return self

    def __init__(self) -> None:
        self.after_answer = AfterAnswer()
        self.calls: list[Call] = []
        #: method name -> result to answer synchronously (an Exception fails the call)
        self.auto: dict[str, Any] = {}
        #: False: hand out plain Deferreds (no canceller), as a careless core might
        self.cancellable = True

    def _call(self, method: str, *args: Any, **kwargs: Any) -> defer.Deferred[Any]:
        if method in self.auto:
            result = self.auto[method]
            d: defer.Deferred[Any] = (
                defer.fail(result) if isinstance(result, BaseException) else defer.succeed(result)
            )
            self.calls.append(Call(method, args, kwargs, d))
            return d

        def cancel(_: defer.Deferred[Any]) -> None:
            call.cancelled = True

        d = defer.Deferred(cancel if self.cancellable else None)
        call = Call(method, args, kwargs, d)
        self.calls.append(call)
        return d

    def produce_values(
        self, topic: str, partition: int, values: list[bytes]
    ) -> defer.Deferred[AppendInfo]:
        return self._call("produce_values", topic, partition, values)

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec
    ) -> defer.Deferred[LogRead]:
        return self._call("read", topic, partition, offset, max_bytes, spec)

    def wait_records(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_value_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
    ) -> defer.Deferred[LogRead]:
        return self._call(
            "wait_records",
            topic,
            partition,
            offset,
            max_value_bytes=max_value_bytes,
            min_bytes=min_bytes,
            max_wait_ms=max_wait_ms,
        )

    def create_topic(self, name: str, partitions: int) -> defer.Deferred[None]:
        return self._call("create_topic", name, partitions)

    def list_offsets(
        self, topic: str, partition: int, *, read_committed: bool = False
    ) -> defer.Deferred[tuple[int, int]]:
        return self._call("list_offsets", topic, partition)

    def list_topics(self) -> defer.Deferred[list[TopicInfo]]:
        return self._call("list_topics")
