"""Kafka Streams 4.2 against brokerd: a real topology in its own JVM, checked against a
count made here.

The topology (``tests/jvm/src/brokerd/streams/Topology.java``): lines split into words,
re-keyed by word (a repartition topic), counted into a RocksDB KTable with its changelog;
the same words counted in 10 s event-time windows; and the words joined with a
``categories`` KTable, then counted per category (a second repartition). Each scenario runs
under ``at_least_once`` and ``exactly_once_v2``:

- a normal run;
- the app killed -9 while records are in flight, then restarted on the same state dir;
- the app stopped, its state directory wiped, and restarted: every store restores from
  its changelog;
- (exactly_once_v2, long) the broker killed -9 and restarted under the running app.

What is checked (docs/kafka.md, "Kafka Streams"): under exactly_once_v2 every output, read
``read_committed``, ends exactly equal to the independent count, whatever was killed.
Under at_least_once a kill may replay records whose offsets were not committed while their
updates already reached the changelog and the outputs, so after a kill each count must be
at least the true count (nothing lost) and the excess is reported; without a kill
(normal run, clean stop and wiped state) the counts must be exact.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess
from tests.figures import record
from tests.kafka_helpers import close_consumer, crash_and_restart, module_broker, wait_until
from tests.streams_app import StreamsApp, need_streams_app, true_counts

pytestmark = pytest.mark.broker

PARTITIONS = 2
VOCABULARY = [f"w{i:02d}" for i in range(12)]
CATEGORY = {w: f"c{i % 3}" for i, w in enumerate(VOCABULARY)}
WORDS_PER_LINE = 4
OUTPUTS = ("word-counts", "window-counts", "category-counts")
#: Waits for the outputs to catch up (a restart's rebalance waits out the killed member's
#: 6 s session, and an open transaction of a killed EOS producer its timeout).
CATCH_UP = 120.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "streams")


class Lines:
    """The input: lines of words with event times, produced and remembered."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.sent: list[tuple[str, int]] = []
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        self.t0 = int(time.time() * 1000) // 10_000 * 10_000

    def produce(self, count: int) -> None:
        for _ in range(count):
            i = len(self.sent)
            words = [VOCABULARY[(i * 7 + j * 5) % len(VOCABULARY)] for j in range(WORDS_PER_LINE)]
            # Event times 250 ms apart: about forty lines to a window.
            ts = self.t0 + i * 250
            text = " ".join(words)
            self.producer.produce(self.topic, value=text.encode(), timestamp=ts)
            self.producer.poll(0)
            self.sent.append((text, ts))
        assert self.producer.flush(30) == 0, "lines not acknowledged"


class Outputs:
    """The app's three output tables, read from the start (read_committed under EOS); the
    last value of each key is the table's value."""

    def __init__(self, bootstrap: str, prefix: str, guarantee: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{prefix}reader",
                "enable.auto.commit": False,
                "isolation.level": (
                    "read_committed" if guarantee == "exactly_once_v2" else "read_uncommitted"
                ),
            }
        )
        self.prefix = prefix
        self.consumer.assign(
            [TopicPartition(prefix + o, p, 0) for o in OUTPUTS for p in range(PARTITIONS)]
        )
        self.tables: dict[str, dict[str, int]] = {o: {} for o in OUTPUTS}
        self.records = 0

    def poll(self) -> None:
        for msg in self.consumer.consume(1000, 0.2):
            if msg.error():
                continue
            name = msg.topic()[len(self.prefix) :]
            self.tables[name][msg.key().decode()] = int(msg.value().decode())
            self.records += 1

    def close(self) -> None:
        close_consumer(self.consumer)


