"""Answers sent when written (``brokerd.net.prompt_write``), on Twisted's real TCP
transport around a real socket pair: the peer has the bytes before the reactor gets a
turn, bytes the transport already holds go first, what the kernel does not take is left
to the transport, and small spliced frames go out whole as bytes.

No reactor runs: the transport is given a ``MemoryReactor`` (it only records
``startWriting``), and the test plays the reactor's write turn (``doWrite``) by hand.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.internet import tcp
from twisted.internet.protocol import Protocol
from twisted.internet.testing import MemoryReactor, StringTransport

from brokerd.net.frames import SplicedFrame
from brokerd.net.prompt_write import (
    SMALL_FRAME_BYTES,
    small_frame_bytes,
    write_now,
    write_sequence_now,
)
from brokerd.net.sendfile import RegionLedger
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches
from brokerd.storage.segment.stored import StoredSpan

from tests.read_specs import REFERENCE, span_of


@pytest.fixture
def pair() -> Iterator[tuple[tcp.Connection, socket.socket, MemoryReactor]]:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    a.setblocking(False)
    b.setblocking(False)
    reactor = MemoryReactor()
    transport = tcp.Connection(a, Protocol(), reactor)  # type: ignore[arg-type]
    transport.connected = 1
    yield transport, b, reactor
    a.close()
    b.close()


def received(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return out
        out += chunk


def test_sent_before_the_reactor_turns(
    pair: tuple[tcp.Connection, socket.socket, MemoryReactor],
) -> None:
    transport, peer, reactor = pair
    write_now(transport, b"answer")
    assert received(peer) == b"answer"
    assert transport not in reactor.getWriters(), "no write turn was needed"
    write_sequence_now(transport, [b"head", b"records", b"tail"])
    assert received(peer) == b"headrecordstail"


def test_bytes_the_transport_holds_go_first(
    pair: tuple[tcp.Connection, socket.socket, MemoryReactor],
) -> None:
    transport, peer, _reactor = pair
    transport.write(b"first ")  # buffered: Twisted sends it in its write turn
    write_now(transport, b"second ")
    write_sequence_now(transport, [b"third ", b"fourth"])
    assert received(peer) == b"", "nothing may overtake the buffered bytes"
    transport.doWrite()
    assert received(peer) == b"first second third fourth"


def test_what_the_kernel_does_not_take_is_left_to_the_transport(
    pair: tuple[tcp.Connection, socket.socket, MemoryReactor],
) -> None:
    transport, peer, reactor = pair
    big = bytes(range(256)) * 4096  # 1 MiB: far more than the socket buffers hold
    write_now(transport, big)
    assert transport in reactor.getWriters(), "the rest waits for a write turn"
    got = received(peer)
    assert 0 < len(got) < len(big)
    while len(got) < len(big):
        transport.doWrite()
        got += received(peer)
    assert got == big


def test_closing_transports_and_others_take_the_ordinary_path(
    pair: tuple[tcp.Connection, socket.socket, MemoryReactor],
) -> None:
    transport, peer, _reactor = pair
    transport.disconnecting = True
    transport.write = lambda data: None  # type: ignore[method-assign]
    write_now(transport, b"late")
    assert received(peer) == b"", "a closing transport decides itself"
    plain = StringTransport()
    write_now(plain, b"one")
    write_sequence_now(plain, [b"two", b"three"])
    assert plain.value() == b"onetwothree"


@pytest.fixture
def plog(tmp_path: Path) -> Iterator[PartitionLog]:
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(), recovery_point=None)
    for size in (100, SMALL_FRAME_BYTES):
        data = encode_batch([b"v" * size], timestamp_ms=0)
        log.append(data, parse_batches(data, max_batch_bytes=1 << 20))
    log.publish()
    yield log
    log.close()


def test_a_small_spliced_frame_goes_as_bytes(plog: PartitionLog) -> None:
    span = span_of(plog.read(0, 1, REFERENCE))
    assert isinstance(span, StoredSpan)
    ledger = RegionLedger()
    ledger.hold(span)
    stored = span.read()
    frame = SplicedFrame.of([b"head", span, b"t"])
    assert small_frame_bytes(frame, ledger) == [b"head", stored, b"t"]
    assert span.released and len(ledger) == 0


def test_a_large_spliced_frame_stays_a_region(plog: PartitionLog) -> None:
    span = span_of(plog.read(1, 1, REFERENCE))
    assert isinstance(span, StoredSpan) and span.length > SMALL_FRAME_BYTES
    ledger = RegionLedger()
    ledger.hold(span)
    assert small_frame_bytes(SplicedFrame.of([b"head", span]), ledger) is None
    assert not span.released, "left for sendfile"
    ledger.release_all()
