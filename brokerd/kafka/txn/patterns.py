# -*- test-case-name: tests.kafka.server.handlers.test_txn -*-
"""The transactional-id pattern of ListTransactions v2+ (KIP-1152), compiled for Python's
``re``.

Kafka matches the pattern with RE2J, whose matching time is linear in the id. Python's
``re`` backtracks, so a pattern that is harmless to RE2 can take exponential time and
stall the reactor. :func:`compile_bounded` therefore refuses, beside what does not
compile, what RE2 refuses too (back-references, lookaround) and the shapes whose
backtracking can explode: a repetition inside a repeated group, or an alternation inside
one (``(a+)+``, ``(a|aa)*``). Without nested repetition a match costs at most a
polynomial of the id's length, and ids are bounded.

Pure: no I/O, no Twisted.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

__all__ = ["MAX_PATTERN_LENGTH", "PatternRefused", "compile_bounded"]

#: Longest pattern accepted, in characters (Kafka sets no limit; RE2J's own is its memory).
MAX_PATTERN_LENGTH = 1024

# ``re``'s parser: its parse tree is what the checks below walk (typeshed has no stubs
# for the package form, and the old ``sre_parse`` alias warns on import).
_parser: Any = importlib.import_module("re._parser")
_c = _parser  # the opcode constants are re-exported there
_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT)
_REFUSED = {
    _c.GROUPREF: "a back-reference",
    _c.GROUPREF_EXISTS: "a conditional group",
    _c.ASSERT: "a lookahead or lookbehind",
    _c.ASSERT_NOT: "a negative lookahead or lookbehind",
}


class PatternRefused(ValueError):
    """A pattern that does not compile or that brokerd does not run (the message says
    which)."""


def compile_bounded(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled, or :class:`PatternRefused`."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternRefused(f"pattern longer than {MAX_PATTERN_LENGTH} characters")
    try:
        tree = _parser.parse(pattern)
    except re.error as e:
        raise PatternRefused(f"invalid pattern: {e}") from e
    _check(tree, repeated=False)
    try:
        return re.compile(pattern)
    except re.error as e:  # pragma: no cover - parse() accepted it
        raise PatternRefused(f"invalid pattern: {e}") from e


def _check(items: Any, *, repeated: bool) -> None:
    """Walk a parse tree (a list of ``(opcode, argument)``); ``repeated``: inside a
    repetition of more than once."""
    for op, arg in items:
        if op in _REFUSED:
            raise PatternRefused(f"{_REFUSED[op]} is not supported")
        if op in _REPEATS:
            _low, high, body = arg
            many = high > 1
            if many and repeated:
                raise PatternRefused("a repetition inside a repeated group is not supported")
            _check(body, repeated=repeated or many)
        elif op is _c.SUBPATTERN:
            _check(arg[-1], repeated=repeated)
        elif op is _c.BRANCH:
            if repeated:
                raise PatternRefused("an alternation inside a repeated group is not supported")
            for branch in arg[1]:
                _check(branch, repeated=False)
        elif op is _c.ATOMIC_GROUP:
            _check(arg, repeated=repeated)
