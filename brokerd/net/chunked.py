# -*- test-case-name: tests.net.test_chunked -*-
"""Sending a spliced response frame on a transport that must see its bytes (TLS): file
regions read and written in bounded chunks, one chunk per reactor turn.

On a plain socket, a Fetch answer's file regions go to the kernel by ``os.sendfile``
(``brokerd/net/sendfile.py``). TLS has to encrypt them in user space; reading a 55 MiB
answer whole and encrypting it in one go held it all in memory and kept the reactor from
every other client for hundreds of milliseconds. :class:`ChunkedSender` instead:

* reads at most :data:`CHUNK_BYTES` of a region at a time (``FileRegion.read_at``) and
  writes it to the transport, which encrypts it at once (the TLS layer hands the
  ciphertext to the TCP transport's buffer);
* writes the next chunk only while the transport is not paused: the connection stays the
  transport's streaming producer and passes its ``pauseProducing`` / ``resumeProducing``
  on (``RequestConnection``); Twisted pauses it once the TCP buffer holds more than its
  high-water mark, and resumes it when the buffer has drained, so a client that does not
  read holds about one chunk of ciphertext in the broker, plus the kernel's buffers;
* yields to the reactor between chunks (``callLater(0)`` on the injected clock), so other
  connections wait at most one chunk's read and encryption (about a millisecond);
* takes each chunk from the listener's :class:`~brokerd.net.answer_budget.AnswerBudget`
  before reading it and gives it back once the transport has drained past it (the next
  turn or resume), waiting for room while the budget is full;
* releases each region through the connection's
  :class:`~brokerd.net.sendfile.RegionLedger` once its last byte is written, and all that
  remain when it stops early (the connection closed mid-answer, a read failed).

In-memory parts (headers, records read into memory) are written in the same chunks; the
connection counts them in the budget for the whole frame. A frame no longer than one
chunk is written at once (:meth:`ChunkedSender.send_now`), without a turn.

What it does not do: choose between this and ``os.sendfile`` (the connection does, by
transport), know any protocol, or use the global reactor.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Protocol

from brokerd.clock import Clock, DelayedCall
from brokerd.errors import StorageError
from brokerd.net.answer_budget import AnswerBudget
from brokerd.net.sendfile import RegionGone, RegionLedger
from brokerd.storage.types import Part

__all__ = ["CHUNK_BYTES", "ChunkTransport", "ChunkedSender"]

#: Bytes read from a file region and written in one reactor turn at most. Encrypting this
#: much takes well under a millisecond; reading it is a page-cache copy (or one disk read).
CHUNK_BYTES = 256 * 1024


class ChunkTransport(Protocol):
    """What the sender needs of a transport: somewhere to write."""

    def write(self, data: bytes) -> None: ...


class ChunkedSender:
    """Sends one spliced frame's ``parts`` on ``transport`` in chunks (see the module
    docstring).

    ``done`` is called once: with None after the last byte was written to the transport,
    or with the exception (a region was gone, a read failed, the connection closed).
    ``progress``, if given, is called after each turn that wrote (traffic, for an idle
    timer).
    Start it with :meth:`send_now`, then :meth:`start` if that returned False; the
    connection forwards its transport's :meth:`pauseProducing` / :meth:`resumeProducing`.
    """

    def __init__(
        self,
        transport: ChunkTransport,
        parts: Iterable[Part],
        ledger: RegionLedger,
        budget: AnswerBudget,
        clock: Clock,
        done: Callable[[BaseException | None], None],
        *,
        paused: bool = False,
        chunk_bytes: int = CHUNK_BYTES,
        progress: Callable[[], None] | None = None,
    ) -> None:
        if chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be positive, not {chunk_bytes}")
        self._t = transport
        self._parts: deque[Part] = deque(parts)
        self._ledger = ledger
        self._budget = budget
        self._clock = clock
        self._done = done
        self._chunk = chunk_bytes
        self._progress = progress
        self._sent = 0  # bytes of the first part already written
        self._held = 0  # budget taken for chunks written and maybe still buffered
        self._paused = paused
        self._finished = False
        self._call: DelayedCall | None = None
        self._forget_wait: Callable[[], None] | None = None

    @property
    def paused(self) -> bool:
        """Whether the transport last said its buffer is full."""
        return self._paused

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def held(self) -> int:
        """Budget bytes this sender holds now (chunks read and maybe still buffered)."""
        return self._held

    def send_now(self) -> bool:
        """Write a frame of at most one chunk at once: True when it was written (``done``
        is then not called) or failed (``done`` has the exception); False when it is
        longer: then call :meth:`start`."""
        size = sum(len(p) if isinstance(p, bytes) else p.length for p in self._parts)
        if size > self._chunk:
            return False
        try:
            while self._parts:
                part = self._parts[0]
                data = part if isinstance(part, bytes) else self._read(part, 0, part.length)
                self._parts.popleft()
                if not isinstance(part, bytes):
                    self._ledger.release(part)
                self._t.write(data)
        except (OSError, StorageError, RegionGone) as exc:
            self._finish(exc)
            return True
        self._finished = True
        return True

    def start(self) -> None:
        """Begin sending, a chunk per reactor turn while the transport is not paused."""
        self._schedule()

    # ----------------------------------------------------------------- producer events

    def pauseProducing(self) -> None:
        self._paused = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def resumeProducing(self) -> None:
        """The transport's buffer has drained: what was written is gone from memory."""
        self._paused = False
        self._give_back()
        self._schedule()

    def stopProducing(self) -> None:
        """The connection is going away: release everything, report the early end."""
        self._finish(RegionGone("the connection closed during the send"))

    # ----------------------------------------------------------------- sending

    def _schedule(self) -> None:
        if self._finished or self._paused or self._forget_wait is not None:
            return
        if self._call is None or not self._call.active():
            self._call = self._clock.callLater(0, self._turn)

    def _room(self) -> None:
        self._forget_wait = None
        self._schedule()

    def _give_back(self) -> None:
        if self._held:
            self._budget.give(self._held)
            self._held = 0

    def _turn(self) -> None:
        self._call = None
        if self._finished or self._paused:
            return
        # Run only while the transport is not paused: its buffer is below its high-water
        # mark, so the chunk written last turn has (nearly) left it.
        self._give_back()
        try:
            self._write_chunk()
        except (OSError, StorageError, RegionGone) as exc:
            self._finish(exc)
            return
        if self._progress is not None:
            self._progress()
        if not self._parts:
            self._finish(None)
        else:
            self._schedule()

    def _write_chunk(self) -> None:
        """Write up to one chunk: in-memory parts as they are, regions read now."""
        left = self._chunk
        while self._parts and left > 0 and not self._paused:
            part = self._parts[0]
            if isinstance(part, bytes):
                whole = self._sent == 0 and len(part) <= left
                piece = part if whole else part[self._sent : self._sent + left]
                end = len(part)
            else:
                n = min(left, part.length - self._sent)
                if not self._budget.try_take(n):
                    self._forget_wait = self._budget.when_room(self._room)
                    return
                self._held += n
                piece = self._read(part, self._sent, n)
                end = part.length
            self._sent += len(piece)
            left -= len(piece)
            if self._sent >= end:
                self._parts.popleft()
                self._sent = 0
                if not isinstance(part, bytes):
                    self._ledger.release(part)
            self._t.write(piece)  # may pause us at once (the TCP buffer is full)

    @staticmethod
    def _read(region: Part, offset: int, n: int) -> bytes:
        assert not isinstance(region, bytes)
        if region.released:
            raise RegionGone(f"{region!r} was released before it was sent")
        return region.read_at(offset, n)

    def _finish(self, failure: BaseException | None) -> None:
        if self._finished:
            return
        self._finished = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        if self._forget_wait is not None:
            self._forget_wait()
            self._forget_wait = None
        self._give_back()
        for part in self._parts:
            if not isinstance(part, bytes):
                self._ledger.release(part)
        self._parts.clear()
        self._done(failure)
