# -*- test-case-name: tests.core.test_broker -*-
"""The partitions the core has open, and topics: create, auto-create, delete.

A :class:`Partition` is the reactor-side state of one open partition log: its writer
(group commit) and its producer guard (idempotence). :class:`TopicRegistry` opens
partitions on first use and keeps them; when a produce names a topic that does not
exist and the broker auto-creates topics, the creation runs in the write pool once, and
requests that arrive meanwhile wait in a list and continue in arrival order, so
pipelined appends to a new topic keep their order (and an idempotent producer's
sequence stays in order).

Blocking directory calls go through the injected write-pool runner; topic metadata is
read from the directory in the reactor thread. It does not append or read records.

A topic being deleted is gone for the registry from the moment the deletion starts, as
a Kafka topic is gone from the metadata: its partitions are dropped, the fetches parked
on them are answered, and until the directory has deleted it the topic is not listed and
none of its partitions opens again (it is unknown). A parked fetch answered by the
deletion reads again at once; if that read reopened the log the directory is about to
close, the registry would keep the closed log under the topic's name, and a topic
created again under that name would be served from it. For the same reason an
auto-create whose answer comes back after the topic's deletion registers nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import attrs
from twisted.internet import defer
from twisted.python.failure import Failure

from brokerd.core.interfaces import Runner
from brokerd.core.producers import ProducerSnapshots
from brokerd.core.stopping import StopLatch, refused_when_stopping
from brokerd.core.writer import PartitionWriter
from brokerd.errors import BrokerError, UnknownTopicOrPartition
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.log_directory import LogDirectory
from brokerd.storage.types import TopicInfo

PartitionKey = tuple[str, int]


@attrs.define(eq=False)
class Partition:
    """Reactor-side state of one open partition."""

    topic: str
    index: int
    log: PartitionLog
    writer: PartitionWriter
    #: When its producer state was last snapshotted (the state is the log's).
    snapshots: ProducerSnapshots

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.index)


#: Builds the state of a partition whose log was just opened.
PartitionFactory = Callable[[str, int, PartitionLog], Partition]


class TopicRegistry:
    """Open partitions by ``(topic, index)``, and the topic operations (reactor thread):
    the core face's topics role (:class:`brokerd.core.roles.CoreTopics`, held by the
    broker as ``topic_registry``).

    :param forget: called with each partition of a topic being deleted, once it is
        dropped from the registry (to answer the fetches waiting on it).
    :param stop_latch: the broker's; once set, deletions are refused.

    :meth:`on_topic_deleted` adds what to call with a topic's name once its deletion is
    done: what others keep about the topic (committed offsets, share-partitions) goes
    with it.
    """

    def __init__(
        self,
        logdir: LogDirectory,
        *,
        run_write: Runner,
        make_partition: PartitionFactory,
        forget: Callable[[PartitionKey], None],
        stop_latch: StopLatch,
    ) -> None:
        self.logdir = logdir
        self._run_write = run_write
        self._make_partition = make_partition
        self._forget = forget
        self.stop_latch = stop_latch
        self._partitions: dict[PartitionKey, Partition] = {}
        self._creating: dict[PartitionKey, list[defer.Deferred[Partition]]] = {}
        #: Topics whose deletion has begun and not finished: none of their partitions opens.
        self._deleting: set[str] = set()
        self._idle: defer.Deferred[None] | None = None
        self._deleted: list[Callable[[str], object]] = []

    def __iter__(self) -> Iterator[Partition]:
        return iter(list(self._partitions.values()))

    def get(self, key: PartitionKey) -> Partition | None:
        return self._partitions.get(key)

    def open_now(self, topic: str, index: int) -> Partition | None:
        """The partition when it is open and its topic is not being deleted (what
        :meth:`open` would answer at once); None when :meth:`open` has more to say."""
        if topic in self._deleting:
            return None
        return self._partitions.get((topic, index))

    @property
    def auto_create_topics(self) -> bool:
        return bool(self.logdir.auto_create)

    def topics(self) -> dict[str, TopicInfo]:
        """Every topic, but those being deleted (gone from the deletion's start)."""
        topics = self.logdir.topics()
        if self._deleting:
            topics = {name: info for name, info in topics.items() if name not in self._deleting}
        return topics

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic whose ID (``TopicInfo.topic_id``) is ``topic_id``; None for an ID no
        topic has now (a deleted topic's, even when its name was used again). No I/O."""
        info = self.logdir.topic_by_id(topic_id)
        return None if info is None or info.name in self._deleting else info

    def list_topics(self) -> defer.Deferred[list[TopicInfo]]:
        return defer.succeed(sorted(self.topics().values(), key=lambda t: t.name))

    def on_topic_deleted(self, call: Callable[[str], object]) -> None:
        """Call ``call(name)`` after each topic deletion (reactor thread)."""
        self._deleted.append(call)

    def ensure_topic(self, name: str) -> defer.Deferred[TopicInfo]:
        """The topic's info, auto-creating it when the broker allows that."""
        info = self.topics().get(name)
        if info is not None:
            return defer.succeed(info)
        if not self.auto_create_topics or name in self._deleting:
            return defer.fail(UnknownTopicOrPartition(f"unknown topic {name!r}"))
        d = self._run_write(self.logdir.get, name, 0, create=True)
        return d.addCallback(lambda _: self._created(name))

    def _created(self, name: str) -> TopicInfo:
        """The info of a topic just auto-created; a deletion that began meanwhile makes
        it unknown, as any later lookup would."""
        info = self.topics().get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"unknown topic {name!r}")
        return info

    @refused_when_stopping
    def delete_topic(self, name: str) -> defer.Deferred[None]:
        """Delete a topic with no append in flight, answering fetches parked on it.

        From now until the directory has deleted it, its partitions do not open (see the
        module docstring); a second deletion meanwhile finds no such topic, as Kafka's."""
        if name in self._deleting:
            return defer.fail(UnknownTopicOrPartition(f"topic {name!r} is being deleted"))
        keys = [k for k in self._partitions if k[0] == name]
        if any(not self._partitions[k].writer.idle for k in keys):
            return defer.fail(BrokerError(f"topic {name!r} has appends in flight"))
        self._deleting.add(name)
        for key in keys:
            del self._partitions[key]
            self._forget(key)
        d: defer.Deferred[None] = self._run_write(self.logdir.topic_changes.delete_topic, name)

        def settled(outcome: object) -> object:
            self._deleting.discard(name)
            return outcome

        def done(_: object) -> None:
            for call in self._deleted:
                call(name)

        return d.addBoth(settled).addCallback(done)

    def open(self, topic: str, index: int, *, create: bool) -> defer.Deferred[Partition]:
        """The partition's state, opening its log (and auto-creating its topic when
        ``create`` and the broker allows it) if needed. A topic being deleted is
        unknown."""
        if topic in self._deleting:
            return defer.fail(UnknownTopicOrPartition(f"topic {topic!r} is being deleted"))
        part = self._partitions.get((topic, index))
        if part is not None:
            return defer.succeed(part)
        try:
            log = self.logdir.get(topic, index, create=False)
        except UnknownTopicOrPartition:
            if not (create and self.auto_create_topics) or topic in self.topics():
                return defer.fail()
            return self._create_then_adopt(topic, index)
        except BrokerError:
            return defer.fail()
        return defer.succeed(self.adopt(topic, index, log))

    def _create_then_adopt(self, topic: str, index: int) -> defer.Deferred[Partition]:
        key = (topic, index)
        d: defer.Deferred[Partition] = defer.Deferred()
        waiting = self._creating.get(key)
        if waiting is not None:
            waiting.append(d)
            return d
        waiting = self._creating[key] = [d]

        def done(outcome: PartitionLog | Failure) -> None:
            del self._creating[key]
            if not isinstance(outcome, Failure) and not self._current(topic, index, outcome):
                # Deleted while it was being created: the log is closed or closing.
                outcome = Failure(UnknownTopicOrPartition(f"topic {topic!r} was deleted"))
            for w in waiting:
                if isinstance(outcome, Failure):
                    w.errback(outcome)
                else:
                    w.callback(self.adopt(topic, index, outcome))

        self._run_write(self.logdir.get, topic, index, create=True).addBoth(done)
        return d

    def _current(self, topic: str, index: int, log: PartitionLog) -> bool:
        """Whether ``log`` is still the directory's log of the partition and its topic
        is not being deleted."""
        if topic in self._deleting:
            return False
        try:
            return self.logdir.get(topic, index, create=False) is log
        except BrokerError:
            return False

    def adopt(self, topic: str, index: int, log: PartitionLog) -> Partition:
        """Register an open log (once; later calls return the same state)."""
        part = self._partitions.get((topic, index))
        if part is None:
            part = self._partitions[(topic, index)] = self._make_partition(topic, index, log)
        return part

    # -- draining at shutdown ----------------------------------------------------------

    @property
    def idle(self) -> bool:
        return all(p.writer.idle for p in self._partitions.values())

    def drained(self) -> defer.Deferred[None]:
        """Fires once no partition has a write job running or queued."""
        if self.idle:
            return defer.succeed(None)
        if self._idle is None:
            self._idle = defer.Deferred()
        return self._idle

    def writer_idle(self) -> None:
        """A writer found nothing to do: maybe every one is idle now."""
        if self._idle is not None and self.idle:
            idle, self._idle = self._idle, None
            idle.callback(None)
