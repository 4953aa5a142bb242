"""A Faust app's ``worker`` command as a child process of a test, logging to a file.

Shared by the Faust tests (tests/e2e/test_faust.py, tests/e2e/test_faust_transactions.py): each
start appends a marked section to the log, so a failure can show what every run said.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.brokerproc import BrokerProcess, free_port


class FaustProcess:
    """``APP worker`` against ``broker``, in ``workdir``; ``env`` is added to the
    environment the app reads (FAUST_BROKER, FAUST_APP_ID, FAUST_WEB_PORT and
    FAUST_DATADIR are always set)."""

    def __init__(
        self,
        app: Path,
        broker: BrokerProcess,
        workdir: Path,
        app_id: str,
        *,
        log_name: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.app = app
        self.broker = broker
        self.workdir = workdir
        self.app_id = app_id
        self.web_port = free_port()
        self.log_path = workdir / log_name
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        assert not self.alive()
        environ = dict(os.environ)
        environ.update(
            FAUST_BROKER=self.broker.kafka_bootstrap,
            FAUST_APP_ID=self.app_id,
            FAUST_WEB_PORT=str(self.web_port),
            FAUST_DATADIR=str(self.workdir / "faust-data"),
            PYTHONUNBUFFERED="1",
            **self.env,
        )
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start {self.starts} =====\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [sys.executable, str(self.app), "worker", "--loglevel", "info"],
                cwd=self.workdir,
                env=environ,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
