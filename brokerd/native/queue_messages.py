"""The native protocol's queue requests (types 15 to 18): share groups on the native wire.

What this module does: defines one attrs-frozen request class per queue request type
(fetch with acquisition, acknowledge, describe and list of share groups), the answers a
client decodes, the acknowledgement kinds' wire codes and the named limits. The layouts
are in ``brokerd.native.queue_wire``; the format is specified in ``docs/protocol.md``
(section 2.9) and the consumer's model in ``docs/queues.md`` ("The same queue on the
native protocol").

What it does not do: encode, decode, or know what the broker does with a request
(``brokerd.native.queue_handlers`` and ``brokerd.core.share``).
"""

from __future__ import annotations

import enum

import attrs

__all__ = [
    "MAX_QUEUE_ACK_OFFSETS",
    "MAX_QUEUE_ACK_RANGES",
    "MAX_QUEUE_ANSWER_BYTES",
    "MAX_QUEUE_RECORDS",
    "AckKind",
    "AckRange",
    "DescribeShareGroupRequest",
    "ListShareGroupsRequest",
    "QueueAckRequest",
    "QueueAckResponse",
    "QueueFetchRequest",
    "QueueFetchResponse",
    "QueueRecord",
    "QueueRequest",
]

#: A queue fetch asks for at most this many records.
MAX_QUEUE_RECORDS = 10_000
#: An acknowledgement carries at most this many offset ranges...
MAX_QUEUE_ACK_RANGES = 10_000
#: ...covering at most this many offsets in all (each offset is one state change).
MAX_QUEUE_ACK_OFFSETS = 100_000
#: A client refuses to wait for an answer body longer than this (the broker's fetch
#: answers stay near its fetch limit, one record at least).
MAX_QUEUE_ANSWER_BYTES = 64 * 1024 * 1024


class AckKind(enum.IntEnum):
    """An acknowledgement's ``u8 kind`` (Kafka's AcknowledgeType numbers)."""

    #: Processed: the record is done.
    ACCEPT = 1
    #: Not processed: the record becomes available again (a later fetch redelivers it
    #: with a higher delivery count, until the group's delivery count limit archives it).
    RELEASE = 2
    #: Unprocessable: the record is archived, never delivered again.
    REJECT = 3


@attrs.frozen
class QueueFetchRequest:
    """Type 15: acquire up to ``max_records`` records of one partition for this
    connection, waiting up to ``max_wait_ms`` for some to be available."""

    group_id: str
    topic: str
    partition: int
    max_records: int
    max_wait_ms: int = 0


@attrs.frozen
class AckRange:
    """Offsets ``first`` to ``last`` (inclusive), all acknowledged as ``kind``."""

    first: int
    last: int
    kind: AckKind


@attrs.frozen
class QueueAckRequest:
    """Type 16: acknowledge records this connection acquired (all ranges or none)."""

    group_id: str
    topic: str
    partition: int
    ranges: tuple[AckRange, ...]


@attrs.frozen
class DescribeShareGroupRequest:
    """Type 17: one share group's figures per partition."""

    group_id: str


@attrs.frozen
class ListShareGroupsRequest:
    """Type 18: every share group, summarised."""


QueueRequest = (
    QueueFetchRequest | QueueAckRequest | DescribeShareGroupRequest | ListShareGroupsRequest
)


@attrs.frozen
class QueueRecord:
    """One acquired record: a null key or value travels as size 0, as in LongPollFetch."""

    offset: int
    delivery_count: int
    key: bytes
    value: bytes


@attrs.frozen
class QueueFetchResponse:
    """A successful type-15 answer: the acquired records in offset order (possibly
    none when the wait ended first)."""

    records: tuple[QueueRecord, ...] = ()


@attrs.frozen
class QueueAckResponse:
    """A successful type-16 answer: every range was applied and is durable."""
