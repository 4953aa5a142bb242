"""Run ``twistd broker`` the way systemd runs it, without systemd as PID 1.

:class:`NotifySocket` stands in for systemd's notification socket: a datagram socket in
the abstract namespace that records every message with its arrival time and the sender's
PID (``SO_PASSCRED``, which is how systemd enforces ``NotifyAccess=main``).

:class:`ActivatedBroker` starts the command line of the shipped ``brokerd.service`` under
Debian's ``systemd-socket-activate``, which binds one listening socket per shipped socket
unit (named by the unit's ``FileDescriptorName=``), waits for the first connection, then
execs the service with ``LISTEN_FDS``/``LISTEN_PID``/``LISTEN_FDNAMES`` set exactly as
systemd does. Only the addresses change: free loopback ports instead of the units'
fixed ones, a data directory under the test's ``tmp_path`` for ``%S``, and this venv for
``/opt/brokerd/venv``.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import attrs

from tests.brokerproc import REPO, free_port

UNITS = REPO / "deploy" / "systemd"
SOCKET_ACTIVATE = shutil.which("systemd-socket-activate")
VENV = Path(sys.executable).parent.parent
#: Bounds of every wait: generous for a loaded 2-core machine, yet a hang fails in seconds.
START_TIMEOUT = 60.0
#: Linux's ``struct ucred``: pid, uid, gid.
_UCRED = struct.Struct("3i")


@attrs.frozen
class Notification:
    """One datagram: when it arrived, who sent it, its ``KEY=value`` fields."""

    at: float
    pid: int | None
    fields: dict[str, str]


def parse_fields(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key] = value
    return fields


class NotifySocket:
    """A stand-in for ``$NOTIFY_SOCKET``: a reader thread records every notification."""

    def __init__(self) -> None:
        self.name = f"brokerd-test-{uuid.uuid4().hex}"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind("\0" + self.name)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self._sock.settimeout(0.2)
        self._cond = threading.Condition()
        self.notifications: list[Notification] = []
        self._closed = False
        self._thread = threading.Thread(target=self._read, name="notify-reader", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        """The value of ``$NOTIFY_SOCKET`` (``@`` names the abstract namespace)."""
        return "@" + self.name

    def _read(self) -> None:
        while not self._closed:
            try:
                data, ancillary, _, _ = self._sock.recvmsg(4096, socket.CMSG_SPACE(_UCRED.size))
            except TimeoutError:
                continue
            except OSError:
                return
            pid = None
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = _UCRED.unpack(payload[: _UCRED.size])[0]
            note = Notification(time.monotonic(), pid, parse_fields(data.decode()))
            with self._cond:
                self.notifications.append(note)
                self._cond.notify_all()

    def wait_for(self, key: str, *, timeout: float = START_TIMEOUT) -> Notification:
        """The first notification carrying ``key``; fails after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for note in self.notifications:
                    if key in note.fields:
                        return note
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [n.fields for n in self.notifications]
                    raise AssertionError(f"no {key}= within {timeout:.0f} s; got {seen}")
                self._cond.wait(left)

    def clear(self) -> None:
        with self._cond:
            self.notifications.clear()

    def close(self) -> None:
        self._closed = True
        self._thread.join()
        self._sock.close()


def unit_lines(name: str) -> list[str]:
    """The unit file's lines with backslash continuations joined."""
    text = (UNITS / name).read_text()
    return re.sub(r"\\\n\s*", " ", text).splitlines()


def unit_setting(name: str, key: str) -> list[str]:
    prefix = key + "="
    return [line[len(prefix) :].strip() for line in unit_lines(name) if line.startswith(prefix)]


def socket_units() -> dict[str, str]:
    """``FileDescriptorName`` -> ``ListenStream`` of every shipped socket unit."""
    found = {}
    for path in sorted(UNITS.glob("*.socket")):
        (fd_name,) = unit_setting(path.name, "FileDescriptorName")
        (listen,) = unit_setting(path.name, "ListenStream")
        found[fd_name] = listen
    return found


