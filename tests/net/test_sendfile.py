"""SpliceSender over a real socketpair and real segment files: partial ``sendfile``,
``EAGAIN`` (waiting for writability), order behind buffered bytes, failures, and the
region ledger.

The transport here is a small stand-in for ``twisted.internet.tcp.Connection``'s
producer machinery (its buffer, ``startWriting``, and calling a pull producer when the
buffer is empty) around a real non-blocking socket: the sends, ``sendfile`` calls and
their short counts are the kernel's.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.testing import StringTransport

from brokerd.net.frames import SplicedFrame
from brokerd.net.sendfile import RegionGone, RegionLedger, SpliceSender, can_splice
from brokerd.storage.config.log_config import LogConfig
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.record.encode import encode_batch
from brokerd.storage.record.header import parse_batches
from brokerd.storage.segment.stored import StoredSpan
from brokerd.storage.types import FileRegion, StoredRecords

from tests.read_specs import REFERENCE, span_of

BIG = 1 << 20


class SocketTransport:
    """The producer/buffer behaviour of Twisted's FileDescriptor, on a real socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.socket = sock
        self.buffer = bytearray()
        self.producer: Any = None
        self.streaming: bool | None = None
        self.writing = False
        self.most_buffered = 0

    def write(self, data: bytes) -> None:
        self.buffer += data
        self.most_buffered = max(self.most_buffered, len(self.buffer))
        self.writing = True

    def writeSequence(self, data: Iterable[bytes]) -> None:
        for chunk in data:
            self.write(chunk)

    def startWriting(self) -> None:
        self.writing = True

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        assert self.producer is None, "a producer is registered already"
        self.producer, self.streaming = producer, streaming
        if not streaming:
            producer.resumeProducing()

    def unregisterProducer(self) -> None:
        self.producer = None

    def do_write(self) -> None:
        """What the reactor does when the socket is writable and writing was asked."""
        if not self.writing:
            return
        if self.buffer:
            try:
                n = self.socket.send(self.buffer)
            except BlockingIOError:
                n = 0
            del self.buffer[:n]
            if self.buffer:
                return
        self.writing = False
        if self.producer is not None and not self.streaming:
            self.producer.resumeProducing()


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    # Small kernel buffers: a few hundred KB cannot go in one sendfile call.
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def plog(tmp_path: Path) -> Iterator[PartitionLog]:
    log = PartitionLog.open(
        str(tmp_path / "t-0"), LogConfig(segment_bytes=256 * 1024), recovery_point=None
    )
    for i in range(120):
        data = encode_batch([bytes([i % 251]) * 4000] * 2, timestamp_ms=i)
        log.append(data, parse_batches(data, max_batch_bytes=BIG))
    log.publish()
    yield log
    log.close()


def spans(plog: PartitionLog, offsets: Iterable[int]) -> list[StoredSpan]:
    out = []
    for offset in offsets:
        span = span_of(plog.read(offset, 200_000, REFERENCE))
        assert isinstance(span, StoredSpan)
        out.append(span)
    return out


class Recorder:
    def __init__(self) -> None:
        self.results: list[BaseException | None] = []

    def __call__(self, failure: BaseException | None) -> None:
        self.results.append(failure)


def drive(
    transport: SocketTransport,
    peer: socket.socket,
    done: Recorder,
    *,
    read_chunk: int = 8192,
    limit: float = 20.0,
) -> bytes:
    """Run the 'reactor' until ``done`` fires, reading ``read_chunk`` bytes per turn."""
    received = bytearray()
    deadline = time.monotonic() + limit
    # poll, not select: a long test run may have handed out descriptors above 1024.
    poller = select.poll()
    poller.register(transport.socket, select.POLLOUT)
    while not done.results or transport.buffer:
        assert time.monotonic() < deadline, "the send did not finish"
        if poller.poll(10):
            transport.do_write()
        with contextlib.suppress(BlockingIOError):
            received += peer.recv(read_chunk)
    while True:
        try:
            more = peer.recv(BIG)
        except BlockingIOError:
            break
        if not more:
            break
        received += more
    return bytes(received)


