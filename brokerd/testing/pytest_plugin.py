"""The pytest plugin: a real brokerd for each test, loaded through the ``pytest11``
entry point once brokerd is installed.

Fixtures:

- ``brokerd``: a fresh broker (function scope) in the test's ``tmp_path``, on free ports;
  ``bootstrap_servers``, ``native_address``, ``data_dir``, ``kill()``, ``restart()``.
- ``brokerd_session``: one broker for the whole session (per xdist worker).
- ``brokerd_factory``: a callable starting as many brokers as a test needs, each with its
  own flags (``brokerd_factory(fsync="always")``); all stopped after the test.

Per-test broker flags: ``@pytest.mark.brokerd(fsync="always", authorizer="acl")`` sets
them for that test's ``brokerd`` (keywords as in :class:`~brokerd.testing.LaunchedBroker`).
A failing test's report carries the log of every broker it used.

Each test process keeps one fork server (:mod:`brokerd.testing.fork_server`), a
process that has imported the broker once and forks each fixture's broker, so that a
start after the first does not pay the imports; ``BROKERD_TEST_FORK_SERVER=0`` turns it
off (every broker is spawned cold).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from brokerd.testing.launcher import LaunchedBroker, close_fork_server, fork_server_wanted

#: The brokers a test used, by test item: their logs go into a failing test's report.
_USED: pytest.StashKey[list[LaunchedBroker]] = pytest.StashKey()
#: How much of a broker's log a failing report shows (its end).
LOG_TAIL_CHARS = 64 * 1024

BrokerFactory = Callable[..., LaunchedBroker]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "brokerd(**flags, args=()): broker flags for this test's `brokerd` fixture "
        "(e.g. fsync='always')",
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    # The server would exit anyway when this process does (its stdin closes).
    close_fork_server()


def _used(node: pytest.Item | Any) -> list[LaunchedBroker]:
    stash: pytest.Stash | None = getattr(node, "stash", None)
    if stash is None:
        return []
    return stash.setdefault(_USED, [])


def _stashed(stash: pytest.Stash) -> list[LaunchedBroker]:
    """A copy of the brokers noted in ``stash``."""
    found: list[LaunchedBroker] = stash.get(_USED, [])
    return list(found)


def _launch(directory: Path, flags: dict[str, Any], used: list[LaunchedBroker]) -> LaunchedBroker:
    broker = LaunchedBroker(directory / "data", fork_server=fork_server_wanted(), **flags)
    used.append(broker)
    return broker.start()


def _finish(broker: LaunchedBroker) -> None:
    try:
        broker.stop()
    finally:
        broker.kill()


@pytest.fixture
def brokerd(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LaunchedBroker]:
    """A fresh broker for this test: free ports, data in ``tmp_path``; flags from the
    test's ``@pytest.mark.brokerd(...)``."""
    flags: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("brokerd"))):
        flags.update(marker.kwargs)
    broker = _launch(tmp_path / "brokerd", flags, _used(request.node))
    try:
        yield broker
    finally:
        _finish(broker)


@pytest.fixture
def brokerd_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[BrokerFactory]:
    """Start brokers on demand, each with its own flags and data directory:
    ``brokerd_factory(fsync="always")``. All of them stop after the test."""
    started: list[LaunchedBroker] = []
    used = _used(request.node)

    def launch(**flags: Any) -> LaunchedBroker:
        directory = tmp_path / f"brokerd-{len(started)}"
        broker = LaunchedBroker(directory / "data", fork_server=fork_server_wanted(), **flags)
        started.append(broker)
        used.append(broker)
        return broker.start()

    try:
        yield launch
    finally:
        for broker in started:
            _finish(broker)


@pytest.fixture(scope="session")
def brokerd_session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LaunchedBroker]:
    """One broker for the whole session (each xdist worker has its own): for suites whose
    tests share a broker and name their topics apart."""
    broker = LaunchedBroker(
        tmp_path_factory.mktemp("brokerd-session") / "data", fork_server=fork_server_wanted()
    )
    request.config.stash.setdefault(_USED, []).append(broker)
    broker.start()
    try:
        yield broker
    finally:
        _finish(broker)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        brokers = _stashed(item.stash)
        if "brokerd_session" in getattr(item, "fixturenames", ()):
            brokers += _stashed(item.config.stash)
        for index, broker in enumerate(brokers):
            text = broker.log()
            if len(text) > LOG_TAIL_CHARS:
                text = "... (start cut)\n" + text[-LOG_TAIL_CHARS:]
            name = "brokerd log" if len(brokers) == 1 else f"brokerd log {index}"
            report.sections.append((f"{name} ({broker.log_path})", text))
    return report
