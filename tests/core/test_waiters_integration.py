"""Long poll against a real ``twistd broker`` on loopback, with every consumer we support:
the native client (type 6), ``brokerctl consume --follow``, confluent-kafka, kafka-python,
aiokafka and kcat.

* A parked consumer receives a record produced afterwards promptly. Each consumer asks
  for a 5 s wait, and we check through a counting proxy that its fetch really stayed
  parked (no new fetch request for a while before the produce), so an answer well under
  a second proves the append woke it rather than the timeout.
* An idle consumer costs the broker next to nothing: over 3 s with a 1 s maximum wait
  the broker handles a few fetches (about one per second), and its process uses only a
  sliver of one core (measured from ``/proc/<pid>/stat``).
* ``brokerctl consume --follow`` prints records as they arrive and carries on across a
  broker restart and a crash, with no duplicate and no gap.

The proxy (``tests/countingproxy.py``) sits between consumer and broker; records are
produced straight to the broker over the native protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.client import NativeClient

from tests.brokerproc import BROKERCTL, BrokerProcess, env
from tests.countingproxy import KAFKA_FETCH, CountingProxy

pytestmark = pytest.mark.broker

NATIVE_LONG_POLL = 6
#: brokerctl's own long-poll wait (``cli.FOLLOW_WAIT_MS``).
FOLLOW_WAIT_MS = 5000
PARKED_WAIT_MS = 5000
IDLE_WAIT_MS = 1000
IDLE_SECONDS = 3.0
#: "Promptly": far below the 5 s a consumer would otherwise wait.
PROMPT = 1.0
#: Broker CPU allowed while consumers idle, as a fraction of one core.
IDLE_CPU = 0.10
KCAT = shutil.which("kcat")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# -- consumers -----------------------------------------------------------------------


class Consumer:
    """One consumer reading one partition from an offset in a thread (or a child
    process); what it receives goes to ``received`` as ``(monotonic time, value)``."""

    kind = "kafka"  # which proxy it needs
    fetch_key = KAFKA_FETCH  # the request the proxy counts as its fetch

    def __init__(self, address: str, topic: str, offset: int, wait_ms: int) -> None:
        self.address = address
        self.topic = topic
        self.offset = offset
        self.wait_ms = wait_ms
        self.received: queue.Queue[tuple[float, bytes]] = queue.Queue()
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._guarded, daemon=True)

    def start(self) -> Consumer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._thread.join(15)
        assert not self._thread.is_alive(), f"{type(self).__name__} did not stop"
        assert not self.errors, self.errors

    def got(self, value: bytes | None) -> None:
        self.received.put((time.monotonic(), value or b""))

    def _guarded(self) -> None:
        try:
            self.run()
        except BaseException as e:  # reported by stop()
            self.errors.append(e)

    def run(self) -> None:
        raise NotImplementedError


class NativePoller(Consumer):
    kind = "native"
    fetch_key = NATIVE_LONG_POLL

    def run(self) -> None:
        host, port = self.address.rsplit(":", 1)
        with NativeClient(host, int(port)) as client:
            offset = self.offset
            while not self.stopping.is_set():
                try:
                    response = client.poll(self.topic, 0, offset, max_wait_ms=self.wait_ms)
                except OSError:
                    if self.stopping.is_set():
                        return  # the proxy closed to end a parked poll: see consuming()
                    raise
                for record in response.records:
                    self.got(record.value)
                    offset = record.offset + 1


class SubprocessConsumer(Consumer):
    """A consumer program printing one value per line."""

    def command(self) -> list[str]:
        raise NotImplementedError

    def run(self) -> None:
        proc = subprocess.Popen(
            self.command(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env()
        )
        assert proc.stdout is not None
        stdout = proc.stdout

        def read() -> None:
            for line in stdout:
                self.got(line.rstrip(b"\n"))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        self.stopping.wait()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(5)


class Brokerctl(SubprocessConsumer):
    kind = "native"
    fetch_key = NATIVE_LONG_POLL

    def command(self) -> list[str]:
        # Its wait is fixed (FOLLOW_WAIT_MS); self.wait_ms is not passed.
        return [str(BROKERCTL), "--bootstrap", self.address, "consume", self.topic,
                "--from", str(self.offset), "--follow"]


class Kcat(SubprocessConsumer):
    def command(self) -> list[str]:
        assert KCAT is not None
        return [KCAT, "-C", "-b", self.address, "-t", self.topic, "-p", "0",
                "-o", str(self.offset), "-u", "-q", "-f", "%s\\n",
                "-X", f"fetch.wait.max.ms={self.wait_ms}"]


class Confluent(Consumer):
    def run(self) -> None:
        from confluent_kafka import Consumer as CKConsumer
        from confluent_kafka import TopicPartition

        consumer = CKConsumer({
            "bootstrap.servers": self.address,
            "group.id": f"longpoll-{self.topic}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": self.wait_ms,
        })
        try:
            consumer.assign([TopicPartition(self.topic, 0, self.offset)])
            while not self.stopping.is_set():
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    self.got(msg.value())
        finally:
            consumer.close()


class KafkaPython(Consumer):
    def run(self) -> None:
        import kafka

        consumer = kafka.KafkaConsumer(
            bootstrap_servers=self.address, group_id=None, enable_auto_commit=False,
            fetch_max_wait_ms=self.wait_ms,
        )
        try:
            tp = kafka.TopicPartition(self.topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, self.offset)
            while not self.stopping.is_set():
                for records in consumer.poll(timeout_ms=100).values():
                    for record in records:
                        self.got(record.value)
        finally:
            consumer.close()


class AioKafka(Consumer):
    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        import aiokafka

        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=self.address, group_id=None, enable_auto_commit=False,
            fetch_max_wait_ms=self.wait_ms,
        )
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition(self.topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, self.offset)
            while not self.stopping.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                for records in batches.values():
                    for record in records:
                        self.got(record.value)
        finally:
            await consumer.stop()


CONSUMERS: dict[str, type[Consumer]] = {
    "native": NativePoller,
    "brokerctl": Brokerctl,
    "confluent": Confluent,
    "kafka-python": KafkaPython,
    "aiokafka": AioKafka,
    "kcat": Kcat,
}


def _available(name: str) -> None:
    if name == "kcat" and KCAT is None:
        pytest.skip("kcat is not installed")
    module = {"confluent": "confluent_kafka", "kafka-python": "kafka", "aiokafka": "aiokafka"}
    if name in module:
        pytest.importorskip(module[name])


# -- fixtures ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the wake-up and idle tests (each uses its own topic)."""
    proc = BrokerProcess(tmp_path_factory.mktemp("longpoll") / "data").start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def producer(shared_broker: BrokerProcess) -> Iterator[NativeClient]:
    with shared_broker.client() as client:
        yield client


