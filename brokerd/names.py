"""Validation of names that reach the filesystem or the wire.

Topic names follow Kafka's rule (what its ``Topic.validate`` accepts): one to 249
characters from ``[a-zA-Z0-9._-]``, and neither ``.`` nor ``..``. A topic name becomes a
directory name, so every path is built only from a name that passed this check.
Consumer group ids never become file names; they only get a length cap.
"""

from __future__ import annotations

import re

from brokerd.errors import InvalidTopic

MAX_TOPIC_LENGTH = 249
#: Kafka puts no rule on group ids; the cap keeps one hostile id from costing much memory.
MAX_GROUP_ID_LENGTH = 255

_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}\Z")


def validate_topic_name(name: str) -> str:
    """Return ``name`` if it is a legal topic name, else raise :class:`InvalidTopic`."""
    if name in (".", "..") or not _TOPIC_RE.match(name):
        shown = name if len(name) <= 64 else name[:64] + "..."
        raise InvalidTopic(
            f"invalid topic name {shown!r}: use 1-{MAX_TOPIC_LENGTH} characters of "
            "[a-zA-Z0-9._-], not '.' or '..'"
        )
    return name


#: The topics Kafka keeps for itself (consumer offsets, transaction state, share-group
#: state). brokerd stores that state in its own journals, never in topics of these names;
#: clients may neither create them nor write to them, as Kafka refuses them.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

#: Kafka's warning for a new topic whose name has '.' or '_' (metric names map both to '_').
COLLISION_WARNING = (
    "due to limitations in metric names, topics with a period ('.') or underscore ('_') "
    "could collide; to avoid issues it is best to use either, but not both"
)


def is_internal_topic(name: str) -> bool:
    """True for a name Kafka reserves for its internal topics."""
    return name in INTERNAL_TOPICS


def collision_key(name: str) -> str:
    """The name with every '.' as '_': two topics with the same key would share metric
    names, so only one of them may exist (Kafka's rule)."""
    return name.replace(".", "_")


def has_collision_chars(name: str) -> bool:
    """True if ``name`` has a '.' or '_' (the characters metric names conflate)."""
    return "." in name or "_" in name


def refuse_internal_topic(name: str, action: str) -> None:
    """Raise :class:`InvalidTopic` if ``name`` is internal; ``action`` says what the
    client tried ("create", "write to")."""
    if is_internal_topic(name):
        raise InvalidTopic(
            f"cannot {action} topic {name!r}: the name is reserved for Kafka's internal "
            f"topics ({', '.join(sorted(INTERNAL_TOPICS))})"
        )


def collision_error(name: str, existing: str) -> InvalidTopic:
    """The refusal of a new topic whose name collides with ``existing``."""
    return InvalidTopic(
        f"topic {name!r} collides with existing topic {existing!r}: names that differ "
        "only in '.' versus '_' cannot both exist (metric names would clash)"
    )
