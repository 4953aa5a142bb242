"""Run a real ``twistd broker`` process for integration tests (loopback only).

Each broker gets its own data directory and free ports on 127.0.0.1, logs to a file next
to the data directory, and is stopped by its own PID. The process is started and waited
for by the pytest plugin's launcher (:mod:`brokerd.testing.launcher`: spawn, then the
``--ready-file``), so there is one way to start a broker; this class keeps the fixed
ports, the HTTP services and the helpers the older tests use (new tests take the
``brokerd`` fixture).
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from brokerd.client import NativeClient
from brokerd.testing.launcher import spawn, wait_until_ready

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TWISTD = BIN / "twistd"
BROKERCTL = BIN / "brokerctl"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0


#: Ports handed out lately. A port bound to 0 and closed is free again at once, so the
#: kernel can hand the same one out twice in a row (about one broker start in 4,000 got
#: two equal listener ports); none of these is handed out again.
_RECENT_PORTS: collections.deque[int] = collections.deque(maxlen=256)


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port not in _RECENT_PORTS:
            _RECENT_PORTS.append(port)
            return port


def wait_for_port(port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def env() -> dict[str, str]:
    """Subprocess environment in which twistd finds the plugin of this checkout."""
    environ = dict(os.environ)
    environ["PYTHONPATH"] = str(REPO) + os.pathsep + environ.get("PYTHONPATH", "")
    return environ


class BrokerProcess:
    """A ``twistd -n broker`` child process."""

    def __init__(
        self,
        data_dir: Path,
        *,
        kafka: bool = True,
        native: bool = True,
        args: tuple[str, ...] = (),
    ) -> None:
        self.data_dir = Path(data_dir)
        #: Without the native listener (``--native none``) start() waits for the others.
        self.native_on = native
        self.native_port = free_port()
        self.kafka_port = free_port() if kafka else None
        self.http_port = free_port()
        #: The platform's HTTP services, each on a free port (never 8081/8082 here).
        self.schema_registry_port = free_port()
        #: The REST Proxy's port (never the default 8082: a developer's broker may hold it).
        self.http_proxy_port = free_port()
        self.args = args
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-twistd.log"
        self.ready_path = self.data_dir.parent / f"{self.data_dir.name}.ready"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def kafka_bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def schema_registry_url(self) -> str:
        return f"http://127.0.0.1:{self.schema_registry_port}"

    @property
    def native_bootstrap(self) -> str:
        return f"127.0.0.1:{self.native_port}"

    def command(self) -> list[str]:
        kafka = f"tcp:{self.kafka_port}:interface=127.0.0.1" if self.kafka_port else "none"
        native = f"tcp:{self.native_port}:interface=127.0.0.1" if self.native_on else "none"
        return [
            str(TWISTD),
            "--nodaemon",
            "--pidfile=",
            f"--logfile={self.log_path}",
            "broker",
            f"--data-dir={self.data_dir}",
            f"--native={native}",
            f"--kafka={kafka}",
            f"--http=tcp:{self.http_port}:interface=127.0.0.1",
            f"--schema-registry=tcp:{self.schema_registry_port}:interface=127.0.0.1",
            f"--http-proxy=tcp:{self.http_proxy_port}:interface=127.0.0.1",
            *self.args,
        ]

    def start(self) -> BrokerProcess:
        assert self.proc is None or self.proc.poll() is not None
        # Last on the command line, so a subclass's command() (a wrapper such as prlimit,
        # a --config file) keeps it among the broker's options.
        command = [*self.command(), f"--ready-file={self.ready_path}"]
        self.proc = spawn(command, self.ready_path, cwd=self.data_dir.parent, env=env())
        try:
            # A wrapper may run the broker under another pid: any ready file written
            # after the spawn (it removed the old one) is this start's.
            wait_until_ready(self.proc, self.ready_path, self.log, timeout=START_TIMEOUT,
                             check_pid=False)
        except RuntimeError as e:
            self.kill()
            raise RuntimeError(f"broker did not start: {e}") from None
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"

    def stop(self) -> int:
        """SIGTERM and wait: the clean shutdown path."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError("broker did not stop on SIGTERM") from None
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: the crash path."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def client(self, timeout: float = 10.0) -> NativeClient:
        return NativeClient("127.0.0.1", self.native_port, timeout=timeout)

    def metric(self, name: str, **labels: str) -> float:
        """One sample of the broker's ``/metrics`` (0 when the series is absent)."""
        from prometheus_client.parser import text_string_to_metric_families

        url = f"http://127.0.0.1:{self.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return float(sample.value)
        return 0.0

    def until_connections(self, count: int, listener: str = "native") -> None:
        """Wait until the broker counts ``count`` open connections on ``listener``: a
        closed connection is counted out when the reactor sees the close, some time
        after the client closed it."""
        deadline = time.monotonic() + START_TIMEOUT
        while self.metric("brokerd_connections_open", listener=listener) != count:
            assert time.monotonic() < deadline, f"never {count} {listener} connections open"
            time.sleep(0.05)
