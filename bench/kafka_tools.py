"""Apache Kafka's Java side of ``make bench``: the JVM kit (the jars of one Kafka release
that ``make jvm-deps`` copies into tests/jvm/lib, as tests/jvm/pom.xml pins them) and
Kafka's own producer and consumer perf tests, run the same way against brokerd and
against Apache Kafka.

The tools run with the heap and collector flags Kafka's scripts give them
(``kafka-producer-perf-test.sh`` sets ``-Xmx512M``; ``kafka-run-class.sh`` adds G1 and its
pause target), not the test kit's small C1-only launchers: a perf test that is not
JIT-compiled would measure the JVM's interpreter. Their figures are the tools' own
(``records/sec`` of ProducerPerformance from the first send to the last acknowledgement,
``fetch.nMsg.sec`` of ConsumerPerformance after the group join), so the JVM's start-up is
not in them, unlike kcat's rows.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from bench.common import REPO, TOOL_TIMEOUT

KIT = REPO / "tests" / "jvm" / "lib"
# What kafka-run-class.sh gives every Kafka JVM (KAFKA_JVM_PERFORMANCE_OPTS).
JVM_OPTS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true")
TOOL_HEAP = ("-Xmx512M",)
# slf4j-simple is the kit's logging binding: warnings and errors only, on stderr.
QUIET = "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"
# The broker jar and the tools jar: both must be there for the Kafka rows.
NEEDED_JARS = ("kafka_2.13-*.jar", "kafka-tools-*.jar", "kafka-clients-*.jar")

PERF_PRODUCE = "Kafka ProducerPerformance, acks=all, linger.ms=5"
PERF_CONSUME = "Kafka ConsumerPerformance (fetch rate after the group join)"
PERF_TIMEOUT_MS = 60_000

# "200000 records sent, 17497.81 records/sec (1.67 MB/sec), ..." (the last line).
_PRODUCED = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec", re.MULTILINE)


def java() -> str | None:
    return shutil.which("java")


def missing() -> str:
    """Why Kafka's jars cannot run here ("" when they can)."""
    if java() is None:
        return "java not found (a JDK 17+; `make jvm-deps` also needs mvn and javac)"
    absent = [p for p in NEEDED_JARS if not any(KIT.glob(p))]
    if absent:
        return f"Kafka jars missing in {KIT.relative_to(REPO)} (`make jvm-deps`)"
    return ""


def command(main_class: str, *args: str, heap: tuple[str, ...] = TOOL_HEAP,
            log_level: str = QUIET) -> list[str]:
    """The ``java`` command running ``main_class`` on the kit's classpath."""
    binary = java()
    assert binary is not None, missing()
    return [binary, *heap, *JVM_OPTS, log_level, "-cp", f"{KIT}/*", main_class, *args]


def version() -> str | None:
    """Kafka's release, from the broker jar's name."""
    jar = next(iter(sorted(KIT.glob("kafka_2.13-*.jar"))), None)
    return None if jar is None else jar.stem.removeprefix("kafka_2.13-")


def _run(main_class: str, *args: str) -> str:
    done = subprocess.run(command(main_class, *args), capture_output=True, text=True,
                          timeout=TOOL_TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"{main_class.rsplit('.', 1)[-1]} exited {done.returncode}: "
                           f"{(done.stderr or done.stdout)[-400:]}")
    return done.stdout


# The producer configs of the perf-test rows, as the other clients' rows set them.
PERF_PROPS = ("acks=all", "linger.ms=5")


def producer_perf(bootstrap: str, topic: str, records: int, size: int, *,
                  props: tuple[str, ...] = PERF_PROPS) -> float:
    """Records/s ProducerPerformance reports for ``records`` values of ``size`` bytes,
    sent as fast as it can (``--throughput -1``), with the producer configs ``props``
    (``name=value``)."""
    out = _run(
        "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
        "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", *props,
    )
    found = _PRODUCED.findall(out)
    if not found or int(found[-1][0]) != records:
        raise RuntimeError(f"ProducerPerformance: no final line for {records} records: "
                           f"{out[-300:]!r}")
    return float(found[-1][1])


def consumer_perf(bootstrap: str, topic: str, records: int) -> float:
    """ConsumerPerformance's ``fetch.nMsg.sec`` reading ``records`` from ``topic`` (the
    rate once the consumer has joined its group and fetches)."""
    out = _run(
        "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap,
        "--topic", topic, "--num-records", str(records), "--timeout", str(PERF_TIMEOUT_MS),
        "--group", f"perf-{topic}",
    )
    lines = [x for x in out.splitlines() if x.strip()]
    head = next((i for i, x in enumerate(lines) if x.startswith("start.time")), None)
    if head is None or head + 1 >= len(lines):
        raise RuntimeError(f"ConsumerPerformance printed no figures: {out[-300:]!r}")
    fields = dict(zip([c.strip() for c in lines[head].split(",")],
                      [c.strip() for c in lines[head + 1].split(",")], strict=False))
    got = int(float(fields["data.consumed.in.nMsg"]))
    if got != records:
        raise RuntimeError(f"ConsumerPerformance consumed {got} of {records} records")
    return float(fields["fetch.nMsg.sec"])
