"""A fetch session's standing watch
(:class:`~brokerd.kafka.server.handlers.fetch_watch.AppendsWatch`): registered once per
partition, appends marking partitions dirty and counting toward a parked fetch, the
park's deadline, cancelling, closing. Over ``task.Clock``."""

from __future__ import annotations

import uuid

from twisted.internet import defer, task
from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.server.fetch_sessions import CachedPartition
from brokerd.kafka.server.handlers.fetch_watch import AppendsWatch

TID = uuid.UUID(int=1)


class Watches:
    """The core's append watches, recording who watches what."""

    def __init__(self) -> None:
        self.watched: dict[tuple[str, int], object] = {}
        self.calls: list[tuple[str, tuple[str, int]]] = []

    def watch(self, key: tuple[str, int], watcher: object) -> None:
        self.calls.append(("watch", key))
        self.watched[key] = watcher

    def unwatch(self, key: tuple[str, int], watcher: object) -> None:
        self.calls.append(("unwatch", key))
        del self.watched[key]


def part(p: int, topic: str = "t") -> CachedPartition:
    return CachedPartition(topic, TID, p, 0, 1000)


class AppendsWatchTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.watches = Watches()
        self.clock = task.Clock()
        self.watch = AppendsWatch(self.watches, self.clock)  # type: ignore[arg-type]
        self.watch.add((TID, 0), part(0))
        self.watch.add((TID, 1), part(1))

    def test_each_partition_is_registered_once_and_removed_once(self) -> None:
        self.watch.add((TID, 0), part(0))  # again: no second registration
        self.watch.add((TID, 9), part(9, topic=""))  # an ID no topic has: not watched
        self.assertEqual(len(self.watch), 2)
        self.assertEqual(self.watches.calls, [("watch", ("t", 0)), ("watch", ("t", 1))])
        self.watch.remove(part(0))
        self.watch.remove(part(0))
        self.assertEqual(self.watches.calls[2:], [("unwatch", ("t", 0))])
        self.watch.close()
        self.assertEqual(self.watches.watched, {})
        self.assertEqual(len(self.watch), 0)

    def test_appends_mark_partitions_dirty_until_taken(self) -> None:
        self.watch.changed(("t", 1), 10)
        self.watch.changed(("other", 0), 10)  # not watched
        self.assertEqual(self.watch.take_dirty(), {(TID, 1)})
        self.assertEqual(self.watch.take_dirty(), set())
        self.watch.changed(("t", 0), 10)
        self.watch.remove(part(0))
        self.assertEqual(self.watch.take_dirty(), set())  # removed: no longer dirty

    def test_a_park_fires_once_enough_bytes_land(self) -> None:
        d = self.watch.park(100, 5000)
        self.watch.changed(("t", 0), 60)
        self.assertNoResult(d)
        self.watch.changed(("t", 1), 40)
        self.assertIs(self.successResultOf(d), True)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.watch.take_dirty(), {(TID, 0), (TID, 1)})

    def test_a_park_answers_at_once_or_at_its_deadline(self) -> None:
        self.assertIs(self.successResultOf(self.watch.park(0, 5000)), True)
        self.assertIs(self.successResultOf(self.watch.park(10, 0)), True)
        self.watch.changed(("t", 0), 1)
        self.assertIs(self.successResultOf(self.watch.park(10, 5000)), True)  # dirty
        self.watch.take_dirty()
        d = self.watch.park(10, 5000)
        self.clock.advance(4.999)
        self.assertNoResult(d)
        self.clock.advance(0.001)
        self.assertIs(self.successResultOf(d), True)

    def test_a_deletion_or_close_answers_with_what_there_is(self) -> None:
        d = self.watch.park(10, 5000)
        self.watch.changed(("t", 0), None)
        self.assertIs(self.successResultOf(d), False)
        self.watch.take_dirty()
        d = self.watch.park(10, 5000)
        self.watch.close()
        self.assertIs(self.successResultOf(d), False)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_a_second_park_answers_the_first_and_cancelling_drops_the_timer(self) -> None:
        first = self.watch.park(10, 5000)
        second = self.watch.park(10, 5000)
        self.assertIs(self.successResultOf(first), True)
        self.assertNoResult(second)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        second.cancel()
        self.failureResultOf(second, defer.CancelledError)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.watch.changed(("t", 0), 100)  # nothing parked: only marked dirty
        self.assertEqual(self.watch.take_dirty(), {(TID, 0)})
