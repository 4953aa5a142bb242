"""Snapshots of the live broker for operators: :class:`Inspector` builds the views of
:mod:`brokerd.admin.views` from the core's open partitions, the topic registry and the
consumer-group coordinator.

Reactor thread only, memory only: every figure comes from state the broker already keeps
(offsets, sizes and segment lists are maintained by the logs; committed offsets by the
offsets store), so a snapshot never touches the disk and is cheap enough to take on every
page view or metrics scrape. What this module does not do: change anything (see
:mod:`brokerd.admin.operations`), render, or talk to a network.
"""

from __future__ import annotations

from collections.abc import Mapping

from brokerd.admin.group_face import GroupAdminFace
from brokerd.admin.views import GroupOffsetView, GroupView, MemberView, PartitionView, TopicView
from brokerd.core.api import CoreApi
from brokerd.core.interfaces import PartitionStore
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
    """

    def __init__(
        self,
        broker: CoreApi,
        groups: GroupAdminFace | None = None,
        offsets: OffsetStore | None = None,
    ) -> None:
        self._broker = broker
        self._groups = groups
        self._offsets = offsets

    @property
    def has_groups(self) -> bool:
        """Whether this broker has a group coordinator."""
        return self._groups is not None

    # -- topics -------------------------------------------------------------------------

    def topics(self) -> list[TopicView]:
        """Every topic, by name."""
        infos = self._broker.topics()
        defaults = self._broker.topic_config_defaults()
        # One copy of the open logs for all topics (one per topic made the sampler and
        # /metrics quadratic in the topic count, on the reactor thread).
        logs = self._broker.open_logs()
        return [self._topic_view(infos[name], defaults, logs) for name in sorted(infos)]

    def topic(self, name: str) -> TopicView | None:
        """One topic, or None if it does not exist."""
        info = self._broker.topics().get(name)
        if info is None:
            return None
        return self._topic_view(
            info, self._broker.topic_config_defaults(), self._broker.open_logs()
        )

    def _topic_view(
        self,
        info: TopicInfo,
        defaults: Mapping[str, str],
        logs: Mapping[tuple[str, int], PartitionStore],
    ) -> TopicView:
        offline = self._broker.offline_partitions()
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
        return dict(self._broker.offline_partitions())

    # -- groups -------------------------------------------------------------------------

    def group_ids(self) -> list[str]:
        """Every group the coordinator holds or has committed offsets for, by id."""
        if self._groups is None:
            return []
        return [group_id for group_id, _, _ in self._groups.list_groups_with_states()[1]]

    def groups(self) -> list[GroupView]:
        """Every group, by id, with members, offsets and lag."""
        return [view for g in self.group_ids() if (view := self.group(g)) is not None]

    def group(self, group_id: str) -> GroupView | None:
        """One group, or None if the broker knows nothing of it (or has no groups)."""
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
        )

    def _group_offsets(self, group_id: str) -> tuple[GroupOffsetView, ...]:
        if self._offsets is None:
            return ()
        logs = self._broker.open_logs()
        rows: list[GroupOffsetView] = []
        for (topic, partition), (offset, _epoch, metadata) in sorted(
            self._offsets.committed(group_id).items()
        ):
            log = logs.get((topic, partition))
            end = None if log is None else log.high_watermark
            lag = None if end is None else max(0, end - offset)
            rows.append(GroupOffsetView(topic, partition, offset, end, lag, metadata))
        return tuple(rows)


__all__ = ["Inspector"]
