"""The client matrix with aiokafka against a real ``twistd broker``: CreateTopics and
listing, produce with acks 0/1/all, consume from earliest, an offset and the end, every
codec, and a consumer group across a member leaving, a broker restart and a broker crash.

Each test runs its own asyncio loop (``asyncio.run``); the broker is a separate process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import (
    CODECS,
    HEARTBEAT_MS,
    SESSION_TIMEOUT_MS,
    WAIT,
    Rec,
    check_group_records,
    committed_offsets,
    compressible_values,
    crash_and_restart,
    expected,
    module_broker,
    offset_inside_a_batch,
    small_values,
    stored_codecs,
)

aiokafka = pytest.importorskip("aiokafka")
from aiokafka import (  # noqa: E402
    AIOKafkaConsumer,
    AIOKafkaProducer,
    ConsumerRebalanceListener,
    TopicPartition,
)
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402
from aiokafka.errors import TopicAlreadyExistsError  # noqa: E402

pytestmark = pytest.mark.clients

#: Quick metadata refreshes and short request timeouts for every client object.
COMMON: dict[str, Any] = {"metadata_max_age_ms": 1000, "request_timeout_ms": 10_000}


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "aiokafka")


async def wait_for(predicate: Callable[[], Awaitable[bool]], what: str) -> None:
    """The asyncio twin of ``kafka_helpers.wait_until``."""
    deadline = time.monotonic() + WAIT
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {WAIT:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


async def _produce(
    producer: AIOKafkaProducer, topic: str, partition: int, values: Sequence[bytes]
) -> list[tuple[int, int] | None]:
    """Send every value, then wait for all; return the reported ``(partition, offset)``s
    (None for acks=0: aiokafka reports no metadata then)."""
    futures = [await producer.send(topic, v, partition=partition) for v in values]
    metadata = [await asyncio.wait_for(f, WAIT) for f in futures]
    return [None if md is None else (md.partition, md.offset) for md in metadata]


def _records(polled: dict[Any, list[Any]]) -> list[Rec]:
    return sorted((r.partition, r.offset, r.value) for rs in polled.values() for r in rs)


async def _read(broker: BrokerProcess, topic: str, partition: int, start: int | None) -> list[Rec]:
    """Everything from ``start`` (None: the beginning) to the partition's end, with a
    consumer outside any group."""
    c = AIOKafkaConsumer(bootstrap_servers=broker.kafka_bootstrap, **COMMON)
    await c.start()
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        if start is None:
            await c.seek_to_beginning(tp)
        else:
            c.seek(tp, start)
        end = (await c.end_offsets([tp]))[tp]
        out: list[Rec] = []

        async def at_end() -> bool:
            out.extend(_records(await c.getmany(tp, timeout_ms=100)))
            return await c.position(tp) >= end

        await wait_for(at_end, f"the end of {topic}/{partition}")
        return out
    finally:
        await c.stop()


def test_create_and_list_topics(kbroker: BrokerProcess) -> None:
    async def main() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kbroker.kafka_bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic("ak-create", 3, 1)])
            assert "ak-create" in await admin.list_topics()
            [described] = await admin.describe_topics(["ak-create"])
            assert sorted(p["partition"] for p in described["partitions"]) == [0, 1, 2]
            # aiokafka hands back the response with per-topic errors instead of raising.
            again = await admin.create_topics([NewTopic("ak-create", 3, 1)])
            assert [(t[0], t[1]) for t in again.topic_errors] == [
                ("ak-create", TopicAlreadyExistsError.errno)
            ]
        finally:
            await admin.close()

    asyncio.run(main())


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_produce_acks_and_read_back(kbroker: BrokerProcess, acks: int | str) -> None:
    topic = f"ak-acks-{acks}"
    values = small_values(f"ak{acks}", 20)

    async def main() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=kbroker.kafka_bootstrap, acks=acks, linger_ms=20, **COMMON
        )
        await producer.start()
        try:
            reports = await _produce(producer, topic, 0, values)
        finally:
            await producer.stop()
        if acks == 0:
            assert reports == [None] * 20  # no answer, so no offsets

            async def stored() -> bool:
                return len(await _read(kbroker, topic, 0, None)) == 20

            await wait_for(stored, "the acks=0 records to be stored")
        else:
            assert reports == [(0, i) for i in range(20)]
        assert await _read(kbroker, topic, 0, None) == expected(0, 0, values)

    asyncio.run(main())


def test_consume_from_earliest_offset_and_latest(kbroker: BrokerProcess) -> None:
    topic = "ak-positions"

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kbroker.kafka_bootstrap, **COMMON)
        await producer.start()
        try:
            values = small_values("pos", 10)
            await _produce(producer, topic, 0, values)
            assert await _read(kbroker, topic, 0, None) == expected(0, 0, values)
            assert await _read(kbroker, topic, 0, 6) == expected(0, 6, values[6:])
            c = AIOKafkaConsumer(bootstrap_servers=kbroker.kafka_bootstrap, **COMMON)
            await c.start()
            try:
                tp = TopicPartition(topic, 0)
                c.assign([tp])
                await c.seek_to_end(tp)
                assert await c.position(tp) == 10  # resolved through ListOffsets
                later = small_values("later", 3)
                await _produce(producer, topic, 0, later)
                got: list[Rec] = []

                async def read_three() -> bool:
                    got.extend(_records(await c.getmany(timeout_ms=100)))
                    return len(got) >= 3

                await wait_for(read_three, "the 3 new records")
                assert got == expected(0, 10, later)
            finally:
                await c.stop()
        finally:
            await producer.stop()

    asyncio.run(main())


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips(kbroker: BrokerProcess, codec: str) -> None:
    topic = f"ak-codec-{codec}"
    values = compressible_values(f"ak-{codec}", 6)

    async def main() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=kbroker.kafka_bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=20,
            **COMMON,
        )
        await producer.start()
        try:
            assert await _produce(producer, topic, 0, values) == [(0, i) for i in range(6)]
        finally:
            await producer.stop()
        assert await _read(kbroker, topic, 0, None) == expected(0, 0, values)
        # From inside a (compressed) batch: the records before the offset are skipped.
        inner = offset_inside_a_batch(kbroker, topic, 0)
        assert await _read(kbroker, topic, 0, inner) == expected(0, inner, values[inner:])

    asyncio.run(main())
    assert stored_codecs(kbroker, topic, 0) == {codec}


class _Member:
    """A group member with a task that keeps fetching (getmany) into ``records``."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str, name: str) -> None:
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.kafka_bootstrap,
            group_id=group,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            **COMMON,
        )
        self.records: list[Rec] = []
        self._task: asyncio.Task[None] | None = None
        #: Completed assignments (rebalances this member went through).
        self.assigned = 0
        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            async def on_partitions_assigned(self, assigned: Any) -> None:
                member.assigned += 1

        self.consumer.subscribe([topic], listener=Listener())

    async def start(self) -> _Member:
        await self.consumer.start()
        self._task = asyncio.create_task(self._poll())
        return self

    async def _poll(self) -> None:
        while True:
            self.records.extend(_records(await self.consumer.getmany(timeout_ms=100)))

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    async def close(self) -> None:
        """Stop fetching, then stop the consumer (LeaveGroup)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.consumer.stop()


def test_group_split_leave_commit_restart_resume(make_broker: object) -> None:
    """Two members split a 4-partition topic and each reads exactly its share; one
    leaves and the other takes its partitions over from the leaver's commits; after a
    clean restart a new member starts exactly at the committed offsets; it then stays up
    through a crash of the broker (the group is restored), and reads what comes next.
    Every record is
    read once in all (check_group_records)."""
    broker: BrokerProcess = make_broker()  # type: ignore[operator]
    topic, group = "ak-group", "ak-group-g"
    parts = range(4)
    produced: dict[int, list[bytes]] = {p: [] for p in parts}

    async def phase_one_and_two() -> tuple[list[Rec], dict[int, int]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.kafka_bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 4, 1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=broker.kafka_bootstrap, **COMMON)
        await producer.start()
        members: list[_Member] = []

        async def produce(phase: str, counts: dict[int, int]) -> list[Rec]:
            out = []
            for p in parts:
                values = small_values(f"{phase}-p{p}", counts[p])
                offsets = await _produce(producer, topic, p, values)
                assert offsets == [(p, len(produced[p]) + i) for i in range(len(values))]
                out += expected(p, len(produced[p]), values)
                produced[p] += values
            return out

        try:
            a = await _Member(broker, group, topic, "member-a").start()
            members.append(a)

            async def a_has_all() -> bool:
                return a.assignment() == set(parts)

            await wait_for(a_has_all, "member A to get all 4 partitions")
            b = await _Member(broker, group, topic, "member-b").start()
            members.append(b)

            async def split() -> bool:
                sa, sb = a.assignment(), b.assignment()
                return bool(sa and sb and not sa & sb and sa | sb == set(parts))

            await wait_for(split, "A and B to split the 4 partitions")
            a_parts, b_parts = a.assignment(), b.assignment()
            phase1 = await produce("one", {p: 10 for p in parts})

            async def each_read_its_own() -> bool:
                return set(a.records) == {r for r in phase1 if r[0] in a_parts} and set(
                    b.records
                ) == {r for r in phase1 if r[0] in b_parts}

            await wait_for(each_read_its_own, "each member to read exactly its partitions")
            await a.consumer.commit()
            await b.consumer.commit()
            assert committed_offsets(broker, group, topic, parts) == {p: 10 for p in parts}

            await b.close()  # LeaveGroup
            members.remove(b)
            await wait_for(a_has_all, "A to take over B's partitions")
            phase2 = await produce("two", {p: 3 + 2 * p for p in parts})

            async def a_read_phase2() -> bool:
                return set(phase2) <= set(a.records)

            await wait_for(a_read_phase2, "A to read phase two")
            await a.consumer.commit()
            ends = {p: len(produced[p]) for p in parts}
            assert committed_offsets(broker, group, topic, parts) == ends
            seen = {p: await a.consumer.committed(TopicPartition(topic, p)) for p in parts}
            assert seen == ends
            await a.close()
            members.remove(a)
            await produce("three", {p: 4 for p in parts})
            return a.records + b.records, ends
        finally:
            for m in members:
                await m.close()
            await producer.stop()

    async def after_restart() -> list[Rec]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.kafka_bootstrap, **COMMON)
        await producer.start()
        c = await _Member(broker, group, topic, "member-c").start()
        try:

            async def read_phase3() -> bool:
                return len(c.records) >= 16

            await wait_for(read_phase3, "C to read phase three after the restart")
            await c.consumer.commit()

            # C (and the producer) stay up while the broker crashes (SIGKILL) and
            # starts again. The broker restores the group from its journal
            # (docs/kafka.md), so C carries on as a member and keeps all four
            # partitions; then it reads what is produced after.
            await asyncio.to_thread(crash_and_restart, broker)

            async def rejoined() -> bool:
                return c.assignment() == set(parts)

            await wait_for(rejoined, "C to hold its partitions after the restart")
            phase4 = []
            for p in parts:
                values = small_values(f"four-p{p}", 5)
                offsets = await _produce(producer, topic, p, values)
                assert offsets == [(p, len(produced[p]) + i) for i in range(5)]
                phase4 += expected(p, len(produced[p]), values)
                produced[p] += values

            async def read_phase4() -> bool:
                return set(phase4) <= set(c.records)

            await wait_for(read_phase4, "C to read phase four")
            await c.consumer.commit()
            assert committed_offsets(broker, group, topic, parts) == {
                p: len(produced[p]) for p in parts
            }
        finally:
            await c.close()
            await producer.stop()
        return c.records

    before, ends = asyncio.run(phase_one_and_two())
    assert broker.restart() is broker
    assert committed_offsets(broker, group, topic, parts) == ends  # durable
    after = asyncio.run(after_restart())
    check_group_records(before, after, ends, produced)