@contextlib.contextmanager
def consuming(
    broker: BrokerProcess, name: str, topic: str, wait_ms: int
) -> Iterator[tuple[Consumer, CountingProxy]]:
    """A consumer of ``topic``/0 from offset 0, through a counting proxy, parked on its
    first fetch when this yields."""
    cls = CONSUMERS[name]
    port = broker.native_port if cls.kind == "native" else broker.kafka_port
    assert port is not None
    with CountingProxy(port, cls.kind) as proxy:  # type: ignore[arg-type]
        consumer = cls(proxy.address, topic, 0, wait_ms).start()
        try:
            assert proxy.wait_for(cls.fetch_key), f"{name} never fetched"
            yield consumer, proxy
        finally:
            if cls is NativePoller:
                # Its blocking poll would only notice the stop at the end of its wait.
                consumer.stopping.set()
                proxy.close()
            consumer.stop()


def wait_quietly(proxy: CountingProxy, key: int, seconds: float) -> None:
    """Sleep, asserting that no fetch request passed meanwhile: the one in flight stayed
    parked at the broker (an answered fetch is followed at once by the next)."""
    before = proxy.count(key)
    time.sleep(seconds)
    assert proxy.count(key) == before, "the fetch was answered while there was no data"


# -- a parked consumer wakes up at once --------------------------------------------


@pytest.mark.parametrize("name", list(CONSUMERS))
def test_parked_consumer_receives_a_later_record_promptly(
    shared_broker: BrokerProcess, producer: NativeClient, name: str
) -> None:
    _available(name)
    topic = f"wake-{name}"
    producer.create_topic(topic, 1)
    wait_ms = FOLLOW_WAIT_MS if name == "brokerctl" else PARKED_WAIT_MS
    with consuming(shared_broker, name, topic, wait_ms) as (consumer, proxy):
        for i in range(3):
            # The consumer's fetch has been sent; it stays parked for a while, so its
            # timeout is seconds away: only the append can answer it within PROMPT.
            wait_quietly(proxy, consumer.fetch_key, 0.5)
            assert consumer.received.empty(), "a record arrived before it was produced"
            fetches = proxy.count(consumer.fetch_key)
            value = b"%s-%d" % (name.encode(), i)
            producer.produce(topic, 0, [value])
            # Timed from the acknowledgement: the append's fsync is the disk's time, not
            # the wake-up's.
            sent = time.monotonic()
            arrived, got = consumer.received.get(timeout=wait_ms / 1000 + 5)
            assert got == value
            assert arrived - sent < PROMPT, f"{name}: {arrived - sent:.3f}s after produce"
            # Woken, it fetches again at once; that fetch is the next one to park.
            assert proxy.wait_for(consumer.fetch_key, fetches + 1, timeout=5)


