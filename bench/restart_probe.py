"""Restart-time probe: the bench's restart step, repeated on one kept data directory.

``fill`` creates a topic of N partitions, writes about B bytes of 1,000-byte values with
``--fsync never`` and kills the broker (kill -9). ``time`` then starts the broker on that
directory several times and prints the seconds until both listeners answer: after a
kill -9 (the broker is killed again once it answers, so every trial starts unclean; the
first trial after ``fill`` also has the fill's unsynced pages) and after a clean stop
(SIGTERM, then the start is timed). Every record written must be there each time.

Usage::

    python -m bench.restart_probe fill DIR --partitions 1000 --bytes 5e9
    python -m bench.restart_probe time DIR --trials 3
    python -m bench.restart_probe floor DIR --trials 5

``floor`` times what no broker can go below on this machine: the same ``twistd`` (same
interpreter, same plugin scan, the default reactor) running a bare plugin that listens on
two TCP ports and answers one byte, timed from spawn until both ports answer; and
``twistd --version`` (the interpreter and twistd's own imports, no reactor).

What it does not do: profile (run ``py-spy record`` on the broker, or profile
``LogDirectory.open`` on the directory) or write results anywhere but stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import stop_quietly
from bench.resources import _compiled, _fill, _start_timed, _stop_timed, _stored

from tests.brokerproc import TWISTD, BrokerProcess, env, free_port

TOPIC = "restart"
STATE_FILE = "probe.json"


def _proc(home: Path) -> BrokerProcess:
    return BrokerProcess(home / "data", args=("--fsync=never",))


def fill(home: Path, partitions: int, total_bytes: int) -> None:
    home.mkdir(parents=True, exist_ok=True)
    proc = _proc(home).start()
    try:
        with proc.client(timeout=600) as client:
            client.create_topic(TOPIC, partitions)
        written = _fill(proc, TOPIC, partitions, total_bytes)
    finally:
        proc.kill()
    (home / STATE_FILE).write_text(json.dumps({"partitions": partitions, "records": written}))
    print(f"wrote {written:,} records in {partitions:,} partitions; killed")


def _check(proc: BrokerProcess, state: dict[str, int]) -> None:
    found = _stored(proc, TOPIC, state["partitions"])
    if found != state["records"]:
        stop_quietly(proc)
        sys.exit(f"records lost: {found:,} of {state['records']:,}")


def time_starts(home: Path, trials: int) -> None:
    state = json.loads((home / STATE_FILE).read_text())
    _compiled()
    unclean: list[float] = []
    clean: list[float] = []
    proc = _proc(home)
    for _ in range(trials):
        unclean.append(_start_timed(proc))
        _check(proc, state)
        proc.kill()
    # A clean stop first, so that the first timed start below is a clean one.
    _start_timed(proc)
    _stop_timed(proc)
    for _ in range(trials):
        clean.append(_start_timed(proc))
        _check(proc, state)
        _stop_timed(proc)
    for what, seconds in (("after kill -9", unclean), ("after clean stop", clean)):
        print(f"start {what}: " + ", ".join(f"{s:.2f}" for s in seconds)
              + f" s (best {min(seconds):.2f}, spread {max(seconds) - min(seconds):.2f},"
              f" median {statistics.median(seconds):.2f})")


#: A twistd plugin that listens on two ports and answers every connection with one byte.
_FLOOR_PLUGIN = '''
from twisted.application.service import ServiceMaker
floor = ServiceMaker("restart-floor", "restart_floor_tap", "bare listener", "restart-floor")
'''
_FLOOR_TAP = '''
from twisted.application import internet, service
from twisted.internet import protocol
from twisted.python import usage


class Options(usage.Options):
    optParameters = [["ports", None, "", "comma list"]]


class Answer(protocol.Protocol):
    def connectionMade(self):
        self.transport.write(b"!")


def makeService(options):
    top = service.MultiService()
    for port in options["ports"].split(","):
        factory = protocol.Factory.forProtocol(Answer)
        internet.TCPServer(int(port), factory, interface="127.0.0.1").setServiceParent(top)
    return top
'''


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            return sock.recv(1) == b"!"
    except OSError:
        return False


def _floor_start(home: Path) -> float:
    """Seconds from spawning twistd with the bare plugin until both its ports answer."""
    ports = (free_port(), free_port())
    environ = env()
    environ["PYTHONPATH"] = str(home) + os.pathsep + environ["PYTHONPATH"]
    command = [str(TWISTD), "--nodaemon", "--pidfile=", f"--logfile={home / 'floor.log'}",
               "restart-floor", f"--ports={ports[0]},{ports[1]}"]
    begin = time.perf_counter()
    proc = subprocess.Popen(command, env=environ, cwd=home)
    try:
        while time.perf_counter() - begin < 60:
            if proc.poll() is not None:
                sys.exit(f"the floor plugin exited: {(home / 'floor.log').read_text()[-2000:]}")
            if all(_answers(port) for port in ports):
                return time.perf_counter() - begin
            time.sleep(0.02)
        sys.exit("the floor plugin did not answer")
    finally:
        proc.terminate()
        proc.wait(30)


def _version_seconds() -> float:
    begin = time.perf_counter()
    subprocess.run([str(TWISTD), "--version"], env=env(), check=True, capture_output=True)
    return time.perf_counter() - begin


def floor(home: Path, trials: int) -> None:
    plugins = home / "twisted" / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    (plugins / "restart_floor.py").write_text(_FLOOR_PLUGIN)
    (home / "restart_floor_tap.py").write_text(_FLOOR_TAP)
    _floor_start(home)  # the first run writes twistd's plugin cache
    for what, timed in (("twistd --version", _version_seconds),
                        ("bare twistd plugin, two listeners", lambda: _floor_start(home))):
        seconds = [timed() for _ in range(trials)]
        print(f"{what}: " + ", ".join(f"{s:.2f}" for s in seconds)
              + f" s (median {statistics.median(seconds):.2f}, best {min(seconds):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("fill", "time", "floor"))
    parser.add_argument("home", type=Path)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--bytes", type=float, default=5e9)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    if args.action == "fill":
        fill(args.home, args.partitions, int(args.bytes))
    elif args.action == "floor":
        floor(args.home, args.trials)
    else:
        time_starts(args.home, args.trials)


if __name__ == "__main__":
    main()
