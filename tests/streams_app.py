"""The Kafka Streams application of ``tests/jvm/src/brokerd/streams`` as a child process,
and the independent count its outputs are checked against.

The app runs in its own JVM (small heap, its state directory under the test's tmp dir) and
prints ``STATE <state>`` and ``RESTORED <store> <partition> <records>`` lines on stdout;
:class:`StreamsApp` reads them on a thread so a test can wait for RUNNING or a restore.
Its stderr (the Streams and client log) goes to a file that failures quote.
"""

from __future__ import annotations

import collections
import shutil
import subprocess
import threading
import time
from pathlib import Path

from tests.judge_drivers import JVM_CLASSES, JVM_LIB, JVM_OPTIONS, missing

#: Event-time window of the windowed count, as the topology declares it.
WINDOW_MS = 10_000
#: A JVM start, the group's join and the tasks' restore, on a loaded two-core machine.
START_WAIT = 90.0


def need_streams_app() -> None:
    """Skip (fail on CI) without a JDK or without the built topology."""
    if shutil.which("java") is None:
        missing("java is not installed (CI installs JDK 17)")
    if not (JVM_CLASSES / "brokerd" / "streams" / "Topology.class").exists():
        missing("the Kafka Streams topology is not built: run `make jvm-deps`")
    if not any(JVM_LIB.glob("kafka-streams-*.jar")):
        missing("kafka-streams is not in tests/jvm/lib: run `make jvm-deps`")


class StreamsApp:
    """One instance of the topology; start, kill -9, stop cleanly, start again."""

    def __init__(
        self, bootstrap: str, app_id: str, guarantee: str, state_dir: Path, prefix: str,
        protocol: str = "classic",
    ) -> None:
        self.args = [bootstrap, app_id, guarantee, str(state_dir), prefix, protocol]
        self.state_dir = state_dir
        self.log_path = state_dir.parent / f"{app_id}-streams.log"
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._cond = threading.Condition()

    def start(self) -> StreamsApp:
        assert self.proc is None or self.proc.poll() is not None
        with self._cond:
            self.lines = []
        classpath = f"{JVM_CLASSES}:{JVM_LIB}/*"
        log = self.log_path.open("a")
        self.proc = subprocess.Popen(
            ["java", *JVM_OPTIONS, "-cp", classpath, "brokerd.streams.Topology", *self.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        log.close()
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self._cond:
                self.lines.append(line.strip())
                self._cond.notify_all()

    def wait_for(self, line: str, timeout: float = START_WAIT) -> None:
        """Wait for ``line`` on the app's stdout; fail quoting the log's tail."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while line not in self.lines:
                left = deadline - time.monotonic()
                if left <= 0 or any(x.startswith("FAILED") for x in self.lines):
                    break
                self._cond.wait(min(left, 0.5))
            else:
                return
        raise AssertionError(
            f"streams app: no {line!r} after {timeout:.0f}s; stdout {self.lines};"
            f" log tail:\n{self.log_tail()}"
        )

    def command(self, line: str) -> None:
        """Send ``add-thread`` or ``remove-thread`` (the app answers THREAD-ADDED or
        THREAD-REMOVED with the thread's name)."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_prefix(self, prefix: str, timeout: float = START_WAIT) -> str:
        """The first stdout line starting with ``prefix`` (waited for)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if line.startswith(prefix):
                        return line
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
        raise AssertionError(f"streams app: no {prefix!r} line; stdout {self.lines}")

    def restored(self) -> dict[str, int]:
        """Records restored from the changelogs per store, as the app reported them."""
        out: collections.Counter[str] = collections.Counter()
        with self._cond:
            for line in self.lines:
                parts = line.split()
                if parts[0] == "RESTORED":
                    out[parts[1]] += int(parts[3])
        return dict(out)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL: no commit, no close, open transactions left open."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        """SIGTERM: Streams closes, committing and flushing its stores."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError("streams app did not stop on SIGTERM") from None

    def wipe_state(self) -> None:
        """Remove the state directory: the next start restores every store from its
        changelog (and takes a new process id, hence new transactional ids)."""
        assert self.proc is None or self.proc.poll() is not None
        shutil.rmtree(self.state_dir, ignore_errors=True)


# -- the independent count ---------------------------------------------------------------


def words_of(line: str) -> list[str]:
    return [w for w in line.lower().split() if w]


def true_counts(
    lines: list[tuple[str, int]], category: dict[str, str]
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Word counts, windowed counts (``word@start``) and per-category counts of ``lines``
    (text, event time in ms), computed here without Kafka."""
    words: collections.Counter[str] = collections.Counter()
    windows: collections.Counter[str] = collections.Counter()
    categories: collections.Counter[str] = collections.Counter()
    for text, ts in lines:
        for word in words_of(text):
            words[word] += 1
            windows[f"{word}@{ts - ts % WINDOW_MS}"] += 1
            categories[category[word]] += 1
    return dict(words), dict(windows), dict(categories)
