"""brokerd's ``brokerd`` pytest fixture beside pytest-kafka-broker's ``kafka_broker``: the
same two tests (a produce/consume test and a group-consume test, confluent-kafka in
both) run under each fixture in child pytest sessions, ``--runs`` times each, and the
medians printed as the table docs/testing-with-brokerd.md shows.

Per session the children record each test's phases as pytest reports them (``setup``
is the fixture's start: spawning the broker until the fixture hands it over;
``teardown`` its stop), and, when the session ends, the peak RSS of the largest child
process they waited for (the broker: brokerd's ``twistd``, or Kafka's JVM).

pytest-kafka-broker downloads a Kafka release from archive.apache.org into astropy's
cache the first time it runs, unless that cache already holds the release's directory.
Where only package registries are reachable, this script fills a scratch cache with a
Kafka directory built from the Kafka jars of the JVM kit (tests/jvm/lib, Kafka 4.4 from
Maven Central) and three small scripts doing what Kafka's ``bin/kafka-storage.sh`` and
``bin/kafka-server-start.sh`` do (``kafka.tools.StorageTool`` and ``kafka.Kafka`` on
that classpath, with the heap from ``KAFKA_HEAP_OPTS`` and the G1 settings of Kafka's
``kafka-run-class.sh``; logs at WARN on stderr). The directory keeps the name the
plugin looks for (its pinned release), though the jars are 4.4.

pytest-kafka-broker lives in its own virtualenv (``--pkb-python``; it pulls astropy and
rich). testcontainers needs a running Docker daemon; without one its row says so.

Run (bounded: every child session has a timeout; sessions run one after another, never
two JVMs at once)::

    python -m venv .venv-pkb && .venv-pkb/bin/pip install pytest-kafka-broker
    PYTHONPATH=$PWD .venv/bin/python -m bench.fixture_compare --pkb-python .venv-pkb/bin/python

It is not part of ``make test`` or ``make bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / "tests" / "jvm" / "lib"
SESSION_TIMEOUT = 600.0
TESTS = ("test_produce_consume", "test_group_consume")
PHASES = ("setup", "call", "teardown")
#: The JVM options Kafka's kafka-run-class.sh gives every broker (KAFKA_JVM_PERFORMANCE_OPTS).
KAFKA_JVM_OPTS = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 "
                  "-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent "
                  "-Djava.awt.headless=true")
#: Kafka's scripts' default heap is 1 GiB fixed; on a shared machine the runs here cap it
#: (``--kafka-heap`` changes it).
KAFKA_HEAP = "-Xmx256m -Xms256m"

# The two tests, the same bodies under either fixture. Topics are made with the admin
# client (one partition for the plain test, three for the group's), 100 records of 100
# bytes each.
BODIES = '''
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

RECORDS = 100


def _topic(bootstrap, partitions):
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    return name


def _produce(bootstrap, topic):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=str(i).encode(), value=b"v" * 100)
    assert producer.flush(30) == 0


def _read(consumer):
    got = 0
    deadline = 60
    while got < RECORDS:
        message = consumer.poll(deadline)
        assert message is not None, f"only {got} records"
        assert message.error() is None, message.error()
        got += 1
    return got


def produce_consume(bootstrap):
    topic = _topic(bootstrap, 1)
    _produce(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        assert _read(consumer) == RECORDS
    finally:
        consumer.close()


def group_consume(bootstrap):
    topic = _topic(bootstrap, 3)
    _produce(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        assert _read(consumer) == RECORDS
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
'''

CONFTEST = '''
import json
import os
import resource
import sys

sys.path.insert(0, os.path.dirname(__file__))
_OUT = os.environ["FIXTURE_COMPARE_OUT"]


def pytest_runtest_logreport(report):
    with open(_OUT, "a") as out:
        out.write(json.dumps({"test": report.nodeid.split("::")[-1], "phase": report.when,
                              "seconds": report.duration, "outcome": report.outcome}) + "\\n")


def pytest_sessionfinish(session):
    # Linux gives ru_maxrss in KiB: the peak of the largest child waited for.
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(_OUT, "a") as out:
        out.write(json.dumps({"peak_child_rss": usage.ru_maxrss * 1024,
                              "child_cpu": usage.ru_utime + usage.ru_stime}) + "\\n")
'''

TEST_BROKERD = '''
from bodies import group_consume, produce_consume


def test_produce_consume(brokerd):
    produce_consume(brokerd.bootstrap_servers)


def test_group_consume(brokerd):
    group_consume(brokerd.bootstrap_servers)
'''

# pytest-kafka-broker's fixture is an asyncio one: the tests are coroutines (the client
# calls inside block the loop, which nothing else needs meanwhile). Its port fixture is
# overridden so that no fixed port is tried.
TEST_PKB = '''
import socket

import pytest

from bodies import group_consume, produce_consume


@pytest.fixture
def find_unused_tcp_port():
    # The plugin's own tries 9092 and 9093 first; here every port is the kernel's choice
    # (a developer's Kafka may hold those).
    def factory(default=0):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    return factory


@pytest.mark.asyncio
async def test_produce_consume(kafka_broker):
    produce_consume(kafka_broker.bootstrap_server)


@pytest.mark.asyncio
async def test_group_consume(kafka_broker):
    group_consume(kafka_broker.bootstrap_server)
'''

RUN_CLASS = '''#!/bin/sh
# Runs a Kafka class on the jars in ../libs, as Kafka's kafka-run-class.sh does.
home=$(cd "$(dirname "$0")/.." && pwd)
class=$1
shift
exec java ${KAFKA_HEAP_OPTS:--Xmx256M} @JVM_OPTS@ \\
  -Dorg.slf4j.simpleLogger.defaultLogLevel=warn ${KAFKA_OPTS:-} \\
  -cp "$home/libs/*" "$class" "$@"
'''.replace("@JVM_OPTS@", KAFKA_JVM_OPTS)

STORAGE = '''#!/bin/sh
exec "$(dirname "$0")/kafka-run-class.sh" kafka.tools.StorageTool "$@"
'''

SERVER_START = '''#!/bin/sh
# Kafka's default broker heap unless KAFKA_HEAP_OPTS says otherwise.
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}"
exec "$(dirname "$0")/kafka-run-class.sh" kafka.Kafka "$@"
'''


def _python_prints(python: str, code: str, env: dict[str, str]) -> str:
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120, check=True)
    return done.stdout.strip()


def pkb_missing(python: str | None) -> str:
    """Why pytest-kafka-broker cannot run here ("" when it can)."""
    if python is None or not Path(python).exists():
        return "no virtualenv with pytest-kafka-broker (--pkb-python)"
    if shutil.which("java") is None:
        return "java not found"
    if not any(KIT.glob("kafka_2.13-*.jar")):
        return "Kafka jars missing in tests/jvm/lib (`make jvm-deps`)"
    return ""


def docker_missing() -> str:
    if shutil.which("docker") is None:
        return "no docker command"
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "docker info did not answer"
    if done.returncode != 0:
        return "no Docker daemon running"
    return ""


def fill_pkb_cache(python: str, scratch: Path, env: dict[str, str]) -> None:
    """A Kafka directory where pytest-kafka-broker's fixture looks before downloading."""
    cache = scratch / "astropy-cache"
    cache.mkdir(parents=True, exist_ok=True)
    env["ASTROPY_CACHE_DIR"] = str(cache)
    root = Path(_python_prints(
        python, "from astropy.config import get_cache_dir_path; print(get_cache_dir_path())",
        env))
    dirname = _python_prints(
        python, "from pytest_kafka_broker import plugin as p; "
        "print(f'kafka_{p.SCALA_VERSION}-{p.KAFKA_VERSION}')", env)
    home = root / "pytest_kafka_broker" / dirname
    (home / "bin").mkdir(parents=True, exist_ok=True)
    libs = home / "libs"
    if not libs.exists():
        libs.symlink_to(KIT.resolve())
    for name, text in (("kafka-run-class.sh", RUN_CLASS), ("kafka-storage.sh", STORAGE),
                       ("kafka-server-start.sh", SERVER_START)):
        script = home / "bin" / name
        script.write_text(text)
        script.chmod(0o755)


