# -*- test-case-name: tests.net.test_phase -*-
"""The phase of one client connection, and the table of how it changes (sans-IO).

A connection is in exactly one :class:`Phase`; what happens to it is an :class:`Event`;
:data:`TRANSITIONS` says, for every (phase, event) pair, the next phase, or that the
pair cannot happen (:class:`brokerd.fsm.InvalidTransition`: a bug in the connection code).

What the phases mean for a connection (``brokerd.net.connection``):

* ``NEW``: built, not yet connected.
* ``OPEN``: connected; requests are taken and the transport may read.
* ``BLOCKED``: the transport's send buffer is full (it paused us): no request is taken
  and the transport does not read, so a client that does not read its answers cannot
  make us buffer more.
* ``SPLICING``: a response frame is being sent from a file (``os.sendfile``); the sender
  is the transport's producer meanwhile, so the same rule as ``BLOCKED`` holds.
* ``CLOSING``: we decided to close (graceful or abort); the transport still exists and
  sends what was written, but nothing more is taken.
* ``LOST``: the transport is gone without our closing it; requests received in full
  before that may still be carried out (unanswered), if the protocol wants it.
* ``CLOSED``: gone, and nothing more is taken.

Facts that are not phases stay facts on the connection: whether it last told the
transport to read (a consequence of the phase and of in-flight requests and the request
budget), whether its pump is running (a re-entrancy guard), whether it has seen data.
"""

from __future__ import annotations

import enum

from brokerd.fsm import step

__all__ = ["TRANSITIONS", "Event", "Phase", "next_phase"]


class Phase(enum.Enum):
    NEW = "new"
    OPEN = "open"
    BLOCKED = "blocked"
    SPLICING = "splicing"
    CLOSING = "closing"
    LOST = "lost"
    CLOSED = "closed"

    @property
    def connected(self) -> bool:
        """Between connectionMade and connectionLost."""
        return self in _CONNECTED

    @property
    def taking(self) -> bool:
        """Requests may be handed out (LOST: those received in full before the loss)."""
        return self in (Phase.OPEN, Phase.LOST)

    @property
    def closing(self) -> bool:
        """We closed it (or it is gone and done): take nothing more."""
        return self in (Phase.CLOSING, Phase.CLOSED)

    @property
    def write_blocked(self) -> bool:
        """The client is not reading answers, or a spliced frame holds the transport."""
        return self in (Phase.BLOCKED, Phase.SPLICING)


_CONNECTED = frozenset({Phase.OPEN, Phase.BLOCKED, Phase.SPLICING, Phase.CLOSING})


class Event(enum.Enum):
    MADE = "connectionMade"
    PAUSE = "pauseProducing"  # the transport's send buffer is full
    RESUME = "resumeProducing"  # it has room again
    SPLICE_START = "splice started"
    SPLICE_DONE = "splice done"  # the frame is sent (a failed one closes instead)
    CLOSE = "close"  # close(), or the protocol refuses further requests
    LOST = "connectionLost"


P, E = Phase, Event
#: Every (phase, event) pair: the next phase, or None where the pair cannot happen.
TRANSITIONS: dict[tuple[Phase, Event], Phase | None] = {
    (P.NEW, E.MADE): P.OPEN,
    (P.NEW, E.PAUSE): P.NEW,
    (P.NEW, E.RESUME): P.NEW,
    (P.NEW, E.SPLICE_START): None,
    (P.NEW, E.SPLICE_DONE): None,
    (P.NEW, E.CLOSE): P.CLOSED,
    (P.NEW, E.LOST): P.CLOSED,
    (P.OPEN, E.MADE): None,
    (P.OPEN, E.PAUSE): P.BLOCKED,
    (P.OPEN, E.RESUME): P.OPEN,
    (P.OPEN, E.SPLICE_START): P.SPLICING,
    (P.OPEN, E.SPLICE_DONE): None,
    (P.OPEN, E.CLOSE): P.CLOSING,
    (P.OPEN, E.LOST): P.LOST,
    (P.BLOCKED, E.MADE): None,
    (P.BLOCKED, E.PAUSE): P.BLOCKED,
    (P.BLOCKED, E.RESUME): P.OPEN,
    # An answer may be written while blocked; a spliced one then holds the transport.
    (P.BLOCKED, E.SPLICE_START): P.SPLICING,
    (P.BLOCKED, E.SPLICE_DONE): None,
    (P.BLOCKED, E.CLOSE): P.CLOSING,
    (P.BLOCKED, E.LOST): P.LOST,
    (P.SPLICING, E.MADE): None,
    # The sender, not the connection, is the transport's producer meanwhile: a late
    # pause or resume meant for the connection changes nothing.
    (P.SPLICING, E.PAUSE): P.SPLICING,
    (P.SPLICING, E.RESUME): P.SPLICING,
    (P.SPLICING, E.SPLICE_START): None,  # later answers queue behind the frame
    (P.SPLICING, E.SPLICE_DONE): P.OPEN,
    (P.SPLICING, E.CLOSE): P.CLOSING,
    (P.SPLICING, E.LOST): P.LOST,
    (P.CLOSING, E.MADE): None,
    (P.CLOSING, E.PAUSE): P.CLOSING,
    (P.CLOSING, E.RESUME): P.CLOSING,
    # Answers written before the close are still sent, spliced ones too.
    (P.CLOSING, E.SPLICE_START): P.CLOSING,
    (P.CLOSING, E.SPLICE_DONE): P.CLOSING,
    (P.CLOSING, E.CLOSE): P.CLOSING,
    (P.CLOSING, E.LOST): P.CLOSED,
    (P.LOST, E.MADE): None,
    (P.LOST, E.PAUSE): P.LOST,
    (P.LOST, E.RESUME): P.LOST,
    (P.LOST, E.SPLICE_START): None,  # nothing is written to a lost transport
    (P.LOST, E.SPLICE_DONE): None,
    (P.LOST, E.CLOSE): P.CLOSED,
    (P.LOST, E.LOST): P.LOST,
    (P.CLOSED, E.MADE): None,
    (P.CLOSED, E.PAUSE): P.CLOSED,
    (P.CLOSED, E.RESUME): P.CLOSED,
    (P.CLOSED, E.SPLICE_START): None,
    (P.CLOSED, E.SPLICE_DONE): None,
    (P.CLOSED, E.CLOSE): P.CLOSED,
    (P.CLOSED, E.LOST): P.CLOSED,
}
del P, E


def next_phase(phase: Phase, event: Event) -> Phase:
    """The phase after ``event``; :class:`InvalidTransition` where it cannot happen."""
    return step(TRANSITIONS, phase, event)