def create_topics(bootstrap: str, prefix: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = ["lines", "categories", *OUTPUTS]
    futures = admin.create_topics(
        [NewTopic(prefix + n, PARTITIONS, 1) for n in names], operation_timeout=10
    )
    for future in futures.values():
        future.result(30)


def produce_categories(bootstrap: str, topic: str, t0: int) -> None:
    # Java's partitioner (murmur2): the join needs this topic partitioned as Streams
    # partitions its repartition topic, key by key.
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for word, category in CATEGORY.items():
        # Older than every line, so the table has each word before any line is joined.
        producer.produce(topic, key=word.encode(), value=category.encode(), timestamp=t0 - 60_000)
    assert producer.flush(30) == 0


def internal_topics(bootstrap: str, app_id: str) -> set[str]:
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return {t[len(app_id) + 1 :] for t in topics if t.startswith(app_id + "-")}


def run_scenario(
    broker: BrokerProcess, tmp_path: Path, guarantee: str, action: str, lines_per_phase: int,
    protocol: str = "classic",
    while_running: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One scenario; ``protocol`` is the app's group.protocol (``classic`` or ``streams``,
    KIP-1071: the broker then assigns the tasks and creates the internal topics).
    ``while_running`` is called with the application id once the outputs caught up,
    the app still running."""
    need_streams_app()
    prefix = f"{protocol[0]}{guarantee.replace('_', '')}-{action}-{lines_per_phase}-"
    app_id = prefix + "app"
    bootstrap = broker.kafka_bootstrap
    create_topics(bootstrap, prefix)
    lines = Lines(bootstrap, prefix + "lines")
    produce_categories(bootstrap, prefix + "categories", lines.t0)
    app = StreamsApp(bootstrap, app_id, guarantee, tmp_path / "state", prefix, protocol)
    outputs = Outputs(bootstrap, prefix, guarantee)
    exact = guarantee == "exactly_once_v2" or action in ("none", "wipe")
    started = time.monotonic()
    try:
        app.start().wait_for("STATE RUNNING")
        lines.produce(lines_per_phase)

        def caught_up() -> bool:
            outputs.poll()
            want = true_counts(lines.sent, CATEGORY)
            for name, table in zip(OUTPUTS, want, strict=True):
                got = outputs.tables[name]
                if exact and got != table:
                    return False
                if any(got.get(k, 0) < v for k, v in table.items()):
                    return False
            return True

        def wait_caught_up() -> None:
            try:
                wait_until(caught_up, "the outputs to match the true counts", timeout=CATCH_UP)
            except AssertionError as e:
                want = true_counts(lines.sent, CATEGORY)
                diff = {
                    name: {
                        k: (outputs.tables[name].get(k), v)
                        for k, v in table.items()
                        if outputs.tables[name].get(k) != v
                    }
                    for name, table in zip(OUTPUTS, want, strict=True)
                }
                raise AssertionError(f"{e}; (got, want): {diff}; log:\n{app.log_tail()}") from e

        if action == "kill":
            before = outputs.records
            lines.produce(lines_per_phase)
            in_flight = before + lines_per_phase * WORDS_PER_LINE // 3
            wait_until(
                lambda: (outputs.poll(), outputs.records >= in_flight)[1],
                "output of the second batch",
                timeout=CATCH_UP,
            )
            app.kill()
            lines.produce(lines_per_phase)
            app.start().wait_for("STATE RUNNING", timeout=CATCH_UP)
        elif action == "wipe":
            wait_caught_up()
            app.stop()
            app.wipe_state()
            lines.produce(lines_per_phase)
            app.start().wait_for("STATE RUNNING", timeout=CATCH_UP)
            restored = app.restored()
            assert restored.get("word-counts", 0) > 0, f"nothing restored: {app.lines}"
            assert restored.get("window-counts", 0) > 0, f"nothing restored: {app.lines}"
        elif action == "broker-kill":
            lines.produce(lines_per_phase)
            crash_and_restart(broker)
            lines.produce(lines_per_phase)
        wait_caught_up()
        if exact:
            # Nothing more may arrive once the counts are right (no late duplicate).
            time.sleep(2)
            outputs.poll()
            assert caught_up(), f"outputs changed after catching up: {outputs.tables}"
        if while_running is not None:
            while_running(app_id)
        internal = internal_topics(bootstrap, app_id)
        for topic in (
            "word-counts-changelog",
            "window-counts-changelog",
            "category-counts-changelog",
            "by-word-repartition",
            "by-category-repartition",
            "to-join-repartition",
        ):
            assert topic in internal, f"{topic} not among {sorted(internal)}"
        want = true_counts(lines.sent, CATEGORY)
        excess = sum(outputs.tables["word-counts"].values()) - sum(want[0].values())
        return {
            "seconds": time.monotonic() - started,
            "words": sum(want[0].values()),
            "excess": excess,
            "restored": app.restored(),
        }
    finally:
        outputs.close()
        app.kill()


def test_exactly_once_killed_and_restarted(broker: BrokerProcess, tmp_path: Path) -> None:
    """EOS v2: the app killed -9 mid-stream and restarted; every count exact."""
    result = run_scenario(broker, tmp_path, "exactly_once_v2", "kill", 100)
    assert result["excess"] == 0
    record(
        "streams eos kill -9",
        f"{result['words']} words exact after kill -9 in {result['seconds']:.0f} s",
    )


def test_at_least_once_wiped_state(broker: BrokerProcess, tmp_path: Path) -> None:
    """ALOS: clean stop, state directory wiped, restart restores from the changelogs;
    counts exact (a clean close commits what the changelogs hold)."""
    result = run_scenario(broker, tmp_path, "at_least_once", "wipe", 100)
    assert result["excess"] == 0
    record("streams alos wiped state", f"restored {result['restored']}")


@pytest.mark.slow
@pytest.mark.parametrize(
    "guarantee", ["at_least_once", "exactly_once_v2"]
)
def test_normal_run(broker: BrokerProcess, tmp_path: Path, guarantee: str) -> None:
    result = run_scenario(broker, tmp_path, guarantee, "none", 300)
    assert result["excess"] == 0


@pytest.mark.parametrize(
    "lines_per_phase", [100, pytest.param(300, marks=pytest.mark.slow)], ids=["short", "long"]
)
def test_at_least_once_killed_and_restarted(
    broker: BrokerProcess, tmp_path: Path, lines_per_phase: int
) -> None:
    """ALOS after kill -9: nothing lost; the replayed excess is reported, not bounded."""
    result = run_scenario(broker, tmp_path, "at_least_once", "kill", lines_per_phase)
    assert result["excess"] >= 0
    record("streams alos kill -9", f"{result['excess']} of {result['words']} words counted twice")


@pytest.mark.slow
def test_exactly_once_wiped_state(broker: BrokerProcess, tmp_path: Path) -> None:
    result = run_scenario(broker, tmp_path, "exactly_once_v2", "wipe", 300)
    assert result["excess"] == 0


@pytest.mark.slow
def test_exactly_once_broker_killed(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """EOS v2 with the broker killed -9 and restarted under the running app."""
    for own in module_broker(tmp_path_factory, "streams-crash"):
        result = run_scenario(own, tmp_path, "exactly_once_v2", "broker-kill", 200)
        assert result["excess"] == 0