def write_tests(scratch: Path) -> None:
    scratch.mkdir(parents=True, exist_ok=True)
    for name, text in (("bodies.py", BODIES), ("conftest.py", CONFTEST),
                       ("test_brokerd.py", TEST_BROKERD), ("test_pkb.py", TEST_PKB)):
        (scratch / name).write_text(textwrap.dedent(text).lstrip())


def one_session(python: str, test_file: str, scratch: Path, env: dict[str, str],
                extra: list[str]) -> dict[str, Any]:
    """One child pytest session: its phases by test, its peak child RSS, its wall time."""
    out = scratch / "session.jsonl"
    out.unlink(missing_ok=True)
    env = {**env, "FIXTURE_COMPARE_OUT": str(out)}
    load = os.getloadavg()[0]
    begin = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(scratch),
         "-c", "/dev/null", "--basetemp", str(scratch / "tmp"), *extra, test_file],
        cwd=scratch, env=env, capture_output=True, text=True, timeout=SESSION_TIMEOUT,
    )
    wall = time.perf_counter() - begin
    if done.returncode != 0:
        raise RuntimeError(f"{test_file} failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    session: dict[str, Any] = {"wall": wall, "load": load, "phases": {}}
    for line in out.read_text().splitlines():
        row = json.loads(line)
        if "peak_child_rss" in row:
            session["peak_rss"] = row["peak_child_rss"]
            session["cpu"] = row["child_cpu"]
        else:
            session["phases"][f"{row['test']}.{row['phase']}"] = row["seconds"]
    return session


def summary(sessions: list[dict[str, Any]]) -> dict[str, float]:
    med: dict[str, float] = {}
    # The fixture's start: both tests' setups (two starts per session).
    med["start"] = statistics.median(
        s["phases"][f"{t}.setup"] for s in sessions for t in TESTS)
    med["stop"] = statistics.median(
        s["phases"][f"{t}.teardown"] for s in sessions for t in TESTS)
    for test in TESTS:
        med[f"{test}.call"] = statistics.median(s["phases"][f"{test}.call"] for s in sessions)
        med[f"{test}.total"] = statistics.median(
            sum(s["phases"][f"{test}.{p}"] for p in PHASES) for s in sessions)
    med["peak_rss_mib"] = statistics.median(s["peak_rss"] for s in sessions) / 2**20
    med["cpu"] = statistics.median(s["cpu"] for s in sessions)
    med["wall"] = statistics.median(s["wall"] for s in sessions)
    med["load"] = statistics.median(s["load"] for s in sessions)
    return med


def table(results: dict[str, dict[str, float] | str]) -> str:
    rows = [
        ("fixture start (setup)", "start", "{:.2f} s"),
        ("fixture stop (teardown)", "stop", "{:.2f} s"),
        ("produce/consume test, body", "test_produce_consume.call", "{:.2f} s"),
        ("produce/consume test, with its fixture", "test_produce_consume.total", "{:.2f} s"),
        ("group-consume test, body", "test_group_consume.call", "{:.2f} s"),
        ("group-consume test, with its fixture", "test_group_consume.total", "{:.2f} s"),
        ("broker's peak RSS", "peak_rss_mib", "{:.0f} MiB"),
        ("broker processes' CPU time, whole session", "cpu", "{:.1f} s"),
        ("whole session (both tests, pytest start-up)", "wall", "{:.2f} s"),
        ("load average at session start", "load", "{:.2f}"),
    ]
    names = list(results)
    lines = ["| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label, key, fmt in rows:
        cells = []
        for name in names:
            result = results[name]
            cells.append(result if isinstance(result, str) else fmt.format(result[key]))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="sessions per fixture (median)")
    parser.add_argument("--pkb-python", default=str(REPO / ".venv-pkb" / "bin" / "python"),
                        help="python of a virtualenv holding pytest-kafka-broker")
    parser.add_argument("--brokerd-python", default=sys.executable,
                        help="python of a virtualenv where brokerd and its plugin import")
    parser.add_argument("--kafka-heap", default=KAFKA_HEAP, help="KAFKA_HEAP_OPTS for Kafka")
    parser.add_argument("--variant-runs", type=int, default=3,
                        help="sessions of pytest-kafka-broker with "
                        "group.initial.rebalance.delay.ms=0 (0: none)")
    parser.add_argument("--scratch", type=Path, default=REPO / "build" / "fixture-compare")
    parser.add_argument("--json", type=Path, help="write the medians here as well")
    args = parser.parse_args(argv)

    scratch: Path = args.scratch.resolve()
    # The children run in the scratch directory: interpreters by absolute path (not
    # resolved: a virtualenv's python is a symlink that must stay one).
    args.pkb_python = os.path.abspath(args.pkb_python)
    args.brokerd_python = os.path.abspath(args.brokerd_python)
    shutil.rmtree(scratch, ignore_errors=True)
    write_tests(scratch)
    base = dict(os.environ)
    base.pop("PYTEST_ADDOPTS", None)
    base.pop("NOTIFY_SOCKET", None)
    if args.brokerd_python == os.path.abspath(sys.executable):
        # The source tree's brokerd (its pytest plugin is the installed entry point).
        base["PYTHONPATH"] = str(REPO) + os.pathsep + base.get("PYTHONPATH", "")

    results: dict[str, dict[str, float] | str] = {}
    plans: list[tuple[str, str, str, list[str]]] = [
        ("brokerd fixture", args.brokerd_python, "test_brokerd.py", [])]
    why = pkb_missing(args.pkb_python)
    pkb_env = {k: v for k, v in base.items() if k != "PYTHONPATH"}
    if why:
        results["pytest-kafka-broker"] = f"not run: {why}"
    else:
        fill_pkb_cache(args.pkb_python, scratch, pkb_env)
        pkb_env["KAFKA_HEAP_OPTS"] = args.kafka_heap
        plans.append(("pytest-kafka-broker", args.pkb_python, "test_pkb.py", ["--kafka"]))
        if args.variant_runs:
            plans.append(("pytest-kafka-broker, rebalance delay 0", args.pkb_python,
                          "test_pkb.py",
                          ["--kafka", "-o",
                           "kafka_broker_extra_config=group.initial.rebalance.delay.ms=0"]))
    sessions: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in plans}
    # Alternate the fixtures run by run, so load from elsewhere falls on all of them.
    for run in range(max(args.runs, args.variant_runs)):
        for name, python, test_file, extra in plans:
            if run >= (args.variant_runs if "delay 0" in name else args.runs):
                continue
            env = base if python == args.brokerd_python and name.startswith("brokerd") \
                else pkb_env
            session = one_session(python, test_file, scratch, env, extra)
            sessions[name].append(session)
            print(f"run {run + 1} {name}: {session['wall']:.1f} s "
                  f"(load {session['load']:.2f})", file=sys.stderr)
    # The measured columns first, then those that could not run.
    results = {**{name: summary(runs) for name, runs in sessions.items()}, **results}
    why = docker_missing()
    results["testcontainers (Kafka image)"] = (
        f"not run: {why}" if why else "not measured by this script")
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
