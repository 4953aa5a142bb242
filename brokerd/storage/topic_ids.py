"""Topic IDs: the 128-bit identity a topic keeps for its whole life (pure, no I/O).

A topic's name can be reused after a delete; its ID cannot. Clients that cache a topic
(its partition count, their fetch positions) compare IDs to notice that the topic they
knew is gone and a new one took its name, so an ID is random, drawn once when the topic
is created, stored with it in the registry, and never derived from the name.

Kafka's rules, which clients rely on: a random (version 4) UUID, never the all-zero
UUID (the wire's "no ID") nor the one reserved for Kafka's metadata topic, and never one
whose text form starts with '-' (the tools would read it as an option). The text form is
Kafka's: the 16 bytes in URL-safe base64 without padding (22 characters), as
``kafka-topics.sh --describe`` shows it.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Callable, Container

__all__ = [
    "RESERVED_TOPIC_IDS",
    "ZERO_TOPIC_ID",
    "format_topic_id",
    "new_topic_id",
    "parse_topic_id",
]

#: The wire's "no topic ID".
ZERO_TOPIC_ID = uuid.UUID(int=0)
#: IDs never given to a topic: none, and the one Kafka reserves for its metadata topic.
RESERVED_TOPIC_IDS = frozenset({ZERO_TOPIC_ID, uuid.UUID(int=1)})
#: Characters of the text form.
_TEXT_CHARS = 22


def format_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's text form: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def parse_topic_id(text: str) -> uuid.UUID:
    """The ID a text form names; raises ValueError for anything else."""
    if not isinstance(text, str) or len(text) != _TEXT_CHARS:
        raise ValueError(f"topic ID {text!r} is not {_TEXT_CHARS} base64url characters")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"topic ID {text!r} is not base64url") from exc
    # b64decode ignores nothing in urlsafe mode but accepts non-canonical trailing bits.
    if len(raw) != 16 or format_topic_id(uuid.UUID(bytes=raw)) != text:
        raise ValueError(f"topic ID {text!r} is not base64url of 16 bytes")
    return uuid.UUID(bytes=raw)


def new_topic_id(
    taken: Container[uuid.UUID] = frozenset(),
    draw: Callable[[], uuid.UUID] = uuid.uuid4,
) -> uuid.UUID:
    """A fresh ID: random, not reserved, not starting with '-', and not in ``taken``
    (the IDs of the other topics; a repeat of 122 random bits is not expected, but a
    duplicate would make two topics one)."""
    while True:
        candidate = draw()
        if (
            candidate not in RESERVED_TOPIC_IDS
            and candidate not in taken
            and not format_topic_id(candidate).startswith("-")
        ):
            return candidate
