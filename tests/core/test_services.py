"""After a crash the broker serves once recovery validated the logs, and syncs what
recovery left unsynced in the background, then checkpoints: the service's scheduling
(with a fake log directory and synchronous runners) and a real broker killed with -9."""

from __future__ import annotations

import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer
from twisted.trial.unittest import SynchronousTestCase

from brokerd.core.services import LogDirectoryService
from brokerd.core.topics import TopicRegistry
from brokerd.storage.checkpoints import parse_checkpoint
from brokerd.storage.logdir.layout import CHECKPOINT_FILE

from tests.brokerproc import BrokerProcess


class FakeLogDir:
    """The part of a LogDirectory the service uses at start (``path`` starts empty: no
    empty-producers file)."""

    was_clean = False

    def __init__(self, unsynced: int, sync_ok: bool = True) -> None:
        # A real directory: a stop writes its empty-producers file there.
        self.path = tempfile.mkdtemp(prefix="brokerd-fake-logdir-")
        weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)
        self.unsynced = unsynced
        self.sync_ok = sync_ok
        self.calls: list[str] = []

    def logs(self) -> Mapping[tuple[str, int], Any]:
        return {}

    def unsynced_partitions(self) -> int:
        return self.unsynced

    def sync_recovered(self) -> bool:
        self.calls.append("sync")
        if self.sync_ok:
            self.unsynced = 0
        return self.sync_ok

    def checkpoint(self) -> None:
        self.calls.append("checkpoint")


class Held:
    """Runs write jobs when the test says so."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Callable[[], Any], defer.Deferred[Any]]] = []

    def __call__(self, f: Callable[..., Any], *args: Any) -> defer.Deferred[Any]:
        d: defer.Deferred[Any] = defer.Deferred()
        self.jobs.append((lambda: f(*args), d))
        return d

    def run_all(self) -> None:
        while self.jobs:
            f, d = self.jobs.pop(0)
            d.callback(f())


def service(logdir: FakeLogDir, runner: Held) -> LogDirectoryService:
    registry = TopicRegistry.__new__(TopicRegistry)
    return LogDirectoryService(logdir, registry, run_write=runner)  # type: ignore[arg-type]


class ServiceTests(SynchronousTestCase):
    def test_after_a_crash_sync_then_checkpoint_in_the_write_pool(self) -> None:
        logdir, runner = FakeLogDir(3), Held()
        svc = service(logdir, runner)
        svc.snapshot_producers = lambda: defer.succeed(None)  # type: ignore[method-assign]
        svc.startService()
        # Nothing ran in the reactor thread: the start does not wait for the sync.
        self.assertEqual(logdir.calls, [])
        self.assertEqual(len(runner.jobs), 1)
        runner.run_all()
        self.assertEqual(logdir.calls, ["sync", "checkpoint"])

    def test_clean_start_schedules_nothing(self) -> None:
        logdir, runner = FakeLogDir(0), Held()
        service(logdir, runner).startService()
        self.assertEqual(runner.jobs, [])
        self.assertEqual(logdir.calls, [])


@pytest.mark.broker
def test_kill9_restart_serves_everything_and_checkpoints_after_the_sync(
    tmp_path: Path,
) -> None:
    proc = BrokerProcess(tmp_path / "data", args=("--fsync=never",)).start()
    try:
        with proc.client() as client:
            client.create_topic("r", 4)
            for p in range(4):
                for i in range(30):
                    client.produce("r", p, [b"%d-%d" % (p, i) * 50] * 10)
        proc.kill()
        proc.start()
        with proc.client() as client:
            for p in range(4):
                assert client.list_offsets("r", p)[1] == 300
        # The background sync, then a checkpoint with the recovered ends.
        checkpoint = proc.data_dir / CHECKPOINT_FILE
        deadline = time.monotonic() + 30
        found: dict[tuple[str, int], int] = {}
        while time.monotonic() < deadline:
            found = parse_checkpoint(checkpoint.read_bytes()) if checkpoint.exists() else {}
            if found == {("r", p): 300 for p in range(4)}:
                break
            time.sleep(0.1)
        assert found == {("r", p): 300 for p in range(4)}
        assert "not clean (logs recovered)" in proc.log()
    finally:
        proc.stop()
