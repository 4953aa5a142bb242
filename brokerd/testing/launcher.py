"""Start a real ``twistd broker`` child process for a test and learn its ports.

Every listener is given ``tcp:0`` on 127.0.0.1 (no fixed port: safe when several test
processes run at once, as under pytest-xdist), and the broker writes the addresses the
kernel chose to its ``--ready-file`` once all of them are bound; the launcher waits for
that file, never for a log line. ``restart()`` starts the broker again over the same
data directory on the ports it had (clients keep their bootstrap address).

A launcher may keep a *spare* (:mod:`brokerd.testing.spare`, ``spare=True``; the pytest
plugin's fixtures do unless ``BROKERD_TEST_SPARE=0``): one child process that has
already imported everything a start imports and waits for its arguments. A start takes
it if one is there and its environment fits, and spawns the next one once its broker
is ready; otherwise it spawns cold. Either way the child is a ``subprocess.Popen`` running
``twistd broker`` with the same arguments, so its pid, ``kill()``, exit status, ready file
and log are the same.

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
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

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
#: A spare, by this interpreter (``-c`` as for twistd: sys.path is a cold start's).
SPARE = "import sys; from brokerd.testing.spare import main; main(sys.argv[1:])"
#: The environment variable that turns spares off for the pytest plugin (``0``).
SPARE_ENV = "BROKERD_TEST_SPARE"
#: Environment variables a spare's imports depended on: a spare started under other
#: values is not used (its modules could differ from a cold start's).
IMPORT_ENV_PREFIX = "PYTHON"


def spares_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the plugin's fixtures use spares (on unless ``BROKERD_TEST_SPARE=0``)."""
    value = (os.environ if environ is None else environ).get(SPARE_ENV, "1")
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


class Spare:
    """A :mod:`brokerd.testing.spare` child (run by ``-c``, as twistd is): imported,
    waiting for its order on its stdin (it exits 0 if the pipe closes first, e.g. when
    this process ends)."""

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
        try:
            self.proc: subprocess.Popen[bytes] = subprocess.Popen(
                [sys.executable, *python_options, "-c", SPARE, "--ready-fd", str(ready_write)],
                env=self.env,
                stderr=stderr,
                # Where the imported brokerd lives: ``-c`` puts the working directory
                # first on sys.path (as "", so after the order's chdir it is the cold
                # start's directory again).
                cwd=Path(brokerd.__file__).resolve().parents[1],
                stdin=subprocess.PIPE,
                pass_fds=(ready_write,),
            )
        finally:
            os.close(ready_write)
        self._ready_fd: int | None = ready_read

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Whether the spare finished its imports (waiting up to ``timeout`` seconds)."""
        if self._ready_fd is None:
            return self.alive
        readable, _, _ = select.select([self._ready_fd], [], [], timeout)
        if not readable:
            return False
        os.close(self._ready_fd)
        self._ready_fd = None
        return self.alive

    def fits(self, env: Mapping[str, str]) -> bool:
        """Whether a broker wanting ``env`` can be this spare: the same interpreter (it
        always is: this process started it) and the same import environment."""

        def imports(environ: Mapping[str, str]) -> dict[str, str]:
            return {k: v for k, v in environ.items() if k.startswith(IMPORT_ENV_PREFIX)}

        return imports(self.env) == imports(env)

    def order(self, argv: list[str], *, cwd: Path, env: Mapping[str, str]) -> bool:
        """Make the spare the broker of ``argv``; False if it has died meanwhile."""
        line = json.dumps({
            "argv": argv,
            "cwd": str(cwd),
            "env": {k: v for k, v in env.items() if self.env.get(k) != v},
            "unset": [k for k in self.env if k not in env],
        })
        self._close_ready()
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            self.proc.wait()
            return False
        return True

    def discard(self) -> None:
        """Close its stdin: it exits 0 (at once if imported, else after its imports)."""
        self._close_ready()
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()

    def _close_ready(self) -> None:
        if self._ready_fd is not None:
            os.close(self._ready_fd)
            self._ready_fd = None


#: This process's spare (one per process: each pytest-xdist worker has its own).
_spare: Spare | None = None


def current_spare() -> Spare | None:
    """The spare waiting now, if any."""
    return _spare


def prepare_spare(env: Mapping[str, str] | None = None) -> Spare:
    """The spare for brokers started with ``env`` (the launcher's child environment by
    default): the waiting one if it fits, else a new one (the old one is discarded)."""
    global _spare
    wanted = child_environment(env)
    if _spare is not None and _spare.alive and _spare.fits(wanted):
        return _spare
    discard_spare()
    _spare = Spare(wanted)
    return _spare


def discard_spare() -> None:
    """Let the waiting spare exit (and reap it)."""
    global _spare
    spare, _spare = _spare, None
    if spare is not None:
        still_importing = not spare.wait_ready(0)
        spare.discard()
        if still_importing:
            # It reads its stdin only once imported; it holds nothing to lose.
            spare.proc.terminate()
        try:
            spare.proc.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            spare.proc.kill()
            spare.proc.wait()


def take_spare(
    argv: list[str], *, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes] | None:
    """The waiting spare turned into the broker of ``argv`` (None: no spare that fits;
    the caller spawns cold)."""
    global _spare
    wanted = child_environment(env)
    spare = _spare
    if spare is None or not spare.alive or not spare.fits(wanted):
        return None
    _spare = None
    return spare.proc if spare.order(argv, cwd=cwd, env=wanted) else None


atexit.register(discard_spare)


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
    command-line words as they are. With ``spare``, a start takes this process's spare
    if one fits, and leaves the next one waiting once its broker is ready.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        log_path: Path | str | None = None,
        args: tuple[str, ...] = (),
        start_timeout: float = START_TIMEOUT_SECONDS,
        test_mode: bool = True,
        spare: bool = False,
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
        self.spare = spare
        #: Whether the last start used a spare (False: spawned cold).
        self.from_spare = False
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
        """Spawn the broker and wait for its ready file."""
        if self.running:
            raise RuntimeError("the broker is already running")
        started = time.monotonic()
        proc = None
        if self.spare:
            self.ready_path.unlink(missing_ok=True)
            proc = take_spare(self.twistd_args(), cwd=self.data_dir.parent)
        self.from_spare = proc is not None
        self.proc = proc or spawn(self.command(), self.ready_path, cwd=self.data_dir.parent)
        try:
            self.addresses = wait_until_ready(
                self.proc, self.ready_path, self.log, timeout=self.start_timeout
            )
        finally:
            if self.spare:
                # The next one imports while this broker's test runs, not during its start.
                prepare_spare()
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
