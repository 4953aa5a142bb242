# -*- test-case-name: tests.core.share.test_dead_letters -*-
"""Share groups' dead-letter topics (KIP-1191): the records the share-partitions hand over
as dead letters, written to the group's ``errors.deadletterqueue.topic.name``.

One dead-letter record per archived offset, on partition ``source partition % the topic's
partitions``, its timestamp the time of writing, with Kafka's context headers:
``__dlq.errors.topic``, ``__dlq.errors.partition``, ``__dlq.errors.offset``,
``__dlq.errors.group``, ``__dlq.errors.delivery.count`` and ``__dlq.errors.message`` (why:
rejected by a client, or out of deliveries). With ``errors.deadletterqueue.copy.record.enable``
it carries the original key and value too (read committed from the log; an offset the log
no longer has gets the headers alone, as Kafka does).

Kafka's rules for the topic, checked on every write because configs change: the name must
not start with ``__``, must start with the broker's ``errors.deadletterqueue.topic.name.prefix``
(``dlq.`` by default; empty allows any), and an existing topic must have
``errors.deadletterqueue.group.enable=true``; a missing topic is created (with that config)
only if ``errors.deadletterqueue.auto.create.topics.enable`` is on. A dead letter the rules
refuse, or whose append fails, is archived unwritten, as Kafka archives it (logged, and
counted in :attr:`DeadLetterWriter.failed_total`).

What it does not do: decide which records are dead (:mod:`brokerd.core.share.partition`)
or when they are archived (:mod:`brokerd.core.share.service`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import attrs
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from brokerd.core.roles import HoldsReads
from brokerd.core.share.engine import GroupDeadLetters
from brokerd.core.share.partition import DeadLetter
from brokerd.storage.record.encode import RecordHeaders, encode_batch
from brokerd.storage.types import AppendInfo, Delivery, Isolation, LogRead, ReadSpec, TopicInfo

__all__ = [
    "DLQ_AUTO_CREATE",
    "DLQ_PREFIX",
    "DLQ_TOPIC_ENABLE",
    "DeadLetterCore",
    "DeadLetterRules",
    "DeadLetterWriter",
    "dead_letter_headers",
    "refusal",
]

#: The broker configs (Kafka's names) and the topic config of KIP-1191.
DLQ_PREFIX = "errors.deadletterqueue.topic.name.prefix"
DLQ_AUTO_CREATE = "errors.deadletterqueue.auto.create.topics.enable"
DLQ_TOPIC_ENABLE = "errors.deadletterqueue.group.enable"

#: Dead-letter records per appended batch: bounds one append's size (a whole rejected
#: batch of a few thousand records goes in several).
MAX_RECORDS_PER_BATCH = 500
#: Most bytes one copy-record read of the source log asks for.
COPY_READ_BYTES = 1 << 20

_DECODED = ReadSpec(Isolation.READ_COMMITTED, Delivery.RECORDS)


class DeadLetterCore(HoldsReads, Protocol):
    """What the writer needs of the broker: topics, creation, appends and reads. Implemented
    by :class:`~brokerd.core.broker.Broker`; a Protocol because the broker holds the share
    service (``brokerd.core`` imports ``brokerd.core.share``), so this package cannot import
    it back."""

    def topics(self) -> dict[str, TopicInfo]: ...

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> Deferred[None]: ...

    def produce_batches(
        self, topic: str, partition: int, data: bytes, *, acks: int = -1
    ) -> Deferred[AppendInfo]: ...


@attrs.frozen
class DeadLetterRules:
    """The broker's KIP-1191 configs (Kafka's defaults)."""

    #: Required prefix of dead-letter topic names ("" allows any).
    prefix: str = "dlq."
    #: Whether a missing dead-letter topic is created.
    auto_create: bool = False
    #: Partitions of a topic the writer creates (the broker's ``num.partitions``).
    partitions: int = 1


def refusal(name: str, topic: TopicInfo | None, rules: DeadLetterRules) -> str | None:
    """Why Kafka would not write to dead-letter topic ``name`` (None: it would)."""
    if not name:
        return "no dead-letter topic is configured"
    if name.startswith("__"):
        return f"dead-letter topic {name} starts with __"
    if rules.prefix and not name.startswith(rules.prefix):
        return f"dead-letter topic {name} does not start with the prefix {rules.prefix}"
    if topic is None:
        if not rules.auto_create:
            return f"dead-letter topic {name} does not exist and {DLQ_AUTO_CREATE} is off"
        return None
    if topic.configs.get(DLQ_TOPIC_ENABLE, "false").lower() != "true":
        return f"topic {name} does not have {DLQ_TOPIC_ENABLE}=true"
    return None


def dead_letter_headers(
    group: str, topic: str, partition: int, offset: int, letter: DeadLetter
) -> RecordHeaders:
    """Kafka's context headers of one dead-letter record (values as decimal text)."""
    return (
        ("__dlq.errors.topic", topic.encode()),
        ("__dlq.errors.partition", str(partition).encode()),
        ("__dlq.errors.offset", str(offset).encode()),
        ("__dlq.errors.group", group.encode()),
        ("__dlq.errors.delivery.count", str(letter.delivery_count).encode()),
        ("__dlq.errors.message", letter.reason.value.encode()),
    )


