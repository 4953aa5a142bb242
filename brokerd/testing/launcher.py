"""Start a real ``twistd broker`` child process for a test and learn its ports.

Every listener is given ``tcp:0`` on 127.0.0.1 (no fixed port: safe when several test
processes run at once, as under pytest-xdist), and the broker writes the addresses the
kernel chose to its ``--ready-file`` once all of them are bound; the launcher waits for
that file, never for a log line. ``restart()`` starts the broker again over the same
data directory on the ports it had (clients keep their bootstrap address).

The defaults suit tests (:data:`TEST_MODE_ARGS`): no fsync, no HTTP services. Any
broker flag can be given as a keyword (``fsync="always"`` is ``--fsync=always``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import brokerd

#: How long a start may take before the launcher gives up (a loaded CI machine).
START_TIMEOUT_SECONDS = 60.0
#: How long a clean stop (SIGTERM) may take before the child is killed.
STOP_TIMEOUT_SECONDS = 30.0
#: How often the launcher looks for the ready file while the broker starts.
POLL_SECONDS = 0.005

#: The listeners a test broker has unless a flag says otherwise: the Kafka and native
#: ones. The HTTP services are off: each costs start time and a port.
DEFAULT_LISTENERS = {
    "kafka": "tcp:0:interface=127.0.0.1",
    "native": "tcp:0:interface=127.0.0.1",
    "http": "none",
    "schema-registry": "none",
    "http-proxy": "none",
}
#: Test mode: a test's data need not outlive a power cut, so no fsync unless a test asks
#: for it (``fsync="always"``); segments small, so that retention and compaction tests
#: roll them without writing a gigabyte.
TEST_MODE_ARGS: Mapping[str, str] = {"fsync": "never", "segment-bytes": str(16 * 1024 * 1024)}


class BrokerLaunchError(RuntimeError):
    """The broker exited or did not become ready in time; the message carries its log."""


def flag_args(flags: Mapping[str, object]) -> list[str]:
    """``--name=value`` per flag (``_`` in a keyword is ``-``); ``True`` is a bare flag,
    ``False`` and ``None`` leave it out; a list or tuple repeats it."""
    args: list[str] = []
    for key, value in flags.items():
        name = key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(f"--{name}")
        elif isinstance(value, (list, tuple)):
            args.extend(f"--{name}={item}" for item in value)
        else:
            args.append(f"--{name}={value}")
    return args


def child_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: this process's, with the directory holding the
    imported ``brokerd`` first on ``PYTHONPATH`` so the child runs the same broker (a
    source checkout's ``twisted/plugins`` sits beside it there)."""
    environ = dict(os.environ if base is None else base)
    root = str(Path(brokerd.__file__).resolve().parents[1])
    rest = environ.get("PYTHONPATH")
    environ["PYTHONPATH"] = root + (os.pathsep + rest if rest else "")
    if base is None:
        # Not the test runner's service manager's business (a given ``base`` is kept
        # as it is: a test may hand the broker a socket of its own).
        environ.pop("NOTIFY_SOCKET", None)
    return environ


