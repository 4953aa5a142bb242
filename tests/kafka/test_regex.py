"""Linear-time matching of the regexes clients send (:mod:`brokerd.kafka.regex`): the
hostile patterns of the issue that backtracking engines take a minute on."""

from __future__ import annotations

import time

from brokerd.kafka.regex import compile_regex

#: The issue's patterns: backtracking engines take 68 s and 19.5 s on these names.
HOSTILE_16 = "^" + ".{0,249}" * 16 + "x"
HOSTILE_8 = "^" + ".{0,249}" * 8 + "x"


def test_the_issue_patterns_match_fast_and_right() -> None:
    started = time.monotonic()
    sixteen = compile_regex(HOSTILE_16)
    assert not sixteen.fullmatch("a" * 30)
    assert sixteen.fullmatch("a" * 29 + "x")
    eight = compile_regex(HOSTILE_8)
    assert not eight.fullmatch("a" * 60)
    assert eight.fullmatch("a" * 59 + "x")
    # Generous: a backtracking engine takes minutes here, RE2 milliseconds.
    assert time.monotonic() - started < 10
