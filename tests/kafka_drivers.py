"""One small, synchronous driver per Kafka client (confluent-kafka, kafka-python, aiokafka,
kcat) for the scenario suite in ``tests/kafka/test_scenarios.py``.

A driver hides how its client creates and lists topics, produces (acks, compression,
linger), reads a partition from the beginning, an offset or the end, and runs a group
member (assignment, records read, commit, close). The scenarios state what every client
must see; a driver states only how its client does it and what its client reports.
Client modules are imported when a driver is built, so this module imports everywhere
(``trial tests`` included) and a missing client skips only its own tests.

The helpers shared with the other Kafka tests (waits, payloads, what the log stores, kcat
as a subprocess, the polling thread) are in :mod:`tests.kafka_helpers`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, ClassVar, TypeVar

import pytest

from tests.brokerproc import BrokerProcess
from tests.kafka_helpers import (
    HEARTBEAT_MS,
    KCAT_FORMAT,
    SESSION_TIMEOUT_MS,
    WAIT,
    KcatProcess,
    Poller,
    Rec,
    kcat_consume,
    kcat_produce,
    need_kcat,
    wait_until,
)

T = TypeVar("T")
#: What a producer reported for one record: ``(partition, offset)``, the offset None when
#: the client reports none, or None when the client reports no metadata at all.
Report = tuple[int, int | None] | None


# -- the interface -------------------------------------------------------------------


class Closable(ABC):
    """Something a driver opened; the driver closes what a test left open."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        driver.opened.append(self)

    def close(self) -> None:
        if self in self._driver.opened:
            self._driver.opened.remove(self)
            self._close()

    @abstractmethod
    def _close(self) -> None: ...


class Producer(Closable):
    @abstractmethod
    def send(self, topic: str, partition: int, values: Sequence[bytes]) -> list[Report] | None:
        """Produce ``values`` to one partition and wait until every one is delivered (or
        sent, for acks=0). Returns what the client reported per record, or None if the
        client reports nothing (kcat)."""


class Tail(Closable):
    """A consumer of one partition that starts at its end."""

    @abstractmethod
    def at_end(self) -> int:
        """Wait until the consumer has found the end; return the offset it found."""

    @abstractmethod
    def take(self, count: int) -> list[Rec]:
        """Wait for ``count`` records and return what was read."""


class Member(Closable):
    """One member of a consumer group, polled in the background."""

    @abstractmethod
    def assignment(self) -> set[int]: ...

    @abstractmethod
    def records(self) -> list[Rec]: ...

    @abstractmethod
    def commit(self) -> None:
        """Commit what was read (a client that commits only by itself does nothing)."""

    @abstractmethod
    def committed(self, topic: str, partitions: Sequence[int]) -> dict[int, int] | None:
        """The committed offsets as the client sees them; None if it cannot tell."""


class Driver(ABC):
    """One Kafka client against one broker. Use it as a context manager: on exit it
    closes whatever the test left open."""

    #: The test id and the prefix of every topic and group the client's tests use.
    name: ClassVar[str]
    prefix: ClassVar[str]
    #: The Python module the client needs (None: an external program).
    module: ClassVar[str | None] = None
    #: Whether the client can create topics and list them (kcat cannot create).
    creates_topics: ClassVar[bool] = True
    #: Whether the client commits when asked (kcat commits only by itself).
    commits_on_request: ClassVar[bool] = True

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.opened: list[Closable] = []

    @classmethod
    def require(cls) -> None:
        """Skip the test if the client is not installed."""
        if cls.module is not None:
            pytest.importorskip(cls.module)

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        while self.opened:  # newest first; each close() takes its object off the list
            with contextlib.suppress(Exception):
                self.opened[-1].close()

    # admin
    @abstractmethod
    def create_topic(self, topic: str, partitions: int) -> None: ...

    def create_topic_again(self, topic: str, partitions: int) -> int:
        """Create an existing topic; return the Kafka error code the client reports."""
        raise NotImplementedError

    def topic_names(self) -> set[str]:
        raise NotImplementedError

    def topic_partitions(self, topic: str) -> list[int]:
        raise NotImplementedError

    def broker_ids(self) -> list[int]:
        raise NotImplementedError

    # produce and consume
    @abstractmethod
    def producer(
        self, *, acks: str | None = None, compression: str | None = None, linger_ms: int = 0
    ) -> Producer:
        """A producer; None/0 keeps the client's default; acks is "0", "1" or "all"."""

    @abstractmethod
    def check_unacked_reports(self, reports: list[Report] | None, partition: int) -> None:
        """Assert what the client reports for records sent with acks=0 (no answer)."""

    @abstractmethod
    def read(self, topic: str, partition: int, start: int | None) -> list[Rec]:
        """Everything from ``start`` (None: the beginning) to the partition's end, read by
        a consumer outside any group."""

    @abstractmethod
    def tail(self, topic: str, partition: int, count: int) -> Tail:
        """A consumer starting at the end that will read ``count`` records."""

    @abstractmethod
    def member(self, group: str, topic: str, name: str) -> Member:
        """A group member subscribed to ``topic`` that resets to the earliest offset, does
        not auto-commit (kcat: commits by itself) and uses short group timings."""


