# -*- test-case-name: tests.operator_room.test_operations -*-
"""The admin operations an operator runs against a live broker: alter a topic's configs,
delete a topic, add partitions, reset a consumer group's offsets, delete a group; and
the describe answers they are shown with (from :class:`~brokerd.operator.inspect.Inspector`).

:class:`OperatorOps` applies Kafka's rules, so an operation here and the same operation by
a Kafka admin client (or ``kafka-consumer-groups``) end the same way:

- a group's offsets are reset only while the group is inactive (no members: Empty, or
  unknown to the coordinator, which creates its offsets); a group with members is
  refused with :class:`~brokerd.operator.errors.GroupNotEmpty`, and a share group's id with
  :class:`~brokerd.operator.errors.GroupNotFound` (it is no consumer group; nor is it
  deleted here, but with a message saying how);
- reset targets are clamped to ``[log start offset, high watermark]`` of each
  partition; ``--to-datetime`` takes the first offset whose record timestamp is at or
  after the time, and the high watermark when no record is that new;
- the new offsets are committed through the group coordinator exactly as an
  OffsetCommit from outside the group protocol (generation -1): in its ordered,
  fsync'd write queue, so a member that joins meanwhile makes the commit fail rather
  than race it;
- a group is deleted only when it has no members (Kafka's DeleteGroups).

Reactor thread only; every operation answers with a Deferred, and failures carry
:mod:`brokerd.errors` / :mod:`brokerd.operator.errors` exceptions. What this module does
not do: decode requests, check ACLs (the protocols do), or touch files itself (the core
and the coordinator do the durable writes).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping

import attrs
from twisted.internet import defer

from brokerd.core.api import CoreApi
from brokerd.errors import BrokerError, InvalidConfig, UnknownTopicOrPartition
from brokerd.names import MAX_GROUP_ID_LENGTH, validate_topic_name
from brokerd.operator.errors import GroupNotEmpty, GroupNotFound, GroupsUnavailable, InvalidGroupId
from brokerd.operator.group_face import GroupErrorOf, OperatorGroups
from brokerd.operator.inspect import Inspector
from brokerd.operator.views import SHARE_GROUP, GroupView, OffsetResetView, TopicView
from brokerd.storage.config.topic_config import TOPIC_CONFIGS
from brokerd.storage.stores.offsets import OffsetEntry

__all__ = [
    "INACTIVE_GROUP_STATES",
    "OperatorOps",
    "ResetMode",
    "ResetSpec",
]

#: The states in which a group's offsets may be reset (Kafka: an "inactive" group).
INACTIVE_GROUP_STATES = frozenset({"Empty", "Dead"})

#: An OffsetCommit from outside the group protocol (the admin tools' commit).
_NO_GENERATION = -1
_NO_MEMBER = ""
_NO_LEADER_EPOCH = -1


class ResetMode(enum.Enum):
    """Where ``reset-offsets`` moves a group's committed offsets to."""

    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSET = "offset"
    DATETIME = "datetime"


@attrs.frozen
class ResetSpec:
    """A reset target: ``value`` is the offset (OFFSET) or the time in milliseconds
    since the epoch (DATETIME); unused otherwise."""

    mode: ResetMode
    value: int = 0


def _check_group_id(group_id: str) -> None:
    if len(group_id.encode("utf-8", "surrogatepass")) > MAX_GROUP_ID_LENGTH:
        raise InvalidGroupId(f"group id longer than {MAX_GROUP_ID_LENGTH} bytes")


def _unexplained(code: int, group_id: str) -> BrokerError:
    return BrokerError(f"group {group_id!r}: the coordinator answered error {code}")


def config_update(
    set_configs: Mapping[str, str], delete: Collection[str]
) -> Callable[[Mapping[str, str]], Mapping[str, str | None]]:
    """The update of a topic's overrides that sets ``set_configs`` and removes the
    overrides named in ``delete`` (their broker defaults apply again); unknown names and
    a name both set and deleted are :class:`InvalidConfig`. The values are checked by the
    log directory when the update runs."""
    both = sorted(set(set_configs) & set(delete))
    if both:
        raise InvalidConfig(f"config {both[0]} is both set and deleted")
    for name in (*set_configs, *delete):
        if name not in TOPIC_CONFIGS:
            raise InvalidConfig(f"Unknown topic config name: {name}")
    removed = frozenset(delete)

    def update(current: Mapping[str, str]) -> Mapping[str, str | None]:
        kept: dict[str, str | None] = {k: v for k, v in current.items() if k not in removed}
        kept.update(set_configs)
        return kept

    return update


