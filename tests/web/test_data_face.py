"""The broker as the console's data pages see it: committed reads whatever way the core
answers, produces only to partitions that exist, and Kafka's default partitioner."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from brokerd.errors import OffsetOutOfRange, UnknownTopicOrPartition
from brokerd.storage.types import ReadSpec, Record
from brokerd.web.data_face import BrokerData, murmur2, partition_for

from tests.fake_core import FakeCore


def test_murmur2_and_the_default_partitioner() -> None:
    # The values of Kafka's own UtilsTest.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107
    assert partition_for(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7
    assert {partition_for(None, 3) for _ in range(3)} == {0, 1, 2}



class RaisingCore(FakeCore):
    """A core whose read refuses at once, as the real one does for an offset it knows
    is out of range."""

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, spec: ReadSpec) -> Any:
        raise OffsetOutOfRange(offset, 0, 0)


class BrokerDataTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.core = FakeCore()
        self.core.add_topic("t", 2)
        self.data = BrokerData(self.core, None)  # type: ignore[arg-type]

    def test_reads_are_committed_and_an_immediate_refusal_is_a_failure(self) -> None:
        self.core.logs[("t", 0)].append(b"batch")
        read = self.successResultOf(self.data.read("t", 0, 0, 100))
        self.assertEqual(read.records, b"batch")
        self.assertEqual(self.core.fetch_calls, [("t", 0, 0, 100, True)])
        data = BrokerData(RaisingCore(), None)  # type: ignore[arg-type]
        self.failureResultOf(data.read("t", 0, 5, 100), OffsetOutOfRange)

    def test_a_produce_reaches_only_an_existing_partition(self) -> None:
        info = self.successResultOf(
            self.data.produce("t", 1, [Record(0, 5, b"k", b"v")], timestamp_ms=5)
        )
        self.assertEqual(info.base_offset, 0)
        [(topic, partition, batch, acks)] = self.core.produce_calls
        self.assertEqual((topic, partition, acks), ("t", 1, -1))
        self.assertIn(b"v", batch)
        for topic, partition in (("t", 2), ("t", -1), ("missing", 0)):
            self.failureResultOf(
                self.data.produce(topic, partition, [], timestamp_ms=5), UnknownTopicOrPartition
            )
        self.assertNotIn("missing", self.core.topics())

    def test_create_topic_passes_the_configs_to_the_core(self) -> None:
        self.successResultOf(self.data.create_topic("new", 3, {"retention.ms": "5"}))
        self.assertEqual(self.core.topics()["new"].configs, {"retention.ms": "5"})
