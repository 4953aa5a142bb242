# -*- test-case-name: tests.net.test_prompt_write -*-
"""Answers go to the kernel when they are written, not at the end of the reactor turn.

Twisted's ``transport.write`` only appends to the transport's buffer and asks the
reactor for a write turn (``startWriting``): the bytes reach the socket when the
reactor next finds it writable, after it has handled every other event of the turn it
is in. For a request/response protocol that puts each answer behind whatever else the
turn holds: the pipelined requests read in the same turn (decoded and dispatched before
the answers to earlier ones leave), the long polls an append wakes, the other
connections. Measured with librdkafka at 1,000 records/s (docs/performance.md,
"librdkafka's latency"), an encoded Produce answer waited there 1-2 ms before its
``send``.

:func:`write_now` sends the bytes at once with one non-blocking ``send`` when that
keeps their order: a plain socket transport (TCP or UNIX, not TLS) that holds nothing
unsent and is neither closing nor closed. Whatever the kernel does not take (a full
send buffer, ``EAGAIN``, an error) goes through ``transport.write`` as before, so the
transport's buffer, its producer flow control and its error handling stay in charge of
the rest; bytes sent here never pass through that buffer, so they never count toward
its high-water mark either (they are in the kernel already).

A spliced frame (a Kafka Fetch answer whose records are a file region) of at most
:data:`SMALL_FRAME_BYTES` is sent the same way as bytes: :func:`small_frame_bytes` reads
its regions (one ``pread``, from the page cache: such records were usually appended a
moment ago) so that the frame leaves in one ``sendmsg`` and one packet. Sent with
``os.sendfile`` it took three calls (header, records, the answer's few trailing bytes),
and the trailing bytes went as a packet of their own, which the client has to wait for
before it can read the answer.

Once an answer is handed over (to the kernel, or to the transport's buffer) by these
functions, the caller (the connection, :mod:`brokerd.net.connection`) runs the wake-ups
the appends of this call hold (:meth:`brokerd.after_answer.AfterAnswer.answer_written`):
a long poll woken by a small Produce is answered right after that Produce's answer, in
the same call, not a reactor turn later.

What it does not do: decide what to send, send large file regions
(``brokerd/net/sendfile.py`` does, with the same rule for order), or touch TLS
transports (their bytes must pass the TLS layer).
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.net.frames import SplicedFrame
from brokerd.net.sendfile import RegionGone, RegionLedger, can_splice
from brokerd.net.twisted_state import holds_nothing

__all__ = ["SMALL_FRAME_BYTES", "small_frame_bytes", "write_now", "write_sequence_now"]

#: A spliced frame up to this long is read into memory and sent as bytes (see the
#: module docstring); a longer one goes by ``os.sendfile``, without the copy.
SMALL_FRAME_BYTES = 16 * 1024

#: Pieces one ``sendmsg`` takes at most here (well under Linux's ``IOV_MAX``, 1,024);
#: a frame in more goes through the transport's buffer as before.
_MAX_PIECES = 64


def write_now(transport: object, data: bytes) -> None:
    """Write ``data`` on ``transport``: sent at once when it can go in order (see the
    module docstring), the part the kernel does not take through ``transport.write``."""
    if data and _sends_direct(transport):
        try:
            sent = transport.socket.send(data)  # type: ignore[attr-defined]
        except OSError:
            # EAGAIN, or a failure the transport reports in its own write turn.
            sent = 0
        if sent >= len(data):
            return
        data = data[sent:]
    transport.write(data)  # type: ignore[attr-defined]


def write_sequence_now(transport: object, parts: Sequence[bytes]) -> None:
    """:func:`write_now` of several pieces: one gathering ``sendmsg`` (no join, one
    packet for a small answer), the rest through ``transport.writeSequence``."""
    if len(parts) > _MAX_PIECES or not _sends_direct(transport):
        transport.writeSequence(parts)  # type: ignore[attr-defined]
        return
    try:
        sent = transport.socket.sendmsg(parts)  # type: ignore[attr-defined]
    except OSError:
        sent = 0
    rest: list[bytes] = []
    for part in parts:
        if sent >= len(part):
            sent -= len(part)
            continue
        rest.append(part[sent:] if sent else part)
        sent = 0
    if rest:
        transport.writeSequence(rest)  # type: ignore[attr-defined]


def small_frame_bytes(
    frame: SplicedFrame, ledger: RegionLedger, limit: int = SMALL_FRAME_BYTES
) -> list[bytes] | None:
    """``frame``'s parts as bytes, its regions read and given back through ``ledger``,
    when it is at most ``limit`` bytes long; None when it is longer (nothing read). A
    region that cannot be read raises (``OSError``, :class:`RegionGone`, or the storage
    error of a file shorter than the region); every region is given back even then."""
    if frame.size > limit:
        return None
    parts: list[bytes] = []
    try:
        for part in frame.parts:
            if isinstance(part, bytes):
                parts.append(part)
            elif part.released:
                raise RegionGone(f"{part!r} was released before it was sent")
            else:
                parts.append(part.read())
    finally:
        for part in frame.parts:
            if not isinstance(part, bytes):
                ledger.release(part)
    return parts


def _sends_direct(transport: object) -> bool:
    return (
        can_splice(transport)
        and bool(getattr(transport, "connected", False))
        and not getattr(transport, "disconnecting", True)
        and holds_nothing(transport)
    )
