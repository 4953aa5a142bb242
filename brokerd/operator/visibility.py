# -*- test-case-name: tests.operator_room.test_visibility -*-
"""What one principal may see of the operators' views: the topics and groups it may
DESCRIBE, as Kafka filters its answers.

Kafka leaves out of an answer every topic the principal may not DESCRIBE: Metadata and
ListTopics do not list it, OffsetFetch of a whole group does not return its offsets. The
same rule applies here to every view an operator reads over the native admin requests,
the web console and ``/metrics``: a group's committed offsets, lag, commit metadata and
member assignments keep only the partitions of topics the principal may DESCRIBE, and a
group's counts and totals are computed over what is left. Kafka sends a member's
assignment as opaque bytes; here it is decoded, so it is filtered too rather than let a
denied topic's name through.

Pure: no Twisted, no I/O; the decision is :class:`~brokerd.security.acl.AclAuthorizer`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs

from brokerd.operator.views import GroupView, MemberView, TopicView
from brokerd.security.acl import CLUSTER_NAME, AclAuthorizer, Operation, ResourceType

if TYPE_CHECKING:
    from brokerd.operator.share_groups import ShareGroupView

__all__ = ["Visibility"]


@attrs.frozen
class Visibility:
    """One principal (from one host) against the authorizer."""

    authorizer: AclAuthorizer
    principal: str
    host: str

    def _allows(self, op: Operation, rtype: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, op, rtype, name)

    def topic(self, name: str) -> bool:
        """Whether the principal may DESCRIBE topic ``name``."""
        return self._allows(Operation.DESCRIBE, ResourceType.TOPIC, name)

    def topic_configs(self, name: str) -> bool:
        """Whether the principal may DESCRIBE_CONFIGS topic ``name`` (Kafka's
        DescribeConfigs rule)."""
        return self._allows(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name)

    def cluster_configs(self) -> bool:
        """Whether the principal may DESCRIBE_CONFIGS the cluster (the broker's
        settings)."""
        return self._allows(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)

    def group(self, group_id: str) -> bool:
        """Whether the principal may DESCRIBE group ``group_id``."""
        return self._allows(Operation.DESCRIBE, ResourceType.GROUP, group_id)

    def topic_views(self, topics: Iterable[TopicView]) -> list[TopicView]:
        """The topics the principal may DESCRIBE, each without its configs unless it may
        DESCRIBE_CONFIGS it."""
        return [self.topic_view(t) for t in topics if self.topic(t.name)]

    def topic_view(self, topic: TopicView) -> TopicView:
        """``topic`` (one the principal may DESCRIBE) with its configs only if it may
        DESCRIBE_CONFIGS it."""
        if self.topic_configs(topic.name):
            return topic
        return attrs.evolve(topic, configs={}, overrides=frozenset())

    def group_view(self, group: GroupView) -> GroupView:
        """``group`` with only the partitions of topics the principal may DESCRIBE, in
        its offsets (a share group's partitions) and in its members' assignments."""
        offsets = tuple(o for o in group.offsets if self.topic(o.topic))
        shared = tuple(p for p in group.share_partitions if self.topic(p.topic))
        return attrs.evolve(
            group, members=self._members(group.members), offsets=offsets,
            share_partitions=shared,
        )

    def share_group_view(self, group: ShareGroupView) -> ShareGroupView:
        """A share group (one the principal may DESCRIBE) with only the partitions of
        topics the principal may DESCRIBE, in its figures and its members' assignments."""
        partitions = tuple(p for p in group.partitions if self.topic(p.topic))
        return attrs.evolve(group, partitions=partitions, members=self._members(group.members))

    def share_group_views(self, groups: Iterable[ShareGroupView]) -> list[ShareGroupView]:
        """The share groups the principal may DESCRIBE, each filtered by
        :meth:`share_group_view`."""
        return [self.share_group_view(g) for g in groups if self.group(g.group_id)]

    def _members(self, members: tuple[MemberView, ...]) -> tuple[MemberView, ...]:
        return tuple(
            attrs.evolve(m, assignment=tuple(p for p in m.assignment if self.topic(p[0])))
            for m in members
        )

    def group_views(self, groups: Iterable[GroupView]) -> list[GroupView]:
        """The groups the principal may DESCRIBE, each filtered by :meth:`group_view`."""
        return [self.group_view(g) for g in groups if self.group(g.group_id)]
