"""Kafka Connect (the JVM framework, distributed mode) with brokerd as its Kafka.

One worker (``org.apache.kafka.connect.cli.ConnectDistributed``, from the jars of
``tests/jvm/pom.xml``) keeps its config, offset and status topics on a real
``twistd broker``. A FileStreamSource connector reads a file this test appends lines to
into a topic; a FileStreamSink connector writes that topic into another file. The worker
is killed (SIGKILL) mid-stream and restarted; the sink file must then hold every line.

What is checkable, and checked: Connect is at-least-once here. The source commits its file
position and the sink its consumer offsets every ``offset.flush.interval.ms``; after a kill
each resumes from its last commit, so lines handled since then may be written again.
The test waits until both commits cover the first batch (read back from brokerd: the
sink group's committed offset and the source's record in the offset topic), then appends
the second batch and kills the worker while it is being appended. So: every line reaches
the sink, in the order appended (counting each line's first appearance); lines of the
first batch (committed before the kill) and of the third (appended after it) appear
exactly once; only the second batch, the uncommitted tail, may repeat.

``make jvm-deps`` fetches the jars; without java or them the tests skip (on CI they fail).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.brokerproc import BrokerProcess, free_port
from tests.figures import record
from tests.judge_drivers import JVM_CONNECT_LIB, JVM_OPTIONS, missing

pytestmark = pytest.mark.broker

WORKER_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
#: The worker's first start creates its three topics and joins its group; ~20 s on two
#: shared cores, so the bound is generous.
WORKER_START_TIMEOUT = 120.0
#: After a kill -9 the restarted worker waits for the dead member's session to expire
#: (``session.timeout.ms`` below) and rebalances before its tasks run again.
DELIVERY_TIMEOUT = 120.0
CONFIG_TOPIC = "connect-configs"
OFFSET_TOPIC = "connect-offsets"
STATUS_TOPIC = "connect-status"
DATA_TOPIC = "connect-lines"
SOURCE = "lines-source"
SINK = "lines-sink"


def require_connect() -> None:
    if shutil.which("java") is None:
        missing("java is not installed (CI installs JDK 17)")
    if not any(JVM_CONNECT_LIB.glob("connect-runtime-*.jar")) or not any(
        JVM_CONNECT_LIB.glob("connect-file-*.jar")
    ):
        missing("Kafka Connect's jars are missing: run `make jvm-deps`")


def wait_until(
    what: str, check: Callable[[], bool], timeout: float, log: Callable[[], str]
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; worker log tail:\n{log()[-6000:]}")


class ConnectWorker:
    """One distributed Connect worker process, its REST API on a free loopback port."""

    def __init__(self, workdir: Path, bootstrap: str, extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.properties = workdir / "worker.properties"
        self.log_path = workdir / "worker.log"
        self.properties.write_text(
            "\n".join(
                [
                    f"bootstrap.servers={bootstrap}",
                    "group.id=brokerd-connect",
                    f"config.storage.topic={CONFIG_TOPIC}",
                    f"offset.storage.topic={OFFSET_TOPIC}",
                    f"status.storage.topic={STATUS_TOPIC}",
                    "config.storage.replication.factor=1",
                    "offset.storage.replication.factor=1",
                    "status.storage.replication.factor=1",
                    # Connect's defaults (25 and 5); the config topic is always one partition.
                    "offset.storage.partitions=25",
                    "status.storage.partitions=5",
                    "key.converter=org.apache.kafka.connect.json.JsonConverter",
                    "value.converter=org.apache.kafka.connect.json.JsonConverter",
                    "key.converter.schemas.enable=false",
                    "value.converter.schemas.enable=false",
                    "offset.flush.interval.ms=500",
                    # The restarted worker's group must drop the killed member soon, and
                    # hand its tasks out at once rather than after Connect's five minute
                    # grace for a worker that may come back.
                    "session.timeout.ms=6000",
                    "heartbeat.interval.ms=2000",
                    "scheduled.rebalance.max.delay.ms=0",
                    # Likewise the sink task's consumer group, whose dead member would
                    # otherwise hold the rebalance for the consumer's default 45 s.
                    "consumer.session.timeout.ms=6000",
                    "consumer.heartbeat.interval.ms=2000",
                    f"listeners=http://127.0.0.1:{self.port}",
                    *extra,
                    "",
                ]
            )
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ConnectWorker:
        assert self.proc is None or self.proc.poll() is not None
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    "java",
                    *JVM_OPTIONS,
                    "-Dorg.slf4j.simpleLogger.showDateTime=true",
                    "-cp",
                    str(JVM_CONNECT_LIB / "*"),
                    WORKER_CLASS,
                    str(self.properties),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_until("the worker's REST API", self.ready, WORKER_START_TIMEOUT, self.log)
        return self

    def ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(
                f"the worker exited ({self.proc.returncode}):\n{self.log()[-6000:]}"
            )
        try:
            self.get("/connectors")
        except (OSError, urllib.error.URLError):
            return False
        return True

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def put_connector(self, name: str, config: dict[str, str]) -> Any:
        return self.request("PUT", f"/connectors/{name}/config", config)

    def running(self, name: str) -> bool:
        try:
            status = self.get(f"/connectors/{name}/status")
        except urllib.error.HTTPError:
            return False
        tasks = status.get("tasks", [])
        return bool(
            status["connector"]["state"] == "RUNNING"
            and tasks
            and all(t["state"] == "RUNNING" for t in tasks)
        )


class Pipeline:
    """Source file -> connect-lines on brokerd -> sink file, and brokerd-side read-backs."""

    def __init__(self, workdir: Path, broker: BrokerProcess) -> None:
        self.broker = broker
        self.source_file = workdir / "source.txt"
        self.sink_file = workdir / "sink.txt"
        self.source_file.write_text("")
        self.appended: list[str] = []

    def connect(self, worker: ConnectWorker) -> None:
        worker.put_connector(
            SOURCE,
            {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "file": str(self.source_file),
                "topic": DATA_TOPIC,
                "tasks.max": "1",
            },
        )
        worker.put_connector(
            SINK,
            {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "file": str(self.sink_file),
                "topics": DATA_TOPIC,
                "tasks.max": "1",
            },
        )

    def append(
        self, lines: list[str], pause: float = 0.0, during: Callable[[int], None] | None = None
    ) -> None:
        for i, line in enumerate(lines):
            with self.source_file.open("a") as f:
                f.write(line + "\n")
            self.appended.append(line)
            if during is not None:
                during(i)
            if pause:
                time.sleep(pause)

    def sunk(self) -> list[str]:
        try:
            text = self.sink_file.read_text()
        except FileNotFoundError:
            return []
        # Only whole lines: the sink may be caught between a line and its newline.
        return text.split("\n")[:-1]

    def all_sunk(self) -> bool:
        return set(self.appended) <= set(self.sunk())

    def consumer(self, group: str) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": self.broker.kafka_bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )

    def sink_committed(self) -> int:
        """The sink task's committed offset on partition 0 of the data topic."""
        consumer = self.consumer(f"connect-{SINK}")
        try:
            (tp,) = consumer.committed([TopicPartition(DATA_TOPIC, 0)], timeout=10)
            return int(tp.offset)
        finally:
            consumer.close()

    def topic_records(self) -> list[tuple[int, str]]:
        """(offset, line) of every committed record of the data topic, read from brokerd."""
        consumer = self.consumer(f"probe-{uuid.uuid4()}")
        out: list[tuple[int, str]] = []
        try:
            tp = TopicPartition(DATA_TOPIC, 0)
            _, high = consumer.get_watermark_offsets(tp, timeout=10)
            consumer.assign([TopicPartition(DATA_TOPIC, 0, 0)])
            idle = 0
            deadline = time.monotonic() + 20
            # Transaction markers may sit past the last record, so the end is the high
            # watermark or a second of silence, whichever comes first.
            while high > 0 and idle < 4 and time.monotonic() < deadline:
                msg = consumer.poll(0.25)
                if msg is None or msg.error():
                    idle += 1
                    continue
                idle = 0
                out.append((msg.offset(), json.loads(msg.value())))
                if msg.offset() + 1 >= high:
                    break
        finally:
            consumer.close()
        return out

    def data_end(self) -> int:
        """One past the offset of the data topic's last record (a sink commits that)."""
        records = self.topic_records()
        return records[-1][0] + 1 if records else 0

    def source_position(self) -> int:
        """The source task's last committed file position, read from the offset topic."""
        consumer = self.consumer(f"probe-{uuid.uuid4()}")
        position = -1
        try:
            metadata = consumer.list_topics(OFFSET_TOPIC, timeout=10)
            partitions = [
                TopicPartition(OFFSET_TOPIC, p) for p in metadata.topics[OFFSET_TOPIC].partitions
            ]
            ends = {
                p.partition: consumer.get_watermark_offsets(p, timeout=10)[1] for p in partitions
            }
            consumer.assign(
                [TopicPartition(OFFSET_TOPIC, p, 0) for p, end in ends.items() if end > 0]
            )
            remaining = {p for p, end in ends.items() if end > 0}
            deadline = time.monotonic() + 20
            while remaining and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                if msg.offset() + 1 >= ends[msg.partition()]:
                    remaining.discard(msg.partition())
                key = json.loads(msg.key() or b"null")
                if key and key[0] == SOURCE and msg.value():
                    position = int(json.loads(msg.value())["position"])
        finally:
            consumer.close()
        return position

    def committed_everything(self) -> bool:
        """Both tasks have committed past every line appended so far."""
        size = self.source_file.stat().st_size
        return self.source_position() == size and self.sink_committed() == self.data_end() > 0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    require_connect()
    data = tmp_path / "data"
    data.mkdir()
    proc = BrokerProcess(data).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def worker(tmp_path: Path, broker: BrokerProcess) -> Iterator[ConnectWorker]:
    w = ConnectWorker(tmp_path, broker.kafka_bootstrap)
    try:
        yield w.start()
    finally:
        w.kill()


