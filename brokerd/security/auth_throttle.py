# -*- test-case-name: tests.security.test_auth_throttle -*-
"""How failed SASL authentications are slowed down and logged, without locking anyone out.

* :class:`AuthThrottle` keeps, per (peer address, user name) pair, the failures of the
  last :data:`FORGET_AFTER` seconds. The answer to a failure waits ``delay`` seconds
  (Kafka's ``connection.failed.authentication.delay.ms``), doubled for each further
  failure of the same pair, up to :data:`MAX_DELAY`. Until that wait is over, the answer
  to the pair's next attempt waits too, whether its credentials are right or wrong: a
  guesser learns nothing sooner by not waiting for the failure answer. A correct
  credential is always checked and always accepted, at worst :data:`MAX_DELAY` late,
  and only for the same user name from the same address; other users behind that
  address are not slowed at all. A success forgets the pair.
* :class:`FailureLog` lets one log line per kind of failure through every
  :data:`LOG_INTERVAL` seconds and counts the rest, so a client retrying a stale
  password every few milliseconds does not fill the log.

Both are sans-IO: they take a clock (seconds) and answer numbers; the Kafka protocol
holds the answers with ``callLater`` on its injected clock. Memory is bounded: at most
``max_pairs`` pairs (the least recently failed is forgotten first) and one counter per
kind of failure.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import attrs

#: Kafka's default ``connection.failed.authentication.delay.ms``, in seconds.
DEFAULT_DELAY = 0.1
#: Longest wait of a failure answer, however many failures came before. It stays well
#: under the shortest timeout common clients give a login (kcat's and librdkafka's
#: tools wait 5 s for metadata): a wait near it would turn a clear "authentication
#: failed" into a timeout, and delay a correct password past the client's patience.
MAX_DELAY = 2.0
#: A pair with no failure for this long starts again from ``delay``.
FORGET_AFTER = 60.0
#: Pairs remembered at most.
MAX_PAIRS = 10_000
#: At most one log line per kind of failure in this many seconds.
LOG_INTERVAL = 10.0

__all__ = [
    "DEFAULT_DELAY",
    "FORGET_AFTER",
    "LOG_INTERVAL",
    "MAX_DELAY",
    "MAX_PAIRS",
    "AuthThrottle",
    "FailureLog",
]


@attrs.define
class _Pair:
    failures: int
    last_failure: float
    #: Before this time, answers to this pair wait.
    ready_at: float


class AuthThrottle:
    """Failures per (address, user name), and how long their answers wait.

    :param clock: seconds (the reactor's ``seconds``, or ``task.Clock().seconds``).
    :param delay: seconds the answer to a first failure waits (0: no delay, no
        throttle, as Kafka with the option at 0).
    """

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        delay: float = DEFAULT_DELAY,
        max_delay: float = MAX_DELAY,
        forget_after: float = FORGET_AFTER,
        max_pairs: int = MAX_PAIRS,
    ) -> None:
        if delay < 0 or max_delay < delay or forget_after <= 0 or max_pairs < 1:
            raise ValueError("invalid throttle limits")
        self.clock = clock
        self.delay = delay
        self.max_delay = max_delay
        self._forget_after = forget_after
        self._max_pairs = max_pairs
        self._pairs: OrderedDict[tuple[str, str], _Pair] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pairs)

    def _current(self, key: tuple[str, str]) -> _Pair | None:
        pair = self._pairs.get(key)
        if pair is not None and self.clock() - pair.last_failure >= self._forget_after:
            del self._pairs[key]
            return None
        return pair

    def hold(self, address: str, user: str) -> float:
        """Seconds the answer to an attempt of ``user`` from ``address`` must wait
        before it is given (0: answer now), whatever the attempt's outcome."""
        pair = self._current((address, user))
        if pair is None:
            return 0.0
        return max(pair.ready_at - self.clock(), 0.0)

    def failed(self, address: str, user: str, *, held: float = 0.0) -> float:
        """Count a failure of ``user`` from ``address`` whose answer already waits
        ``held`` seconds; return how long in all it is to wait."""
        key = (address, user)
        now = self.clock()
        pair = self._current(key)
        if pair is None:
            if len(self._pairs) >= self._max_pairs:
                self._pairs.popitem(last=False)
            pair = self._pairs[key] = _Pair(0, now, now)
        else:
            self._pairs.move_to_end(key)
        pair.failures += 1
        pair.last_failure = now
        wait = max(held, self._delay_after(pair.failures))
        pair.ready_at = now + wait
        return wait

    def succeeded(self, address: str, user: str) -> None:
        """The pair logged in: its failures no longer count."""
        self._pairs.pop((address, user), None)

    def failures(self, address: str, user: str) -> int:
        """Failures of the pair that still count (0 if none)."""
        pair = self._current((address, user))
        return 0 if pair is None else pair.failures

    def _delay_after(self, failures: int) -> float:
        if self.delay == 0:
            return 0.0
        # 2**n grows past any cap quickly; stop the exponent before it overflows.
        return min(self.delay * 2.0 ** min(failures - 1, 64), self.max_delay)


@attrs.define
class _Kind:
    logged_at: float
    suppressed: int = 0


class FailureLog:
    """At most one log line per kind of failure every ``interval`` seconds.

    :param clock: seconds.
    """

    def __init__(self, clock: Callable[[], float], *, interval: float = LOG_INTERVAL) -> None:
        self._clock = clock
        self.interval = interval
        self._kinds: dict[str, _Kind] = {}

    def admit(self, kind: str) -> int | None:
        """Whether a failure of ``kind`` is to be logged now: None (counted, not to be
        logged), or how many of that kind were not logged since its last line."""
        now = self._clock()
        state = self._kinds.get(kind)
        if state is None:
            self._kinds[kind] = _Kind(now)
            return 0
        if now - state.logged_at < self.interval:
            state.suppressed += 1
            return None
        suppressed, state.suppressed, state.logged_at = state.suppressed, 0, now
        return suppressed