class DeadLetterWriter:
    """See the module docstring. ``now_ms``: wall-clock milliseconds (the records'
    timestamps: retention compares them with the wall clock)."""

    _log = Logger()

    def __init__(
        self, core: DeadLetterCore, rules: DeadLetterRules, now_ms: Callable[[], float]
    ) -> None:
        self._core = core
        self.rules = rules
        self._now_ms = now_ms
        #: Dead-letter records written, and dead letters archived unwritten.
        self.written_total = 0
        self.failed_total = 0

    async def write(self, letters: GroupDeadLetters) -> bool:
        """Write ``letters``: whether they were (never raises: a refusal or failure is
        logged and counted, and the caller archives the records all the same, as Kafka
        does)."""
        count = sum(d.last - d.first + 1 for d in letters.letters)
        try:
            await self._write(letters)
        except Exception as exc:  # Kafka archives on any failure
            self.failed_total += count
            self._log.warn(
                "share group {group}: dead letters of {topic}-{partition} not written: {why}",
                group=letters.group, topic=letters.topic, partition=letters.partition,
                why=str(exc) or type(exc).__name__,
            )
            return False
        self.written_total += count
        return True

    async def _write(self, letters: GroupDeadLetters) -> None:
        name = letters.dlq_topic
        info = self._core.topics().get(name)
        why = refusal(name, info, self.rules)
        if why is not None:
            raise ValueError(why)
        if info is None:
            await self._core.create_topic(
                name, self.rules.partitions,
                {DLQ_TOPIC_ENABLE: "true", "message.timestamp.type": "CreateTime"},
            )
            info = self._core.topics()[name]
        target = letters.partition % info.partitions
        for letter in letters.letters:
            first = letter.first
            while first <= letter.last:
                last = min(letter.last, first + MAX_RECORDS_PER_BATCH - 1)
                originals = (
                    await self._originals(letters.topic, letters.partition, first, last)
                    if letters.copy_record else {}
                )
                offsets = range(first, last + 1)
                keys: list[bytes | None] = []
                values: list[bytes | None] = []
                for offset in offsets:
                    key, value = originals.get(offset, (None, None))
                    keys.append(key)
                    values.append(value)
                batch = encode_batch(
                    values,
                    keys=keys,
                    timestamp_ms=int(self._now_ms()),
                    headers=[
                        dead_letter_headers(
                            letters.group, letters.topic, letters.partition, offset, letter
                        )
                        for offset in offsets
                    ],
                )
                await self._core.produce_batches(name, target, batch, acks=-1)
                first = last + 1

    async def _originals(
        self, topic: str, partition: int, first: int, last: int
    ) -> dict[int, tuple[bytes | None, bytes | None]]:
        """The key and value of the records ``first..last`` the log still has."""
        out: dict[int, tuple[bytes | None, bytes | None]] = {}
        at = first
        while at <= last:
            try:
                got = self._core.reads.read(topic, partition, at, COPY_READ_BYTES, _DECODED)
                read = got if isinstance(got, LogRead) else await got
            except Exception:  # gone from the log: headers only
                return out
            decoded = read.decoded or ()
            moved = False
            for record in decoded:
                if first <= record.offset <= last:
                    out[record.offset] = (record.key, record.value)
                if record.offset >= at:
                    at = record.offset + 1
                    moved = True
            if not decoded or not moved:
                break
        return out
