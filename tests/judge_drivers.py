"""One small driver per outside client of the judges' suite (``tests/e2e/test_judges.py``):
Kafka's Java client (``tests/jvm/``), the Go clients franz-go, sarama and segmentio/kafka-go
(``tests/go/``) and @platformatic/kafka (``tests/node/platformatic.mjs``).

Each client's program runs a named scenario (create a topic with configs, produce, consume,
a group member, an admin call) and prints what its client reported as one line of JSON,
``{"ok": ...}`` or ``{"error": "..."}``; a driver here only starts that program and hands
the answer back. The assertions, and the independent reads through confluent-kafka that
check what the broker really stored, are in the suite.

The Java driver keeps one JVM for a whole test module (a scenario per stdin line), since a
JVM's start costs more than most scenarios; the Go and Node programs start per scenario.
``make jvm-deps``, ``make go-deps`` and ``make node-deps`` build what these run. A missing
toolchain skips its client's tests, saying so, except on CI (``CI`` set), where every
judge must run.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import IO, Any, ClassVar

import pytest

from tests.brokerproc import REPO, BrokerProcess

#: Upper bound of one scenario: the programs bound every client call by 30 s themselves.
SCENARIO_TIMEOUT = 90.0

JVM_DIR = REPO / "tests" / "jvm"
JVM_LIB = JVM_DIR / "lib"
#: Kafka Connect and MirrorMaker 2, a release of their own (tests/jvm/connect/pom.xml).
JVM_CONNECT_LIB = JVM_DIR / "lib-connect"
JVM_CLASSES = REPO / "build" / "jvm" / "classes"
GO_BINARY = REPO / "build" / "go" / "judge"
NODE_DIR = REPO / "tests" / "node"
#: A small heap and the quick JIT tier: the scenarios move kilobytes, and two cores are
#: shared by the whole suite.
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")


class ScenarioError(AssertionError):
    """The client reported a failure: its own message, as the client put it."""


def missing(what: str) -> None:
    """Skip (or, on CI, fail) a test whose client's toolchain or build is missing."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI must run every judge)")
    pytest.skip(what)


def answer(client: str, scenario: str, line: str, stderr: str = "") -> Any:
    """The value of one ``{"ok": ...}`` answer; a ``{"error": ...}`` one raises."""
    if not line.strip():
        raise ScenarioError(f"{client} {scenario}: no answer; stderr: {stderr[-2000:]}")
    outcome = json.loads(line)
    if "error" in outcome:
        raise ScenarioError(f"{client} {scenario}: {outcome['error']}")
    return outcome["ok"]


class Judge(ABC):
    """One outside client against one broker."""

    name: ClassVar[str]
    #: What a consumer commits for a record it processed: the next offset (Kafka's
    #: convention, 1) or the record's own (0; the client resumes after it).
    commit_past_record: ClassVar[int] = 1

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker

    @classmethod
    @abstractmethod
    def require(cls) -> None:
        """Skip the test if the client's toolchain or build is missing."""

    @abstractmethod
    def run(self, scenario: str, *args: object) -> Any:
        """Run one scenario; return what the client reported (raise ScenarioError if it
        reported a failure)."""

    @abstractmethod
    def close(self) -> None:
        """Release what the driver keeps between scenarios."""


class JavaJudge(Judge):
    """Kafka's Java client (``tests/jvm/src``): one JVM, a scenario per line."""

    name = "java"

    @classmethod
    def require(cls) -> None:
        if shutil.which("java") is None:
            missing("java is not installed (CI installs JDK 17)")
        if not (JVM_CLASSES / "brokerd" / "judge" / "Judge.class").exists():
            missing("the Java judge is not built: run `make jvm-deps`")

    def __init__(self, broker: BrokerProcess) -> None:
        super().__init__(broker)
        classpath = os.pathsep.join([str(JVM_CLASSES), str(JVM_LIB / "*")])
        self.proc = subprocess.Popen(
            ["java", *JVM_OPTIONS, "-cp", classpath, "brokerd.judge.Judge"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._pump(self.proc.stdout, self.lines.put)
        self._pump(self.proc.stderr, self.stderr.append)

    @staticmethod
    def _pump(stream: IO[str], sink: Any) -> None:
        def pump() -> None:
            for line in stream:
                sink(line)

        threading.Thread(target=pump, daemon=True).start()

    def run(self, scenario: str, *args: object) -> Any:
        assert self.proc.stdin is not None
        words = [scenario, self.broker.kafka_bootstrap, *map(str, args)]
        assert not any("\t" in w or "\n" in w for w in words), words
        self.proc.stdin.write("\t".join(words) + "\n")
        self.proc.stdin.flush()
        try:
            line = self.lines.get(timeout=SCENARIO_TIMEOUT)
        except queue.Empty:
            raise ScenarioError(
                f"java {scenario}: no answer; stderr: {self.stderr[-20:]}"
            ) from None
        return answer(self.name, scenario, line, "".join(self.stderr[-20:]))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _ProgramJudge(Judge):
    """A client whose program runs one scenario per process."""

    def command(self, scenario: str, args: tuple[object, ...]) -> list[str]:
        raise NotImplementedError

    cwd: ClassVar[Path] = REPO

    def close(self) -> None:
        pass  # each scenario's process has ended with it

    def run(self, scenario: str, *args: object) -> Any:
        done = subprocess.run(
            self.command(scenario, args),
            capture_output=True,
            text=True,
            timeout=SCENARIO_TIMEOUT,
            cwd=self.cwd,
            check=False,
        )
        lines = done.stdout.strip().splitlines()
        return answer(self.name, scenario, lines[-1] if lines else "", done.stderr)


class GoJudge(_ProgramJudge):
    """One of the Go clients, all in the one binary ``make go-deps`` builds."""

    @classmethod
    def require(cls) -> None:
        if not GO_BINARY.exists():
            missing("the Go judge is not built: run `make go-deps` (needs go)")

    def command(self, scenario: str, args: tuple[object, ...]) -> list[str]:
        return [str(GO_BINARY), self.name, scenario, self.broker.kafka_bootstrap, *map(str, args)]


class FranzJudge(GoJudge):
    """franz-go (kgo, kadm): negotiates the highest version of every API."""

    name = "franz"


class SaramaJudge(GoJudge):
    """IBM/sarama with ``Config.Version`` = Kafka 4.2.1."""

    name = "sarama"


class KafkaGoJudge(GoJudge):
    """segmentio/kafka-go."""

    name = "kafkago"


class PlatformaticJudge(_ProgramJudge):
    """@platformatic/kafka, as ``tests/node/package-lock.json`` pins it."""

    name = "platformatic"
    cwd = NODE_DIR
    # message.commit() commits the message's own offset, and a consumer in 'committed'
    # mode resumes one past it: against Kafka too, the group's offsets are one lower.
    commit_past_record = 0

    @classmethod
    def require(cls) -> None:
        if shutil.which("node") is None:
            missing("node is not installed (CI has node 20 and npm)")
        if not (NODE_DIR / "node_modules" / "@platformatic" / "kafka" / "package.json").exists():
            missing("@platformatic/kafka is not installed: run `make node-deps`")

    def command(self, scenario: str, args: tuple[object, ...]) -> list[str]:
        node = shutil.which("node") or "node"
        script = str(NODE_DIR / "platformatic.mjs")
        return [node, script, scenario, self.broker.kafka_bootstrap, *map(str, args)]


#: Every judge, by the name the tests use.
JUDGES: dict[str, type[Judge]] = {
    j.name: j for j in (JavaJudge, FranzJudge, SaramaJudge, KafkaGoJudge, PlatformaticJudge)
}