# -- confluent-kafka -------------------------------------------------------------------


class Confluent(Driver):
    """confluent-kafka (librdkafka 2.16): admin client, producer with delivery reports,
    consumers that report the end of a partition."""

    name, prefix, module = "confluent", "cf", "confluent_kafka"

    #: A consumer outside any group (librdkafka still wants a group id) that reports the
    #: end of a partition. The end is only reported after a fetch comes back empty, which
    #: the broker holds for fetch.wait.max.ms: 100 ms instead of 500 keeps tests quick.
    READER: ClassVar[dict[str, Any]] = {
        "group.id": "confluent-reader",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 100,
    }

    def __init__(self, broker: BrokerProcess) -> None:
        super().__init__(broker)
        self.ck = importlib.import_module("confluent_kafka")
        self.admin_mod = importlib.import_module("confluent_kafka.admin")
        self._admin_client: Any = None

    def conf(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.broker.kafka_bootstrap,
            "topic.metadata.refresh.interval.ms": 1000,
            "socket.connection.setup.timeout.ms": 5000,
            **extra,
        }

    def _admin(self) -> Any:
        # One client for the driver's life: a dropped AdminClient cancels its requests.
        if self._admin_client is None:
            self._admin_client = self.admin_mod.AdminClient(self.conf())
        return self._admin_client

    def create_topic(self, topic: str, partitions: int) -> None:
        new = self.admin_mod.NewTopic(topic, partitions, 1)
        futures = self._admin().create_topics([new], operation_timeout=10)
        assert futures[topic].result(WAIT) is None

    def create_topic_again(self, topic: str, partitions: int) -> int:
        again = self._admin().create_topics([self.admin_mod.NewTopic(topic, partitions, 1)])
        with pytest.raises(self.ck.KafkaException) as exc:
            again[topic].result(WAIT)
        code: int = exc.value.args[0].code()
        return code

    def topic_names(self) -> set[str]:
        return set(self._admin().list_topics(timeout=WAIT).topics)

    def topic_partitions(self, topic: str) -> list[int]:
        return sorted(self._admin().list_topics(timeout=WAIT).topics[topic].partitions)

    def broker_ids(self) -> list[int]:
        return [b.id for b in self._admin().list_topics(timeout=WAIT).brokers.values()]

    def producer(
        self, *, acks: str | None = None, compression: str | None = None, linger_ms: int = 0
    ) -> Producer:
        extra: dict[str, Any] = {}
        if acks is not None:
            extra["acks"] = -1 if acks == "all" else int(acks)
        if compression is not None:
            extra["compression.type"] = compression
        if linger_ms:
            extra["linger.ms"] = linger_ms
        return _ConfluentProducer(self, self.ck.Producer(self.conf(**extra)))

    def check_unacked_reports(self, reports: list[Report] | None, partition: int) -> None:
        # No answer, so no offsets: the delivery reports carry none.
        assert reports is not None and reports == [(partition, None)] * len(reports)

    def records(
        self, messages: Sequence[Any], eofs: set[tuple[int, int]] | None = None
    ) -> list[Rec]:
        """Records of a consume() batch; partition-EOF events go to ``eofs``, other
        errors fail the test."""
        out: list[Rec] = []
        for m in messages:
            err = m.error()
            if err is not None:
                if err.code() == self.ck.KafkaError._PARTITION_EOF and eofs is not None:
                    eofs.add((m.partition(), m.offset()))
                    continue
                raise AssertionError(f"consumer error: {err}")
            out.append((m.partition(), m.offset(), m.value()))
        return out

    def read(self, topic: str, partition: int, start: int | None) -> list[Rec]:
        c = self.ck.Consumer(self.conf(**self.READER))
        try:
            begin = self.ck.OFFSET_BEGINNING if start is None else start
            c.assign([self.ck.TopicPartition(topic, partition, begin)])
            out: list[Rec] = []
            eofs: set[tuple[int, int]] = set()

            def at_end() -> bool:
                out.extend(self.records(c.consume(num_messages=500, timeout=0.1), eofs))
                return bool(eofs)

            wait_until(at_end, f"the end of {topic}/{partition}", interval=0)
            return out
        finally:
            c.close()

    def tail(self, topic: str, partition: int, count: int) -> Tail:
        return _ConfluentTail(self, topic, partition)

    def member(self, group: str, topic: str, name: str) -> Member:
        return _ConfluentMember(self, group, topic, name)


