"""Large topics and many topics against a real ``twistd broker``: the control plane stays
off the reactor's critical path.

- While one client creates a topic with thousands of partitions, grows another to as
  many, and deletes the first, another client's Metadata requests are answered promptly:
  the directory work runs in the write pool without the directory's lock, and each topic
  appears to the other client all at once (absent, or with every partition).
- Creating topics one at a time costs the same per topic at the start and after
  thousands: each create appends one registry journal record instead of rewriting the
  whole registry.

The short tests run in ``make test``; the ``slow`` ones use Kafka-scale sizes (10,000
partitions, 10,000 topics).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis

from tests.brokerproc import BrokerProcess
from tests.control_plane_helpers import admin, confluent
from tests.figures import record
from tests.kafka_helpers import WAIT, RawKafka

pytestmark = [pytest.mark.clients, pytest.mark.broker]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class MetadataProbe:
    """Another client: Metadata for its own topic, back to back on one connection, each
    timed, until stopped. Every fifth round it also asks (untimed) for the large topic
    and notes its partition count: absent (0) or complete, never part of it."""

    def __init__(self, broker: BrokerProcess, own: str, watched: str) -> None:
        self._conn = RawKafka(broker, timeout=WAIT)
        self._own = self._request(own)
        self._watched = self._request(watched)
        self.samples: list[float] = []
        self.partition_counts: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metadata-probe", daemon=True)
        self.error: BaseException | None = None

    @staticmethod
    def _request(name: str) -> apis.MetadataRequest:
        return apis.MetadataRequest(
            topics=(apis.MetadataRequestTopic(name=name),), allow_auto_topic_creation=False
        )

    def _run(self) -> None:
        try:
            rounds = 0
            while not self._stop.is_set():
                start = time.perf_counter()
                (own,) = self._conn.call(ApiKey.METADATA, 8, self._own).topics
                self.samples.append(time.perf_counter() - start)
                assert own.error_code == 0
                rounds += 1
                if rounds % 5 == 0:
                    (watched,) = self._conn.call(ApiKey.METADATA, 8, self._watched).topics
                    self.partition_counts.add(len(watched.partitions))
                time.sleep(0.005)
        except BaseException as e:  # raised again on exit
            self.error = e

    def __enter__(self) -> MetadataProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(WAIT)
        self._conn.close()
        if self.error is not None:
            raise self.error


def timed_admin_call(call: Callable[[], None]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def large_topic_round(tmp_path: Path, partitions: int) -> dict[str, float]:
    """Create a ``partitions`` topic, grow another from 1 to ``partitions``, delete the
    first, each while another client's Metadata is timed; returns the figures and checks
    that the other client saw each topic absent or complete."""
    confluent()
    from confluent_kafka.admin import NewPartitions, NewTopic

    long = {"operation_timeout": 600, "request_timeout": 600}
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        client = admin(broker)
        for name in ("own", "wide"):
            client.create_topics([NewTopic(name, 1, 1)])[name].result(WAIT)
        figures: dict[str, float] = {}
        with MetadataProbe(broker, "own", "big") as probe:
            time.sleep(0.2)
            figures["create_s"] = timed_admin_call(lambda: client.create_topics(
                [NewTopic("big", partitions, 1)], **long)["big"].result(600))
            # Until the probe has seen the whole topic (it looks every few rounds).
            deadline = time.monotonic() + WAIT
            while partitions not in probe.partition_counts and time.monotonic() < deadline:
                time.sleep(0.05)
        # Absent (0) or complete: never a topic with part of its partitions.
        assert probe.partition_counts <= {0, partitions}, probe.partition_counts
        assert partitions in probe.partition_counts
        create_samples = probe.samples
        with MetadataProbe(broker, "own", "wide") as probe:
            figures["grow_s"] = timed_admin_call(lambda: client.create_partitions(
                [NewPartitions("wide", partitions)], **long)["wide"].result(600))
            time.sleep(0.2)
        assert probe.partition_counts <= {1, partitions}, probe.partition_counts
        grow_samples = probe.samples
        with MetadataProbe(broker, "own", "big") as probe:
            figures["delete_s"] = timed_admin_call(
                lambda: client.delete_topics(["big"], **long)["big"].result(600))
            time.sleep(0.2)
        assert probe.partition_counts <= {partitions, 0}, probe.partition_counts
        delete_samples = probe.samples
    finally:
        broker.stop()
    for what, samples in (("create", create_samples), ("grow", grow_samples),
                          ("delete", delete_samples)):
        figures[f"{what}_p99"] = percentile(samples, 0.99)
        figures[f"{what}_max"] = max(samples)
        figures[f"{what}_n"] = len(samples)
    return figures


def describe(partitions: int, f: dict[str, float]) -> str:
    def ms(key: str) -> str:
        return f"{f[key] * 1000:.0f} ms"

    return (
        f"{partitions:,} partitions: Metadata p99 {ms('create_p99')} (max "
        f"{ms('create_max')}, n={f['create_n']:.0f}) during a {f['create_s']:.1f} s create; "
        f"p99 {ms('grow_p99')} during a {f['grow_s']:.1f} s grow 1->{partitions:,}; "
        f"p99 {ms('delete_p99')} during a {f['delete_s']:.1f} s delete"
    )


def check_latency(f: dict[str, float]) -> None:
    # Before, every Metadata waited for the whole create (seconds, the lock held by
    # the create); now only for the GIL and the reactor's own work. Generous bounds for
    # a loaded 2-core machine.
    for what in ("create", "grow", "delete"):
        assert f[f"{what}_p99"] < 0.5, f
        assert f[f"{what}_max"] < 1.0, f


def test_metadata_answered_while_a_2000_partition_topic_is_created(tmp_path: Path) -> None:
    f = large_topic_round(tmp_path, 2000)
    record("Metadata p99 during a 2,000-partition create", describe(2000, f))
    check_latency(f)


@pytest.mark.slow
def test_metadata_answered_while_a_10000_partition_topic_is_created(tmp_path: Path) -> None:
    f = large_topic_round(tmp_path, 10000)
    record("Metadata p99 during a 10,000-partition create", describe(10000, f))
    check_latency(f)


def process_user_seconds(pid: int) -> float:
    """User-mode CPU time of process ``pid`` so far (Linux ``/proc``): the broker's own
    Python work, without the kernel's file-system time, which other jobs on the machine
    contend for."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime is field 14 of the line, 12 after the name.
    return int(fields[11]) / os.sysconf("SC_CLK_TCK")