def batch(name: str, count: int) -> list[str]:
    return [f"{name}-{i:04d}" for i in range(count)]


def assert_delivered(pipeline: Pipeline, once: list[str], repeatable: list[str]) -> None:
    """Every line sunk in order of first appearance; only ``repeatable`` lines repeat."""
    sunk = pipeline.sunk()
    first_seen = list(dict.fromkeys(sunk))
    assert first_seen == pipeline.appended, "lines lost, invented or out of order"
    counts = Counter(sunk)
    repeated_once_lines = sorted(line for line in once if counts[line] != 1)
    assert not repeated_once_lines, f"committed lines written again: {repeated_once_lines[:10]}"
    # The source re-reads at most the uncommitted tail once and the sink re-writes at most
    # what it had not committed: a line of the tail can therefore reach the file up to 3x.
    assert all(counts[line] <= 3 for line in repeatable), counts.most_common(3)


def run_kill_restart(
    pipeline: Pipeline, worker: ConnectWorker, crash_broker: bool, label: str = ""
) -> None:
    first, second, third = batch("before", 40), batch("during", 60), batch("after", 40)
    pipeline.append(first)
    wait_until("the first batch in the sink file", pipeline.all_sunk, DELIVERY_TIMEOUT, worker.log)
    assert pipeline.sunk() == first
    wait_until(
        "both tasks to commit the first batch", pipeline.committed_everything, 30, worker.log
    )

    sunk_at_kill = 0

    def kill_midway(i: int) -> None:
        nonlocal sunk_at_kill
        if i == len(second) // 2:
            worker.kill()
            if crash_broker:
                pipeline.broker.kill()
            sunk_at_kill = len(set(pipeline.sunk()) & set(second))

    # Slow enough that the source has read, and the sink written, part of the batch
    # when the worker dies (the source polls its file about once a second when idle).
    pipeline.append(second, pause=0.1, during=kill_midway)
    pipeline.append(third)
    restarted = time.monotonic()
    if crash_broker:
        pipeline.broker.start()
    worker.start()
    wait_until("every line in the sink file", pipeline.all_sunk, DELIVERY_TIMEOUT, worker.log)
    recovered = time.monotonic() - restarted
    # A little longer, so late duplicates would show too.
    time.sleep(2)
    assert_delivered(pipeline, once=first + third, repeatable=second)
    what = "worker and broker kill -9" if crash_broker else "worker kill -9"
    repeats = len(pipeline.sunk()) - len(pipeline.appended)
    record(
        f"Connect {what}{label}",
        f"all {len(pipeline.appended)} lines sunk {recovered:.1f} s after the restart; "
        f"{sunk_at_kill} of the {len(second)}-line batch in the sink at the kill, "
        f"{repeats} duplicate line(s)",
    )


