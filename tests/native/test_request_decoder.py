"""The native connection's request decoder (``brokerd.native.request_decoder``), sans-IO:
plain bytes in, requests and refusals out, no transport and no clock."""

from __future__ import annotations

import ast
import struct

from twisted.trial.unittest import SynchronousTestCase

from brokerd.native.messages import ErrorCode, FetchRequest, ProduceRequest, Request
from brokerd.native.request_decoder import (
    LONG_POLL_EAGER_READ_BYTES,
    MAX_UNREAD_SLACK_BYTES,
    NativeDecoder,
    Refusal,
)

from tests import paths
from tests.native_helpers import fetch_frame, produce_frame

ONE: tuple[object, ...] = (object(),)  # one request in flight
NONE: tuple[object, ...] = ()


def parks(request: Request) -> bool:
    return isinstance(request, FetchRequest)


class NativeDecoderTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.decoder = NativeDecoder(parks, max_produce_bytes=1024)

    def test_one_request_at_a_time_the_rest_undecoded(self) -> None:
        frame = produce_frame("t", 0, [b"a"])
        self.decoder.receive(frame + frame)
        first = self.decoder.next_request(NONE)
        self.assertIsInstance(first, ProduceRequest)
        self.assertEqual(self.decoder.last_request_bytes, len(frame))
        self.assertIsNone(self.decoder.next_request(ONE))
        self.assertEqual(self.decoder.buffered, len(frame))
        self.assertIsInstance(self.decoder.next_request(NONE), ProduceRequest)
        self.assertIsNone(self.decoder.next_request(NONE))

    def test_a_refusal_is_an_aside(self) -> None:
        self.decoder.receive(struct.pack(">H", 999))
        refusal = self.decoder.next_request(NONE)
        assert isinstance(refusal, Refusal)
        self.assertEqual(refusal.error.code, ErrorCode.UNKNOWN_REQUEST_TYPE)
        self.assertTrue(refusal.error.fatal)

    def test_partial_frame_is_pending_only_while_nothing_is_in_flight(self) -> None:
        self.decoder.receive(fetch_frame("t", 0, 0)[:5])
        self.assertIsNone(self.decoder.next_request(NONE))
        self.assertTrue(self.decoder.frame_pending(NONE))
        self.assertFalse(self.decoder.frame_pending(ONE))

    def test_reads_ahead_a_little_behind_a_parked_request_only(self) -> None:
        self.decoder.receive(fetch_frame("t", 0, 0))
        self.assertIsInstance(self.decoder.next_request(NONE), FetchRequest)
        self.assertTrue(self.decoder.read_ahead())
        self.decoder.receive(b"\0" * LONG_POLL_EAGER_READ_BYTES)
        self.assertFalse(self.decoder.read_ahead())
        produce = NativeDecoder(parks)
        produce.receive(produce_frame("t", 0, [b"a"]))
        produce.next_request(NONE)
        self.assertFalse(produce.read_ahead())

    def test_undecoded_input_beyond_its_bound_is_a_fault(self) -> None:
        frame = produce_frame("t", 0, [b"a"])
        self.decoder.receive(frame)
        self.decoder.next_request(NONE)
        self.assertIsNone(self.decoder.overflow())
        self.decoder.receive(frame * ((1024 + MAX_UNREAD_SLACK_BYTES) // len(frame) + 1))
        self.assertIsNotNone(self.decoder.overflow())

    def test_input_bytes_and_loss(self) -> None:
        self.decoder.receive(fetch_frame("t", 0, 0)[:5])
        self.assertEqual(self.decoder.input_bytes(), 5)
        self.decoder.lost()
        self.assertEqual(self.decoder.input_bytes(), 0)
        self.assertFalse(self.decoder.frame_pending(NONE))


class NoTwistedTests(SynchronousTestCase):
    def test_the_decoder_module_imports_no_twisted(self) -> None:
        path = paths.REPO / "brokerd" / "native" / "request_decoder.py"
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        self.assertEqual([n for n in names if n.startswith("twisted")], [])
