"""A real broker under a descriptor limit far below three files per partition: partitions,
idle connections and reads all fit, because segment files are opened lazily under a
budget (brokerd/storage/segment/fd_cache.py); and a restart under the same limit keeps every
record."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess

PRLIMIT = shutil.which("prlimit")
#: The broker's RLIMIT_NOFILE (soft and hard): with one descriptor per file held for
#: good, the partitions below would need 3 x 300 + the connections.
LIMIT = 400
PARTITIONS = 300
IDLE_CONNECTIONS = 60

pytestmark = [
    pytest.mark.skipif(PRLIMIT is None, reason="needs prlimit (util-linux)"),
    pytest.mark.broker,
]


class LimitedBroker(BrokerProcess):
    """twistd started under ``prlimit --nofile=LIMIT``."""

    def command(self) -> list[str]:
        assert PRLIMIT is not None
        return [PRLIMIT, f"--nofile={LIMIT}:{LIMIT}", "--", *super().command()]


def _open_fds(proc: BrokerProcess) -> int:
    assert proc.proc is not None
    return len(os.listdir(f"/proc/{proc.proc.pid}/fd"))


def _limit(proc: BrokerProcess) -> int:
    assert proc.proc is not None
    with open(f"/proc/{proc.proc.pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    raise AssertionError("no descriptor limit in /proc")


def test_partitions_and_connections_beyond_three_files_each(tmp_path: Path) -> None:
    proc = LimitedBroker(tmp_path / "data", args=("--max-connections=0", "--segment-bytes=4096"))
    proc.start()
    idle: list[socket.socket] = []
    try:
        assert _limit(proc) == LIMIT
        with proc.client(timeout=60) as client:
            client.create_topic("many", PARTITIONS)
            for p in range(PARTITIONS):
                # Several segments per partition (4 KiB each), so sealed ones exist too.
                for round_ in range(3):
                    values = [f"{p}-{round_}-{i}".encode() * 20 for i in range(10)]
                    client.produce("many", p, values)
        assert _open_fds(proc) < LIMIT
        for _ in range(IDLE_CONNECTIONS):
            idle.append(socket.create_connection(("127.0.0.1", proc.native_port)))
        with proc.client(timeout=60) as client:
            for p in range(PARTITIONS):
                got: list[bytes] = []
                while len(got) < 30:
                    more = client.fetch("many", p, len(got))
                    assert more, f"partition {p}: nothing at offset {len(got)}"
                    got.extend(more)
                expected = [
                    f"{p}-{r}-{i}".encode() * 20 for r in range(3) for i in range(10)
                ]
                assert got == expected
        assert _open_fds(proc) < LIMIT
        for sock in idle:
            sock.close()
        idle.clear()
        proc.restart()
        with proc.client(timeout=60) as client:
            for p in range(0, PARTITIONS, 7):
                assert client.list_offsets("many", p)[1] == 30
                assert client.fetch("many", p, 29)[-1] == f"{p}-2-9".encode() * 20
        assert _open_fds(proc) < LIMIT
        assert "Too many open files" not in proc.log()
    finally:
        for sock in idle:
            sock.close()
        proc.stop()
