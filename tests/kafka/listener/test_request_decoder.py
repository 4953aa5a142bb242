"""The Kafka connection's request decoder (``brokerd.kafka.listener.request_decoder``),
sans-IO: plain bytes in, requests and asides out, no transport and no clock."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.listener.request_decoder import (
    MAX_PIPELINED_PRODUCES,
    PIPELINE_READ_BYTES,
    Answer,
    KafkaDecoder,
    KafkaFrameFault,
    Refuse,
)
from brokerd.kafka.wire.codec import ApiKey, RequestHeader
from brokerd.kafka.wire.requests import apis

from tests import paths

NONE: tuple[object, ...] = ()


def frame(key: ApiKey, version: int, body: Any, correlation: int = 1) -> bytes:
    return apis.encode_request(RequestHeader(int(key), version, correlation, "t"), body)


def produce() -> bytes:
    return frame(ApiKey.PRODUCE, 8, apis.ProduceRequest(
        transactional_id=None, acks=1, timeout_ms=1000, topic_data=()))


def metadata() -> bytes:
    return frame(ApiKey.METADATA, 8, apis.MetadataRequest(topics=None))


class KafkaDecoderTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.decoder = KafkaDecoder(4096, reset_frame_bytes=lambda: 8192)

    def test_whole_frames_out_one_at_a_time(self) -> None:
        data = metadata() + metadata()
        self.decoder.receive(data[:7])
        self.assertTrue(self.decoder.frame_pending(NONE))
        self.assertIsNone(self.decoder.next_request(NONE))
        self.decoder.receive(data[7:])
        self.assertFalse(self.decoder.frame_pending(NONE))
        self.assertEqual(self.decoder.input_bytes(), len(data) - 8)  # the size prefixes
        first = self.decoder.next_request(NONE)
        assert not isinstance(first, Answer | Refuse) and first is not None
        self.assertIs(first.api_key, ApiKey.METADATA)
        self.assertEqual(self.decoder.last_request_bytes, len(data) // 2 - 4)
        self.assertIsNone(self.decoder.next_request((first,)))  # not a produce: waits

    def test_consecutive_produces_run_together_up_to_the_bound(self) -> None:
        self.decoder.max_frame_bytes = 1 << 20
        self.decoder.receive(produce() * (MAX_PIPELINED_PRODUCES + 1) + metadata())
        in_flight: list[object] = []
        while (request := self.decoder.next_request(in_flight)) is not None:
            in_flight.append(request)
        self.assertEqual(len(in_flight), MAX_PIPELINED_PRODUCES)
        in_flight.clear()
        self.assertIsNotNone(request := self.decoder.next_request(in_flight))
        in_flight.append(request)
        self.assertIsNone(self.decoder.next_request(in_flight))  # metadata waits

    def test_a_produce_does_not_join_a_non_produce_in_flight(self) -> None:
        self.decoder.receive(metadata() + produce())
        first = self.decoder.next_request(NONE)
        self.assertIsNone(self.decoder.next_request((first,)))

    def test_too_large_is_a_fault_and_nothing_is_kept(self) -> None:
        with self.assertRaises(KafkaFrameFault) as caught:
            self.decoder.receive((5000).to_bytes(4, "big"))
        self.assertTrue(caught.exception.too_large)
        self.assertEqual(self.decoder.input_bytes(), 0)
        self.assertEqual(self.decoder.max_frame_bytes, 8192)

    def test_unsupported_api_versions_gets_the_fallback_others_are_refused(self) -> None:
        self.decoder.receive(frame(ApiKey.API_VERSIONS, 99, apis.ApiVersionsRequest()))
        self.assertIsInstance(self.decoder.next_request(NONE), Answer)
        self.decoder.receive(bytes.fromhex("00000004" "0003" "0063"))  # Metadata v99
        self.assertIsInstance(self.decoder.next_request(NONE), Refuse)

    def test_reads_ahead_up_to_the_pipeline_bound(self) -> None:
        self.assertTrue(self.decoder.read_ahead())
        self.decoder.max_frame_bytes = 1 << 20
        self.decoder.receive((1 << 19).to_bytes(4, "big") + b"\0" * PIPELINE_READ_BYTES)
        self.assertFalse(self.decoder.read_ahead())

    def test_after_a_loss_fetches_are_dropped_the_rest_kept(self) -> None:
        fetch = frame(ApiKey.FETCH, 4, apis.FetchRequest(
            max_wait_ms=0, min_bytes=1, max_bytes=1, isolation_level=0, topics=()))
        self.decoder.receive(fetch + metadata() + b"\0\0")
        self.decoder.lost()
        self.assertFalse(self.decoder.frame_pending(NONE))
        request = self.decoder.next_request(NONE)
        assert request is not None and not isinstance(request, Answer | Refuse)
        self.assertIs(request.api_key, ApiKey.METADATA)

    def test_discard_drops_the_queue(self) -> None:
        self.decoder.receive(metadata())
        self.decoder.discard()
        self.assertIsNone(self.decoder.next_request(NONE))


class NoTwistedTests(SynchronousTestCase):
    def test_the_decoder_imports_no_twisted(self) -> None:
        code = ("import sys, brokerd.kafka.listener.request_decoder; "
                "print(sorted(m for m in sys.modules if m.split('.')[0] == 'twisted'))")
        out = subprocess.run([sys.executable, "-c", code], cwd=paths.REPO, check=True,
                             capture_output=True, text=True).stdout
        self.assertEqual(out.strip(), "[]")