# -- an idle consumer does not spin ------------------------------------------------


@pytest.mark.parametrize("name", list(CONSUMERS))
def test_idle_consumer_costs_next_to_nothing(
    shared_broker: BrokerProcess, producer: NativeClient, name: str
) -> None:
    _available(name)
    topic = f"idle-{name}"
    producer.create_topic(topic, 1)
    assert shared_broker.proc is not None
    pid = shared_broker.proc.pid
    with consuming(shared_broker, name, topic, IDLE_WAIT_MS) as (consumer, proxy):
        time.sleep(0.5)  # past the client's start-up requests
        start, cpu_start = time.monotonic(), cpu_seconds(pid)
        time.sleep(IDLE_SECONDS)
        end, cpu_end = time.monotonic(), cpu_seconds(pid)
        fetches = proxy.count(consumer.fetch_key, start, end)
        everything = sum(proxy.count(k, start, end) for k in {k for _, k in proxy.events})
    elapsed = end - start
    # About one fetch per max wait (one per 5 s for brokerctl); a busy loop makes
    # hundreds. A live consumer with a 1 s wait must have fetched at least once.
    wait_s = (FOLLOW_WAIT_MS if name == "brokerctl" else IDLE_WAIT_MS) / 1000
    expected = elapsed / wait_s
    assert fetches <= expected + 3, f"{name}: {fetches} fetches in {elapsed:.1f}s"
    if name != "brokerctl":
        assert fetches >= 1, f"{name}: no fetch in {elapsed:.1f}s"
    assert everything <= 2 * expected + 6, f"{name}: {everything} requests in {elapsed:.1f}s"
    load = (cpu_end - cpu_start) / elapsed
    assert load < IDLE_CPU, f"{name}: broker used {load:.0%} of a core while idle"
    assert consumer.received.empty()


# -- brokerctl consume --follow ------------------------------------------------------


class LineReader:
    """Reads a child's stdout lines in a thread."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.lines: queue.Queue[bytes] = queue.Queue()
        stdout = proc.stdout

        def read() -> None:
            for line in stdout:
                self.lines.put(line.rstrip(b"\n"))

        self._thread = threading.Thread(target=read, daemon=True)
        self._thread.start()

    def take(self, n: int, timeout: float) -> list[bytes]:
        deadline = time.monotonic() + timeout
        out: list[bytes] = []
        while len(out) < n:
            left = deadline - time.monotonic()
            try:
                out.append(self.lines.get(timeout=max(left, 0.001)))
            except queue.Empty:
                break
        return out


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_consume_follow_prints_as_records_arrive_across_restart_and_crash(
    tmp_path: Path,
) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        def produce(*values: bytes) -> None:
            with broker.client() as c:
                c.produce("follow", 0, list(values))

        with broker.client() as c:
            c.create_topic("follow", 1)
        produce(b"a0", b"a1", b"a2")
        proc = subprocess.Popen(
            [str(BROKERCTL), "--bootstrap", broker.native_bootstrap, "consume", "follow",
             "--follow"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(),
            # A suite started as a background job inherits SIGINT ignored, and Python
            # keeps an ignored SIGINT ignored: brokerctl must get Ctrl-C as a user's has.
            preexec_fn=_interruptible,
        )
        out = LineReader(proc)
        assert out.take(3, 10) == [b"a0", b"a1", b"a2"]

        # As they arrive: a record produced now is printed well before the 5 s wait.
        time.sleep(0.3)
        produce(b"b0")
        sent = time.monotonic()  # acknowledged: connecting and fsync are not the wake-up
        assert out.take(1, 5) == [b"b0"]
        assert time.monotonic() - sent < PROMPT

        # A clean restart: the parked poll is answered or cut; brokerctl reconnects and
        # goes on from the next offset.
        broker.restart()
        produce(b"c0", b"c1")
        assert out.take(2, 10) == [b"c0", b"c1"]

        # A crash (SIGKILL), with a record produced while the broker is down-and-back.
        broker.kill()
        broker.start()
        produce(b"d0")
        produce(b"d1")
        assert out.take(2, 10) == [b"d0", b"d1"]

        assert out.take(1, 0.5) == []  # nothing printed twice
        assert proc.poll() is None, "brokerctl stopped following"

        # Until interrupted: Ctrl-C ends it cleanly.
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
        assert proc.stderr is not None
        assert proc.stderr.read() == b""
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        broker.kill()