def spawn(
    command: list[str], ready_path: Path, *, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a broker ``command`` (one that writes ``ready_path``) after removing a ready
    file an earlier run left."""
    ready_path.unlink(missing_ok=True)
    return subprocess.Popen(
        command,
        env=child_environment(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def read_ready_file(path: Path, pid: int | None = None) -> dict[str, str] | None:
    """The listeners a ready file names (None: not written yet, or by another process
    than ``pid``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    ready = json.loads(text)
    if pid is not None and ready.get("pid") != pid:
        return None
    return {str(k): str(v) for k, v in ready["listeners"].items()}


def wait_until_ready(
    proc: subprocess.Popen[bytes],
    ready_path: Path,
    log: Callable[[], str],
    *,
    timeout: float = START_TIMEOUT_SECONDS,
    check_pid: bool = True,
) -> dict[str, str]:
    """The listeners of ``proc``'s ready file once it is written; BrokerLaunchError (with
    the ``log()``) if the child exits first or ``timeout`` passes (the child is then
    killed)."""
    deadline = time.monotonic() + timeout
    while True:
        ready = read_ready_file(ready_path, proc.pid if check_pid else None)
        if ready is not None:
            return ready
        if proc.poll() is not None:
            raise BrokerLaunchError(
                f"the broker exited with status {proc.returncode} before it was "
                f"ready; its log:\n{log()}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise BrokerLaunchError(f"the broker was not ready in {timeout} s; its log:\n{log()}")
        time.sleep(POLL_SECONDS)


class LaunchedBroker:
    """A ``twistd -n broker`` child on free loopback ports, over ``data_dir``.

    ``flags`` are broker options as keywords (over the default listeners, and
    :data:`TEST_MODE_ARGS` unless ``test_mode`` is false); ``args`` are further
    command-line words as they are.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        log_path: Path | str | None = None,
        args: tuple[str, ...] = (),
        start_timeout: float = START_TIMEOUT_SECONDS,
        test_mode: bool = True,
        **flags: object,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = (
            Path(log_path) if log_path else self.data_dir.parent / f"{self.data_dir.name}.log"
        )
        self.ready_path = self.data_dir.parent / f"{self.data_dir.name}.ready"
        mode = TEST_MODE_ARGS if test_mode else {}
        self.flags: dict[str, object] = {**DEFAULT_LISTENERS, **mode}
        self.flags.update({key.replace("_", "-"): value for key, value in flags.items()})
        self.args = tuple(args)
        self.start_timeout = start_timeout
        #: ``HOST:PORT`` by listener name (``kafka``, ``native``, ``http``, ...), as
        #: the ready file said at the last start.
        self.addresses: dict[str, str] = {}
        #: Seconds from spawning the child to its ready file, at the last start.
        self.start_seconds: float | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    # -- addresses ---------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """The Kafka listener's ``HOST:PORT`` (what Kafka clients bootstrap from)."""
        return self._address("kafka")

    @property
    def native_address(self) -> str:
        """The native listener's ``HOST:PORT`` (``brokerctl --bootstrap``)."""
        return self._address("native")

    def _address(self, name: str) -> str:
        try:
            return self.addresses[name]
        except KeyError:
            raise AttributeError(f"the broker has no {name} listener (--{name} none)") from None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- life cycle --------------------------------------------------------------

    def command(self) -> list[str]:
        flags = dict(self.flags)
        # After a first start, the same ports again (restart keeps the addresses).
        for name, address in self.addresses.items():
            host, _, port = address.rpartition(":")
            flags[name] = f"tcp:{port}:interface={host.strip('[]')}"
        return [
            sys.executable,
            "-c",
            # twistd itself, by this interpreter (no reliance on a bin directory).
            "from twisted.scripts.twistd import run; run()",
            "--nodaemon",
            "--pidfile=",
            f"--logfile={self.log_path}",
            "broker",
            f"--data-dir={self.data_dir}",
            f"--ready-file={self.ready_path}",
            *flag_args(flags),
            *self.args,
        ]

    def start(self) -> LaunchedBroker:
        """Spawn the broker and wait for its ready file."""
        if self.running:
            raise RuntimeError("the broker is already running")
        started = time.monotonic()
        self.proc = spawn(self.command(), self.ready_path, cwd=self.data_dir.parent)
        self.addresses = wait_until_ready(
            self.proc, self.ready_path, self.log, timeout=self.start_timeout
        )
        self.start_seconds = time.monotonic() - started
        return self

    def kill(self) -> None:
        """SIGKILL and reap: the crash path (nothing flushed, nothing closed)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> int | None:
        """SIGTERM and wait (the clean shutdown); killed if it takes over ``timeout``.
        The exit status (None if it was never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise BrokerLaunchError(
                    f"the broker did not stop on SIGTERM in {timeout} s"
                ) from None
        return self.proc.returncode

    def restart(self) -> LaunchedBroker:
        """Stop it cleanly if it runs (after ``kill()`` it does not), then start it
        again over the same data directory on the same ports."""
        self.stop()
        return self.start()

    def log(self) -> str:
        """The broker's log so far (twistd's log file)."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"

    def __repr__(self) -> str:
        return f"<LaunchedBroker {self.data_dir} pid={self.pid} {self.addresses}>"
