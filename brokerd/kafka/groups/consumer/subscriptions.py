"""Which topics a consumer-protocol member subscribes to: by names, or by a regular
expression matched against every topic name (``SubscribedTopicRegex``).

Kafka compiles subscription regexes with RE2/J; brokerd uses Python's :mod:`re` with
``fullmatch`` (the whole topic name must match, as in Kafka). The two agree on the
common syntax (classes, alternation, repetition, anchors). RE2 matches in linear time;
a backtracking engine does not, and a client's pattern runs on the reactor, so
:func:`compile_regex` refuses what could take it exponential or high polynomial time:
back-references and look-arounds (RE2 refuses those too), a repetition inside a
repetition or an alternation inside one (``(a+)+``, ``(a|ab)*``), and more than
:data:`MAX_UNBOUNDED_REPEATS` unbounded repetitions (``.*``, ``+``, ``{n,}``) in all.
Internal topics (``__`` prefixed) never match a regex, as in Kafka. Compiled patterns
and each (pattern, topic) answer are cached, bounded, so a heartbeat costs a lookup per
topic.

Pure: no I/O.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterable
from typing import Any

#: Longest regex accepted (Kafka has no stated bound; this keeps compilation bounded).
MAX_REGEX_LENGTH = 1024
#: Unbounded repetitions a pattern may hold: with topic names of at most 249 characters,
#: three keep the worst case of a failing match near 249**3 steps (once per topic: the
#: answers are cached), and still take ``[a-z]+-[a-z]+-.*``.
MAX_UNBOUNDED_REPEATS = 3

# The parser of :mod:`re` (no public API gives the parse tree; typed loosely).
_parser: Any = importlib.import_module("re._parser")
_constants: Any = importlib.import_module("re._constants")
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
_REFUSED = {
    "GROUPREF": "back-references",
    "GROUPREF_EXISTS": "conditional groups",
    "ASSERT": "look-arounds",
    "ASSERT_NOT": "look-arounds",
}


class InvalidRegex(ValueError):
    """A subscription regex that does not compile."""


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re.Pattern[str]:
    if len(pattern) > MAX_REGEX_LENGTH:
        raise InvalidRegex(f"SubscribedTopicRegex longer than {MAX_REGEX_LENGTH} characters")
    try:
        compiled = re.compile(pattern)
        tree = _parser.parse(pattern)
    except re.error as e:
        raise InvalidRegex(f"SubscribedTopicRegex `{pattern}` is not a valid regular "
                           f"expression: {e}") from None
    problem = _too_costly(tree)
    if problem is not None:
        raise InvalidRegex(f"SubscribedTopicRegex `{pattern}` is refused: {problem}")
    return compiled


def _children(op: str, av: Any) -> list[Any]:
    """The sub-patterns one parse node holds."""
    if op in _REPEATS:
        return [av[2]]
    if op == "SUBPATTERN":
        return [av[3]]
    if op == "BRANCH":
        return list(av[1])
    if op == "ATOMIC_GROUP":
        return [av]
    return []


def _too_costly(tree: Any) -> str | None:
    unbounded = 0

    def walk(sub: Any, in_repeat: bool) -> str | None:
        nonlocal unbounded
        for raw_op, av in sub:
            op = str(raw_op)
            if op in _REFUSED:
                return f"{_REFUSED[op]} are not supported (RE2 has none)"
            repeats = op in _REPEATS and av[1] > 1
            if repeats and av[1] == _constants.MAXREPEAT:
                unbounded += 1
            if in_repeat and (repeats or op == "BRANCH"):
                return ("a repetition or alternation inside a repetition can take "
                        "exponential time")
            for child in _children(op, av):
                found = walk(child, in_repeat or repeats)
                if found is not None:
                    return found
        return None

    found = walk(tree, False)
    if found is None and unbounded > MAX_UNBOUNDED_REPEATS:
        found = f"more than {MAX_UNBOUNDED_REPEATS} unbounded repetitions"
    return found


@functools.lru_cache(maxsize=65536)
def _matches(pattern: str, topic: str) -> bool:
    return compile_regex(pattern).fullmatch(topic) is not None


def matching_topics(pattern: str, topics: Iterable[str]) -> set[str]:
    compile_regex(pattern)  # refuses a pattern that is not accepted
    return {t for t in topics if not t.startswith("__") and _matches(pattern, t)}


def subscribed(names: Iterable[str], regex: str | None, topics: Iterable[str]) -> set[str]:
    """The existing topics a member with these subscriptions consumes."""
    existing = set(topics)
    found = {n for n in names if n in existing}
    if regex is not None:
        found |= matching_topics(regex, existing)
    return found


__all__ = [
    "MAX_REGEX_LENGTH",
    "MAX_UNBOUNDED_REPEATS",
    "InvalidRegex",
    "compile_regex",
    "matching_topics",
    "subscribed",
]
