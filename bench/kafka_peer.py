"""Apache Kafka as a peer of ``make bench``: one single-node KRaft broker (the broker and
its controller in one JVM, ``process.roles=broker,controller``), started from the jars
of the JVM kit (bench/kafka_tools.py).

Each peer has a home directory in the run's scratch tree, on the same disk as brokerd's
data: ``server.properties`` written here, ``kafka-logs/`` (``log.dirs``) formatted once
with ``kafka.tools.StorageTool format --standalone`` (what ``kafka-storage.sh format
--standalone`` runs), and the JVM's output in ``kafka.log``. Both listeners are on
127.0.0.1 at free ports chosen when the peer is made; they stay the same across restarts
(the controller's address is part of the formatted quorum). The broker runs as
``kafka-server-start.sh`` runs it: a 1 GiB heap (``-Xmx1G -Xms1G``) and G1. Everything
else is Kafka's default, except the replication factors of its internal topics (one
broker: 1) and ``group.initial.rebalance.delay.ms=0`` (no 3 s wait before a group's first
rebalance, as Kafka's own sample config for a single node has). It is stopped by its own
PID.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import kafka_tools
from bench.common import kafka_answers, rss_bytes
from brokerd.storage.topic_ids import format_topic_id, new_topic_id

from tests.brokerproc import free_port

SYSTEM = "Apache Kafka"
BROKER_HEAP = ("-Xmx1G", "-Xms1G")
# The JVM's INFO lines are many; the log keeps warnings (startup problems show there).
BROKER_LOG = kafka_tools.QUIET
READY_TIMEOUT = 600.0
STOP_TIMEOUT = 600.0
ADMIN_TIMEOUT = 120.0
# Written by the log manager at the end of a clean shutdown, one per log directory.
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
# The JVM exits 128 + SIGTERM once its shutdown hook (Kafka's clean stop) has run.
SIGTERM_EXIT = 128 + signal.SIGTERM

SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def missing() -> str:
    """Why no Kafka peer can run here ("" when it can)."""
    why = kafka_tools.missing()
    if why:
        return why
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "confluent-kafka missing (the peer's topics are made with its admin client)"
    return ""


def _cluster_id() -> str:
    """A KRaft cluster id as Kafka draws one: a random UUID in URL-safe base64 without
    padding, never starting with '-' (kafka-storage's parser would take it for an
    option; one draw in 64 does)."""
    return format_topic_id(new_topic_id())


class KafkaPeer:
    """One Apache Kafka broker process in ``home`` (formatted on its first start)."""

    def __init__(self, home: Path, *, settings: dict[str, str] | None = None) -> None:
        self.home = home
        self.log_dir = home / "kafka-logs"
        self.port = free_port()
        self.controller_port = free_port()
        self.properties = home / "server.properties"
        self.log_path = home / "kafka.log"
        self.settings = {**SETTINGS, **(settings or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self._admin_client: Any = None

    @property
    def kafka_bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _write_properties(self) -> None:
        listeners = (f"PLAINTEXT://127.0.0.1:{self.port},"
                     f"CONTROLLER://127.0.0.1:{self.controller_port}")
        values = {
            **self.settings,
            "listeners": listeners,
            "advertised.listeners": listeners,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.log_dir),
        }
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in values.items()))

    def format(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self._write_properties()
        done = subprocess.run(
            kafka_tools.command("kafka.tools.StorageTool", "format", "--standalone",
                                "-t", _cluster_id(), "-c", str(self.properties)),
            capture_output=True, text=True, timeout=READY_TIMEOUT,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed: {done.stderr[-1000:]}")

    def spawn(self) -> None:
        """Start the JVM without waiting (``start`` and ``start_timed`` wait)."""
        assert self.proc is None or self.proc.poll() is not None
        if not (self.log_dir / "meta.properties").exists():
            self.format()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                kafka_tools.command("kafka.Kafka", str(self.properties), heap=BROKER_HEAP,
                                    log_level=BROKER_LOG),
                stdout=log, stderr=subprocess.STDOUT, cwd=self.home,
            )

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"

    def answers(self) -> bool:
        """Both listeners answer an ApiVersions request (the broker's and the
        controller's)."""
        return kafka_answers(self.port) and kafka_answers(self.controller_port)

    def start_timed(self) -> float:
        """Seconds from starting the JVM until both listeners answer."""
        begin = time.perf_counter()
        self.spawn()
        assert self.proc is not None
        while time.perf_counter() - begin < READY_TIMEOUT:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.proc.returncode} while starting; "
                                   f"log:\n{self.log()[-2000:]}")
            if self.answers():
                return time.perf_counter() - begin
            time.sleep(0.02)
        self.kill()
        raise RuntimeError("Kafka did not answer in time")

    def start(self) -> KafkaPeer:
        self.start_timed()
        return self

    def stop_timed(self) -> float:
        """Seconds from SIGTERM to exit: Kafka's controlled shutdown (it flushes every
        log and writes its clean-shutdown marker)."""
        assert self.proc is not None
        self._admin_client = None
        begin = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError("Kafka did not stop on SIGTERM") from None
        seconds = time.perf_counter() - begin
        if code not in (0, SIGTERM_EXIT) or not (self.log_dir / CLEAN_SHUTDOWN_FILE).exists():
            raise RuntimeError(f"Kafka exited with {code} on SIGTERM, not cleanly")
        return seconds

    def kill(self) -> None:
        """SIGKILL: the crash path, and the end of a peer whose data is scratch."""
        self._admin_client = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def rss(self) -> int:
        return rss_bytes(self.pid)

    # -- through Kafka's own protocol (confluent-kafka's admin client) ------------------

    def _admin(self) -> Any:
        """The peer's admin client, kept while the broker runs: a client dropped while
        its requests are out fails them ("handle destroyed"). A new one after each
        start: the old one's cached leader epochs are fenced by the restarted broker."""
        if self._admin_client is None:
            from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

            self._admin_client = AdminClient({"bootstrap.servers": self.kafka_bootstrap})
        return self._admin_client

    def create_topic(self, name: str, partitions: int,
                     config: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        topic = NewTopic(name, num_partitions=partitions, replication_factor=1,
                         config=config or {})
        for future in self._admin().create_topics(
            [topic], operation_timeout=ADMIN_TIMEOUT, request_timeout=ADMIN_TIMEOUT
        ).values():
            future.result()

    def end_offsets(self, topic: str, partitions: int) -> list[int]:
        """The end offset of each of ``topic``'s first ``partitions`` partitions (one
        ListOffsets request)."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
        found = self._admin().list_offsets(wanted, request_timeout=ADMIN_TIMEOUT)
        ends = {tp.partition: future.result().offset for tp, future in found.items()}
        return [ends[p] for p in range(partitions)]

    def end_offset(self, topic: str, partition: int) -> int:
        return self.end_offsets(topic, partition + 1)[partition]

    def partition_dirs(self) -> int:
        """Partition directories the broker has made in its log directory."""
        return sum(1 for p in self.log_dir.iterdir() if p.is_dir() and "-" in p.name
                   and not p.name.startswith("__"))
