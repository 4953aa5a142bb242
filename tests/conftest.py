"""Shared fixtures: a real ``twistd broker`` process on loopback; the property tests'
settings; the ``broker`` marker that sorts the suite into the unit layer and the rest.

A test that starts a real broker process (this file's ``broker``/``make_broker``, the
plugin's ``brokerd`` fixtures, :class:`tests.brokerproc.BrokerProcess`, twistd by hand)
carries the ``broker`` marker, so ``pytest -m "not broker"`` is the fast unit layer. Tests
using the broker fixtures are marked here at collection; modules that spawn by hand say
``pytestmark = pytest.mark.broker``. An audit hook sees every process spawned and fails
the test (in its teardown) that starts a broker without the marker, so the layer cannot
silently grow a broker again. It sees this process's spawns only: a test whose brokers
start in a child process (a child pytest) is marked by hand.
"""

from __future__ import annotations

import functools
import importlib.metadata
import itertools
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark.expression import Expression
from hypothesis import settings

from tests.brokerproc import BrokerProcess

# ``pytester`` runs the plugin's own tests (tests/plugin) in a child pytest; pytest takes
# plugin lists only from this top-level conftest. The pytest plugin (fixture ``brokerd``)
# comes through its entry point once the project is installed; a checkout on PYTHONPATH
# beside an older install loads it by name.
pytest_plugins = ["pytester"]
if not any(
    ep.value == "brokerd.testing.pytest_plugin"
    for ep in importlib.metadata.entry_points(group="pytest11")
):
    pytest_plugins.append("brokerd.testing.pytest_plugin")

# Property tests draw new inputs each run; a failure prints the blob that replays it
# (``@reproduce_failure``), since a fresh checkout keeps no example database.
settings.register_profile("brokerd", print_blob=True)
settings.load_profile("brokerd")


# The fixtures that start a broker process; a test using any of them (directly or through
# another fixture: ``item.fixturenames`` is the closure) is marked ``broker``.
BROKER_FIXTURES = frozenset(
    {"broker", "make_broker", "brokerd", "brokerd_factory", "brokerd_session"}
)


# The rooms of whole real processes (docs/architecture.md, "The house"): a broker killed
# or starved, Kafka's own broker and tools, third-party frameworks. Every test there is
# marked, spawn or not (a crash loop of a storage child, a JVM peer): none is a unit test.
PROCESS_ROOMS = ("tests/e2e/", "tests/faults/")


@functools.cache
def deselects_every_broker_test(markexpr: str) -> bool:
    """Whether a ``-m`` expression is false for every test marked ``broker``, whatever
    its other markers (``not broker``, ``not broker and not slow``)."""
    if not markexpr:
        return False
    compiled = Expression.compile(markexpr)
    others = sorted(set(re.findall(r"[A-Za-z_]\w*", markexpr)) - {"and", "or", "not", "broker"})
    for values in itertools.product((False, True), repeat=len(others)):
        markers = frozenset({"broker", *(n for n, on in zip(others, values, strict=True) if on)})
        if compiled.evaluate(markers.__contains__):
            return False
    return True


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m "not broker"`` the process rooms are not even imported: every test there
    is marked ``broker`` (below), and their modules import the clients and tools of whole
    processes (a second or so of each test process's start)."""
    if not collection_path.is_dir() or not collection_path.is_relative_to(config.rootpath):
        return None
    rel = collection_path.relative_to(config.rootpath).as_posix() + "/"
    if rel.startswith(PROCESS_ROOMS) and deselects_every_broker_test(config.option.markexpr):
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ())) or (
            item.nodeid.startswith(PROCESS_ROOMS)
        ):
            item.add_marker(pytest.mark.broker)


def command_words(argv: object) -> list[str]:
    """A spawn's command line as words (a shell string is split on spaces)."""
    if isinstance(argv, (str, bytes)):
        return os.fsdecode(argv).split()
    if not isinstance(argv, (list, tuple)):
        return []
    return [os.fsdecode(a) if isinstance(a, (bytes, str, os.PathLike)) else str(a) for a in argv]


def is_broker_command(words: Sequence[str]) -> bool:
    """Whether a spawned command line runs the broker: twistd (as a script or by
    ``twisted.scripts.twistd``), possibly behind a wrapper such as prlimit, with the
    ``broker`` plugin as its subcommand."""
    return "broker" in words and any("twistd" in word for word in words)


# Broker spawns since the running test began (the audit hook appends, the runtest hook
# reads and clears); the hook stays installed for the whole session.
_spawned: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Both events carry the argument vector second: (executable, args, cwd, env) and
    # (path, argv, env).
    if event in ("subprocess.Popen", "os.posix_spawn"):
        words = command_words(args[1])
        if is_broker_command(words):
            _spawned.append(" ".join(words))


sys.addaudithook(_audit)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    # Setup, call and teardown all count: a module- or session-scoped fixture starts its
    # broker in the setup of the first test that asks for it.
    _spawned.clear()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    result = yield
    if _spawned and item.get_closest_marker("broker") is None:
        spawned = list(_spawned)
        _spawned.clear()
        raise AssertionError(
            f"{item.nodeid} started a broker process without the `broker` marker "
            f"(mark the test `@pytest.mark.broker`, or its module `pytestmark = "
            f"pytest.mark.broker`): {spawned[0]}"
        )
    return result


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A started broker with both listeners, fsync always, data under ``tmp_path``."""
    proc = BrokerProcess(tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[object]:
    """Factory for brokers with extra options; all are killed at teardown."""
    started: list[BrokerProcess] = []

    def make(*args: str, kafka: bool = True, name: str = "data") -> BrokerProcess:
        proc = BrokerProcess(tmp_path / name, kafka=kafka, args=args)
        started.append(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.kill()
