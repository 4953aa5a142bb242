# -*- test-case-name: tests.net.test_sendfile -*-
"""Sending a spliced response frame: in-memory parts with ``send``, file regions with
``os.sendfile`` from the segment file straight to the socket (Kafka's zero-copy fetch).

What it does:

* :func:`can_splice` says whether a transport is a plain TCP (or UNIX) socket transport
  this module can send file regions on: never TLS, where the bytes must pass through the
  TLS layer (``brokerd/net/chunked.py`` reads them in bounded chunks then).
* :class:`SpliceSender` is a pull producer (``IPullProducer``) registered on the
  transport for one frame. Twisted calls its ``resumeProducing`` whenever the
  transport's own buffer is empty; it then sends in-memory parts with ``send``
  (``MSG_MORE`` while a region follows, so a small header shares a packet with the
  records) and regions with ``os.sendfile``, at most :data:`SPLICE_TURN_BYTES` per call.
  When the transport holds nothing, :meth:`SpliceSender.send_now` first tries the whole
  frame at once without registering: most answers fit the socket's send buffer, and
  then nothing (producer, reading paused and resumed) has to be set up and undone.
  A short send or ``EAGAIN`` asks the transport for a writability callback
  (``startWriting``): nothing is buffered in user space, so a slow reader costs a file
  position, not memory. When the transport still holds bytes, the first call (from
  ``registerProducer``) only asks for a write turn, so they go first: responses stay
  in order; when it holds none, the first call sends at once.
* :class:`RegionLedger` holds, per connection, every file region handed to an answer
  and not yet sent, so that the segment pins are given back when the connection goes
  away with answers undelivered.
* :func:`can_chunk` says whether a transport is TLS: file regions then go through
  ``brokerd/net/chunked.py`` (read and encrypted in bounded chunks), never whole.

What it does not do: decide what to send or in which order (``brokerd.net.connection``),
or know the Kafka protocol.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from collections.abc import Callable, Iterable
from typing import Protocol

from twisted.internet import tcp
from twisted.internet.interfaces import IPullProducer, ISSLTransport
from twisted.protocols.tls import TLSMemoryBIOProtocol
from zope.interface import implementer

from brokerd.net.twisted_state import holds_nothing
from brokerd.storage.types import FileRegion, Part

__all__ = [
    "SPLICE_TURN_BYTES",
    "RegionGone",
    "RegionLedger",
    "SpliceSender",
    "SpliceTransport",
    "can_chunk",
    "can_splice",
]

#: Bytes sent by ``os.sendfile`` in one call of ``resumeProducing`` at most: then the
#: sender yields to the reactor (other connections) and continues when the socket is
#: writable again. The kernel's send buffer usually stops it sooner.
SPLICE_TURN_BYTES = 4 * 1024 * 1024
#: Held regions at which a ledger forgets the released ones.
_LEDGER_PRUNE_AT = 64


class RegionGone(Exception):
    """A region could not be sent: released already, or the file ended early."""


class SpliceTransport(Protocol):
    """What the sender needs of a TCP transport (``twisted.internet.tcp.Connection``)."""

    socket: socket.socket

    def write(self, data: bytes) -> None: ...
    def writeSequence(self, data: Iterable[bytes]) -> None: ...
    def startWriting(self) -> None: ...
    def registerProducer(self, producer: object, streaming: bool) -> None: ...
    def unregisterProducer(self) -> None: ...


def can_splice(transport: object) -> bool:
    """Whether ``transport`` is a plain socket transport (TCP or UNIX, no TLS)."""
    return (
        hasattr(os, "sendfile")
        and isinstance(transport, tcp.Connection)
        and not ISSLTransport.providedBy(transport)
        and not getattr(transport, "TLS", False)
    )


def can_chunk(transport: object) -> bool:
    """Whether ``transport`` is a TLS transport, which takes file regions read and
    written in chunks (``brokerd/net/chunked.py``)."""
    return (
        isinstance(transport, TLSMemoryBIOProtocol)
        or ISSLTransport.providedBy(transport)
        or bool(getattr(transport, "TLS", False))
    )


class RegionLedger:
    """The file regions a connection's answers hold (reactor thread only)."""

    def __init__(self) -> None:
        self._held: set[FileRegion] = set()
        self._closed = False

    def __len__(self) -> int:
        return sum(1 for r in self._held if not r.released)

    def hold(self, region: FileRegion) -> FileRegion:
        """Track ``region`` until released; released at once if the connection is gone."""
        if self._closed:
            region.release()
            return region
        if len(self._held) >= _LEDGER_PRUNE_AT:
            self._held = {r for r in self._held if not r.released}
        self._held.add(region)
        return region

    def release(self, region: FileRegion) -> None:
        region.release()
        self._held.discard(region)

    def release_all(self) -> None:
        """The connection is gone: release everything, and whatever is held later."""
        self._closed = True
        held, self._held = self._held, set()
        for region in held:
            region.release()


