# -*- test-case-name: tests.native.test_acl_checks -*-
"""ACL checks of native requests, with the connection's TLS client-certificate principal.

The checks are Kafka's for the same operations (``docs/security.md``): Produce needs
WRITE on the topic (and CREATE on the topic or the cluster when the produce would
auto-create it), Fetch and LongPollFetch READ, ListOffsets DESCRIBE, CreateTopic CREATE
(topic or cluster), and ListTopics lists only the topics the principal may DESCRIBE.
The admin requests: DescribeTopic needs DESCRIBE on the topic, AlterTopicConfigs
ALTER_CONFIGS, DeleteTopic DELETE, CreatePartitions ALTER; DescribeGroup needs DESCRIBE
on the group, DeleteGroup DELETE, ResetOffsets READ on the group and READ on the topic
(Kafka's OffsetCommit rule), and ListGroups lists only the groups the principal may
DESCRIBE. The queue requests: QueueFetch and QueueAcknowledge need READ on the group and
READ on the topic (Kafka's ShareFetch rule), DescribeShareGroup DESCRIBE on the group,
and ListShareGroups lists only the share groups the principal may DESCRIBE. A group's
answer (DescribeGroup, each group of ListGroups) keeps only the partitions of topics the
principal may DESCRIBE (:mod:`brokerd.operator.visibility`).
A topic refusal is :class:`~brokerd.errors.AuthorizationFailed` (native
``TOPIC_AUTHORIZATION_FAILED``), a group refusal
:class:`~brokerd.operator.errors.GroupAuthorizationFailed` (``GROUP_AUTHORIZATION_FAILED``),
said the same way whether the topic or group exists or not, so a client learns nothing
about what it may not describe.

Which rule a request type obeys is declared in its row of
:data:`brokerd.native.commands.COMMANDS`; this module holds the rules' primitives and the
answer filters. Without a client certificate a native connection is ``User:ANONYMOUS``.
Pure: no Twisted, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from typing import NoReturn

import attrs

from brokerd.errors import AuthorizationFailed
from brokerd.operator.errors import GroupAuthorizationFailed
from brokerd.operator.share_groups import ShareGroupView
from brokerd.operator.views import GroupView
from brokerd.operator.visibility import Visibility
from brokerd.security.acl import CLUSTER_NAME, AclAuthorizer, Operation, ResourceType
from brokerd.storage.types import TopicInfo


@attrs.frozen
class NativeAccess:
    """One connection's principal and host against the authorizer; ``existing`` gives
    the names of the topics that exist now (auto-creation needs CREATE)."""

    authorizer: AclAuthorizer
    principal: str
    host: str
    existing: Callable[[], Container[str]]

    def _allows(self, op: Operation, rtype: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, op, rtype, name)

    def _topic(self, op: Operation, name: str) -> bool:
        return self._allows(op, ResourceType.TOPIC, name)

    def _may_create(self, name: str) -> bool:
        return self._allows(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or self._topic(
            Operation.CREATE, name
        )

    def refuse(self) -> NoReturn:
        """Raise the topic refusal (the same words whatever the topic)."""
        raise AuthorizationFailed(f"{self.principal} is not authorized for this topic")

    def require_topic(self, op: Operation, name: str) -> None:
        """Refuse unless the principal may ``op`` on topic ``name``."""
        if not self._topic(op, name):
            self.refuse()

    def require_group(self, op: Operation, group_id: str) -> None:
        """Refuse (the group form) unless the principal may ``op`` on ``group_id``."""
        if not self._allows(op, ResourceType.GROUP, group_id):
            raise GroupAuthorizationFailed(f"{self.principal} is not authorized for this group")

    def require_create(self, name: str) -> None:
        """Refuse unless the principal may create topic ``name`` (CREATE on the topic
        or on the cluster)."""
        if not self._may_create(name):
            self.refuse()

    def require_produce(self, name: str) -> None:
        """Refuse unless the principal may WRITE to ``name``, and create it when it does
        not exist yet (a produce auto-creates)."""
        if not self._topic(Operation.WRITE, name) or not (
            name in self.existing() or self._may_create(name)
        ):
            self.refuse()

    def visible(self, topics: Sequence[TopicInfo]) -> list[TopicInfo]:
        """The topics of a ListTopics answer the principal may DESCRIBE."""
        return [t for t in topics if self._topic(Operation.DESCRIBE, t.name)]

    def visible_share_groups(self, groups: Sequence[ShareGroupView]) -> list[ShareGroupView]:
        """The share groups of a ListShareGroups or DescribeShareGroup answer the
        principal may DESCRIBE, each with only the partitions of topics it may DESCRIBE
        (so its figures leave those out), in its figures and its members' assignments."""
        return self._visibility().share_group_views(groups)

    def visible_groups(self, groups: Sequence[GroupView]) -> list[GroupView]:
        """The groups of a ListGroups answer the principal may DESCRIBE, each as
        :meth:`visible_group` filters it (so its counts and lag leave out denied
        topics)."""
        return self._visibility().group_views(groups)

    def visible_group(self, group: GroupView) -> GroupView:
        """A DescribeGroup answer with only the partitions of topics the principal may
        DESCRIBE (offsets, lag, metadata and assignments), as Kafka's OffsetFetch
        leaves such topics out."""
        return self._visibility().group_view(group)

    def _visibility(self) -> Visibility:
        return Visibility(self.authorizer, self.principal, self.host)