class _ConfluentProducer(Producer):
    def __init__(self, driver: Confluent, producer: Any) -> None:
        super().__init__(driver)
        self.ck = driver.ck
        self.producer = producer

    def send(self, topic: str, partition: int, values: Sequence[bytes]) -> list[Report]:
        reports: list[Report | Exception] = []

        def delivered(err: Any, msg: Any) -> None:
            reports.append(err if err is not None else (msg.partition(), msg.offset()))

        for v in values:
            self.producer.produce(topic, v, partition=partition, on_delivery=delivered)
        assert self.producer.flush(WAIT) == 0, "messages still undelivered"
        errors = [r for r in reports if isinstance(r, self.ck.KafkaError)]
        assert not errors, errors
        return [r for r in reports if not isinstance(r, self.ck.KafkaError)]  # type: ignore[misc]

    def _close(self) -> None:
        self.producer.flush(WAIT)


class _ConfluentTail(Tail):
    def __init__(self, driver: Confluent, topic: str, partition: int) -> None:
        super().__init__(driver)
        self.d = driver
        self.partition = partition
        self.c = driver.ck.Consumer(driver.conf(**driver.READER))
        self.c.assign([driver.ck.TopicPartition(topic, partition, driver.ck.OFFSET_END)])
        self.got: list[Rec] = []
        self.eofs: set[tuple[int, int]] = set()

    def _consume(self) -> None:
        self.got.extend(self.d.records(self.c.consume(num_messages=10, timeout=0.1), self.eofs))

    def at_end(self) -> int:
        wait_until(
            lambda: self._consume() or self.eofs, "the consumer to reach the end", interval=0
        )
        [(partition, offset)] = self.eofs
        assert partition == self.partition and self.got == []
        return offset

    def take(self, count: int) -> list[Rec]:
        wait_until(
            lambda: self._consume() or len(self.got) >= count, f"{count} records", interval=0
        )
        return self.got

    def _close(self) -> None:
        self.c.close()


