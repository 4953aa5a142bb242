"""The ``broker`` marker's check (tests/conftest.py): a test that spawns a broker command
line without the marker fails in its teardown, naming the test and the command; with the
marker it passes; and which command lines count as a broker."""

from __future__ import annotations

import sys

import pytest

from tests.brokerproc import REPO
from tests.conftest import command_words, is_broker_command

SPAWNING_FILE = f'''
import subprocess
import pytest

# Not a broker: an interpreter that exits at once, with a broker's words on its line.
COMMAND = [{sys.executable!r}, "-c", "pass", "twistd", "--nodaemon", "broker"]


def test_unmarked():
    subprocess.run(COMMAND, check=True)


@pytest.mark.broker
def test_marked():
    subprocess.run(COMMAND, check=True)


def test_no_spawn():
    pass
'''


def test_a_broker_spawned_without_the_marker_fails_its_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A child pytest with this suite's conftest as a plugin (a child: the reactor
    # pytest-twisted runs here is this session's).
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_spawning=SPAWNING_FILE)
    result = pytester.runpytest_subprocess("-p", "tests.conftest", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines([
        "*test_unmarked started a broker process without the `broker` marker*twistd*broker*",
    ])


@pytest.mark.parametrize(
    ("argv", "broker"),
    [
        (["/venv/bin/twistd", "--nodaemon", "broker", "--data-dir=d"], True),
        ([sys.executable, "-c", "from twisted.scripts.twistd import run; run()", "broker"], True),
        (["prlimit", "--nofile=64", "--", "/venv/bin/twistd", "broker"], True),
        ("twistd --nodaemon broker --data-dir d", True),
        (["/venv/bin/twistd", "--help"], False),
        (["brokerctl", "produce", "t"], False),
        (["java", "-cp", "lib/*", "brokerd.judge.Main", "broker"], False),
    ],
)
def test_which_command_lines_start_a_broker(argv: object, broker: bool) -> None:
    assert is_broker_command(command_words(argv)) is broker


def test_the_process_rooms_are_left_uncollected_only_when_broker_tests_are_deselected() -> None:
    from tests.conftest import deselects_every_broker_test

    for expr in ("not broker", "not broker and not slow", "not (broker or clients)"):
        assert deselects_every_broker_test(expr), expr
    for expr in ("", "not slow", "broker", "slow or not broker", "not clients"):
        assert not deselects_every_broker_test(expr), expr
