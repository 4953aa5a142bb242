"""A consumer that read a backlog to its end is told at once
(brokerd/kafka/server/handlers/fetch_catchup.py).

The rule in isolation (:class:`CatchUp`), the Fetch API with a fake core,
``StringTransport`` and ``task.Clock`` (which fetches park and which are answered at
once), and end to end on a real socket against the real broker core.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest_twisted

from brokerd.kafka.server.handlers.fetch_catchup import MAX_BEHIND_PER_CONNECTION, CatchUp
from brokerd.kafka.wire.codec import ApiKey

from tests.kafka.listener.test_protocol import KafkaTestCase, batch
from tests.kafka.server.handlers import test_fetch_zero_copy as zero_copy
from tests.kafka.server.handlers.test_fetch_zero_copy import (
    Server,
    connect,
    decode_fetch,
    fetch_request,
    produce,
    sleep,
    some_batches,
)

#: The broker on real sockets (a pytest fixture).
server = zero_copy.server


class _Conn:
    """A connection object (weakly referenced by CatchUp)."""


# -- the rule ------------------------------------------------------------------------


def test_an_answer_cut_by_its_limit_marks_and_an_empty_one_clears() -> None:
    catch_up, conn = CatchUp(), _Conn()
    assert not catch_up.behind(conn, [("t", 0)])
    catch_up.answered(conn, ("t", 0), 1000, 1000)  # cut by the limit: behind
    assert catch_up.behind(conn, [("t", 0)])
    assert catch_up.behind(conn, [("t", 1), ("t", 0)])
    assert not catch_up.behind(conn, [("t", 1)])  # another partition is not
    assert not catch_up.behind(_Conn(), [("t", 0)])  # nor another connection
    catch_up.answered(conn, ("t", 0), 10, 1000)  # the rest of the backlog: still behind
    assert catch_up.behind(conn, [("t", 0)])
    catch_up.answered(conn, ("t", 0), 0, 1000)  # told it is at the end: cleared
    assert not catch_up.behind(conn, [("t", 0)])


def test_a_consumer_keeping_up_is_never_marked() -> None:
    catch_up, conn = CatchUp(), _Conn()
    for size in (100, 999, 0, 5):
        catch_up.answered(conn, ("t", 0), size, 1000)
        assert not catch_up.behind(conn, [("t", 0)])


def test_marks_are_bounded_and_go_with_the_connection() -> None:
    catch_up, conn = CatchUp(), _Conn()
    for p in range(MAX_BEHIND_PER_CONNECTION + 5):
        catch_up.answered(conn, ("t", p), 10, 10)
    assert catch_up.behind(conn, [("t", MAX_BEHIND_PER_CONNECTION - 1)])
    assert not catch_up.behind(conn, [("t", MAX_BEHIND_PER_CONNECTION)])  # not recorded
    assert len(catch_up._behind) == 1
    del conn
    gc.collect()
    assert len(catch_up._behind) == 0


# -- the Fetch API (fake core) -------------------------------------------------------


class CatchUpFetchTests(KafkaTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.core.add_topic("t", 2)
        self.core.logs[("t", 0)] = [batch(100)] * 5

    def fetch(self, parts: list[tuple[str, int, int, int]], *, min_bytes: int = 1) -> None:
        self.send(ApiKey.FETCH, 11, self.fetch_request(parts, max_wait=500, min_bytes=min_bytes))

    def records(self) -> list[int]:
        return [len(p.records) for t in self.one().responses for p in t.partitions]

    def test_the_first_empty_fetch_after_a_backlog_is_answered_at_once(self) -> None:
        self.fetch([("t", 0, 0, 250)])  # cut at its 250-byte limit: a backlog
        self.assertEqual(self.records(), [250])
        self.fetch([("t", 0, 2, 1000)])  # the rest, up to the end
        self.assertEqual(self.records(), [300])
        self.fetch([("t", 0, 5, 1000)])  # at the end: at once, empty, no wait
        self.assertEqual(self.records(), [0])
        self.assertEqual(self.core.waits, [])
        self.fetch([("t", 0, 5, 1000)])  # told already: this one parks as before
        self.assertEqual(self.tr.value(), b"")
        self.assertEqual(len(self.core.waits), 1)
        self.clock.advance(0.5)  # MaxWaitMs passes (the core's wait ends)
        self.core.wait_deferreds[0].callback(None)
        self.assertEqual(self.records(), [0])

    def test_a_consumer_that_keeps_up_parks_at_the_end(self) -> None:
        self.fetch([("t", 0, 0, 1000)])  # all there is, under the limit
        self.assertEqual(self.records(), [500])
        self.fetch([("t", 0, 5, 1000)])
        self.assertEqual(self.tr.value(), b"")
        self.assertEqual(len(self.core.waits), 1)
        self.core.logs[("t", 0)].append(batch(100))
        self.core.wait_deferreds[0].callback(None)
        self.assertEqual(self.records(), [100])

    def test_only_an_empty_read_is_answered_early(self) -> None:
        self.fetch([("t", 0, 0, 250)])
        self.records()
        # Some bytes, fewer than MinBytes: the fetch waits for MinBytes as usual.
        self.fetch([("t", 0, 4, 1000)], min_bytes=1000)
        self.assertEqual(self.tr.value(), b"")
        self.assertEqual(len(self.core.waits), 1)

    def test_other_partitions_and_connections_park(self) -> None:
        self.fetch([("t", 0, 0, 250)])
        self.records()
        self.fetch([("t", 1, 0, 1000)])  # nothing marked for t/1 on this connection
        self.assertEqual(self.tr.value(), b"")
        other, tr = self.connect()
        other.dataReceived(self.frame(ApiKey.FETCH, 11, self.fetch_request(
            [("t", 0, 5, 1000)], max_wait=500)))
        self.assertEqual(tr.value(), b"")
        self.assertEqual(len(self.core.waits), 2)

    def test_one_marked_partition_of_several_answers_at_once(self) -> None:
        self.fetch([("t", 0, 0, 250)])
        self.records()
        self.fetch([("t", 0, 5, 1000), ("t", 1, 0, 1000)])
        self.assertEqual(self.records(), [0, 0])
        self.assertEqual(self.core.waits, [])

    def test_a_whole_response_limit_counts_as_the_limit(self) -> None:
        self.send(ApiKey.FETCH, 11, self.fetch_request(
            [("t", 0, 0, 1000)], max_wait=500, max_bytes=200))
        self.assertEqual(self.records(), [200])
        self.fetch([("t", 0, 5, 1000)])
        self.assertEqual(self.records(), [0])


# -- end to end (real socket, real core) ---------------------------------------------


@pytest_twisted.ensureDeferred
async def test_reading_a_backlog_to_its_end_takes_no_long_poll(
    server: Server, tmp_path: Path
) -> None:
    await server.broker.create_topic("cu", 1)
    await produce(server, "cu", 0, some_batches(0, 40))
    client = await connect(server, "zero")
    hw = server.log("cu", 0).high_watermark
    offset, rounds = 0, 0
    while offset < hw:  # a consumer reading the backlog 2,000 bytes at a time
        answer = decode_fetch(await client.call(
            ApiKey.FETCH, 11, fetch_request([("cu", 0, offset, 2000)], max_wait_ms=5_000)), 11)
        part = answer.responses[0].partitions[0]
        assert part.records
        offset = _next_offset(part.records, offset)
        rounds += 1
    assert rounds > 2
    started = time.monotonic()
    answer = decode_fetch(await client.call(
        ApiKey.FETCH, 11, fetch_request([("cu", 0, hw, 2000)], max_wait_ms=5_000)), 11)
    assert time.monotonic() - started < 2.5  # not the 5 s long poll
    assert answer.responses[0].partitions[0].records == b""
    assert answer.responses[0].partitions[0].high_watermark == hw
    # The next fetch at the end parks until data arrives.
    parked = client.call(
        ApiKey.FETCH, 11, fetch_request([("cu", 0, hw, 2000)], max_wait_ms=5_000))
    await sleep(0.3)
    assert not parked.called
    await produce(server, "cu", 0, some_batches(0, 1))
    woke = decode_fetch(await parked, 11)
    assert woke.responses[0].partitions[0].records


def _next_offset(records: bytes, offset: int) -> int:
    """The offset after the last whole batch in ``records`` (a fetch may end mid-batch)."""
    from brokerd.storage.record.header import read_header

    pos = 0
    while len(records) - pos >= 61:
        header = read_header(records, pos)
        if pos + header.size > len(records):
            break
        offset = header.base_offset + header.last_offset_delta + 1
        pos += header.size
    return offset
