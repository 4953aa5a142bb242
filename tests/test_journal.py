"""brokerd.journal: the journald ``--logger``'s line format."""

from __future__ import annotations

import io
import sys

import pytest
from twisted.logger import LogLevel
from twisted.python.failure import Failure

from brokerd.journal import _line, observer


def test_line_has_priority_and_namespace_per_line() -> None:
    event = {"log_format": "one\ntwo {x}", "x": 3, "log_level": LogLevel.warn,
             "log_namespace": "brokerd.core"}
    assert _line(event) == "<4>brokerd.core: one\n<4>brokerd.core: two 3\n"


def test_line_defaults_unknown_level_to_info_and_namespace_to_dash() -> None:
    assert _line({"log_format": "hi"}) == "<6>-: hi\n"
    assert _line({"log_format": "", "log_level": LogLevel.critical}) == "<2>-: \n"


def test_line_appends_failure_traceback() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        failure = Failure()
    text = _line({"log_format": "bad", "log_level": LogLevel.error, "log_failure": failure,
                  "log_namespace": "n"})
    lines = text.splitlines()
    assert lines[0] == "<3>n: bad"
    assert all(line.startswith("<3>n: ") for line in lines)
    assert any("RuntimeError: boom" in line for line in lines)


def test_observer_writes_lines_to_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    observer()({"log_format": "x", "log_level": LogLevel.debug, "log_namespace": "a"})
    assert out.getvalue() == "<7>a: x\n"
