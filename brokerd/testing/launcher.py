"""Start a real ``twistd broker`` child process for a test and learn its ports.

Every listener is given ``tcp:0`` on 127.0.0.1 (no fixed port: safe when several test
processes run at once, as under pytest-xdist), and the broker writes the addresses the
kernel chose to its ``--ready-file`` once all of them are bound; the launcher waits for
that file, never for a log line. ``restart()`` starts the broker again over the same
data directory on the ports it had (clients keep their bootstrap address).

A launcher may fork its brokers (``fork_server=True``; the pytest plugin's fixtures do
unless ``BROKERD_TEST_FORK_SERVER=0``) from this process's *fork server*
(:mod:`brokerd.testing.fork_server`): one child process, started at the first such
start, that has imported everything a start imports once and forks a broker per start.
The broker child runs twistd with the arguments a cold start's command line has; its
handle (:class:`ForkedChild`) has the ``Popen`` methods the launcher uses, so its pid,
``kill()``, exit status, ready file and log are a cold child's. A server that died or
was imported under other ``PYTHON*`` variables forks nothing: the start spawns cold.

The defaults suit tests (:data:`TEST_MODE_ARGS`): no fsync, no HTTP services. Any
broker flag can be given as a keyword (``fsync="always"`` is ``--fsync=always``).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Protocol

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


#: twistd itself, by this interpreter (no reliance on a bin directory).
TWISTD = "from twisted.scripts.twistd import run; run()"
#: The fork server, by this interpreter (``-c`` as for twistd: sys.path is a cold
#: start's).
FORK_SERVER = "import sys; from brokerd.testing.fork_server import main; main(sys.argv[1:])"
#: The environment variable that turns the fork server off for the plugin (``0``).
FORK_SERVER_ENV = "BROKERD_TEST_FORK_SERVER"
#: Environment variables the fork server's imports depended on: a server started under
#: other values does not serve (its modules could differ from a cold start's).
IMPORT_ENV_PREFIX = "PYTHON"


def fork_server_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the plugin's fixtures fork their brokers (on unless
    ``BROKERD_TEST_FORK_SERVER=0``)."""
    value = (os.environ if environ is None else environ).get(FORK_SERVER_ENV, "1")
    return value.strip().lower() not in ("0", "no", "false", "off")


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


class Child(Protocol):
    """What the launcher uses of a broker child: ``subprocess.Popen``'s (a cold child)
    or :class:`ForkedChild`'s (a child of the fork server)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...

    def terminate(self) -> None: ...


class ForkedChild:
    """A broker the fork server forked, as a ``Popen`` subset: signals go to its pid,
    its exit status comes from the server (which reaps it)."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.status_of(self.pid, timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        if self.returncode is None:
            status = self._server.status_of(self.pid, timeout=timeout)
            if status is None:
                raise subprocess.TimeoutExpired(["forked broker", str(self.pid)], timeout or 0)
            self.returncode = status
        return self.returncode

    def send_signal(self, sig: int) -> None:
        # Not after its exit was reported: the pid may be another process's by now.
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def __repr__(self) -> str:
        return f"<ForkedChild pid={self.pid} returncode={self.returncode}>"


#: The status a forked child is given when the server died before reporting its exit
#: (no real exit status is this number): its launcher cannot know it.
LOST_STATUS = -256