@implementer(IPullProducer)
class SpliceSender:
    """Sends one spliced frame's ``parts`` on ``transport`` (see the module docstring).

    ``done`` is called once: with None after the last byte went to the kernel (the
    sender has unregistered itself), or with the exception (the socket failed, a region was
    gone, or the transport stopped us). Regions are released through ``ledger`` as they
    are sent, and all that remain when it fails.
    """

    def __init__(
        self,
        transport: SpliceTransport,
        parts: Iterable[Part],
        ledger: RegionLedger,
        done: Callable[[BaseException | None], None],
    ) -> None:
        self._t = transport
        self._parts: deque[Part] = deque(parts)
        self._ledger = ledger
        self._done = done
        self._sent = 0  # bytes of the first part already sent
        self._primed = False
        self._registered = False
        self._finished = False
        self._inline = False

    def send_now(self) -> bool:
        """Send the frame at once if the transport holds nothing ahead of it, without
        becoming its producer: True when the whole frame went to the kernel (``done``
        is then not called: the caller goes on as after a plain write) or the send
        failed (``done`` has the exception); False when the rest needs write turns:
        then the caller calls :meth:`start`, which sends the rest in order."""
        if not holds_nothing(self._t):
            return False
        self._inline = True
        try:
            self._send()
        except (OSError, RegionGone) as exc:
            self._finish(exc)
        finally:
            self._inline = False
        return self._finished

    def start(self) -> None:
        self._registered = True
        self._primed = False  # bytes a send_now left in the transport go first
        self._t.registerProducer(self, False)  # calls resumeProducing at once

    # ----------------------------------------------------------------- IPullProducer

    def resumeProducing(self) -> None:
        if self._finished:
            return
        if not self._primed:
            self._primed = True
            if not holds_nothing(self._t):
                # Called from registerProducer while earlier answers still sit in the
                # transport's buffer: ask for a write turn; the transport sends what
                # it holds and calls again once its buffer is empty.
                self._t.startWriting()
                return
            # Nothing waits ahead of this frame: send now, saving a reactor turn.
        try:
            self._send()
        except (OSError, RegionGone) as exc:
            self._finish(exc)

    def stopProducing(self) -> None:
        """The transport is going away (it unregisters us itself)."""
        self._registered = False
        self._finish(RegionGone("the connection closed during the send"))

    # ----------------------------------------------------------------- sending

    def _send(self) -> None:
        sock = self._t.socket
        out_fd = sock.fileno()
        budget = SPLICE_TURN_BYTES
        while self._parts:
            part = self._parts[0]
            if isinstance(part, bytes):
                flags = socket.MSG_MORE if len(self._parts) > 1 else 0
                try:
                    n = sock.send(memoryview(part)[self._sent :], flags)
                except BlockingIOError:
                    n = 0
                self._sent += n
                if self._sent < len(part):
                    # The rest goes through the transport's buffer; it calls us again
                    # when that is sent.
                    rest = part[self._sent :]
                    self._parts.popleft()
                    self._sent = 0
                    self._t.write(rest)
                    return
            else:
                if part.released:
                    raise RegionGone(f"{part!r} was released before it was sent")
                left = part.length - self._sent
                if left > 0:
                    try:
                        n = os.sendfile(
                            out_fd, part.fileno(), part.position + self._sent, min(left, budget)
                        )
                    except BlockingIOError:
                        self._t.startWriting()  # call again when writable
                        return
                    if n == 0:
                        raise RegionGone(f"{part!r}: the file ended before the region did")
                    self._sent += n
                    budget -= n
                    if self._sent < part.length:
                        if budget <= 0:
                            self._t.startWriting()  # let other connections have a turn
                            return
                        continue
                self._ledger.release(part)
            self._parts.popleft()
            self._sent = 0
        self._finish(None)

    def _finish(self, failure: BaseException | None) -> None:
        if self._finished:
            return
        self._finished = True
        for part in self._parts:
            if not isinstance(part, bytes):
                self._ledger.release(part)
        self._parts.clear()
        if self._registered:
            self._registered = False
            self._t.unregisterProducer()
        if failure is None and self._inline:
            return  # sent within send_now: its caller carries on
        self._done(failure)
