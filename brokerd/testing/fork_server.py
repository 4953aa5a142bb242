"""A pre-imported process that forks test brokers (the launcher runs :func:`main`
through ``python -c``, as it runs twistd, so that ``sys.path`` is a cold start's).

A cold test broker spends almost all of its start importing (twistd, the broker's
modules, the Kafka message classes). The fork server pays that once per test process:
it imports what a start imports, then reads orders on its stdin, one JSON line each::

    {"argv": [twistd's arguments], "cwd": "...", "env": {"NAME": "value"}, "unset": ["NAME"]}

and forks. The child closes the server's pipes, changes directory and environment and
runs twistd's ``run()`` with that argv: the same broker, with the same log file, ready
file, signal handling and exit status, that ``python -c "from twisted.scripts.twistd
import run; run()" ARGV`` runs (not in a session of its own, as a cold child is not).
The server answers ``{"pid": N}`` on its stdout (``{"error": "..."}`` to a line that
is no order) and, once it has reaped a child, ``{"exited": N, "status": S}`` (``S`` as
``subprocess`` gives it: the exit code, or minus the signal's number). At end of file
on its stdin it exits 0: the brokers it forked keep running, their launcher stops them
as it stops cold ones.

The server never installs a reactor: importing ``twisted.internet.reactor`` would open
the poller (an epoll descriptor every child would share) and fix the reactor before
twistd's ``--reactor`` option is read. Each child installs its own, as a cold start
does. The server has no thread (a fork copies only the forking one), no port and no
file of a data directory.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from typing import Any

#: An order line longer than this is refused (an argv and an environment are far less).
MAX_ORDER_BYTES = 1 << 20


def preload() -> None:
    """Import everything a test-mode ``twistd broker`` start imports, except the
    reactor's installation (the module of the default one is imported, not installed)."""
    from twisted.application.service import IServiceMaker
    from twisted.internet import default  # noqa: F401
    from twisted.plugin import getPlugins
    from twisted.scripts import twistd  # noqa: F401

    import brokerd.tap  # noqa: F401
    from brokerd.app.wiring import preload as preload_broker

    if sys.platform.startswith("linux"):
        from twisted.internet import epollreactor  # noqa: F401
    # twistd looks its subcommands up through the plugin system: importing the plugin
    # modules now leaves the start only the scan of the cache.
    list(getPlugins(IServiceMaker))
    preload_broker()


def parse_order(line: bytes) -> dict[str, Any]:
    """An order line as a dict (ValueError if it is not an order)."""
    order = json.loads(line)
    if not isinstance(order, dict) or not isinstance(order.get("argv"), list):
        raise ValueError(f"an order must be a JSON object with an argv list: {line[:200]!r}")
    return order


def become_broker(order: dict[str, Any]) -> None:
    """Run twistd as the order says (returns when the broker has stopped; twistd exits
    the process itself on a bad option or a start failure)."""
    from twisted.scripts.twistd import run

    os.chdir(order.get("cwd") or os.getcwd())
    for name in order.get("unset", ()):
        os.environ.pop(name, None)
    os.environ.update({str(k): str(v) for k, v in order.get("env", {}).items()})
    sys.argv = ["-c", *(str(word) for word in order["argv"])]
    run()  # type: ignore[no-untyped-call]  # twistd is not annotated


class Server:
    """The loop: orders in, forks, pids and exits out. ``stdout_fd`` is the descriptor
    the children get as their stdout (the launcher's, as a cold child's)."""

    def __init__(self, stdout_fd: int) -> None:
        self.stdout_fd = stdout_fd
        # SIGCHLD wakes the select through this pipe (the handler itself does nothing:
        # the loop reaps).
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_read, False)
        os.set_blocking(self.wake_write, False)
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        # Ctrl-C in the test run reaches the whole process group: the server ends with
        # its stdin's end of file instead, not with a KeyboardInterrupt of its own.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.pending = b""
        self.out = os.fdopen(os.dup(1), "wb", buffering=0)

    def send(self, message: dict[str, Any]) -> None:
        self.out.write(json.dumps(message).encode() + b"\n")

    def serve(self) -> dict[str, Any] | None:
        """Run until end of file (None) or, in a forked child, return its order."""
        while True:
            self.reap()
            readable, _, _ = select.select([0, self.wake_read], [], [])
            if self.wake_read in readable:
                while True:
                    try:
                        if not os.read(self.wake_read, 512):
                            break
                    except BlockingIOError:
                        break
            if 0 not in readable:
                continue
            chunk = os.read(0, 65536)
            if not chunk:
                return None
            self.pending += chunk
            if len(self.pending) > MAX_ORDER_BYTES and b"\n" not in self.pending:
                raise ValueError(f"an order line over {MAX_ORDER_BYTES} bytes")
            while b"\n" in self.pending:
                line, _, self.pending = self.pending.partition(b"\n")
                try:
                    order = parse_order(line)
                except ValueError as error:  # json's errors are ValueErrors too
                    self.send({"error": str(error)})
                    continue
                pid = os.fork()
                if pid == 0:
                    self.into_child()
                    return order
                self.send({"pid": pid})

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.send({"exited": pid, "status": os.waitstatus_to_exitcode(status)})

    def into_child(self) -> None:
        """Leave the server's state behind: its signal handling, its pipes; stdin is
        empty and stdout the launcher's, as for a cold child."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # Python's own, as a cold child has it (the reactor replaces only that one).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.close(self.wake_read)
        os.close(self.wake_write)
        self.out.close()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(self.stdout_fd, 1)
        os.close(self.stdout_fd)


def main(argv: list[str]) -> None:
    """``--stdout-fd N [--ready-fd M]``: N is the children's stdout; once imported,
    close M (the launcher's pipe reads end of file there: the server is ready)."""
    options = dict(zip(argv[::2], argv[1::2], strict=True))
    preload()
    assert "twisted.internet.reactor" not in sys.modules, "the reactor is the child's"
    if "--ready-fd" in options:
        os.close(int(options["--ready-fd"]))
    order = Server(int(options["--stdout-fd"])).serve()
    if order is not None:
        become_broker(order)


if __name__ == "__main__":
    main(sys.argv[1:])