def test_rest_api_and_internal_topics(worker: ConnectWorker, broker: BrokerProcess) -> None:
    root = worker.get("/")
    assert root["version"] == "4.3.1"
    assert root["kafka_cluster_id"]
    assert worker.get("/connectors") == []
    plugins = {p["class"]: p["type"] for p in worker.get("/connector-plugins")}
    assert plugins["org.apache.kafka.connect.file.FileStreamSourceConnector"] == "source"
    assert plugins["org.apache.kafka.connect.file.FileStreamSinkConnector"] == "sink"

    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    topics = admin.list_topics(timeout=10).topics
    assert len(topics[CONFIG_TOPIC].partitions) == 1
    assert len(topics[OFFSET_TOPIC].partitions) == 25
    assert len(topics[STATUS_TOPIC].partitions) == 5
    resources = [ConfigResource("topic", t) for t in (CONFIG_TOPIC, OFFSET_TOPIC, STATUS_TOPIC)]
    for resource, future in admin.describe_configs(resources).items():
        config = future.result(timeout=10)
        assert config["cleanup.policy"].value == "compact", resource


def test_file_pipeline_survives_worker_kill(
    tmp_path: Path, worker: ConnectWorker, broker: BrokerProcess
) -> None:
    pipeline = Pipeline(tmp_path, broker)
    pipeline.connect(worker)
    wait_until(
        "both connectors RUNNING",
        lambda: worker.running(SOURCE) and worker.running(SINK),
        60,
        worker.log,
    )
    assert sorted(worker.get("/connectors")) == sorted([SOURCE, SINK])
    run_kill_restart(pipeline, worker, crash_broker=False)
    assert worker.running(SOURCE) and worker.running(SINK)


