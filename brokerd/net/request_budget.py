# -*- test-case-name: tests.net.test_request_budget -*-
"""The broker-wide budget of buffered request bytes (Kafka's ``queued.max.request.bytes``).

Every connection of both listeners holds an :class:`Account` on one
:class:`RequestBudget`. A connection keeps its account's reservation at least as large
as the request bytes it holds in memory plus its *claim* on the bytes a size prefix has
announced and the client has not sent yet (``brokerd.net.connection`` reconciles this
after every read and every finished request). While the budget cannot cover that, the
connection stops reading (its transport is paused) and waits, instead of buffering.

Rules, and why:

* **Claims follow what arrives** (:func:`claim`). A size prefix is only a promise: an
  idle client that announced 8 MiB and went silent must not hold 8 MiB. Until
  :data:`PROOF_BYTES` (one socket read) of an announced item have arrived, only what
  arrived is reserved (the next read may pass the reservation by one read, as it always
  could: the connection stops reading as soon as it is not covered); once they have,
  the client is sending and the whole announced rest is claimed at once. Claiming the
  rest in one step (as Kafka's ``MemoryPool`` allocates a frame's buffer whole) keeps
  honest senders from deadlocking on half-received frames: a frame granted its claim
  never waits again. So a connection that goes quiet before one read of its frame holds
  what it sent, however much it announced; one that sent the read holds the frame until
  it is complete or the frame deadline ends it, within its address's share.
* **Small needs overtake, boundedly.** Waiters are served in the order they started
  waiting, except that an account whose whole reservation stays within ``small_bytes``
  (a metadata request, the first read of a frame) may be granted past an older waiter
  that does not fit yet. Each blocked waiter can be overtaken by at most its own need
  in bytes; after that, order is strict until it is served whenever small reservations
  are what keeps it out, so a large frame is never starved by a stream of small ones.
  When other claims fill the budget instead, small needs keep passing: holding them back
  would not make room for the waiter, only stall every other client (claims from a few
  addresses that stop sending would otherwise stop all small requests until their frame
  deadline).
* **One address holds a share.** Reservation beyond ``small_bytes`` per account counts
  toward its client address; once an address's such bytes reach ``address_share``, its
  accounts grow no further until its other claims are given back (small needs still
  pass, so an address's own half-received frames never deadlock on its share). Such a
  waiter does not hold up the others. Connections without an address (UNIX sockets, or
  ``""``) have no share.
* **Small reservations have a pool.** Reservations within ``small_bytes`` (partly
  received frames, first reads) may together take at most ``small_pool`` bytes (half the
  budget), so that many half-received frames waiting for their claims cannot fill the
  budget and leave no room for any claim (a deadlock). That holds while the largest
  frame fits in the other half (at the defaults 8 MiB of 64); with a budget below two
  largest frames the frame deadline is what ends such a wait. One small reservation is
  always allowed while the pool is empty; a waiter for the pool holds up nobody else.

A waiter has a deadline too: it is the connection's frame deadline
(``brokerd.net.connection``), which keeps running while the connection waits here.

The invariant: the budget's ``reserved`` never exceeds its capacity, and a connection
reads only while its reservation covers what it holds plus its claim, so request memory
stays bounded by the capacity plus one read per connection (what a read brings before
the connection learns it is not covered; docs/operations.md, "Bounded memory").

What it does not do: read, pause or resume anything itself (a granted account calls its
owner back), know protocols, or keep time. Reactor thread only.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable

__all__ = [
    "DEFAULT_QUEUED_MAX_REQUEST_BYTES",
    "PROOF_BYTES",
    "SMALL_BYTES",
    "Account",
    "RequestBudget",
    "claim",
]

#: Default ``--queued-max-request-bytes``: eight frames of the default largest Kafka
#: request (8 MiB), far more than the small requests of a busy broker use at once, and a
#: fixed bound on request memory whatever the number of connections.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 64 * 1024 * 1024

#: Bytes of an announced item that must arrive before its whole rest is claimed: one TCP
#: socket read (Twisted reads 64 KiB at a time), what an honest sender's first read
#: brings and an idle one never sends.
PROOF_BYTES = 64 * 1024

#: A reservation this small is what arrived of a frame not yet claimed (less than
#: :data:`PROOF_BYTES`) plus the one read that may pass it: small needs are these.
SMALL_BYTES = 2 * PROOF_BYTES

#: One client address may hold this fraction of the budget beyond small reservations:
#: a few of its connections cannot take it all, and another address always has room.
ADDRESS_SHARE_DIVISOR = 2

#: Small reservations together may hold this fraction of the budget: the rest stays for
#: claims (so no more than half of it waits in half-received frames).
SMALL_POOL_DIVISOR = 2


def claim(owed: int, arrived: int) -> int:
    """Bytes to reserve for the ``owed`` rest of an announced item of which ``arrived``
    bytes are here: all of it once :data:`PROOF_BYTES` arrived, else none yet."""
    return owed if arrived >= PROOF_BYTES else 0


class RequestBudget:
    """``capacity`` bytes shared by every connection; None means no limit (accounts are
    then always granted at once).

    ``small_bytes``: an account reserving at most this much is small (it may overtake,
    it draws from the small pool; only what an account reserves beyond it counts toward
    its address's share). ``address_share``: what one address may hold beyond small
    reservations (default :data:`ADDRESS_SHARE_DIVISOR`). ``small_pool``: what small
    reservations may hold together (default :data:`SMALL_POOL_DIVISOR`)."""

    def __init__(
        self,
        capacity: int | None,
        *,
        small_bytes: int = SMALL_BYTES,
        address_share: int | None = None,
        small_pool: int | None = None,
    ) -> None:
        if capacity is not None and capacity <= 0:
            raise ValueError("the request budget must be positive (or None: unlimited)")
        self.capacity = capacity
        self.small_bytes = small_bytes
        if capacity is None:
            self.address_share: int | None = None
            self.small_pool: int | None = None
        else:
            self.address_share = (
                capacity // ADDRESS_SHARE_DIVISOR if address_share is None else address_share
            )
            self.small_pool = (
                capacity // SMALL_POOL_DIVISOR if small_pool is None else small_pool
            )
        #: Bytes reserved by all accounts together.
        self.reserved = 0
        #: Of those, the reservations of small accounts (at most ``small_bytes`` each).
        self.reserved_small = 0
        #: Per address, the parts beyond ``small_bytes``.
        self._large_by_address: defaultdict[str, int] = defaultdict(int)
        #: Accounts waiting to grow, oldest first.
        self._waiting: deque[Account] = deque()
        self._granting = False
        #: Times an account had to wait (for the operator: the budget is too small for
        #: the load when this grows steadily).
        self.waits = 0

    @property
    def available(self) -> int | None:
        return None if self.capacity is None else self.capacity - self.reserved

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def admits(self, size: int) -> bool:
        """Whether a frame of ``size`` bytes can ever be reserved."""
        return self.capacity is None or size <= self.capacity

    def account(self, address: str = "") -> Account:
        """A new, empty account for a connection from ``address``."""
        return Account(self, address)

    def held_by(self, address: str) -> int:
        """Bytes ``address``'s accounts reserve beyond their small parts."""
        return self._large_by_address.get(address, 0)

    # ----------------------------------------------------------------- for Account

    def _take(self, account: Account, need: int, on_granted: Callable[[], None]) -> bool:
        new = account.need == 0
        if new:
            self._waiting.append(account)
        account.need = need  # keeps its place if it already waits
        account.on_granted = None  # granted now: the caller learns it from the result
        self._grant()
        if not account.need:
            return True
        if new:
            self.waits += 1
        account.on_granted = on_granted
        return False

    def _give_back(self) -> None:
        self._grant()

    def _leave(self, account: Account) -> None:
        if account.need:
            account.need = 0
            account.on_granted = None
            account.overtaken = 0
            self._waiting.remove(account)
            self._grant()

    def _set(self, account: Account, reserved: int) -> None:
        """Move ``account``'s reservation to ``reserved``, keeping the totals."""
        small = self.small_bytes
        old = account.reserved
        self.reserved += reserved - old
        self.reserved_small += (reserved if reserved <= small else 0) - (
            old if old <= small else 0
        )
        large = max(0, reserved - small) - max(0, old - small)
        if large and account.address:
            left = self._large_by_address[account.address] + large
            if left:
                self._large_by_address[account.address] = left
            else:
                del self._large_by_address[account.address]
        account.reserved = reserved
        assert self.reserved >= 0, self.reserved

    def _over_share(self, account: Account, reserved: int) -> bool:
        """Whether growing to ``reserved`` is refused by the address's share: it grows
        beyond the small part while the address's other large parts fill the share."""
        share = self.address_share
        if share is None or not account.address or reserved <= self.small_bytes:
            return False
        own = max(0, account.reserved - self.small_bytes)
        return self.held_by(account.address) - own >= share

    def _pool_full(self, account: Account, reserved: int) -> bool:
        """Whether a small reservation of ``reserved`` is refused by the small pool (an
        account growing beyond ``small_bytes`` is not: the pool keeps room for it)."""
        pool = self.small_pool
        if pool is None or reserved > self.small_bytes or not self.reserved_small:
            return False
        return self.reserved_small + reserved - account.reserved > pool

    def _kept_out_by_small(self, waiter: Account) -> bool:
        """Whether small reservations are what keeps ``waiter`` out: only then does
        holding small needs back help it. When claims fill the budget, it waits for
        those, and holding small requests back would only stall everyone else until
        the claims' frames arrive or their deadline ends them."""
        available = self.available
        return available is None or waiter.need <= available + self.reserved_small

    def _fits(self, account: Account, reserved: int) -> bool:
        available = self.available
        return available is None or reserved - account.reserved <= available

    def _grant(self) -> None:
        if self._granting:
            return  # the loop further up the stack carries on
        self._granting = True
        try:
            while self._grant_one():
                pass
        finally:
            self._granting = False

    def _grant_one(self) -> bool:
        """Grant the first waiter the rules allow (module docstring); False if none."""
        available = self.available
        if available is not None and available <= 0:
            return False  # the common case under load: nobody can grow, look no further
        blocked: Account | None = None  # the oldest waiter that does not fit
        for account in self._waiting:
            if (
                blocked is not None
                and blocked.overtaken >= blocked.need
                and self._kept_out_by_small(blocked)
            ):
                return False  # strict order now: nobody behind it may pass
            reserved = account.reserved + account.need
            if self._over_share(account, reserved) or self._pool_full(account, reserved):
                continue  # waits for its address or the small pool, holding up nobody
            if not self._fits(account, reserved):
                if blocked is None:
                    blocked = account
                continue
            if blocked is not None:
                # Overtaking: only small needs, and only while the oldest blocked
                # waiter has not been overtaken by its own need already.
                if reserved > self.small_bytes:
                    continue
                blocked.overtaken += account.need
            self._waiting.remove(account)
            self._set(account, reserved)
            account.need = 0
            account.overtaken = 0
            on_granted, account.on_granted = account.on_granted, None
            if on_granted is not None:
                on_granted()
            return True
        return False


class Account:
    """One connection's reservation on a :class:`RequestBudget`."""

    def __init__(self, budget: RequestBudget, address: str = "") -> None:
        self.budget = budget
        #: The client address whose share this account draws on ("": none).
        self.address = address
        #: Called once the wait ends; held only while waiting, so a connection and its
        #: account never form a reference cycle that outlives the connection.
        self.on_granted: Callable[[], None] | None = None
        #: Bytes reserved for this connection.
        self.reserved = 0
        #: Bytes it waits for beyond ``reserved`` (0: not waiting).
        self.need = 0
        #: Bytes of small needs granted past it while it waited (bounded by ``need``).
        self.overtaken = 0

    @property
    def waiting(self) -> bool:
        return self.need > 0

    def cover(self, wanted: int, on_granted: Callable[[], None] = lambda: None) -> bool:
        """Make the reservation ``wanted`` bytes: give back what is beyond it, or take
        what is missing. False when the budget cannot cover it now: the account then
        waits (see the rules) and ``on_granted`` is called once it is covered."""
        if wanted <= self.reserved:
            self.budget._leave(self)
            if wanted < self.reserved:
                self.budget._set(self, wanted)
                self.budget._give_back()
            return True
        return self.budget._take(self, wanted - self.reserved, on_granted)

    def close(self) -> None:
        """Give everything back and stop waiting (the connection is done)."""
        self.cover(0)
