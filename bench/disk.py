"""Disk probe: what the file system under the bench's data directories can do.

Sequential writes of 1 MiB blocks without any sync (the page cache's speed) and with a
``fdatasync`` after each block (what ``--fsync always`` pays at most per MiB), then the
latency of a ``fdatasync`` after a small 4 KiB append (what one small produce pays). Uses
the same calls the log engine uses (``brokerd.storage.fileio``). It measures the file
system, never brokerd.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.common import MB, Results, Row, percentiles
from brokerd.storage.fileio import datasync, write_all

BLOCK = 1024 * 1024
SMALL = 4096
SECTION = "ceilings"


def _write(path: Path, blocks: int, sync_each: bool) -> tuple[float, list[float]]:
    """Seconds to write ``blocks`` MiB (a final sync included) and each sync's seconds."""
    data = os.urandom(BLOCK)
    syncs: list[float] = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.perf_counter()
        for _ in range(blocks):
            write_all(fd, data)
            if sync_each:
                t = time.perf_counter()
                datasync(fd)
                syncs.append(time.perf_counter() - t)
        seconds = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    return seconds, syncs


def _small_syncs(path: Path, count: int) -> list[float]:
    data = b"s" * SMALL
    samples: list[float] = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    try:
        for _ in range(count):
            write_all(fd, data)
            t = time.perf_counter()
            datasync(fd)
            samples.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        path.unlink()
    return samples


def probe(directory: Path, results: Results, *, mebibytes: int, small_syncs: int) -> None:
    path = directory / "disk-probe.bin"
    mb = mebibytes * BLOCK / MB
    seconds, _ = _write(path, mebibytes, sync_each=False)
    results.add(
        Row(SECTION, "disk", f"sequential write, 1 MiB blocks, {mebibytes} MiB", "no sync",
            mb / seconds, "MB/s")
    )
    seconds, syncs = _write(path, mebibytes, sync_each=True)
    results.add(
        Row(SECTION, "disk", f"sequential write, 1 MiB blocks, {mebibytes} MiB",
            "fdatasync each MiB", mb / seconds, "MB/s")
    )
    results.latencies.append(percentiles("disk: fdatasync after a 1 MiB write", "", syncs))
    results.latencies.append(
        percentiles("disk: fdatasync after a 4 KiB append", "", _small_syncs(path, small_syncs))
    )
