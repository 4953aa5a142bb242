"""kill -9 during a cleaning pass: the log reopens valid, nothing acknowledged lost.

A real partition directory is cleaned by a child process (tests/cleaner_crash_child.py)
killed with SIGKILL after each step of the pass (segment written, swap committed, swap
renamed, indexes rebuilt, ...) and, in the slow version, after random delays inside a
throttled pass. Each time the directory is reopened as after a crash and checked: the log
end is unchanged, offsets increase, every key's latest value is the one written last,
and everything in the active segment is intact; a full pass afterwards still works.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from brokerd.storage.cleaner.compactor import clean_log
from brokerd.storage.cleaner.keymap import OffsetMap
from brokerd.storage.types import Record

from tests import paths
from tests.brokerproc import env
from tests.compaction_helpers import (
    T0,
    latest,
    live,
    open_log,
    put,
    read_all,
    roll,
    write_overwrites,
)

Base = tuple[Path, dict[bytes, bytes], int, list[Record]]
REPO = paths.REPO


def build(path: Path) -> tuple[dict[bytes, bytes], int, list[Record]]:
    log = open_log(path)
    write_overwrites(log, keys=25, rounds=12)
    put(log, [(b"k%03d" % k, None) for k in range(0, 25, 4)], ts=T0)
    roll(log)
    state = live(latest(read_all(log)))
    end = log.log_end_offset
    active_base = log.segment_bases[-1]
    tail = [r for r in read_all(log) if r.offset >= active_base]
    log.close()
    return state, end, tail


def run_child(path: Path, step: int, delay: float = 0.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.cleaner_crash_child", str(path), str(step), str(delay)],
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def check(path: Path, state: dict[bytes, bytes], end: int, tail: list[Record]) -> None:
    log = open_log(path, point=0)
    try:
        assert log.log_end_offset == end
        records = read_all(log)
        offsets = [r.offset for r in records]
        assert offsets == sorted(set(offsets))
        assert live(latest(records)) == state
        assert [r for r in records if r.offset >= tail[0].offset] == tail
        assert not [n for n in path.iterdir() if n.name.endswith((".swap", ".cleaned"))]
        # The next pass works on whatever the crash left.
        clean_log(log, None, now_ms=T0 + 10**9, key_map=OffsetMap(1 << 20))
        assert live(latest(read_all(log))) == state
        assert log.log_end_offset == end
    finally:
        log.close()


@pytest.fixture(scope="module")
def base(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[bytes, bytes], int, list[Record]]:
    path = tmp_path_factory.mktemp("crash") / "t-0"
    state, end, tail = build(path)
    return path, state, end, tail


def test_kill_at_every_step(
    base: tuple[Path, dict[bytes, bytes], int, list[Record]], tmp_path: Path
) -> None:
    path, state, end, tail = base
    full = tmp_path / "full"
    shutil.copytree(path, full)
    done = run_child(full, 0)
    assert done.returncode == 0, done.stderr
    steps = int(done.stdout.split()[0])
    assert steps >= 5
    check(full, state, end, tail)
    for step in range(1, steps + 1):
        copy = tmp_path / f"step-{step}"
        shutil.copytree(path, copy)
        killed = run_child(copy, step)
        assert killed.returncode == -9, (step, killed.stderr)
        check(copy, state, end, tail)


@pytest.mark.slow
def test_kill_at_random_moments(base: Base, tmp_path: Path) -> None:
    path, state, end, tail = base
    rng = random.Random(8)
    for i in range(25):
        copy = tmp_path / f"random-{i}"
        shutil.copytree(path, copy)
        run_child(copy, -1, delay=rng.uniform(0.3, 1.2))
        check(copy, state, end, tail)
