"""The error codes a Kafka answer carries, found at every level of its message once."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.observe import kafka_errors
from brokerd.kafka.wire.messages.fetch import FetchPartitionResponse, FetchTopicResponse
from brokerd.kafka.wire.requests import apis


class KafkaErrorsTest(SynchronousTestCase):
    def test_kafka_errors_found_at_every_level_once(self) -> None:
        answer = apis.ProduceResponse(
            responses=(
                apis.ProduceTopicResponse(
                    name="t",
                    partition_responses=(
                        apis.ProducePartitionResponse(index=0, error_code=0),
                        apis.ProducePartitionResponse(
                            index=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
                        ),
                        apis.ProducePartitionResponse(
                            index=2, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
                        ),
                    ),
                ),
                apis.ProduceTopicResponse(
                    name="u",
                    partition_responses=(
                        apis.ProducePartitionResponse(
                            index=0, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        ),
                    ),
                ),
            )
        )
        self.assertEqual(
            kafka_errors(answer), ["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION"]
        )
        self.assertEqual(kafka_errors(apis.FetchResponse(error_code=9999)), ["UNKNOWN_9999"])
        self.assertEqual(kafka_errors(apis.FetchResponse()), [])
        # Nested two levels down, beside the fields the walk skips by their wire type
        # (records, offsets): found.
        fetched = apis.FetchResponse(responses=(FetchTopicResponse(topic="t", partitions=(
            FetchPartitionResponse(partition_index=0, records=b"x" * 70, high_watermark=3),
            FetchPartitionResponse(
                partition_index=1, error_code=ErrorCode.OFFSET_OUT_OF_RANGE
            ),
        )),))
        self.assertEqual(kafka_errors(fetched), ["OFFSET_OUT_OF_RANGE"])
        self.assertEqual(kafka_errors(object()), [])
