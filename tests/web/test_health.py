"""/healthz and /readyz with fakes: what the readiness waits for, and the answers."""

from __future__ import annotations

from collections.abc import Sequence

from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest

from brokerd.kafka.txn.types import TxnListing
from brokerd.web.health import (
    MAX_LISTED_PARTITIONS,
    HealthResource,
    Readiness,
    ReadyResource,
    startup_completions,
)


class FakeOffline:
    def __init__(self) -> None:
        self.offline: dict[tuple[str, int], str] = {}

    def offline_partitions(self) -> dict[tuple[str, int], str]:
        return dict(self.offline)


class FakeCoordinator:
    def __init__(self, states: dict[str, str]) -> None:
        self.states = states

    def list_transactions(
        self, state_filters: Sequence[str], producer_id_filters: Sequence[int]
    ) -> list[TxnListing]:
        return [
            TxnListing(tid, 1, state) for tid, state in sorted(self.states.items())
            if not state_filters or state in state_filters
        ]


def get(resource: HealthResource | ReadyResource) -> tuple[int, bytes]:
    request = DummyRequest([b""])
    body = resource.render_GET(request)
    return request.responseCode or 200, body


class ReadinessTest(SynchronousTestCase):
    def test_listeners_and_offline_partitions(self) -> None:
        offline = FakeOffline()
        readiness = Readiness(offline.offline_partitions)
        native = readiness.wait_for("native listener", "not bound yet")
        kafka = readiness.wait_for("kafka listener", "not bound yet")
        resource = ReadyResource(readiness)
        code, body = get(resource)
        self.assertEqual(code, 503)
        self.assertEqual(
            body,
            b"not ready\nkafka listener: not bound yet\nnative listener: not bound yet\n",
        )
        native()
        kafka("an address")  # the listeners call it with the bound address
        self.assertEqual(get(resource), (200, b"ready\n"))
        offline.offline[("t", 3)] = "cannot open segment"
        code, body = get(resource)
        self.assertEqual(code, 503)
        self.assertIn(b"partition t-3 offline: cannot open segment\n", body)
        del offline.offline[("t", 3)]
        self.assertEqual(get(resource)[0], 200)

    def test_many_offline_partitions_are_counted_not_listed(self) -> None:
        offline = FakeOffline()
        offline.offline = {("t", i): "gone" for i in range(MAX_LISTED_PARTITIONS + 5)}
        problems = Readiness(offline.offline_partitions).problems()
        self.assertEqual(len(problems), MAX_LISTED_PARTITIONS + 1)
        self.assertEqual(problems[-1], "... 5 more offline partitions")

    def test_startup_completions(self) -> None:
        coordinator = FakeCoordinator(
            {"a": "PrepareCommit", "b": "PrepareAbort", "c": "Ongoing"}
        )
        readiness = Readiness(FakeOffline().offline_partitions)
        readiness.add_check(startup_completions(coordinator))
        self.assertEqual(
            readiness.problems(),
            ["transaction coordinator: completing 2 prepared transaction(s)"],
        )
        coordinator.states["a"] = "CompleteCommit"
        self.assertEqual(len(readiness.problems()), 1)
        coordinator.states["b"] = "CompleteAbort"
        self.assertEqual(readiness.problems(), [])
        # A transaction prepared later is normal traffic, not start-up: still ready.
        coordinator.states["c"] = "PrepareCommit"
        coordinator.states["a"] = "PrepareAbort"
        self.assertEqual(readiness.problems(), [])

    def test_nothing_prepared_at_start(self) -> None:
        check = startup_completions(FakeCoordinator({"c": "Ongoing"}))
        self.assertEqual(check(), [])


class HealthTest(SynchronousTestCase):
    def test_healthz(self) -> None:
        request = DummyRequest([b""])
        self.assertEqual(HealthResource().render_GET(request), b"ok\n")
        self.assertEqual(
            request.responseHeaders.getRawHeaders(b"content-type"),
            [b"text/plain; charset=utf-8"],
        )
