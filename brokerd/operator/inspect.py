"""Snapshots of the live broker for operators: :class:`Inspector` builds the views of
:mod:`brokerd.operator.views` from the core's open partitions, the topic registry, the
consumer-group coordinator and the share groups.

Consumer groups (classic and consumer protocol) and share groups share one namespace of
group ids, as in Kafka: :meth:`Inspector.group` finds a group of any type (a consumer
group first, should a share group have the same id), and :meth:`Inspector.every_group`
lists them all (``brokerctl groups list``, as ``kafka-groups.sh --list``), while
:meth:`Inspector.groups` is the consumer groups alone (the console's, the metrics'
committed offsets and lag).

Reactor thread only, memory only: every figure comes from state the broker already keeps
(offsets, sizes and segment lists are maintained by the logs; committed offsets by the
offsets store), so a snapshot never touches the disk and is cheap enough to take on every
page view or metrics scrape. What this module does not do: change anything (see
:mod:`brokerd.operator.operations`), render, or talk to a network.
"""

from __future__ import annotations

from collections.abc import Mapping

from brokerd.core.api import CoreApi
from brokerd.operator.group_face import GroupAdminFace
from brokerd.operator.share_groups import ShareGroupInspector, ShareGroupView
from brokerd.operator.views import (
    SHARE_GROUP,
    GroupOffsetView,
    GroupView,
    MemberView,
    PartitionView,
    TopicView,
)
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.stores.offsets import OffsetStore
from brokerd.storage.topic_ids import format_topic_id
from brokerd.storage.types import TopicInfo


class Inspector:
    """Builds views of topics and groups. Reactor thread only; never blocks.

    :param broker: the core (its log directory and topic registry).
    :param groups: the group coordinator's admin view, or None for a broker without
        one (the service tree always builds it; some tests do not): then there are no
        groups.
    :param offsets: the committed-offsets store (None with ``groups``).
    :param shares: the share groups' views (None: no share groups are shown).
    """

    def __init__(
        self,
        broker: CoreApi,
        groups: GroupAdminFace | None = None,
        offsets: OffsetStore | None = None,
        shares: ShareGroupInspector | None = None,
    ) -> None:
        self._broker = broker
        self._groups = groups
        self._offsets = offsets
        self._shares = shares

    @property
    def has_groups(self) -> bool:
        """Whether this broker has a group coordinator."""
        return self._groups is not None

    # -- topics -------------------------------------------------------------------------

    def topics(self) -> list[TopicView]:
        """Every topic, by name."""
        infos = self._broker.topic_registry.topics()
        defaults = self._broker.topic_config_defaults()
        # One copy of the open logs for all topics (one per topic made the sampler and
        # /metrics quadratic in the topic count, on the reactor thread).
        logs = self._broker.storage.open_logs()
        return [self._topic_view(infos[name], defaults, logs) for name in sorted(infos)]

    def topic(self, name: str) -> TopicView | None:
        """One topic, or None if it does not exist."""
        info = self._broker.topic_registry.topics().get(name)
        if info is None:
            return None
        return self._topic_view(
            info, self._broker.topic_config_defaults(), self._broker.storage.open_logs()
        )

    def _topic_view(
        self,
        info: TopicInfo,
        defaults: Mapping[str, str],
        logs: Mapping[tuple[str, int], PartitionLog],
    ) -> TopicView:
        offline = self._broker.storage.offline_partitions()
        parts: list[PartitionView] = []
        for index in range(info.partitions):
            key = (info.name, index)
            log = logs.get(key)
            if log is None:
                parts.append(PartitionView(info.name, index, 0, 0, 0, 0, 0, offline.get(key)))
                continue
            parts.append(
                PartitionView(
                    info.name,
                    index,
                    log.log_start_offset,
                    log.high_watermark,
                    log.last_stable_offset,
                    log.size_bytes,
                    len(log.segment_bases),
                    offline.get(key),
                )
            )
        configs = {**defaults, **info.configs}
        return TopicView(
            info.name,
            tuple(parts),
            configs,
            frozenset(info.configs),
            topic_id=format_topic_id(info.topic_id),
        )

    def offline_partitions(self) -> dict[tuple[str, int], str]:
        """Every partition whose log could not be opened, with the reason."""
        return dict(self._broker.storage.offline_partitions())

    # -- groups -------------------------------------------------------------------------

    def group_ids(self) -> list[str]:
        """Every consumer group the coordinator holds or has committed offsets for, by
        id."""
        if self._groups is None:
            return []
        return [group_id for group_id, _, _ in self._groups.list_groups_with_states()[1]]

    def groups(self) -> list[GroupView]:
        """Every consumer group, by id, with members, offsets and lag."""
        return [view for g in self.group_ids() if (view := self._consumer_group(g)) is not None]

    def every_group(self) -> list[GroupView]:
        """Every group of every type (consumer groups, then the share groups whose id
        no consumer group has), by id."""
        if self._groups is None:
            return []
        consumer = self.groups()
        taken = {g.group_id for g in consumer}
        shares = [
            _share_group_view(v)
            for v in (self._shares.groups() if self._shares is not None else ())
            if v.group_id not in taken
        ]
        return sorted(consumer + shares, key=lambda g: g.group_id)

    def group(self, group_id: str) -> GroupView | None:
        """One group of any type, or None if the broker knows nothing of it (or has no
        groups)."""
        view = self._consumer_group(group_id)
        if view is not None or self._groups is None or self._shares is None:
            return view
        share = self._shares.group(group_id)
        return None if share is None else _share_group_view(share)

    def _consumer_group(self, group_id: str) -> GroupView | None:
        if self._groups is None:
            return None
        (described,) = self._groups.describe([group_id])
        if described.error_code or described.state in ("", "Dead"):
            return None
        members = tuple(
            MemberView(
                m.member_id,
                m.client_id,
                m.client_host,
                m.group_instance_id,
                m.assigned_partitions(),
            )
            for m in described.members
        )
        return GroupView(
            group_id,
            described.state,
            described.protocol_type,
            described.protocol,
            members,
            self._group_offsets(group_id),
            group_type=self._groups.group_type(group_id),
        )

    def _group_offsets(self, group_id: str) -> tuple[GroupOffsetView, ...]:
        if self._offsets is None:
            return ()
        logs = self._broker.storage.open_logs()
        rows: list[GroupOffsetView] = []
        for (topic, partition), (offset, _epoch, metadata) in sorted(
            self._offsets.committed(group_id).items()
        ):
            log = logs.get((topic, partition))
            end = None if log is None else log.high_watermark
            lag = None if end is None else max(0, end - offset)
            rows.append(GroupOffsetView(topic, partition, offset, end, lag, metadata))
        return tuple(rows)


def _share_group_view(share: ShareGroupView) -> GroupView:
    """A share group as a group of the listing: its members, and per partition its start
    offset and backlog in place of committed offsets and lag."""
    return GroupView(
        share.group_id,
        share.state,
        SHARE_GROUP,
        "",
        share.members,
        group_type=SHARE_GROUP,
        share_partitions=share.partitions,
    )


__all__ = ["Inspector"]