class OperatorOps:
    """The operator operations of one broker (brokerctl topics and groups). Reactor
    thread only.

    :param broker: the core.
    :param inspector: the views the answers are made of.
    :param groups: the group coordinator, or None for operations built without one (an
        embedded listener; the service tree always passes it): then every group
        operation fails with :class:`GroupsUnavailable`.
    :param group_error: the exception for an error code the coordinator answers about a
        group (the wiring passes the Kafka coordinator's
        ``brokerd.kafka.groups.group_admin.operator_error``).
    """

    def __init__(
        self,
        broker: CoreApi,
        inspector: Inspector,
        groups: OperatorGroups | None = None,
        group_error: GroupErrorOf = _unexplained,
    ) -> None:
        self._broker = broker
        self._inspector = inspector
        self._groups = groups
        self._group_error = group_error

    @property
    def inspector(self) -> Inspector:
        return self._inspector

    # -- describing ---------------------------------------------------------------------

    def describe_topic(self, name: str) -> TopicView:
        validate_topic_name(name)
        view = self._inspector.topic(name)
        if view is None:
            raise UnknownTopicOrPartition(f"unknown topic {name!r}")
        return view

    def list_groups(self) -> list[GroupView]:
        """Every group of every type (consumer groups and share groups)."""
        self._coordinator()
        return self._inspector.every_group()

    def describe_group(self, group_id: str) -> GroupView:
        self._coordinator()
        _check_group_id(group_id)
        view = self._inspector.group(group_id)
        if view is None:
            raise GroupNotFound(f"unknown group {group_id!r}")
        return view

    # -- topics -------------------------------------------------------------------------

    def alter_topic_configs(
        self, name: str, set_configs: Mapping[str, str], delete: Collection[str] = ()
    ) -> defer.Deferred[TopicView]:
        """Set and delete overrides of topic ``name``, durably; fires with the topic as
        it is now."""
        try:
            validate_topic_name(name)
            update = config_update(set_configs, delete)
        except BrokerError as exc:
            return defer.fail(exc)
        d = self._broker.alter_topic_configs(name, update)
        return d.addCallback(lambda _info: self.describe_topic(name))

    def delete_topic(self, name: str) -> defer.Deferred[None]:
        """Delete topic ``name`` and its data."""
        try:
            validate_topic_name(name)
        except BrokerError as exc:
            return defer.fail(exc)
        if name not in self._broker.topic_registry.topics():
            return defer.fail(UnknownTopicOrPartition(f"unknown topic {name!r}"))
        return self._broker.topic_registry.delete_topic(name)

    def create_partitions(self, name: str, total: int) -> defer.Deferred[TopicView]:
        """Grow topic ``name`` to ``total`` partitions (Kafka's CreatePartitions: the new
        total, never fewer than now); fires with the topic as it is now."""
        try:
            validate_topic_name(name)
        except BrokerError as exc:
            return defer.fail(exc)
        d = self._broker.create_partitions(name, total)
        return d.addCallback(lambda _info: self.describe_topic(name))

    # -- groups -------------------------------------------------------------------------

    def _coordinator(self) -> OperatorGroups:
        if self._groups is None:
            raise GroupsUnavailable(
                "this broker has no group coordinator"
            )
        return self._groups

    def _check_inactive(self, groups: OperatorGroups, group_id: str) -> None:
        (found,) = groups.admin.describe([group_id])
        if found.error_code:
            raise self._group_error(found.error_code, group_id)
        if found.members or found.state not in INACTIVE_GROUP_STATES:
            raise GroupNotEmpty(
                f"group {group_id!r} is {found.state} with {len(found.members)} member(s): "
                "offsets can be reset only while the group is inactive (stop its consumers)"
            )

    def reset_offsets(
        self,
        group_id: str,
        topic: str,
        spec: ResetSpec,
        *,
        partitions: Collection[int] | None = None,
        dry_run: bool = False,
    ) -> defer.Deferred[list[OffsetResetView]]:
        """Move ``group_id``'s committed offsets of ``topic`` (every partition, or
        ``partitions``) to ``spec``, clamped to each partition's log start offset and
        high watermark; with ``dry_run`` only say what would be committed. Fires with
        one row per partition, once the commit is durable."""
        return defer.Deferred.fromCoroutine(
            self._reset(group_id, topic, spec, partitions, dry_run)
        )

    async def _reset(
        self,
        group_id: str,
        topic: str,
        spec: ResetSpec,
        partitions: Collection[int] | None,
        dry_run: bool,
    ) -> list[OffsetResetView]:
        groups = self._coordinator()
        _check_group_id(group_id)
        validate_topic_name(topic)
        info = self._broker.topic_registry.topics().get(topic)
        if info is None:
            raise UnknownTopicOrPartition(f"unknown topic {topic!r}")
        chosen = sorted(set(range(info.partitions) if partitions is None else partitions))
        missing = [p for p in chosen if not 0 <= p < info.partitions]
        if missing:
            raise UnknownTopicOrPartition(
                f"topic {topic!r} has {info.partitions} partition(s); no partition {missing[0]}"
            )
        if spec.mode is ResetMode.OFFSET and spec.value < 0:
            raise BrokerError(f"offset {spec.value} is negative")
        self._refuse_share_group(
            group_id, "reset its start offsets with kafka-share-groups.sh --reset-offsets"
        )
        self._check_inactive(groups, group_id)
        committed = self._inspector_committed(group_id)
        rows = [
            await self._target(group_id, topic, p, spec, committed.get((topic, p)))
            for p in chosen
        ]
        if dry_run or not rows:
            return rows
        entries: list[OffsetEntry] = [
            (r.topic, r.partition, r.new_offset, _NO_LEADER_EPOCH, "") for r in rows
        ]
        # Generation -1 is refused once the group has members, so a consumer that joined
        # since the check above makes this fail instead of having its position moved.
        results = await groups.commit_offsets(group_id, _NO_GENERATION, _NO_MEMBER, entries)
        failed = sorted(code for code in results.values() if code)
        if failed:
            raise self._group_error(failed[0], group_id)
        return rows

    def _refuse_share_group(self, group_id: str, instead: str) -> None:
        # Committed offsets under a share group's id would make a consumer group of the
        # same id (Kafka keeps one namespace and answers an OffsetCommit to a share group
        # GROUP_ID_NOT_FOUND); a share group is reset and deleted its own way.
        view = self._inspector.group(group_id)
        if view is not None and view.group_type == SHARE_GROUP:
            raise GroupNotFound(
                f"group {group_id!r} is a share group, not a consumer group: {instead}"
            )

    def _inspector_committed(self, group_id: str) -> dict[tuple[str, int], int]:
        view = self._inspector.group(group_id)
        if view is None:
            return {}
        return {(o.topic, o.partition): o.committed_offset for o in view.offsets}

    async def _target(
        self, group_id: str, topic: str, partition: int, spec: ResetSpec, previous: int | None
    ) -> OffsetResetView:
        offsets = await self._broker.reads.offsets(topic, partition)
        start, end = offsets.log_start_offset, offsets.high_watermark
        if spec.mode is ResetMode.EARLIEST:
            wanted = start
        elif spec.mode is ResetMode.LATEST:
            wanted = end
        elif spec.mode is ResetMode.OFFSET:
            wanted = spec.value
        else:
            found = await self._broker.reads.offset_for_timestamp(topic, partition, spec.value)
            wanted = end if found is None else found[0]
        new = min(max(wanted, start), end)
        return OffsetResetView(group_id, topic, partition, previous, new, start, end)

    def delete_group(self, group_id: str) -> defer.Deferred[None]:
        """Delete an inactive group with its committed offsets, durably."""
        try:
            groups = self._coordinator()
            _check_group_id(group_id)
            self._refuse_share_group(group_id, "delete it with kafka-share-groups.sh --delete")
        except BrokerError as exc:
            return defer.fail(exc)

        def answered(results: list[tuple[str, int]]) -> None:
            ((_, code),) = results
            if code:
                raise self._group_error(code, group_id)

        return groups.admin.delete_groups([group_id]).addCallback(answered)
