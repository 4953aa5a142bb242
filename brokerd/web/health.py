"""``/healthz`` and ``/readyz``: is the process serving, and is the broker ready.

``/healthz`` answers 200 ``ok`` whenever the HTTP endpoint answers at all (the reactor
runs). ``/readyz`` answers 200 ``ready`` only when :class:`Readiness` finds nothing
missing: every listener has bound, start-up recovery is done (the log directory is open,
and the transaction coordinator has completed the transactions the log left prepared), no
partition is offline, and neither the consumer-offsets store nor the transaction log is
offline after a failed fsync (a check the service tree adds; they reopen themselves, see
``brokerd/core/store_recovery.py``); otherwise 503 with one plain-text line per reason (the
reasons name partitions: the site sends them only to a request allowed to see them, see
:mod:`brokerd.web.scope`). Both are ``text/plain``, never cached, and served without
authentication.

What it does not do: decide readiness itself (the service tree tells :class:`Readiness`
what to wait for), or probe the listeners over the network.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from twisted.web.resource import Resource

from brokerd.operator.txn_face import TxnListingFace

if TYPE_CHECKING:
    # Annotations only: the broker builds its Readiness with --http none too, and
    # twisted.web.server (the HTTP server) is a large import it then never needs.
    from twisted.web.server import Request


#: The transaction states a start-up completion finishes (a decision logged, markers not).
PREPARED_STATES = ("PrepareCommit", "PrepareAbort")
#: Offline partitions named in a /readyz answer; the rest are counted.
MAX_LISTED_PARTITIONS = 20


class Readiness:
    """What the broker still waits for before it is ready. Reactor thread only.

    :param offline_partitions: the offline partitions, with why (the inspector's
        ``offline_partitions``); any offline partition makes the broker not ready.
    """

    def __init__(
        self, offline_partitions: Callable[[], Mapping[tuple[str, int], str]]
    ) -> None:
        self._offline_partitions = offline_partitions
        self._waiting: dict[str, str] = {}
        self._checks: list[Callable[[], Iterable[str]]] = []

    def wait_for(self, name: str, reason: str) -> Callable[[], None]:
        """Not ready until the returned callable is called (``reason`` says why)."""
        self._waiting[name] = reason

        def done(*_: object) -> None:
            self._waiting.pop(name, None)

        return done

    def add_check(self, check: Callable[[], Iterable[str]]) -> None:
        """``check()`` lists what is not ready (nothing when ready); run at every probe."""
        self._checks.append(check)

    def problems(self) -> list[str]:
        """What is not ready, one line each; empty when ready."""
        lines = [f"{name}: {reason}" for name, reason in sorted(self._waiting.items())]
        for check in self._checks:
            lines.extend(check())
        offline = self._offline_partitions()
        for (topic, partition), why in sorted(offline.items())[:MAX_LISTED_PARTITIONS]:
            lines.append(f"partition {topic}-{partition} offline: {why}")
        if len(offline) > MAX_LISTED_PARTITIONS:
            lines.append(f"... {len(offline) - MAX_LISTED_PARTITIONS} more offline partitions")
        return lines


def startup_completions(coordinator: TxnListingFace) -> Callable[[], list[str]]:
    """A readiness check: the transactions prepared (decided, not completed) when the
    coordinator was loaded are all completed. Call before the coordinator starts: the
    ids prepared now are those start-up must complete (later ones are normal traffic)."""
    pending = {
        t.transactional_id
        for t in coordinator.list_transactions(PREPARED_STATES, [])
    }

    def check() -> list[str]:
        if not pending:
            return []
        still = {
            t.transactional_id
            for t in coordinator.list_transactions(PREPARED_STATES, [])
        }
        pending.intersection_update(still)
        if not pending:
            return []
        return [f"transaction coordinator: completing {len(pending)} prepared transaction(s)"]

    return check


def _plain(request: Request, status: int, body: str) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
    request.setHeader(b"cache-control", b"no-store")
    return body.encode()


class HealthResource(Resource):
    """``/healthz``: 200 ``ok`` while the process serves."""

    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        return _plain(request, 200, "ok\n")


class ReadyResource(Resource):
    """``/readyz``: 200 ``ready``, or 503 with what is not ready."""

    isLeaf = True

    def __init__(
        self, readiness: Readiness, shows_reasons: Callable[[Request], bool] | None = None
    ) -> None:
        super().__init__()
        self._readiness = readiness
        self._shows_reasons = shows_reasons

    def render_GET(self, request: Request) -> bytes:
        problems = self._readiness.problems()
        if problems:
            # The reasons name partitions: withheld from who may not see them.
            if self._shows_reasons is not None and not self._shows_reasons(request):
                return _plain(request, 503, "not ready\n")
            return _plain(request, 503, "not ready\n" + "".join(f"{p}\n" for p in problems))
        return _plain(request, 200, "ready\n")


__all__ = [
    "MAX_LISTED_PARTITIONS",
    "PREPARED_STATES",
    "HealthResource",
    "Readiness",
    "ReadyResource",
    "startup_completions",
]
