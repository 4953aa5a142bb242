# -*- test-case-name: tests.kafka.groups.test_group_admin -*-
"""The consumer-group admin operations of the classic coordinator: ListGroups,
DescribeGroups, DeleteGroups and OffsetDelete, with Kafka's rules and error codes.

:class:`GroupAdmin` reads the coordinator's groups (shared with
:class:`~brokerd.kafka.groups.coordinator.GroupCoordinator`) and the offsets store, and queues its
deletions in the coordinator's ordered write queue
(:class:`~brokerd.kafka.groups.store.CommitQueue`), so a deletion is fsync'd before it is
answered and lands in the journal in order with the commits around it.
:func:`subscribed_topics` reads the topics out of a "consumer" protocol subscription
(bounded: every length is checked against the bytes left before anything is taken).

A group exists for these APIs when the coordinator holds it (any state, Empty groups
keep their generation) or the store holds committed offsets for it; a group known only
by its offsets is Empty with protocol type "" (Kafka's "simple" group). Groups of the
consumer protocol (:mod:`brokerd.kafka.groups.consumer`) are listed with type
"consumer", described as Kafka 4.x describes them to DescribeGroups (not a classic
group: GROUP_ID_NOT_FOUND from v6, Dead before), deleted once empty, and their offsets
deleted unless a member subscribes to the topic.

What this module does not do: wire encoding (``brokerd.kafka.server.handlers.group_admin``),
topic existence checks (the handler's), the join/sync protocol, or any blocking I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping

import attrs
from twisted.internet import defer
from twisted.internet.defer import Deferred

from brokerd.errors import BrokerError
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.consumer.coordinator import ConsumerGroupCoordinator
from brokerd.kafka.groups.consumer.state import ConsumerGroup
from brokerd.kafka.groups.state import GroupMetadata, GroupState
from brokerd.kafka.groups.store import CommitQueue
from brokerd.kafka.groups.streams.coordinator import StreamsGroupCoordinator
from brokerd.kafka.groups.streams.state import StreamsGroup, StreamsMember
from brokerd.kafka.wire.codec import CodecError, Reader, Writer
from brokerd.names import MAX_GROUP_ID_LENGTH
from brokerd.operator.errors import GroupNotEmpty, GroupNotFound, GroupsUnavailable, InvalidGroupId
from brokerd.storage.stores.offsets import GroupDeletion, OffsetDeletion, OffsetStore

#: The protocol type of Kafka's consumer clients; only their member metadata is parsed.
CONSUMER_PROTOCOL_TYPE = "consumer"

#: ListGroups v5's group types: Kafka's "classic" protocol, the consumer protocol
#: (KIP-848) and streams groups (KIP-1071, whose protocol type is the same word).
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"
STREAMS_GROUP_TYPE = "streams"

#: Bytes of a string's length prefix: the least a subscribed topic can take.
_I16_SIZE = 2
#: Bytes of a partition number: the least an assigned partition can take.
_I32_SIZE = 4


@attrs.frozen
class DescribedMember:
    """One member as DescribeGroups shows it (metadata and assignment only when Stable)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes

    def assigned_partitions(self) -> tuple[tuple[str, int], ...]:
        return assigned_partitions(self.assignment)


