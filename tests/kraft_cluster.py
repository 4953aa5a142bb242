"""A real Apache Kafka cluster in KRaft mode on loopback, for the migration tests.

Each node is one ``kafka.Kafka`` JVM (the jars of ``tests/jvm/pom.xml``) in combined mode
(``process.roles=broker,controller``): with N nodes the controller quorum has N static
voters. Every node gets free 127.0.0.1 ports for its broker and controller listeners, its
log directory under the test's tmp dir (formatted first with ``kafka.tools.StorageTool``,
as ``kafka-storage.sh format`` does), a small heap and a log file beside its data. Nodes
are stopped by their own PID.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from brokerd.storage.topic_ids import format_topic_id, new_topic_id

from tests.brokerproc import free_port, wait_for_port
from tests.judge_drivers import JVM_DIR

TOOLS = JVM_DIR / "bin"
#: A combined broker+controller node moves kilobytes here; 320 MiB is room for its
#: metadata log, the group coordinator and a few producers.
NODE_HEAP = "-Xmx320m"
#: A first start formats nothing (done before), elects a leader and creates no topic yet:
#: ~10-20 s per JVM on two shared cores, and three JVMs start at once.
START_TIMEOUT = 180.0
#: A clean shutdown (controlled shutdown, logs flushed) takes seconds; past this, SIGKILL.
STOP_TIMEOUT = 20.0


def cluster_id() -> str:
    """A KRaft cluster id as Kafka draws one: a random UUID in URL-safe base64 without
    padding, never starting with '-' (kafka-storage's parser would take it for an
    option; one draw in 64 does)."""
    return format_topic_id(new_topic_id())


class KafkaNode:
    def __init__(self, node_id: int, workdir: Path) -> None:
        self.node_id = node_id
        self.broker_port = free_port()
        self.controller_port = free_port()
        self.log_dir = workdir / f"kafka-{node_id}"
        self.properties = workdir / f"kafka-{node_id}.properties"
        self.log_path = workdir / f"kafka-{node_id}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def write_properties(self, voters: str, replication: int) -> None:
        min_isr = 2 if replication >= 3 else 1
        self.properties.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    f"node.id={self.node_id}",
                    f"controller.quorum.voters={voters}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.broker_port},"
                    f"CONTROLLER://127.0.0.1:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.broker_port}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    f"log.dirs={self.log_dir}",
                    # Topics come from MirrorMaker (with their configs) or from the test,
                    # never from a client's metadata request.
                    "auto.create.topics.enable=false",
                    f"offsets.topic.replication.factor={replication}",
                    "offsets.topic.num.partitions=5",
                    f"transaction.state.log.replication.factor={replication}",
                    f"transaction.state.log.min.isr={min_isr}",
                    "transaction.state.log.num.partitions=5",
                    f"default.replication.factor={replication}",
                    f"min.insync.replicas={min_isr}",
                    "group.initial.rebalance.delay.ms=0",
                    "num.network.threads=2",
                    "num.io.threads=2",
                    "background.threads=2",
                    "",
                ]
            )
        )

    def format(self, cid: str) -> None:
        done = subprocess.run(
            [
                str(TOOLS / "kafka-storage.sh"),
                "format",
                "--cluster-id",
                cid,
                "--config",
                str(self.properties),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage.sh format failed:\n{done.stdout}\n{done.stderr}")

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(TOOLS / "kafka-server-start.sh"), str(self.properties)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={
                    **os.environ,
                    "KAFKA_HEAP_OPTS": NODE_HEAP,
                    "KAFKA_TOOLS_LOG_LEVEL": "warn",
                },
            )

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class KraftCluster:
    """``size`` combined-mode Kafka nodes forming one cluster with a ``size``-voter quorum."""

    def __init__(self, workdir: Path, size: int) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.nodes = [KafkaNode(i + 1, workdir) for i in range(size)]
        self.cluster_id = cluster_id()
        #: Replication factor of the cluster's internal topics (and of MirrorMaker's).
        self.replication = min(size, 3)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def start(self) -> KraftCluster:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        for node in self.nodes:
            node.write_properties(voters, self.replication)
            node.format(self.cluster_id)
        for node in self.nodes:
            node.start()
        deadline = time.monotonic() + START_TIMEOUT
        for node in self.nodes:
            if not wait_for_port(node.broker_port, deadline) or not node.alive():
                self.stop()
                raise RuntimeError(f"Kafka node {node.node_id} did not start:\n{node.log()}")
        self.wait_for_brokers(deadline)
        return self

    def wait_for_brokers(self, deadline: float) -> None:
        """Until the metadata lists every node as a broker (the quorum elected, all fenced in)."""
        from confluent_kafka.admin import AdminClient

        client = AdminClient({"bootstrap.servers": self.bootstrap})
        while time.monotonic() < deadline:
            try:
                metadata = client.list_topics(timeout=5)
            except Exception:  # not up yet: retried until the deadline
                time.sleep(0.5)
                continue
            if len(metadata.brokers) == len(self.nodes):
                return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError("the Kafka cluster did not register every broker in time")

    def stop(self, nodes: Sequence[KafkaNode] | None = None) -> None:
        """SIGTERM every node at once, then wait: one by one, the last voters would wait
        for a quorum that is already gone. A node still up after ``STOP_TIMEOUT`` is
        killed."""
        chosen = list(nodes or self.nodes)
        for node in chosen:
            if node.alive():
                assert node.proc is not None
                node.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for node in chosen:
            if node.proc is None:
                continue
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()
