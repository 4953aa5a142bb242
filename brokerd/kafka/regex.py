# -*- test-case-name: tests.kafka.test_regex -*-
"""Regular expressions that clients send: a consumer-protocol member's
``SubscribedTopicRegex`` (KIP-848) and ListTransactions' ``TransactionalIdPattern``
(KIP-1152), compiled and matched by RE2 (the ``google-re2`` binding), as Kafka does with
RE2/J.

RE2 matches in time linear in the text, whatever the pattern, so no pattern can make a
match backtrack: ``"^" + ".{0,249}" * 16 + "x"`` against a 30-character name takes
microseconds. What RE2 refuses (back-references, look-arounds, possessive quantifiers) is
:class:`InvalidRegex`, as RE2/J refuses it; the clients' messages are RE2's. Kafka's
semantics: the whole text must match (RE2/J's ``matches()``). RE2 and RE2/J share their
syntax, Java's ``\\Q...\\E`` and named groups ``(?<name>...)`` included.

Compiling is what still costs: RE2 expands counted repetitions, and building a program
of tens of thousands of instructions takes tens of milliseconds, holding the GIL. Two
bounds keep it short: a pattern of at most :data:`MAX_REGEX_LENGTH` characters, and
RE2's own memory budget :data:`MAX_PROGRAM_MEMORY` (a pattern whose program does not fit
is refused, "pattern too large"). Compiled patterns are cached, so a member heartbeating
with the same regex compiles it once. :attr:`Regex.cost` tells callers that match many
texts how much one match may cost, to cut their work into bounded slices.

Pure: no I/O, no Twisted.
"""

from __future__ import annotations

import functools
from typing import Any

import attrs
import re2

__all__ = [
    "MAX_PROGRAM_MEMORY",
    "MAX_REGEX_LENGTH",
    "SLICE_COST",
    "InvalidRegex",
    "Regex",
    "compile_regex",
]

#: Longest pattern accepted, in characters. Kafka states none; this bounds parsing, and
#: leaves room for clients that join many subscriptions into one alternation.
MAX_REGEX_LENGTH = 4096
#: RE2's ``max_mem``: the memory a compiled program may take. 1 MiB holds programs of
#: about 36,000 instructions (``.{0,249}`` sixteen times), which compile in about 40 ms;
#: RE2's default of 8 MiB lets one pattern hold the reactor for most of a second.
MAX_PROGRAM_MEMORY = 1 << 20


#: The matching work one slice may do before the reactor serves others, in RE2
#: instruction-characters (program size times text length, the NFA's worst case; RE2's
#: DFA usually does far less): a few milliseconds.
SLICE_COST = 1_000_000


class InvalidRegex(ValueError):
    """A pattern RE2 does not compile, or one over the bounds (the message says which):
    Kafka's INVALID_REGULAR_EXPRESSION."""


def _options() -> Any:
    options = re2.Options()
    options.max_mem = MAX_PROGRAM_MEMORY
    # Matches only say yes or no: no capture groups to track.
    options.never_capture = True
    # A refused pattern is the client's mistake, not the broker's: no stderr log.
    options.log_errors = False
    return options


_OPTIONS = _options()


@attrs.frozen
class Regex:
    """A compiled pattern."""

    pattern: str
    #: RE2's program size: the work of one match, per character of text, at worst.
    cost: int
    _compiled: Any = attrs.field(repr=False, eq=False)

    def fullmatch(self, text: str) -> bool:
        """Whether the whole of ``text`` matches (RE2/J's ``matches()``)."""
        return self._compiled.fullmatch(text) is not None

    def work(self, text: str) -> int:
        """The most RE2 work matching ``text`` can take, in :data:`SLICE_COST` units."""
        return self.cost * (len(text) + 1)


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> Regex:
    """``pattern`` compiled, or :class:`InvalidRegex` (refusals are not cached: they
    cost no more than the compile that failed)."""
    if len(pattern) > MAX_REGEX_LENGTH:
        raise InvalidRegex(f"`{_shown(pattern)}` is longer than {MAX_REGEX_LENGTH} characters")
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        why = e.args[0] if e.args else ""
        if isinstance(why, bytes):
            why = why.decode("utf-8", "replace")
        raise InvalidRegex(
            f"`{_shown(pattern)}` is not a valid regular expression: {why}"
        ) from None
    return Regex(pattern, compiled.programsize, compiled)


def _shown(pattern: str) -> str:
    """The pattern as an error message quotes it (a long one cut short)."""
    return pattern if len(pattern) <= 200 else pattern[:200] + "..."