def service_command(state_dir: Path, http_port: int) -> list[str]:
    """``brokerd.service``'s ``ExecStart``, made runnable here: this venv, ``%S`` under
    the test's directory, the HTTP endpoint on a free port."""
    (exec_start,) = unit_setting("brokerd.service", "ExecStart")
    argv = shlex.split(exec_start.replace("%S", str(state_dir)))
    argv[0] = argv[0].replace("/opt/brokerd/venv", str(VENV))
    http = [i for i, arg in enumerate(argv) if arg.startswith("--http=")]
    assert len(http) == 1, f"ExecStart must pass --http: {exec_start}"
    argv[http[0]] = re.sub(r"^--http=tcp:\d+", f"--http=tcp:{http_port}", argv[http[0]])
    # The other HTTP services on free ports too (never a developer's 8081/8082).
    for i, arg in enumerate(argv):
        if arg.startswith("--schema-registry=tcp:"):
            argv[i] = re.sub(r"=tcp:\d+", f"=tcp:{free_port()}", arg)
    # Never the REST Proxy's default port here (a developer's broker may hold it).
    argv = [re.sub(r"^--http-proxy=tcp:\d+", f"--http-proxy=tcp:{free_port()}", arg)
            for arg in argv]
    return argv


class ActivatedBroker:
    """The shipped service under ``systemd-socket-activate``; new free ports each start.

    The broker logs to ``stdout`` with the journal logger (as in the unit); that goes to
    ``log_path``, appended across starts.
    """

    def __init__(self, state_dir: Path, notify: NotifySocket) -> None:
        assert SOCKET_ACTIVATE is not None
        self.state_dir = state_dir
        self.data_dir = state_dir / "brokerd"
        self.notify = notify
        self.log_path = state_dir / "journal.log"
        self.ports: dict[str, int] = {}
        self.http_port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def native_port(self) -> int:
        return self.ports["native"]

    @property
    def kafka_port(self) -> int:
        return self.ports["kafka"]

    @property
    def kafka_bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    def command(self) -> list[str]:
        listen = [arg for name in self.ports for arg in ("-l", f"127.0.0.1:{self.ports[name]}")]
        return [
            str(SOCKET_ACTIVATE),
            *listen,
            "--fdname=" + ":".join(self.ports),
            "-E",
            f"NOTIFY_SOCKET={self.notify.address}",
            # systemd-socket-activate passes on only PATH, TERM, USER and HOME.
            "-E",
            f"PYTHONPATH={REPO}",
            *service_command(self.state_dir, self.http_port),
        ]

    def start(self) -> ActivatedBroker:
        """Bind the sockets, then connect once: the connection that activates the
        service (it waits in the backlog and is served once the broker runs)."""
        assert self.proc is None or self.proc.poll() is not None
        self.ports = {name: free_port() for name in socket_units()}
        self.http_port = free_port()
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.state_dir
            )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.native_port), timeout=1).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"socket activation failed:\n{self.log()}") from None
                time.sleep(0.05)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"

    def terminate(self) -> float:
        """SIGTERM; return when it was sent (``time.monotonic``)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return time.monotonic()

    def wait(self, timeout: float) -> tuple[int, float]:
        """The exit status and when the exit was seen."""
        assert self.proc is not None
        code = self.proc.wait(timeout)
        return code, time.monotonic()

    def stop(self, timeout: float = 30.0) -> int:
        self.terminate()
        return self.wait(timeout)[0]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def answered_within(seconds: float, call: Callable[[], object]) -> object:
    """Run ``call`` and fail unless it returns within ``seconds``."""
    started = time.monotonic()
    result = call()
    took = time.monotonic() - started
    assert took < seconds, f"answered after {took:.2f} s"
    return result

