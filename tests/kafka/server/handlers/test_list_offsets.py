"""ListOffsets (:mod:`brokerd.kafka.server.handlers.list_offsets`) on the Kafka listener,
over StringTransport and the fake core: earliest, latest, by timestamp, the special
timestamps of each version, read_committed's latest, a partition named twice."""

from __future__ import annotations

from typing import Any

import attrs
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.handlers.list_offsets import SPECIAL_SINCE, timestamp_refused
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.requests import apis

from tests.kafka.listener.test_protocol import KafkaTestCase, batch


class TimestampRefusedTests(SynchronousTestCase):
    def test_a_special_timestamp_from_its_version_on_and_others_never(self) -> None:
        for timestamp, since in SPECIAL_SINCE.items():
            self.assertTrue(timestamp_refused(timestamp, since - 1), timestamp)
            self.assertFalse(timestamp_refused(timestamp, since), timestamp)
        self.assertTrue(timestamp_refused(-7, 11))
        self.assertFalse(timestamp_refused(0, 0))
        self.assertFalse(timestamp_refused(1_700_000_000_000, 1))


class ListOffsetsTests(KafkaTestCase):
    def test_earliest_latest_and_timestamp(self) -> None:
        self.core.add_topic("t")
        self.core.logs[("t", 0)] = [batch()] * 7
        self.core.log_start[("t", 0)] = 2
        got = [self.listed(5, ts) for ts in (-2, -1, 1000, 99999)]
        # No record that new: no offset, timestamp or leader epoch (-1), as Kafka's.
        self.assertEqual(got, [(0, 2, -1, 0), (0, 7, -1, 0), (0, 3, 1234, 0),
                               (0, -1, -1, -1)])
        self.send(ApiKey.LIST_OFFSETS, 5, self.request(-2, topic="nope"))
        self.assertEqual(self.one().topics[0].partitions[0].error_code,
                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    @staticmethod
    def request(*timestamps: int, topic: str = "t", isolation: int = 0) -> Any:
        return apis.ListOffsetsRequest(isolation_level=isolation, topics=(apis.ListOffsetsTopic(
            name=topic, partitions=tuple(
                apis.ListOffsetsPartition(partition_index=i, timestamp=ts)
                for i, ts in enumerate(timestamps)
            )),))

    def listed(self, version: int, timestamp: int, isolation: int = 0) -> tuple[int, ...]:
        """(error, offset, timestamp, leader epoch) of partition 0 of "t"."""
        self.send(ApiKey.LIST_OFFSETS, version, self.request(timestamp, isolation=isolation))
        p = self.one().topics[0].partitions[0]
        return (p.error_code, p.offset, p.timestamp, p.leader_epoch)

    def test_special_timestamps_of_v7_to_v11(self) -> None:
        self.core.add_topic("t")
        self.core.logs[("t", 0)] = [batch()] * 7
        self.core.log_start[("t", 0)] = 2
        self.assertEqual(self.listed(7, -3), (0, 6, 9999, 0))  # MAX_TIMESTAMP
        self.assertEqual(self.listed(8, -4), (0, 2, -1, 0))  # earliest local = log start
        # No tiered storage: Kafka answers no offset, no error.
        self.assertEqual(self.listed(9, -5), (0, -1, -1, -1))  # latest tiered
        self.assertEqual(self.listed(11, -6), (0, -1, -1, -1))  # earliest pending upload
        self.core.logs[("t", 0)] = []
        self.core.log_start[("t", 0)] = 0
        self.assertEqual(self.listed(11, -3), (0, -1, -1, -1))  # no record at all

    def test_special_timestamp_below_its_version_or_unknown_refused(self) -> None:
        self.core.add_topic("t")
        self.core.logs[("t", 0)] = [batch()] * 3
        for version, ts in [(6, -3), (7, -4), (8, -5), (10, -6), (11, -7), (1, -3)]:
            self.assertEqual(self.listed(version, ts)[0], ErrorCode.UNSUPPORTED_VERSION,
                             (version, ts))

    def test_max_timestamp_at_or_past_the_lso_is_no_offset_for_read_committed(self) -> None:
        self.core.add_topic("t")
        self.core.logs[("t", 0)] = [batch()] * 7
        self.core.lso[("t", 0)] = 4
        self.assertEqual(self.listed(11, -3, isolation=1), (0, -1, -1, -1))
        self.assertEqual(self.listed(11, -3, isolation=0), (0, 6, 9999, 0))
        self.core.lso[("t", 0)] = 7
        self.assertEqual(self.listed(11, -3, isolation=1), (0, 6, 9999, 0))

    def test_partition_named_twice_is_invalid_request(self) -> None:
        self.core.add_topic("t", partitions=2)
        self.core.logs[("t", 0)] = [batch()] * 2
        self.core.logs[("t", 1)] = [batch()] * 2
        twice = apis.ListOffsetsRequest(topics=(apis.ListOffsetsTopic(name="t", partitions=(
            apis.ListOffsetsPartition(partition_index=0, timestamp=-1),
            apis.ListOffsetsPartition(partition_index=0, timestamp=-2),
            apis.ListOffsetsPartition(partition_index=1, timestamp=-1),
        )),))
        self.send(ApiKey.LIST_OFFSETS, 11, twice)
        got = [(p.partition_index, p.error_code, p.offset)
               for p in self.one().topics[0].partitions]
        self.assertEqual(got, [(0, ErrorCode.INVALID_REQUEST, -1),
                               (0, ErrorCode.INVALID_REQUEST, -1), (1, 0, 2)])

    def test_latest_is_the_lso_for_read_committed(self) -> None:
        self.core.add_topic("t")
        self.core.logs[("t", 0)] = [batch()] * 7
        self.core.lso[("t", 0)] = 4
        latest = (apis.ListOffsetsPartition(partition_index=0, timestamp=-1),)
        request = apis.ListOffsetsRequest(
            topics=(apis.ListOffsetsTopic(name="t", partitions=latest),))
        got = []
        for version, isolation in [(5, 1), (5, 0), (2, 1), (1, 1)]:
            self.send(ApiKey.LIST_OFFSETS, version,
                      attrs.evolve(request, isolation_level=isolation))
            got.append(self.one().topics[0].partitions[0].offset)
        # v1 has no isolation level on the wire: read_uncommitted.
        self.assertEqual(got, [4, 7, 4, 7])
        self.assertEqual([c[2] for c in self.core.list_offsets_calls],
                         [True, False, True, False])
