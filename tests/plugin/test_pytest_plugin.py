"""The pytest plugin on itself: a child pytest runs a test file that uses the ``brokerd``
fixture with confluent-kafka (produce, group consume, kill, restart, read again), once
alone and once under ``pytest -n 2``; a failing test's report carries the broker's log."""

from __future__ import annotations

import importlib.metadata
import time
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")

# The brokers start in the child pytest, where tests/conftest.py's spawn check cannot see
# them: marked by hand.
pytestmark = pytest.mark.broker

#: The plugin by name when the installed project predates its entry point.
PLUGIN_ARGS: tuple[str, ...] = (
    ()
    if any(
        ep.value == "brokerd.testing.pytest_plugin"
        for ep in importlib.metadata.entry_points(group="pytest11")
    )
    else ("-p", "brokerd.testing.pytest_plugin")
)

#: What a project's test file looks like (docs/testing-with-brokerd.md shows it too).
CRASH_TEST = (Path(__file__).parent / "crash_example.py").read_text()

SECOND_FILE = '''
import os
from pathlib import Path

import pytest
from brokerd.testing.launcher import current_fork_server
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient


@pytest.mark.brokerd(fsync="always", default_partitions=3)
def test_marker_flags(brokerd):
    producer = Producer({"bootstrap.servers": brokerd.bootstrap_servers})
    producer.produce("events", value=b"x")
    assert producer.flush(10) == 0
    topics = AdminClient({"bootstrap.servers": brokerd.bootstrap_servers}).list_topics(
        timeout=10).topics
    assert len(topics["events"].partitions) == 3


def test_two_brokers(brokerd_factory):
    first, second = brokerd_factory(), brokerd_factory()
    assert first.bootstrap_servers != second.bootstrap_servers
    assert first.data_dir != second.data_dir
    # Both forked by this worker's fork server.
    assert first.forked and second.forked
    server = current_fork_server()
    assert server is not None and server.alive
    (Path(__file__).parent / f"server-{os.getpid()}.pid").write_text(str(server.proc.pid))
'''


def test_crash_test_file_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_crash=CRASH_TEST)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_under_xdist(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    monkeypatch.setenv("BROKERD_TEST_FORK_SERVER", "1")  # the second file checks it
    pytester.makepyfile(test_crash=CRASH_TEST, test_more=SECOND_FILE)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-q", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    # The worker's fork server ended with the session.
    (noted,) = pytester.path.glob("server-*.pid")
    deadline = time.monotonic() + 10
    while Path(f"/proc/{int(noted.read_text())}").exists():
        assert time.monotonic() < deadline, "the fork server outlived the test session"
        time.sleep(0.05)


def test_failing_report_carries_the_log(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fails="""
def test_fails(brokerd):
    assert brokerd.native_address == "nowhere"
"""
    )
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*brokerd log*", "*data directory*fsync never*"])
