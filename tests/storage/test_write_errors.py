"""Rate-limited logging of storage faults: the first line of a window, then a count."""

from __future__ import annotations

import pytest

from brokerd.storage.write_errors import WRITE_ERROR_LOG_SECONDS, RateLimitedLog, WriteErrorLog


def test_write_error_log_reports_suppressed_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    errors = WriteErrorLog("t-0", lambda: now[0])
    for _ in range(4):
        errors.report(OSError(28, "No space left on device"))
    now[0] += WRITE_ERROR_LOG_SECONDS
    errors.report(OSError(28, "No space left on device"))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "3 more failed appends not logged" in messages[1]


def test_the_first_fault_is_logged_and_the_window_counts_from_the_last_line() -> None:
    now = [0.0]
    lines: list[str] = []
    faults = RateLimitedLog("store x", lambda: now[0], emit=lines.append)
    assert faults.error("disk full") is True
    now[0] = WRITE_ERROR_LOG_SECONDS - 0.5
    assert faults.error("disk full") is False
    now[0] = WRITE_ERROR_LOG_SECONDS
    assert faults.error("still full") is True
    now[0] = 2 * WRITE_ERROR_LOG_SECONDS
    assert faults.error("again") is True
    assert lines == [
        "store x: disk full",
        "store x: still full (1 more faults not logged in the last"
        f" {WRITE_ERROR_LOG_SECONDS:.0f} s)",
        "store x: again",
    ]