class ForkServer:
    """A :mod:`brokerd.testing.fork_server` child (run by ``-c``, as twistd is): it
    imports once, then forks a broker per :meth:`fork`. A reader thread takes its
    answers; it exits 0 when its stdin closes (:meth:`close`, or this process's end)."""

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        python_options: tuple[str, ...] = (),
        stderr: IO[bytes] | None = None,
    ) -> None:
        """``python_options`` (``-X importtime``) and ``stderr`` are for looking at it."""
        self.env = dict(env)
        ready_read, ready_write = os.pipe()
        # The children's stdout: this process's, as a cold child's.
        stdout = os.dup(1)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, *python_options, "-c", FORK_SERVER,
                 "--stdout-fd", str(stdout), "--ready-fd", str(ready_write)],
                env=self.env,
                stderr=stderr,
                # Where the imported brokerd lives: ``-c`` puts the working directory
                # first on sys.path (as "", so after the order's chdir it is the cold
                # start's directory again).
                cwd=Path(brokerd.__file__).resolve().parents[1],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                pass_fds=(ready_write, stdout),
            )
        finally:
            os.close(ready_write)
            os.close(stdout)
        self._ready_fd: int | None = ready_read
        self._changed = threading.Condition()
        self._answers: list[dict[str, object]] = []
        self._exits: dict[int, int] = {}
        self._children: set[int] = set()
        self._gone = False
        self._order_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="fork-server-reader", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self._gone

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Whether the server finished its imports (waiting up to ``timeout`` seconds)."""
        if self._ready_fd is None:
            return self.alive
        readable, _, _ = select.select([self._ready_fd], [], [], timeout)
        if not readable:
            return False
        os.close(self._ready_fd)
        self._ready_fd = None
        return self.alive

    def fits(self, env: Mapping[str, str]) -> bool:
        """Whether a broker wanting ``env`` can be forked here: the same interpreter (it
        always is: this process started it) and the same import environment."""

        def imports(environ: Mapping[str, str]) -> dict[str, str]:
            return {k: v for k, v in environ.items() if k.startswith(IMPORT_ENV_PREFIX)}

        return imports(self.env) == imports(env)

    def fork(self, argv: list[str], *, cwd: Path, env: Mapping[str, str]) -> ForkedChild | None:
        """A new broker child running twistd with ``argv``; None if the server has died
        (the caller spawns cold)."""
        line = json.dumps({
            "argv": argv,
            "cwd": str(cwd),
            "env": {k: v for k, v in env.items() if self.env.get(k) != v},
            "unset": [k for k in self.env if k not in env],
        })
        answer = self.exchange(line.encode())
        if answer is None:
            return None
        if "error" in answer:
            raise BrokerLaunchError(f"the fork server refused the order: {answer['error']}")
        pid = answer["pid"]
        assert isinstance(pid, int)
        return ForkedChild(self, pid)

    def exchange(self, line: bytes) -> dict[str, object] | None:
        """Send one line, return the server's answer to it (None: the server is gone)."""
        assert self.proc.stdin is not None
        with self._order_lock:
            try:
                self.proc.stdin.write(line + b"\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                return None
            with self._changed:
                while not self._answers and not self._gone:
                    self._changed.wait()
                return self._answers.pop(0) if self._answers else None

    def status_of(self, pid: int, *, timeout: float | None) -> int | None:
        """``pid``'s exit status once the server reported it (None: not within
        ``timeout`` seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while pid not in self._exits:
                if self._gone:
                    # Its children are orphans now: alive or not, their status is lost.
                    if not _running(pid):
                        return LOST_STATUS
                    self._changed.wait(POLL_SECONDS)
                    continue
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._changed.wait(left)
            return self._exits[pid]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            with self._changed:
                if "exited" in message:
                    self._exits[int(message["exited"])] = int(message["status"])
                else:
                    self._answers.append(message)
                self._changed.notify_all()
        with self._changed:
            self._gone = True
            self._changed.notify_all()

    def close(self) -> None:
        """Close its stdin: it exits 0 (at once if imported, else after its imports);
        reap it. Brokers it forked keep running."""
        if self._ready_fd is not None:
            os.close(self._ready_fd)
            self._ready_fd = None
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()
        try:
            self.proc.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (an orphan's zombie waits for whoever reaps orphans here,
    which may take minutes in a container: it has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    # The state follows the command name, which is in parentheses and may hold any.
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


#: This process's fork server (one per process: each pytest-xdist worker has its own).
_server: ForkServer | None = None


def current_fork_server() -> ForkServer | None:
    """The fork server running now, if any."""
    return _server


def prepare_fork_server(env: Mapping[str, str] | None = None) -> ForkServer:
    """The fork server for brokers started with ``env`` (the launcher's child
    environment by default): the running one if it fits, else a new one (the old one
    is closed)."""
    global _server
    wanted = child_environment(env)
    if _server is not None and _server.alive and _server.fits(wanted):
        return _server
    close_fork_server()
    _server = ForkServer(wanted)
    return _server


def close_fork_server() -> None:
    """Let the fork server exit (and reap it)."""
    global _server
    server, _server = _server, None
    if server is not None:
        server.close()


def fork_broker(
    argv: list[str], *, cwd: Path, env: Mapping[str, str] | None = None
) -> ForkedChild | None:
    """A broker of ``argv`` forked by this process's fork server, started if there is
    none (None: it died or cannot serve this environment; the caller spawns cold)."""
    wanted = child_environment(env)
    server = prepare_fork_server(env)
    if not server.wait_ready(START_TIMEOUT_SECONDS) or not server.fits(wanted):
        return None
    return server.fork(argv, cwd=cwd, env=wanted)


atexit.register(close_fork_server)


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
    proc: Child,
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
    command-line words as they are. With ``fork_server``, a start has this process's
    fork server (:func:`prepare_fork_server`, started at the first such start) fork the
    broker, and spawns it cold if the server cannot.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        log_path: Path | str | None = None,
        args: tuple[str, ...] = (),
        start_timeout: float = START_TIMEOUT_SECONDS,
        test_mode: bool = True,
        fork_server: bool = False,
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
        self.fork_server = fork_server
        #: Whether the fork server forked the last start's broker (False: spawned cold).
        self.forked = False
        #: ``HOST:PORT`` by listener name (``kafka``, ``native``, ``http``, ...), as
        #: the ready file said at the last start.
        self.addresses: dict[str, str] = {}
        #: Seconds from spawning the child to its ready file, at the last start.
        self.start_seconds: float | None = None
        self.proc: Child | None = None

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
        """The cold start's command line."""
        return [sys.executable, "-c", TWISTD, *self.twistd_args()]

    def twistd_args(self) -> list[str]:
        """twistd's arguments (what follows the program in :meth:`command`)."""
        flags = dict(self.flags)
        # After a first start, the same ports again (restart keeps the addresses).
        for name, address in self.addresses.items():
            host, _, port = address.rpartition(":")
            flags[name] = f"tcp:{port}:interface={host.strip('[]')}"
        return [
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
        """Spawn (or fork) the broker and wait for its ready file."""
        if self.running:
            raise RuntimeError("the broker is already running")
        started = time.monotonic()
        proc: Child | None = None
        if self.fork_server:
            self.ready_path.unlink(missing_ok=True)
            proc = fork_broker(self.twistd_args(), cwd=self.data_dir.parent)
        self.forked = proc is not None
        self.proc = proc or spawn(self.command(), self.ready_path, cwd=self.data_dir.parent)
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