def create_one_by_one(tmp_path: Path, total: int, block: int) -> list[tuple[float, float]]:
    """(wall seconds, broker user CPU seconds) per ``block`` topics, creating ``total``
    with one CreateTopics each."""
    confluent()
    from confluent_kafka.admin import NewTopic

    # The write-back of an earlier test's files would otherwise be charged to the first
    # block (each create fsyncs).
    os.sync()
    broker = BrokerProcess(tmp_path / "data").start()
    assert broker.proc is not None
    pid = broker.proc.pid
    try:
        client = admin(broker)
        blocks: list[tuple[float, float]] = []
        for first in range(0, total, block):
            start, cpu = time.perf_counter(), process_user_seconds(pid)
            for i in range(first, first + block):
                name = f"t{i:05d}"
                client.create_topics([NewTopic(name, 1, 1)])[name].result(WAIT)
            blocks.append((time.perf_counter() - start, process_user_seconds(pid) - cpu))
        del client
        # Durable and complete after a crash.
        broker.kill()
        broker.start()
        with broker.client() as native:
            assert len(native.list_topics()) == total
    finally:
        broker.stop()
    return blocks


def check_linear(blocks: list[tuple[float, float]], block: int, total: int) -> str:
    """The figure comparing the first thousand topics with the last; asserts that the
    broker's CPU per create did not grow."""
    k = max(1, 1000 // block)  # blocks per thousand topics
    first, last = blocks[:k], blocks[-k:]
    figure = (
        f"first 1,000: {sum(w for w, _ in first):.1f} s ({sum(c for _, c in first):.1f} s "
        f"broker user CPU); last 1,000 (up to {total:,}): {sum(w for w, _ in last):.1f} s "
        f"({sum(c for _, c in last):.1f} s user CPU)"
    )
    # Before, every create rewrote the whole registry (JSON encoding: user CPU), so the
    # broker's CPU per create grew with the topic count (quadratic in all). The measure is
    # the broker's user CPU in the quietest block of each thousand: wall time and kernel
    # time (fsync, mkdir) on a machine shared with other jobs vary by 2x from block to
    # block.
    quiet_first = min(c for _, c in first)
    quiet_last = min(c for _, c in last)
    assert quiet_last < 2.0 * quiet_first, figure
    return f"{figure}; quietest-block user CPU ratio {quiet_last / quiet_first:.2f}"


def test_topic_creation_cost_is_linear_in_the_number_of_topics(tmp_path: Path) -> None:
    blocks = create_one_by_one(tmp_path, 3000, 250)
    record("time to create 1,000 vs 3,000 topics", check_linear(blocks, 250, 3000))


@pytest.mark.slow
def test_creating_10000_topics_one_by_one_is_linear(tmp_path: Path) -> None:
    blocks = create_one_by_one(tmp_path, 10000, 250)
    record("time to create 1,000 vs 10,000 topics", check_linear(blocks, 250, 10000))