@pytest.fixture
def sendfile_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int | str]]:
    """Observe (not replace) os.sendfile: (count asked, count sent or "EAGAIN")."""
    calls: list[tuple[int, int | str]] = []
    real = os.sendfile

    def observed(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        try:
            n = real(out_fd, in_fd, offset, count)
        except BlockingIOError:
            calls.append((count, "EAGAIN"))
            raise
        calls.append((count, n))
        return n

    monkeypatch.setattr(os, "sendfile", observed)
    return calls


def test_a_frame_arrives_whole_through_short_sends_and_eagain(
    pair: tuple[socket.socket, socket.socket],
    plog: PartitionLog,
    sendfile_calls: list[tuple[int, int | str]],
) -> None:
    sock, peer = pair
    first, second = spans(plog, [0, 60])
    expected = (
        b"HEAD-0123"
        + first.read()
        + b"-between-" * 3
        + second.read()
        + b"END"
    )
    ledger = RegionLedger()
    for region in (first, second):
        ledger.hold(region)
    transport = SocketTransport(sock)
    done = Recorder()
    sender = SpliceSender(
        transport, [b"HEAD-0123", first, b"-between-" * 3, second, b"END"], ledger, done
    )
    sender.start()
    got = drive(transport, peer, done, read_chunk=4096)
    assert got == expected
    assert done.results == [None]
    assert transport.producer is None, "the sender did not unregister"
    assert first.released and second.released and len(ledger) == 0
    # The kernel took less than asked, and said EAGAIN while the reader lagged.
    assert any(isinstance(n, int) and n < asked for asked, n in sendfile_calls)
    assert any(n == "EAGAIN" for _, n in sendfile_calls)
    # Record bytes never went through the transport's buffer.
    assert transport.most_buffered < 1000
    assert plog.segments[0]._refs == 0


def test_the_frame_waits_behind_bytes_the_transport_still_holds(
    pair: tuple[socket.socket, socket.socket], plog: PartitionLog
) -> None:
    sock, peer = pair
    (region,) = spans(plog, [3])
    transport = SocketTransport(sock)
    earlier = b"earlier-answer" * 5000  # more than the socket takes at once
    transport.write(earlier)
    done = Recorder()
    SpliceSender(transport, [b"H", region, b"T"], RegionLedger(), done).start()
    data = region.read() if not region.released else None
    got = drive(transport, peer, done)
    assert data is not None
    assert got == earlier + b"H" + data + b"T"



class TwistedShapedTransport(SocketTransport):
    """:class:`SocketTransport` with the buffer attributes of Twisted's FileDescriptor
    (``dataBuffer``, ``offset``, ``_tempDataLen``), by which the sender sees whether
    anything waits ahead of its frame."""

    offset = 0
    _tempDataLen = 0

    @property
    def dataBuffer(self) -> bytes:
        return bytes(self.buffer)


def test_with_nothing_buffered_the_send_starts_at_once(
    pair: tuple[socket.socket, socket.socket],
    plog: PartitionLog,
    sendfile_calls: list[tuple[int, int | str]],
) -> None:
    sock, peer = pair
    (region,) = spans(plog, [3])
    data = region.read()
    transport = TwistedShapedTransport(sock)
    done = Recorder()
    SpliceSender(transport, [b"H", region, b"T"], RegionLedger(), done).start()
    # Sent within start(), before any write turn of the "reactor".
    assert sendfile_calls and isinstance(sendfile_calls[0][1], int)
    assert peer.recv(1) == b"H"
    got = b"H" + drive(transport, peer, done)
    assert got == b"H" + data + b"T"
    assert done.results == [None] and region.released


def test_a_small_frame_finishes_within_start(
    pair: tuple[socket.socket, socket.socket], plog: PartitionLog
) -> None:
    sock, peer = pair
    span = span_of(plog.read(0, 100, REFERENCE))  # one batch: about 8 KB, within the buffer
    assert span is not None
    data = span.read()
    transport = TwistedShapedTransport(sock)
    done = Recorder()
    SpliceSender(transport, [b"H", span], RegionLedger(), done).start()
    assert done.results == [None], "not finished within start()"
    assert transport.producer is None and not transport.writing
    assert drive(transport, peer, done) == b"H" + data


def test_a_twisted_shaped_transport_holding_bytes_still_sends_them_first(
    pair: tuple[socket.socket, socket.socket], plog: PartitionLog
) -> None:
    sock, peer = pair
    (region,) = spans(plog, [3])
    data = region.read()
    transport = TwistedShapedTransport(sock)
    transport.write(b"earlier")
    done = Recorder()
    SpliceSender(transport, [b"H", region], RegionLedger(), done).start()
    assert not done.results and transport.writing  # it asked for a write turn
    assert drive(transport, peer, done) == b"earlier" + b"H" + data

def test_a_peer_that_goes_away_fails_the_send_and_releases_every_region(
    pair: tuple[socket.socket, socket.socket], plog: PartitionLog
) -> None:
    sock, peer = pair
    regions = spans(plog, [0, 30, 60])
    ledger = RegionLedger()
    for region in regions:
        ledger.hold(region)
    transport = SocketTransport(sock)
    done = Recorder()
    SpliceSender(transport, [b"H", *regions], ledger, done).start()
    transport.do_write()
    peer.close()
    deadline = time.monotonic() + 10
    while not done.results:
        assert time.monotonic() < deadline
        transport.do_write()
        transport.writing = True  # keep polling: the reactor would report the error
    assert isinstance(done.results[0], OSError)
    assert all(r.released for r in regions) and len(ledger) == 0
    assert transport.producer is None


def test_a_released_region_is_not_sent(
    pair: tuple[socket.socket, socket.socket], plog: PartitionLog
) -> None:
    sock, _peer = pair
    (region,) = spans(plog, [0])
    region.release()
    transport = SocketTransport(sock)
    done = Recorder()
    SpliceSender(transport, [b"H", region], RegionLedger(), done).start()
    transport.do_write()
    assert len(done.results) == 1 and isinstance(done.results[0], RegionGone)


def test_stop_producing_releases_what_was_not_sent(
    pair: tuple[socket.socket, socket.socket], plog: PartitionLog
) -> None:
    sock, _peer = pair
    regions = spans(plog, [0, 60])
    transport = SocketTransport(sock)
    done = Recorder()
    sender = SpliceSender(transport, [b"H", *regions], RegionLedger(), done)
    sender.start()
    for _ in range(5):
        transport.do_write()  # the peer reads nothing: the send stalls
    assert not done.results
    sender.stopProducing()  # the connection is lost
    sender.resumeProducing()  # a late call does nothing
    assert len(done.results) == 1 and isinstance(done.results[0], RegionGone)
    assert all(r.released for r in regions)


class FakeRegion:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0
        self.length = len(data)
        self.released = False

    def fileno(self) -> int:
        raise AssertionError("not sent by descriptor here")

    def read(self) -> bytes:
        return self.data[: self.length]

    def read_at(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + size]

    def truncate(self, length: int) -> None:
        self.length = length

    def release(self) -> None:
        self.released = True


def test_ledger_releases_what_answers_still_hold_when_the_connection_goes() -> None:
    ledger = RegionLedger()
    kept, sent = FakeRegion(b"a"), FakeRegion(b"b")
    ledger.hold(kept)
    ledger.hold(sent)
    ledger.release(sent)
    assert len(ledger) == 1
    ledger.release_all()
    assert kept.released
    late = FakeRegion(b"c")
    ledger.hold(late)  # an answer finished after the connection went away
    assert late.released
    many = RegionLedger()
    regions = [FakeRegion(b"x") for _ in range(200)]
    for region in regions:
        many.hold(region)
        region.release()  # released outside the ledger (a budget cut)
    assert len(many._held) < 100, "released regions are not forgotten"


def test_frames_and_the_transports_that_may_splice() -> None:
    assert not can_splice(StringTransport())
    region: FileRegion = FakeRegion(b"0123456789" * 4000)
    frame = SplicedFrame.of([b"x" * 10, StoredRecords(region), b"y"])
    assert frame.size == 10 + 40_000 + 1
    assert frame.regions == (region,)


def test_send_now_sends_a_small_frame_without_becoming_the_producer(
    pair: tuple[socket.socket, socket.socket], plog: PartitionLog
) -> None:
    sock, peer = pair
    span = span_of(plog.read(0, 100, REFERENCE))  # one batch: about 8 KB, within the buffer
    assert span is not None
    data = span.read()
    transport = TwistedShapedTransport(sock)
    transport.registerProducer("the connection", True)  # as RequestConnection is
    done = Recorder()
    sender = SpliceSender(transport, [b"H", span], RegionLedger(), done)
    assert sender.send_now() is True
    # Whole: done is not called, the transport's producer is untouched, nothing buffered.
    assert done.results == [] and span.released
    assert transport.producer == "the connection" and not transport.buffer
    assert peer.recv(BIG) == b"H" + data


def test_send_now_leaves_a_big_frame_to_start_which_finishes_it_in_order(
    pair: tuple[socket.socket, socket.socket], plog: PartitionLog
) -> None:
    sock, peer = pair
    regions = spans(plog, [0, 30])  # far more than the 16 KB socket buffers take
    data = b"".join(r.read() for r in regions)
    transport = TwistedShapedTransport(sock)
    done = Recorder()
    sender = SpliceSender(transport, [b"H", *regions, b"T"], RegionLedger(), done)
    assert sender.send_now() is False and done.results == []
    sender.start()
    assert drive(transport, peer, done) == b"H" + data + b"T"
    assert done.results == [None] and all(r.released for r in regions)


def test_send_now_waits_behind_bytes_the_transport_holds(
    pair: tuple[socket.socket, socket.socket], plog: PartitionLog,
    sendfile_calls: list[tuple[int, int | str]],
) -> None:
    sock, peer = pair
    (region,) = spans(plog, [3])
    data = region.read()
    transport = TwistedShapedTransport(sock)
    transport.write(b"earlier")
    done = Recorder()
    sender = SpliceSender(transport, [b"H", region], RegionLedger(), done)
    assert sender.send_now() is False and sendfile_calls == []
    sender.start()
    assert drive(transport, peer, done) == b"earlier" + b"H" + data


def test_send_now_reports_a_gone_peer_through_done(
    pair: tuple[socket.socket, socket.socket], plog: PartitionLog
) -> None:
    sock, peer = pair
    (region,) = spans(plog, [3])
    ledger = RegionLedger()
    ledger.hold(region)
    peer.close()
    transport = TwistedShapedTransport(sock)
    done = Recorder()
    assert SpliceSender(transport, [b"H", region], ledger, done).send_now() is True
    assert len(done.results) == 1 and isinstance(done.results[0], OSError)
    assert region.released and len(ledger) == 0
