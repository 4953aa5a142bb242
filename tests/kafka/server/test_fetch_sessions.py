"""The fetch-session cache (KIP-227), sans-IO: session IDs and epochs, the incremental
update of a session, and the cache's room and eviction rules, with a hand-moved clock.
Synchronous."""

from __future__ import annotations

import random
import uuid

from twisted.trial.unittest import SynchronousTestCase

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.fetch_sessions import (
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSessionCache,
    Kind,
    WantedPartition,
    next_epoch,
)

ZERO = uuid.UUID(int=0)


def parts(n: int, topic: str = "t") -> list[CachedPartition]:
    return [CachedPartition(topic, ZERO, p, 0, 1000) for p in range(n)]


def wanted(topic: str, partition: int, offset: int) -> WantedPartition:
    return WantedPartition(topic, ZERO, partition, offset, 1000)


class Clocked(SynchronousTestCase):
    def setUp(self) -> None:
        self.now = 1_000_000

    def cache(self, slots: int) -> FetchSessionCache:
        return FetchSessionCache(slots, now_ms=lambda: self.now, rng=random.Random(7))


class EpochTests(Clocked):
    def test_epochs_run_from_1_and_wrap_to_1(self) -> None:
        self.assertEqual(next_epoch(INITIAL_EPOCH), 1)
        self.assertEqual(next_epoch(41), 42)
        self.assertEqual(next_epoch(0x7FFFFFFF), 1)
        self.assertEqual(next_epoch(FINAL_EPOCH), FINAL_EPOCH)

    def test_full_fetches(self) -> None:
        cache = self.cache(10)
        self.assertIs(cache.open(0, INITIAL_EPOCH, uses_topic_ids=True).kind, Kind.FULL)
        self.assertIs(cache.open(0, FINAL_EPOCH, uses_topic_ids=True).kind, Kind.SESSIONLESS)
        # A full fetch naming a session closes it, whether it asks for a new one or not.
        for epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            sid = cache.create(parts(2), privileged=False, uses_topic_ids=False, size=2)
            self.assertIsNotNone(cache.get(sid))
            cache.open(sid, epoch, uses_topic_ids=False)
            self.assertIsNone(cache.get(sid))
        # Without slots there are no sessions: every full fetch is sessionless.
        off = self.cache(0)
        self.assertIs(off.open(0, INITIAL_EPOCH, uses_topic_ids=True).kind, Kind.SESSIONLESS)
        self.assertEqual(off.create(parts(1), privileged=False, uses_topic_ids=True, size=1),
                         INVALID_SESSION_ID)

    def test_incremental_fetches_follow_the_epochs(self) -> None:
        cache = self.cache(10)
        sid = cache.create(parts(3), privileged=False, uses_topic_ids=False, size=3)
        self.assertNotEqual(sid, INVALID_SESSION_ID)
        session = cache.get(sid)
        assert session is not None
        self.assertEqual(session.epoch, 1)
        ctx = cache.open(sid, 1, uses_topic_ids=False)
        self.assertEqual((ctx.kind, ctx.session), (Kind.INCREMENTAL, session))
        self.assertEqual(session.epoch, 2)
        # The same epoch again (a retry the broker answered already) is refused, and
        # refusing changes nothing: the right epoch still works.
        self.assertEqual(cache.open(sid, 1, uses_topic_ids=False).error,
                         ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        self.assertEqual(cache.open(sid, 3, uses_topic_ids=False).error,
                         ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        self.assertEqual(cache.open(sid + 1, 2, uses_topic_ids=False).error,
                         ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        self.assertEqual(cache.open(sid, 2, uses_topic_ids=True).error,
                         ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        self.assertIs(cache.open(sid, 2, uses_topic_ids=False).kind, Kind.INCREMENTAL)
        self.assertEqual(session.epoch, 3)

    def test_an_incremental_fetch_adds_moves_and_forgets(self) -> None:
        cache = self.cache(10)
        sid = cache.create(parts(3), privileged=False, uses_topic_ids=False, size=3)
        session = cache.get(sid)
        assert session is not None
        update = session.update([wanted("t", 1, 50), wanted("u", 0, 7)], [("t", 2), ("t", 9)])
        self.assertEqual(
            ([(p.topic, p.partition) for p in update.added], update.updated,
             [(p.topic, p.partition) for p in update.removed]),
            ([("u", 0)], 1, [("t", 2)]))
        self.assertEqual(list(session.partitions), [("t", 0), ("t", 1), ("u", 0)])
        self.assertEqual(session.partitions[("t", 1)].fetch_offset, 50)
        # Forgetting every partition ends the session: the answer is sessionless.
        ctx = cache.open(sid, 1, uses_topic_ids=False,
                         forgotten=[("t", 0), ("t", 1), ("u", 0)])
        self.assertIs(ctx.kind, Kind.SESSIONLESS)
        self.assertIsNone(cache.get(sid))

    def test_a_partition_is_answered_when_it_has_news(self) -> None:
        c = CachedPartition("t", ZERO, 0, 10, 1000)
        told = dict(high_watermark=10, last_stable_offset=10, log_start=0)
        self.assertTrue(c.answered(error=False, has_records=False, **told))  # never told
        self.assertFalse(c.answered(error=False, has_records=False, **told))
        self.assertTrue(c.answered(error=False, has_records=True, **told))
        self.assertTrue(c.answered(error=False, has_records=False, high_watermark=11,
                                   last_stable_offset=10, log_start=0))
        self.assertTrue(c.answered(error=False, has_records=False, high_watermark=11,
                                   last_stable_offset=11, log_start=0))
        self.assertTrue(c.answered(error=False, has_records=False, high_watermark=11,
                                   last_stable_offset=11, log_start=5))
        # An error is always named, and names the partition again once it is gone.
        self.assertTrue(c.answered(error=True, has_records=False, high_watermark=-1,
                                   last_stable_offset=-1, log_start=-1))
        self.assertTrue(c.answered(error=False, has_records=False, high_watermark=11,
                                   last_stable_offset=11, log_start=5))
        self.assertFalse(c.answered(error=False, has_records=False, high_watermark=11,
                                    last_stable_offset=11, log_start=5))


class EvictionTests(Clocked):
    def test_a_full_cache_refuses_a_new_session_while_the_others_are_young(self) -> None:
        cache = self.cache(2)
        a = cache.create(parts(5), privileged=False, uses_topic_ids=True, size=5)
        b = cache.create(parts(1), privileged=False, uses_topic_ids=True, size=1)
        self.now += EVICTION_MS  # not yet more than the eviction time
        self.assertEqual(cache.create(parts(100), privileged=False, uses_topic_ids=True,
                                      size=100), INVALID_SESSION_ID)
        self.assertEqual({s.id for s in cache}, {a, b})

    def test_a_stale_session_makes_room_for_any_new_one(self) -> None:
        cache = self.cache(2)
        a = cache.create(parts(50), privileged=False, uses_topic_ids=True, size=50)
        self.now += 1000
        b = cache.create(parts(50), privileged=False, uses_topic_ids=True, size=50)
        self.assertEqual({s.id for s in cache}, {a, b})
        self.now += EVICTION_MS
        # ``a`` is used now (epoch 1): ``b`` is the least recently used, and stale.
        self.assertIs(cache.open(a, 1, uses_topic_ids=True).kind, Kind.INCREMENTAL)
        self.now += 1
        c = cache.create(parts(1), privileged=False, uses_topic_ids=True, size=1)
        self.assertNotEqual(c, INVALID_SESSION_ID)
        self.assertEqual({s.id for s in cache}, {a, c})
        self.assertEqual((cache.created, cache.evicted), (3, 1))

    def test_a_larger_session_evicts_the_smallest_old_one(self) -> None:
        cache = self.cache(3)
        small = cache.create(parts(2), privileged=False, uses_topic_ids=True, size=2)
        mid = cache.create(parts(5), privileged=False, uses_topic_ids=True, size=5)
        self.now += EVICTION_MS + 1
        young = cache.create(parts(1), privileged=False, uses_topic_ids=True, size=1)
        # Keep every session in use, so none is stale.
        for sid in (small, mid, young):
            self.assertIs(cache.open(sid, 1, uses_topic_ids=True).kind, Kind.INCREMENTAL)
        # Not larger than the smallest old one (2 partitions): refused.
        self.assertEqual(cache.create(parts(2), privileged=False, uses_topic_ids=True,
                                      size=2), INVALID_SESSION_ID)
        # Larger: it takes the place of the smallest *old* session, not of the young one.
        big = cache.create(parts(3), privileged=False, uses_topic_ids=True, size=3)
        self.assertEqual({s.id for s in cache}, {mid, young, big})

    def test_a_privileged_session_evicts_an_unprivileged_one_of_any_age(self) -> None:
        cache = self.cache(2)
        a = cache.create(parts(10), privileged=False, uses_topic_ids=True, size=10)
        f = cache.create(parts(1), privileged=True, uses_topic_ids=True, size=1)
        # A follower's session is worth more than any consumer's, even a young larger one.
        f2 = cache.create(parts(1), privileged=True, uses_topic_ids=True, size=1)
        self.assertEqual({s.id for s in cache}, {f, f2})
        self.assertNotIn(a, {s.id for s in cache})
        # An unprivileged session never evicts a privileged one, however large.
        self.now += EVICTION_MS + 1
        for sid in (f, f2):
            cache.open(sid, 1, uses_topic_ids=True)
        self.assertEqual(cache.create(parts(500), privileged=False, uses_topic_ids=True,
                                      size=500), INVALID_SESSION_ID)

    def test_session_ids_are_positive_and_distinct(self) -> None:
        cache = self.cache(200)
        ids = [cache.create(parts(1), privileged=False, uses_topic_ids=False, size=1)
               for _ in range(200)]
        self.assertEqual(len(set(ids)), 200)
        self.assertTrue(all(0 < i <= 0x7FFFFFFF for i in ids))
        self.assertEqual((len(cache), cache.partitions), (200, 200))


class PartitionBoundTests(Clocked):
    def test_the_cache_holds_at_most_max_partitions(self) -> None:
        cache = FetchSessionCache(10, now_ms=lambda: self.now, max_partitions=5)
        a = cache.create(parts(3), privileged=False, uses_topic_ids=False, size=3)
        self.assertEqual(cache.create(parts(3), privileged=False, uses_topic_ids=False,
                                      size=3), INVALID_SESSION_ID)
        # Growing past the bound ends the session: that fetch is served sessionless.
        self.assertIs(cache.open(a, 1, uses_topic_ids=False,
                                 wanted=[wanted("u", 0, 0)]).kind, Kind.INCREMENTAL)
        ctx = cache.open(a, 2, uses_topic_ids=False,
                         wanted=[wanted("u", 1, 0), wanted("u", 2, 0)])
        self.assertIs(ctx.kind, Kind.SESSIONLESS)
        self.assertEqual((len(cache), cache.partitions), (0, 0))
