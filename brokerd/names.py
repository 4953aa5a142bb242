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