@attrs.frozen
class GroupDescription:
    """One group as DescribeGroups shows it."""

    group_id: str
    error_code: int
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[DescribedMember, ...] = ()
    #: Why it could not be described (DescribeGroups v6+), or None.
    error_message: str | None = None


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a consumer-protocol subscription (``i16 version, i32 count, count x
    (i16 length, UTF-8)``, then fields this does not need), or None if it does not parse
    (the caller then takes every topic as subscribed, as Kafka does). The codec's
    :class:`Reader` checks every count and length against the bytes left."""
    r = Reader(metadata)
    try:
        if r.int16() < 0:
            return None
        count = r.array_count(_I16_SIZE)
        if count is None:
            return None
        topics: set[str] = set()
        for _ in range(count):
            topic = r.nullable_string()
            if topic is None:
                return None
            topics.add(topic)
    except CodecError:
        return None
    return frozenset(topics)


def assigned_partitions(assignment: bytes) -> tuple[tuple[str, int], ...]:
    """The ``(topic, partition)`` pairs of a consumer-protocol assignment (``i16
    version, i32 count, count x (i16 topic, i32 n, n x i32 partition)``, user data
    after), sorted; empty when it is empty or does not parse (a group of another
    protocol type)."""
    if not assignment:
        return ()
    r = Reader(assignment)
    pairs: list[tuple[str, int]] = []
    try:
        if r.int16() < 0:
            return ()
        topics = r.array_count(_I16_SIZE)
        for _ in range(topics or 0):
            topic = r.nullable_string()
            count = r.array_count(_I32_SIZE)
            if topic is None:
                return ()
            pairs.extend((topic, r.int32()) for _ in range(count or 0))
    except CodecError:
        return ()
    return tuple(sorted(pairs))


def _consumer_assignment(assignment: Mapping[uuid.UUID, frozenset[int]],
                         names: Mapping[uuid.UUID, str]) -> bytes:
    """A consumer-protocol group member's partitions as the classic consumer protocol's
    assignment bytes (version 0, no user data), what operators' views parse."""
    w = Writer()
    topics = sorted((names[t], sorted(ps)) for t, ps in assignment.items() if ps and t in names)
    w.int16(0)
    w.int32(len(topics))
    for topic, partitions in topics:
        w.nullable_string(topic)
        w.int32(len(partitions))
        for p in partitions:
            w.int32(p)
    w.int32(-1)
    return w.getvalue()


def _consumer_description(group: ConsumerGroup) -> GroupDescription:
    names = {topic_id: name for name, (topic_id, _) in group.subscribed_metadata.items()}
    return GroupDescription(
        group.group_id, 0, group.state.value, CONSUMER_PROTOCOL_TYPE, group.assignor,
        tuple(
            DescribedMember(m.member_id, m.instance_id, m.client_id, m.client_host, b"",
                            _consumer_assignment(m.assigned, names))
            for _, m in sorted(group.members.items())
        ),
    )


def _streams_description(group: StreamsGroup) -> GroupDescription:
    """A streams group as operators see it: each member with the input partitions of its
    active tasks (a task's partition of each of its subtopology's source and repartition
    topics), encoded as a consumer-protocol assignment, what operators' views parse."""
    inputs = {} if group.configured is None else group.configured.inputs

    def partitions(m: StreamsMember) -> bytes:
        by_topic: dict[str, set[int]] = {}
        for subtopology, p in m.assigned.active:
            for topic in inputs.get(subtopology, ()):
                by_topic.setdefault(topic, set()).add(p)
        w = Writer()
        w.int16(0)
        w.int32(len(by_topic))
        for topic, ps in sorted(by_topic.items()):
            w.nullable_string(topic)
            w.int32(len(ps))
            for p in sorted(ps):
                w.int32(p)
        w.int32(-1)
        return w.getvalue()

    return GroupDescription(
        group.group_id, 0, group.state.value, STREAMS_GROUP_TYPE, "",
        tuple(
            DescribedMember(m.member_id, m.instance_id, m.client_id, m.client_host, b"",
                            partitions(m))
            for _, m in sorted(group.members.items())
        ),
    )


def _group_id_error(group_id: str) -> ErrorCode:
    # Kafka allows an empty group id in the admin APIs (it is just never found).
    if len(group_id.encode("utf-8", "surrogatepass")) > MAX_GROUP_ID_LENGTH:
        return ErrorCode.INVALID_GROUP_ID
    return ErrorCode.NONE