@pytest.mark.slow
@pytest.mark.parametrize("exactly_once_source", [False, True], ids=["at_least_once", "eos_source"])
def test_file_pipeline_survives_worker_and_broker_kill(
    tmp_path: Path, broker: BrokerProcess, exactly_once_source: bool
) -> None:
    extra = ("exactly.once.source.support=enabled",) if exactly_once_source else ()
    worker = ConnectWorker(tmp_path, broker.kafka_bootstrap, extra)
    try:
        worker.start()
        pipeline = Pipeline(tmp_path, broker)
        pipeline.connect(worker)
        wait_until(
            "both connectors RUNNING",
            lambda: worker.running(SOURCE) and worker.running(SINK),
            60,
            worker.log,
        )
        label = ", exactly-once source" if exactly_once_source else ""
        run_kill_restart(pipeline, worker, crash_broker=True, label=label)
        # The connectors' configs survived in the config topic on brokerd.
        assert sorted(worker.get("/connectors")) == sorted([SOURCE, SINK])
        if exactly_once_source:
            # The source's records and its file positions commit in one transaction, so
            # a read_committed read of the topic holds every line exactly once, in order;
            # only the sink (at-least-once) may have written duplicates.
            assert [line for _, line in pipeline.topic_records()] == pipeline.appended
    finally:
        worker.kill()
