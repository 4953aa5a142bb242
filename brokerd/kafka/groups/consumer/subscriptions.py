"""Which topics a consumer-protocol member subscribes to: by names, or by a regular
expression matched against every topic name (``SubscribedTopicRegex``).

Kafka compiles subscription regexes with RE2/J; brokerd uses Python's :mod:`re` with
``fullmatch`` (the whole topic name must match, as in Kafka). The two agree on the
common syntax (classes, alternation, repetition, anchors); RE2-only or Python-only
constructs (Python's look-arounds and back-references, which RE2 refuses) are not
rejected the way Kafka would reject them. Internal topics (``__`` prefixed) never match
a regex, as in Kafka. Compiled patterns are cached, bounded.

Pure: no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

#: Longest regex accepted (Kafka has no stated bound; this keeps compilation bounded).
MAX_REGEX_LENGTH = 1024


class InvalidRegex(ValueError):
    """A subscription regex that does not compile."""


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re.Pattern[str]:
    if len(pattern) > MAX_REGEX_LENGTH:
        raise InvalidRegex(f"SubscribedTopicRegex longer than {MAX_REGEX_LENGTH} characters")
    try:
        return re.compile(pattern)
    except re.error as e:
        raise InvalidRegex(f"SubscribedTopicRegex `{pattern}` is not a valid regular "
                           f"expression: {e}") from None


def matching_topics(pattern: str, topics: Iterable[str]) -> set[str]:
    compiled = compile_regex(pattern)
    return {t for t in topics if not t.startswith("__") and compiled.fullmatch(t)}


def subscribed(names: Iterable[str], regex: str | None, topics: Iterable[str]) -> set[str]:
    """The existing topics a member with these subscriptions consumes."""
    existing = set(topics)
    found = {n for n in names if n in existing}
    if regex is not None:
        found |= matching_topics(regex, existing)
    return found


__all__ = ["MAX_REGEX_LENGTH", "InvalidRegex", "compile_regex", "matching_topics", "subscribed"]
