# -*- test-case-name: tests.net.test_request_budget -*-
"""The broker-wide budget of buffered request bytes (Kafka's ``queued.max.request.bytes``).

Every connection of both listeners holds an :class:`Account` on one
:class:`RequestBudget`. A connection keeps its account's reservation at least as large
as the request bytes it holds in memory plus the bytes a size prefix has announced and
the client has not sent yet (``brokerd.net.connection`` reconciles this after every read
and every finished request). A frame is thereby reserved when its size prefix is read,
before its body is read; when the budget cannot cover it, the connection stops reading
(its transport is paused) and waits, instead of buffering.

Fairness: waiting accounts are served strictly in the order they started waiting, and a
new request never overtakes one that waits (no barging), so a large frame is not starved
by a stream of small ones. Whatever a connection holds is covered without waiting on the
others (it is already in memory, or its client is sending it); so every reservation is
eventually given back, and a frame no larger than the whole budget is eventually
admitted. A frame larger than the whole budget can never be: the protocols refuse it as
too large (:meth:`RequestBudget.admits`).

What it does not do: read, pause or resume anything itself (a granted account calls its
owner back), or know protocols. Reactor thread only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

__all__ = ["DEFAULT_QUEUED_MAX_REQUEST_BYTES", "Account", "RequestBudget"]

#: Default ``--queued-max-request-bytes``: eight frames of the default largest Kafka
#: request (8 MiB), far more than the small requests of a busy broker use at once, and a
#: fixed bound on request memory whatever the number of connections.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 64 * 1024 * 1024


class RequestBudget:
    """``capacity`` bytes shared by every connection; None means no limit (accounts are
    then always granted at once)."""

    def __init__(self, capacity: int | None) -> None:
        if capacity is not None and capacity <= 0:
            raise ValueError("the request budget must be positive (or None: unlimited)")
        self.capacity = capacity
        #: Bytes reserved by all accounts together.
        self.reserved = 0
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

    def account(self) -> Account:
        """A new, empty account."""
        return Account(self)

    # ----------------------------------------------------------------- for Account

    def _take(self, account: Account, need: int, on_granted: Callable[[], None]) -> bool:
        available = self.available
        if account.need == 0 and not self._waiting and (available is None or need <= available):
            self.reserved += need
            account.reserved += need
            return True
        if account.need == 0:
            self.waits += 1
            self._waiting.append(account)
        account.need = need  # keeps its place if it already waits
        account.on_granted = on_granted
        self._grant()
        return False

    def _give_back(self, n: int) -> None:
        self.reserved -= n
        assert self.reserved >= 0, self.reserved
        self._grant()

    def _leave(self, account: Account) -> None:
        if account.need:
            account.need = 0
            account.on_granted = None
            self._waiting.remove(account)
            self._grant()

    def _grant(self) -> None:
        if self._granting:
            return  # the loop further up the stack carries on
        self._granting = True
        try:
            while self._waiting:
                head = self._waiting[0]
                available = self.available
                if available is not None and head.need > available:
                    break  # strict order: nobody overtakes the oldest waiter
                self._waiting.popleft()
                self.reserved += head.need
                head.reserved += head.need
                head.need = 0
                on_granted, head.on_granted = head.on_granted, None
                if on_granted is not None:
                    on_granted()
        finally:
            self._granting = False


class Account:
    """One connection's reservation on a :class:`RequestBudget`."""

    def __init__(self, budget: RequestBudget) -> None:
        self.budget = budget
        #: Called once the wait ends; held only while waiting, so a connection and its
        #: account never form a reference cycle that outlives the connection.
        self.on_granted: Callable[[], None] | None = None
        #: Bytes reserved for this connection.
        self.reserved = 0
        #: Bytes it waits for beyond ``reserved`` (0: not waiting).
        self.need = 0

    @property
    def waiting(self) -> bool:
        return self.need > 0

    def cover(self, wanted: int, on_granted: Callable[[], None] = lambda: None) -> bool:
        """Make the reservation ``wanted`` bytes: give back what is beyond it, or take
        what is missing. False when the budget cannot cover it now: the account then
        waits (in order) and ``on_granted`` is called once it is covered."""
        if wanted <= self.reserved:
            self.budget._leave(self)
            extra = self.reserved - wanted
            if extra:
                self.reserved = wanted
                self.budget._give_back(extra)
            return True
        return self.budget._take(self, wanted - self.reserved, on_granted)

    def close(self) -> None:
        """Give everything back and stop waiting (the connection is done)."""
        self.cover(0)