def operator_error(code: int, group_id: str) -> BrokerError:
    """The operator-facing exception (``brokerd.operator.errors``) for an error code the
    coordinator answered about ``group_id`` (what :class:`~brokerd.operator.operations.OperatorOps`
    raises)."""
    if code == ErrorCode.COORDINATOR_NOT_AVAILABLE:
        return GroupsUnavailable("the group coordinator is stopping")
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return GroupNotFound(f"unknown group {group_id!r}")
    if code in (ErrorCode.NON_EMPTY_GROUP, ErrorCode.UNKNOWN_MEMBER_ID):
        return GroupNotEmpty(f"group {group_id!r} has active members")
    if code == ErrorCode.INVALID_GROUP_ID:
        return InvalidGroupId(f"invalid group id {group_id!r}")
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = str(code)
    return BrokerError(f"group {group_id!r}: the coordinator answered {name}")


class GroupAdmin:
    """ListGroups, DescribeGroups, DeleteGroups and OffsetDelete. Reactor thread only.

    :param groups: the coordinator's groups by id (shared; deleted groups are removed).
    :param offsets: the store (read in memory only; no I/O here).
    :param writes: the coordinator's ordered write queue (deletions go through it).
    :param stopped: whether the coordinator has stopped (then every call is refused
        with COORDINATOR_NOT_AVAILABLE).
    """

    def __init__(
        self,
        *,
        groups: dict[str, GroupMetadata],
        offsets: OffsetStore,
        writes: CommitQueue,
        stopped: Callable[[], bool],
        consumer: ConsumerGroupCoordinator | None = None,
        streams: StreamsGroupCoordinator | None = None,
    ) -> None:
        self._groups = groups
        self._offsets = offsets
        self._writes = writes
        self._stopped = stopped
        self._consumer = consumer
        self._streams = streams

    def _streams_groups(self) -> Mapping[str, StreamsGroup]:
        return {} if self._streams is None else self._streams.groups

    def _consumer_groups(self) -> Mapping[str, object]:
        return {} if self._consumer is None else self._consumer.groups

    def _exists(self, group_id: str) -> bool:
        return (
            group_id in self._groups
            or group_id in self._consumer_groups()
            or group_id in self._streams_groups()
            or bool(self._offsets.committed(group_id))
        )

    def group_type(self, group_id: str) -> str:
        """ListGroups v5's type of a listed group."""
        if group_id in self._consumer_groups():
            return CONSUMER_GROUP_TYPE
        if group_id in self._streams_groups():
            return STREAMS_GROUP_TYPE
        return CLASSIC_GROUP_TYPE

    # -- ListGroups ---------------------------------------------------------------------

    def list_groups(self) -> tuple[int, list[tuple[str, str]]]:
        """``(error_code, [(group_id, protocol_type)])``: every group the coordinator
        holds, in any state, and every group that only has committed offsets."""
        code, groups = self.list_groups_with_states()
        return code, [(group_id, protocol) for group_id, protocol, _ in groups]

    def list_groups_with_states(
        self, states_filter: Collection[str] = (), types_filter: Collection[str] = ()
    ) -> tuple[int, list[tuple[str, str, str]]]:
        """``(error_code, [(group_id, protocol_type, state)])`` (ListGroups v4). A group
        with only committed offsets is Empty. ``states_filter`` (state names, compared
        case-insensitively and trimmed as Kafka does; a name that is no state matches
        nothing) keeps only groups in those states; empty keeps every group.
        ``types_filter`` (ListGroups v5, case-insensitive) keeps the groups of the types
        it names (:data:`CLASSIC_GROUP_TYPE`, :data:`CONSUMER_GROUP_TYPE`); empty keeps
        every group. Consumer-protocol groups have protocol type "consumer"."""
        if self._stopped():
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE), []
        listed = {
            g.group_id: (g.protocol_type or "", g.state.value) for g in self._groups.values()
        }
        if self._consumer is not None:
            for g in self._consumer.groups.values():
                listed[g.group_id] = (CONSUMER_PROTOCOL_TYPE, g.state.value)
        for sg in self._streams_groups().values():
            listed[sg.group_id] = (STREAMS_GROUP_TYPE, sg.state.value)
        for group_id in self._offsets.groups():
            listed.setdefault(group_id, ("", GroupState.EMPTY.value))
        wanted = {s.strip().lower() for s in states_filter}
        types = {t.strip().lower() for t in types_filter}
        return int(ErrorCode.NONE), [
            (group_id, protocol, state)
            for group_id, (protocol, state) in sorted(listed.items())
            if (not wanted or state.lower() in wanted)
            and (not types or self.group_type(group_id) in types)
        ]

    # -- DescribeGroups -----------------------------------------------------------------

    def describe(
        self, group_ids: list[str], missing_not_found: bool = False, *,
        classic_only: bool = False,
    ) -> list[GroupDescription]:
        """One description per requested id, in request order. An unknown group is
        Dead with no members and no error (Kafka's answer), or with
        ``missing_not_found`` (DescribeGroups v6+) GROUP_ID_NOT_FOUND and a message.

        :param classic_only: DescribeGroups' view: a consumer-protocol group is not a
            classic group (as Kafka 4 answers it). Operators (the default) see it with
            its state, assignor, members and their assignments."""
        return [
            self._describe_one(group_id, missing_not_found, classic_only)
            for group_id in group_ids
        ]

    def _describe_one(
        self, group_id: str, missing_not_found: bool, classic_only: bool
    ) -> GroupDescription:
        if self._stopped():
            return GroupDescription(group_id, int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "")
        code = _group_id_error(group_id)
        if code is not ErrorCode.NONE:
            return GroupDescription(group_id, int(code), "")
        consumer = None if self._consumer is None else self._consumer.groups.get(group_id)
        if consumer is not None and not classic_only:
            return _consumer_description(consumer)
        streams = self._streams_groups().get(group_id)
        if streams is not None and not classic_only:
            return _streams_description(streams)
        if consumer is not None or streams is not None:
            return _no_classic_group(group_id, missing_not_found,
                                     f"Group {group_id} is not a classic group.")
        group = self._groups.get(group_id)
        if group is None:
            if self._offsets.committed(group_id):
                return GroupDescription(group_id, 0, GroupState.EMPTY.value)
            return _no_classic_group(group_id, missing_not_found,
                                     f"Group {group_id} not found.")
        stable = group.state is GroupState.STABLE
        # As Kafka: the protocol, metadata and assignments only while Stable (in the
        # other states they are in flux).
        protocol = (group.protocol_name or "") if stable else ""
        return GroupDescription(
            group_id,
            0,
            group.state.value,
            group.protocol_type or "",
            protocol,
            tuple(
                DescribedMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata_for(protocol) if stable else b"",
                    m.assignment if stable else b"",
                )
                for m in group.members.values()
            ),
        )

    # -- DeleteGroups -------------------------------------------------------------------

    def delete_groups(self, group_ids: list[str]) -> Deferred[list[tuple[str, int]]]:
        """Delete each Empty group: its committed offsets and stored generation, durably
        (fsync'd) before the answer. NON_EMPTY_GROUP while it has members,
        GROUP_ID_NOT_FOUND for an unknown one. Fires with ``[(group_id, error)]`` in
        request order."""
        waits: list[Deferred[int]] = []
        for group_id in group_ids:
            code = self._delete_code(group_id)
            if code is not ErrorCode.NONE:
                waits.append(defer.succeed(int(code)))
                continue
            if self._consumer is not None:
                self._consumer.delete(group_id)
            if self._streams is not None:
                self._streams.delete(group_id)
            group = self._groups.pop(group_id, None)
            if group is not None:
                # Member ids handed out with MEMBER_ID_REQUIRED die with the group.
                group.cancel_pending()
                group.transition_to(GroupState.DEAD)
            waits.append(self._writes.delete(GroupDeletion(group_id)))
        gathered: Deferred[list[int]] = defer.gatherResults(waits, consumeErrors=True)
        return gathered.addCallback(lambda codes: list(zip(group_ids, codes, strict=True)))

    def _delete_code(self, group_id: str) -> ErrorCode:
        if self._stopped():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        code = _group_id_error(group_id)
        if code is not ErrorCode.NONE:
            return code
        if not self._exists(group_id):
            return ErrorCode.GROUP_ID_NOT_FOUND
        group = self._groups.get(group_id)
        if group is not None and (group.members or group.state is not GroupState.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        consumer = None if self._consumer is None else self._consumer.groups.get(group_id)
        if consumer is not None and consumer.members:
            return ErrorCode.NON_EMPTY_GROUP
        streams = self._streams_groups().get(group_id)
        if streams is not None and streams.members:
            return ErrorCode.NON_EMPTY_GROUP
        return ErrorCode.NONE

    # -- OffsetDelete -------------------------------------------------------------------

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> Deferred[tuple[int, Mapping[tuple[str, int], int]]]:
        """Delete the committed offsets of ``partitions`` (the handler has already
        answered partitions of unknown topics). Fires with ``(group error, {partition:
        error})`` once the deletion is fsync'd. A partition of a topic the group's
        members are subscribed to gets GROUP_SUBSCRIBED_TO_TOPIC; a group with members
        that is not a consumer group is NON_EMPTY_GROUP as a whole."""
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE if self._stopped() else ErrorCode.NONE
        if code is ErrorCode.NONE:
            code = _group_id_error(group_id)
        if code is ErrorCode.NONE and not self._exists(group_id):
            code = ErrorCode.GROUP_ID_NOT_FOUND
        group = self._groups.get(group_id)
        subscribed: frozenset[str] | None = frozenset()
        if code is ErrorCode.NONE and group is not None and group.members:
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                code = ErrorCode.NON_EMPTY_GROUP
            else:
                subscribed = self._subscriptions(group)
        consumer = None if self._consumer is None else self._consumer.groups.get(group_id)
        if code is ErrorCode.NONE and consumer is not None:
            # The topics its members' names and regexes matched at the last heartbeat,
            # and every name a member gives (existing or not).
            subscribed = frozenset(consumer.subscribed_metadata).union(
                *(m.subscribed_topic_names for m in consumer.members.values())
            )
        if code is not ErrorCode.NONE:
            return defer.succeed((int(code), {}))
        results: dict[tuple[str, int], int] = {}
        eligible: list[tuple[str, int]] = []
        for topic, partition in partitions:
            if subscribed is None or topic in subscribed:
                results[(topic, partition)] = int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
            else:
                results[(topic, partition)] = int(ErrorCode.NONE)
                eligible.append((topic, partition))
        if not eligible:
            return defer.succeed((int(ErrorCode.NONE), results))

        def written(write_code: int) -> tuple[int, Mapping[tuple[str, int], int]]:
            for key in eligible:
                results[key] = write_code
            return int(ErrorCode.NONE), results

        d = self._writes.delete(OffsetDeletion(group_id, tuple(eligible)))
        return d.addCallback(written)

    @staticmethod
    def _subscriptions(group: GroupMetadata) -> frozenset[str] | None:
        """Every topic a member subscribes to with the group's protocol (before one is
        chosen: with its first), or None if any subscription does not parse."""
        topics: set[str] = set()
        for m in group.members.values():
            protocol = group.protocol_name or (m.protocols[0][0] if m.protocols else "")
            found = subscribed_topics(m.metadata_for(protocol))
            if found is None:
                return None
            topics |= found
        return frozenset(topics)


def _no_classic_group(group_id: str, missing_not_found: bool, message: str) -> GroupDescription:
    """The description of a group id with no classic group: GROUP_ID_NOT_FOUND (saying
    ``message``) where the version answers so, else a Dead group without error."""
    if missing_not_found:
        return GroupDescription(
            group_id, int(ErrorCode.GROUP_ID_NOT_FOUND), GroupState.DEAD.value,
            error_message=message,
        )
    return GroupDescription(group_id, 0, GroupState.DEAD.value)


__all__ = [
    "CLASSIC_GROUP_TYPE",
    "CONSUMER_GROUP_TYPE",
    "CONSUMER_PROTOCOL_TYPE",
    "DescribedMember",
    "GroupAdmin",
    "GroupDescription",
    "subscribed_topics",
]

