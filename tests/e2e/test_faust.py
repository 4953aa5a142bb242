"""Faust, unmodified, against a real ``twistd broker``: a table app
(tests/apps/faust_table.py) whose changelog topic Faust creates with
``cleanup.policy=compact`` processes events, is stopped, restarted and killed, and every
time comes back with every key's latest value restored from the compacted changelog,
including a key last written longer ago than the broker's default retention.

The broker runs with the options of :data:`tests.control_plane_helpers.FAST_CLEANUP_OPTIONS`
(2 s default retention, segments rolling every 0.5 s, frequent retention and cleaner
passes), so a changelog that the broker wrongly treated as a "delete" topic would lose
the old key within seconds. The worker is a separate process (the project's Python, where
``faust-streaming`` is a test extra), queried over Faust's own web server.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokerproc import REPO, BrokerProcess
from tests.control_plane_helpers import (
    KeyValue,
    confluent,
    create_topic,
    fast_broker,
    iter_keyed,
    latest_per_key,
    produce_keyed,
)
from tests.faust_process import FaustProcess
from tests.kafka_helpers import WAIT, crash_and_restart

pytestmark = [pytest.mark.clients, pytest.mark.broker]

APP = REPO / "tests" / "apps" / "faust_table.py"
#: A worker's start: joining the group, creating topics, recovering the table.
START_WAIT = 60.0
#: Seconds past the broker's default retention (2 s) and segment age (0.5 s).
PAST_RETENTION = 3.0


class FaustWorker(FaustProcess):
    """``faust_table.py worker`` as a child process, logging to a file."""

    def __init__(self, broker: BrokerProcess, workdir: Path, app_id: str) -> None:
        super().__init__(APP, broker, workdir, app_id, log_name="faust-worker.log")

    def start(self) -> FaustWorker:
        super().start()
        return self

    def table(self) -> dict[str, str] | None:
        """The table as the worker's web view shows it; None while it is not serving."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.web_port}/table", timeout=2
            ) as reply:
                body = json.loads(reply.read())
        except (OSError, urllib.error.URLError, ValueError):
            return None
        table: dict[str, str] = body["table"]
        return table

    def wait_table(self, want: dict[str, str], what: str, timeout: float = START_WAIT) -> None:
        """Wait until the worker serves exactly ``want``; fail with the worker's log if it
        exits or the table differs after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        got: dict[str, str] | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"{what}: the Faust worker exited with {self.proc.returncode}; "
                    f"log:\n{self.log_tail()}"
                )
            got = self.table()
            if got == want:
                return
            time.sleep(0.2)
        if got is None:
            detail = "the worker never served its table"
        else:
            wrong = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
            extra = sorted(set(got) - set(want))
            detail = f"{len(wrong)} keys wrong (got, want): {dict(list(wrong.items())[:5])}"
            detail += f"; unexpected keys {extra[:5]}" if extra else ""
        raise AssertionError(f"{what} after {timeout:.0f}s: {detail}; log:\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM: Faust's clean shutdown (commits, leaves the group)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"Faust ignored SIGTERM; log:\n{self.log_tail()}") from None



@pytest.fixture
def fast(tmp_path: Path) -> Iterator[BrokerProcess]:
    if importlib.util.find_spec("faust") is None:
        pytest.skip("faust-streaming is not installed (a test extra: `make install`)")
    confluent()
    proc = fast_broker(tmp_path / "data")
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def worker(fast: BrokerProcess, tmp_path: Path) -> Iterator[FaustWorker]:
    workdir = tmp_path / "faust"
    workdir.mkdir()
    faust_worker = FaustWorker(fast, workdir, "brokerd-table")
    try:
        yield faust_worker
    finally:
        with contextlib.suppress(Exception):
            faust_worker.kill()


def as_table(produced: list[KeyValue]) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in latest_per_key(produced).items()}


def test_faust_table_is_restored_from_its_compacted_changelog(
    fast: BrokerProcess, worker: FaustWorker
) -> None:
    # The input topic keeps its records: with the broker's 2 s default retention an
    # expired segment is deleted, the active one included, so an event could be gone
    # before the worker (a few seconds to start) reads it. Only the changelog is meant
    # to face the fast retention.
    create_topic(fast, "events", config={"retention.ms": "-1"})
    worker.start()
    produced: list[KeyValue] = [(b"aa-old-key", b"written-first")]
    produce_keyed(fast, "events", produced)
    worker.wait_table(as_table(produced), "first event processed")

    # The old key is not written again: from here on only the changelog keeps it.
    time.sleep(PAST_RETENTION)
    batch = list(iter_keyed("k", keys=20, rounds=10))
    produce_keyed(fast, "events", batch)
    produced += batch
    worker.wait_table(as_table(produced), "overwrites processed")

    # A clean stop of worker and broker, then both again: the table comes back.
    worker.stop()
    fast.restart()
    worker.start()
    worker.wait_table(as_table(produced), "table restored after a clean restart")

    # More overwrites, then kill -9 of the worker and of the broker.
    batch = list(iter_keyed("k", keys=20, rounds=3))[::3]
    produce_keyed(fast, "events", batch)
    produced += batch
    worker.wait_table(as_table(produced), "later overwrites processed")
    time.sleep(PAST_RETENTION)
    worker.kill()
    crash_and_restart(fast)
    worker.start()
    worker.wait_table(as_table(produced), "table restored after kill -9 of worker and broker")
    worker.stop()