class _ConfluentMember(Member):
    """A group member polled by its own thread (librdkafka rebalances only in poll)."""

    def __init__(self, driver: Confluent, group: str, topic: str, name: str) -> None:
        super().__init__(driver)
        self.ck = driver.ck
        self.topic = topic
        self.consumer = driver.ck.Consumer(
            driver.conf(
                **{
                    "group.id": group,
                    "client.id": name,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": SESSION_TIMEOUT_MS,
                    "heartbeat.interval.ms": HEARTBEAT_MS,
                }
            )
        )
        self.consumer.subscribe([topic])
        self.poller = Poller(
            name, lambda: driver.records(self.consumer.consume(num_messages=500, timeout=0.1))
        )

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.poller.call(self.consumer.assignment)}

    def records(self) -> list[Rec]:
        return self.poller.records()

    def commit(self) -> None:
        def commit() -> None:
            try:
                self.consumer.commit(asynchronous=False)
            except self.ck.KafkaException as e:
                # Nothing consumed since the last commit: nothing to do.
                if e.args[0].code() != self.ck.KafkaError._NO_OFFSET:
                    raise

        self.poller.call(commit)

    def committed(self, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        tps = [self.ck.TopicPartition(topic, p) for p in partitions]
        seen = self.poller.call(lambda: self.consumer.committed(tps, timeout=10))
        return {tp.partition: tp.offset for tp in seen}

    def _close(self) -> None:
        self.poller.stop(self.consumer.close)


# -- kafka-python --------------------------------------------------------------------


class KafkaPython(Driver):
    """kafka-python 3: admin client, producer futures, consumers with explicit positions."""

    name, prefix, module = "kafka-python", "kp", "kafka"

    #: Quick metadata refreshes and short request timeouts for every client object.
    COMMON: ClassVar[dict[str, Any]] = {"metadata_max_age_ms": 1000, "request_timeout_ms": 10_000}

    def __init__(self, broker: BrokerProcess) -> None:
        super().__init__(broker)
        self.kafka = importlib.import_module("kafka")
        self.admin_mod = importlib.import_module("kafka.admin")
        self.errors = importlib.import_module("kafka.errors")

    def _admin(self, use: Callable[[Any], T]) -> T:
        admin = self.kafka.KafkaAdminClient(
            bootstrap_servers=self.broker.kafka_bootstrap, **self.COMMON
        )
        try:
            return use(admin)
        finally:
            admin.close()

    def create_topic(self, topic: str, partitions: int) -> None:
        self._admin(lambda a: a.create_topics([self.admin_mod.NewTopic(topic, partitions, 1)]))

    def create_topic_again(self, topic: str, partitions: int) -> int:
        new = self.admin_mod.NewTopic(topic, partitions, 1)
        with pytest.raises(self.errors.TopicAlreadyExistsError) as exc:
            self._admin(lambda a: a.create_topics([new], raise_errors=True))
        code: int = exc.value.errno
        return code

    def topic_names(self) -> set[str]:
        return set(self._admin(lambda a: a.list_topics()))

    def topic_partitions(self, topic: str) -> list[int]:
        [described] = self._admin(lambda a: a.describe_topics([topic]))
        return sorted(p["partition_index"] for p in described["partitions"])

    def broker_ids(self) -> list[int]:
        cluster = self._admin(lambda a: a.describe_cluster())
        return [b["broker_id"] for b in cluster["brokers"]]

    def producer(
        self, *, acks: str | None = None, compression: str | None = None, linger_ms: int = 0
    ) -> Producer:
        extra: dict[str, Any] = {}
        if acks is not None:
            extra["acks"] = "all" if acks == "all" else int(acks)
            # acks=all keeps kafka-python's default, the idempotent producer; it cannot
            # be idempotent with acks 0/1, so those turn it off (as its docs ask).
            if acks != "all":
                extra["enable_idempotence"] = False
        if compression not in (None, "none"):
            extra["compression_type"] = compression
        if linger_ms:
            extra["linger_ms"] = linger_ms
        producer = self.kafka.KafkaProducer(
            bootstrap_servers=self.broker.kafka_bootstrap, **extra, **self.COMMON
        )
        return _KafkaPythonProducer(self, producer)

    def check_unacked_reports(self, reports: list[Report] | None, partition: int) -> None:
        # No answer, so the offsets kafka-python reports are its own guesses.
        assert reports is not None
        assert [r[0] for r in reports if r is not None] == [partition] * len(reports)

    def consumer(self) -> Any:
        """A consumer outside any group."""
        return self.kafka.KafkaConsumer(
            bootstrap_servers=self.broker.kafka_bootstrap, group_id=None, **self.COMMON
        )

    def read(self, topic: str, partition: int, start: int | None) -> list[Rec]:
        c = self.consumer()
        try:
            tp = self.kafka.TopicPartition(topic, partition)
            c.assign([tp])
            if start is None:
                c.seek_to_beginning(tp)
            else:
                c.seek(tp, start)
            end = c.end_offsets([tp])[tp]
            out: list[Rec] = []

            def at_end() -> bool:
                out.extend(polled_records(c.poll(timeout_ms=100)))
                return bool(c.position(tp) >= end)

            wait_until(at_end, f"the end of {topic}/{partition}", interval=0)
            return out
        finally:
            c.close()

    def tail(self, topic: str, partition: int, count: int) -> Tail:
        return _KafkaPythonTail(self, topic, partition)

    def member(self, group: str, topic: str, name: str) -> Member:
        return _KafkaPythonMember(self, group, topic, name)


def polled_records(polled: dict[Any, list[Any]]) -> list[Rec]:
    """The records of a kafka-python poll() or an aiokafka getmany(), in order."""
    return sorted((r.partition, r.offset, r.value) for rs in polled.values() for r in rs)


class _KafkaPythonProducer(Producer):
    def __init__(self, driver: KafkaPython, producer: Any) -> None:
        super().__init__(driver)
        self.producer = producer

    def send(self, topic: str, partition: int, values: Sequence[bytes]) -> list[Report]:
        futures = [self.producer.send(topic, v, partition=partition) for v in values]
        self.producer.flush(WAIT)
        return [(md.partition, md.offset) for md in (f.get(WAIT) for f in futures)]

    def _close(self) -> None:
        self.producer.close(WAIT)


class _KafkaPythonTail(Tail):
    def __init__(self, driver: KafkaPython, topic: str, partition: int) -> None:
        super().__init__(driver)
        self.c = driver.consumer()
        self.tp = driver.kafka.TopicPartition(topic, partition)
        self.c.assign([self.tp])
        self.c.seek_to_end(self.tp)

    def at_end(self) -> int:
        position: int = self.c.position(self.tp)  # resolved through ListOffsets (latest)
        return position

    def take(self, count: int) -> list[Rec]:
        got: list[Rec] = []

        def read() -> bool:
            got.extend(polled_records(self.c.poll(timeout_ms=100)))
            return len(got) >= count

        wait_until(read, f"{count} records", interval=0)
        return got

    def _close(self) -> None:
        self.c.close()


class _KafkaPythonMember(Member):
    """A group member polled by its own thread (kafka-python rejoins only in poll)."""

    def __init__(self, driver: KafkaPython, group: str, topic: str, name: str) -> None:
        super().__init__(driver)
        self.kafka = driver.kafka
        self.consumer = driver.kafka.KafkaConsumer(
            bootstrap_servers=driver.broker.kafka_bootstrap,
            group_id=group,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            **driver.COMMON,
        )
        self.consumer.subscribe([topic])
        self.poller = Poller(name, lambda: polled_records(self.consumer.poll(timeout_ms=100)))

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.poller.call(self.consumer.assignment)}

    def records(self) -> list[Rec]:
        return self.poller.records()

    def commit(self) -> None:
        self.poller.call(self.consumer.commit)

    def committed(self, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        tp = self.kafka.TopicPartition
        return self.poller.call(
            lambda: {p: self.consumer.committed(tp(topic, p)) for p in partitions}
        )

    def _close(self) -> None:
        self.poller.stop(self.consumer.close)


# -- aiokafka ------------------------------------------------------------------------


class _LoopThread:
    """An asyncio loop running in a thread of its own. aiokafka objects are made and used
    only there, so a group member keeps fetching while the test waits or restarts the
    broker; the test thread runs coroutines on it and waits for their results."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="aiokafka", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 2 * WAIT) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        async def cancel_the_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(cancel_the_rest())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(WAIT)
        self.loop.close()


async def wait_for(predicate: Callable[[], Awaitable[bool]], what: str) -> None:
    """The asyncio twin of ``kafka_helpers.wait_until``."""
    deadline = time.monotonic() + WAIT
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {WAIT:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


class AioKafka(Driver):
    """aiokafka: admin client, producer, consumers, all on one asyncio loop thread."""

    name, prefix, module = "aiokafka", "ak", "aiokafka"

    COMMON: ClassVar[dict[str, Any]] = KafkaPython.COMMON

    def __init__(self, broker: BrokerProcess) -> None:
        super().__init__(broker)
        self.aiokafka = importlib.import_module("aiokafka")
        self.admin_mod = importlib.import_module("aiokafka.admin")
        self.loop = _LoopThread()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.loop.close()

    def _admin(self, use: Callable[[Any], Awaitable[T]]) -> T:
        async def run() -> T:
            admin = self.admin_mod.AIOKafkaAdminClient(
                bootstrap_servers=self.broker.kafka_bootstrap
            )
            await admin.start()
            try:
                return await use(admin)
            finally:
                await admin.close()

        return self.loop.run(run())

    def create_topic(self, topic: str, partitions: int) -> None:
        self._admin(lambda a: a.create_topics([self.admin_mod.NewTopic(topic, partitions, 1)]))

    def create_topic_again(self, topic: str, partitions: int) -> int:
        # aiokafka hands back the response with per-topic errors instead of raising.
        new = self.admin_mod.NewTopic(topic, partitions, 1)
        again = self._admin(lambda a: a.create_topics([new]))
        [(name, code)] = [(t[0], t[1]) for t in again.topic_errors]
        assert name == topic
        return int(code)

    def topic_names(self) -> set[str]:
        return set(self._admin(lambda a: a.list_topics()))

    def topic_partitions(self, topic: str) -> list[int]:
        [described] = self._admin(lambda a: a.describe_topics([topic]))
        return sorted(p["partition"] for p in described["partitions"])

    def broker_ids(self) -> list[int]:
        cluster = self._admin(lambda a: a.describe_cluster())
        return [b["node_id"] for b in cluster["brokers"]]

    def producer(
        self, *, acks: str | None = None, compression: str | None = None, linger_ms: int = 0
    ) -> Producer:
        extra: dict[str, Any] = {}
        if acks is not None:
            extra["acks"] = "all" if acks == "all" else int(acks)
        if compression not in (None, "none"):
            extra["compression_type"] = compression
        if linger_ms:
            extra["linger_ms"] = linger_ms

        async def start() -> Any:
            producer = self.aiokafka.AIOKafkaProducer(
                bootstrap_servers=self.broker.kafka_bootstrap, **extra, **self.COMMON
            )
            await producer.start()
            return producer

        return _AioProducer(self, self.loop.run(start()))

    def check_unacked_reports(self, reports: list[Report] | None, partition: int) -> None:
        # No answer, so no metadata at all.
        assert reports is not None and reports == [None] * len(reports)

    async def consumer(self) -> Any:
        """A started consumer outside any group."""
        c = self.aiokafka.AIOKafkaConsumer(
            bootstrap_servers=self.broker.kafka_bootstrap, **self.COMMON
        )
        await c.start()
        return c

    def read(self, topic: str, partition: int, start: int | None) -> list[Rec]:
        async def read() -> list[Rec]:
            c = await self.consumer()
            try:
                tp = self.aiokafka.TopicPartition(topic, partition)
                c.assign([tp])
                if start is None:
                    await c.seek_to_beginning(tp)
                else:
                    c.seek(tp, start)
                end = (await c.end_offsets([tp]))[tp]
                out: list[Rec] = []

                async def at_end() -> bool:
                    out.extend(polled_records(await c.getmany(tp, timeout_ms=100)))
                    return bool(await c.position(tp) >= end)

                await wait_for(at_end, f"the end of {topic}/{partition}")
                return out
            finally:
                await c.stop()

        return self.loop.run(read())

    def tail(self, topic: str, partition: int, count: int) -> Tail:
        return _AioTail(self, topic, partition)

    def member(self, group: str, topic: str, name: str) -> Member:
        return _AioMember(self, group, topic, name)


class _AioProducer(Producer):
    def __init__(self, driver: AioKafka, producer: Any) -> None:
        super().__init__(driver)
        self.loop = driver.loop
        self.producer = producer

    def send(self, topic: str, partition: int, values: Sequence[bytes]) -> list[Report]:
        """Send every value, then wait for all (aiokafka reports no metadata for acks=0)."""

        async def send() -> list[Report]:
            futures = [await self.producer.send(topic, v, partition=partition) for v in values]
            metadata = [await asyncio.wait_for(f, WAIT) for f in futures]
            return [None if md is None else (md.partition, md.offset) for md in metadata]

        return self.loop.run(send())

    def _close(self) -> None:
        self.loop.run(self.producer.stop())


class _AioTail(Tail):
    def __init__(self, driver: AioKafka, topic: str, partition: int) -> None:
        super().__init__(driver)
        self.loop = driver.loop
        self.tp = driver.aiokafka.TopicPartition(topic, partition)

        async def start() -> Any:
            c = await driver.consumer()
            c.assign([self.tp])
            await c.seek_to_end(self.tp)
            return c

        self.c = self.loop.run(start())

    def at_end(self) -> int:
        async def position() -> int:
            return int(await self.c.position(self.tp))  # resolved through ListOffsets

        return self.loop.run(position())

    def take(self, count: int) -> list[Rec]:
        got: list[Rec] = []

        async def read() -> bool:
            got.extend(polled_records(await self.c.getmany(timeout_ms=100)))
            return len(got) >= count

        self.loop.run(wait_for(read, f"{count} records"))
        return got

    def _close(self) -> None:
        self.loop.run(self.c.stop())


class _AioMember(Member):
    """A group member with a task on the loop that keeps fetching (getmany)."""

    def __init__(self, driver: AioKafka, group: str, topic: str, name: str) -> None:
        super().__init__(driver)
        self.loop = driver.loop
        self.aiokafka = driver.aiokafka
        self._records: list[Rec] = []
        self.error: BaseException | None = None

        async def start() -> tuple[Any, asyncio.Task[None]]:
            consumer = driver.aiokafka.AIOKafkaConsumer(
                bootstrap_servers=driver.broker.kafka_bootstrap,
                group_id=group,
                client_id=name,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=SESSION_TIMEOUT_MS,
                heartbeat_interval_ms=HEARTBEAT_MS,
                **driver.COMMON,
            )
            consumer.subscribe([topic])
            await consumer.start()
            return consumer, asyncio.create_task(self._poll(consumer))

        self.consumer, self._task = self.loop.run(start())

    async def _poll(self, consumer: Any) -> None:
        try:
            while True:
                self._records.extend(polled_records(await consumer.getmany(timeout_ms=100)))
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            self.error = e

    def _check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"the consumer failed while fetching: {self.error!r}")

    def assignment(self) -> set[int]:
        self._check()

        async def assignment() -> set[int]:
            return {tp.partition for tp in self.consumer.assignment()}

        return self.loop.run(assignment())

    def records(self) -> list[Rec]:
        self._check()
        return list(self._records)

    def commit(self) -> None:
        self.loop.run(self.consumer.commit())

    def committed(self, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        async def committed() -> dict[int, int]:
            tp = self.aiokafka.TopicPartition
            return {p: await self.consumer.committed(tp(topic, p)) for p in partitions}

        return self.loop.run(committed())

    def _close(self) -> None:
        """Stop fetching, then stop the consumer (LeaveGroup)."""

        async def close() -> None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            await self.consumer.stop()

        self.loop.run(close())


# -- kcat ----------------------------------------------------------------------------


class Kcat(Driver):
    """kcat (librdkafka 2.0.2 on Debian 12) as a subprocess per operation. It cannot
    create topics (they are auto-created by producing, with the broker's
    ``--default-partitions``) and commits only by itself: every 5 s, when partitions are
    revoked and when it closes."""

    name, prefix = "kcat", "kcat"
    creates_topics = False
    commits_on_request = False

    @classmethod
    def require(cls) -> None:
        need_kcat()

    def create_topic(self, topic: str, partitions: int) -> None:
        # Nothing to send: the first produce creates it, with this many partitions.
        assert f"--default-partitions={partitions}" in self.broker.args, self.broker.args

    def producer(
        self, *, acks: str | None = None, compression: str | None = None, linger_ms: int = 0
    ) -> Producer:
        extra: list[str] = []
        if acks is not None:
            extra += ["-X", f"acks={acks}"]
        if compression is not None:
            extra += ["-z", compression]
        if linger_ms:
            extra += ["-X", f"linger.ms={linger_ms}"]
        return _KcatProducer(self, extra)

    def check_unacked_reports(self, reports: list[Report] | None, partition: int) -> None:
        assert reports is None  # kcat reports nothing either way

    def read(self, topic: str, partition: int, start: int | None) -> list[Rec]:
        return kcat_consume(
            self.broker, topic, partition, "beginning" if start is None else str(start)
        )

    def tail(self, topic: str, partition: int, count: int) -> Tail:
        return _KcatTail(self, topic, partition, count)

    def member(self, group: str, topic: str, name: str) -> Member:
        return _KcatMember(self, group, topic)


class _KcatProducer(Producer):
    """Each send is one kcat process: later sends append to what earlier ones stored."""

    def __init__(self, driver: Kcat, extra: list[str]) -> None:
        super().__init__(driver)
        self.broker = driver.broker
        self.extra = extra

    def send(self, topic: str, partition: int, values: Sequence[bytes]) -> None:
        kcat_produce(self.broker, topic, partition, values, *self.extra)

    def _close(self) -> None:
        pass


class _KcatTail(Tail):
    """kcat from the end, exiting by itself after ``count`` records (``-c``)."""

    def __init__(self, driver: Kcat, topic: str, partition: int, count: int) -> None:
        super().__init__(driver)
        self.proc = KcatProcess(
            driver.broker,
            "-C", "-t", topic, "-p", str(partition), "-o", "end", "-c", str(count),
            "-f", KCAT_FORMAT,
        )  # fmt: skip

    def at_end(self) -> int:
        def reached() -> int | None:
            for line in self.proc.stderr():
                if m := re.search(r"at offset (\d+)", line):
                    return int(m.group(1))
            return None

        offset = wait_until(reached, "kcat to reach the end of the partition")
        return offset

    def take(self, count: int) -> list[Rec]:
        wait_until(lambda: len(self.proc.records()) == count, f"kcat to read {count} records")
        assert self.proc.proc.wait(10) == 0
        return self.proc.records()

    def _close(self) -> None:
        self.proc.kill()


class _KcatMember(Member):
    def __init__(self, driver: Kcat, group: str, topic: str) -> None:
        super().__init__(driver)
        # No -o: with -G, "-o beginning" would re-seek on every rebalance (kcat's doing);
        # auto.offset.reset=earliest only applies where nothing is committed. -E: kcat
        # otherwise exits on the first error, such as "all brokers down" during a restart.
        self.proc = KcatProcess(
            driver.broker,
            "-E",
            "-G",
            group,
            "-f",
            KCAT_FORMAT,
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            f"session.timeout.ms={SESSION_TIMEOUT_MS}",
            "-X",
            f"heartbeat.interval.ms={HEARTBEAT_MS}",
            "-X",
            "auto.commit.interval.ms=100",
            "-X",
            "topic.metadata.refresh.interval.ms=1000",
            topic,
        )

    def assignment(self) -> set[int]:
        return self.proc.assignment() or set()

    def records(self) -> list[Rec]:
        return self.proc.records()

    def commit(self) -> None:
        pass  # kcat commits by itself (see Kcat)

    def committed(self, topic: str, partitions: Sequence[int]) -> None:
        return None

    def _close(self) -> None:
        # SIGTERM: kcat closes its consumer cleanly (final commit and LeaveGroup).
        try:
            assert self.proc.stop() == 0
        finally:
            self.proc.kill()


#: Every driver, in the order the tests run them.
DRIVERS: tuple[type[Driver], ...] = (Kcat, Confluent, KafkaPython, AioKafka)
