"""What the operator surface reads and asks of the consumer-group coordinator (and of the
share group coordinator), as typed Protocols: the coordinators (``brokerd.kafka.groups``)
satisfy them, and the service wiring (``brokerd/app/wiring.py``) hands them to
:class:`~brokerd.operator.inspect.Inspector`, :class:`~brokerd.operator.operations.OperatorOps`
and :class:`~brokerd.operator.share_groups.ShareGroupInspector`, so nothing here imports
the Kafka listener.

The coordinator answers with Kafka's numeric error codes (0 = none); their meaning for
an operator is the wiring's :data:`GroupErrorOf`, supplied with the coordinator.
What this module does not do: implement any of it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from twisted.internet.defer import Deferred

from brokerd.errors import BrokerError
from brokerd.storage.stores.offsets import OffsetEntry

#: Results of one offset commit: an error code per ``(topic, partition)``.
CommitResults = dict[tuple[str, int], int]

#: The exception for an error code the coordinator answered about a group
#: (``(code, group_id)``).
GroupErrorOf = Callable[[int, str], BrokerError]


class DescribedMemberView(Protocol):
    """One member of a described group."""

    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...
    @property
    def client_id(self) -> str: ...
    @property
    def client_host(self) -> str: ...

    def assigned_partitions(self) -> tuple[tuple[str, int], ...]:
        """The ``(topic, partition)`` pairs of its assignment, sorted; empty when it
        has none (or it is not the consumer protocol)."""
        ...


class DescribedGroupView(Protocol):
    """One group as the coordinator describes it. Implemented by
    :class:`~brokerd.kafka.groups.group_admin.GroupDescription` (the operator package does
    not import the Kafka listener: see the module docstring)."""

    @property
    def error_code(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def protocol_type(self) -> str: ...
    @property
    def protocol(self) -> str: ...
    @property
    def members(self) -> Sequence[DescribedMemberView]: ...


class GroupAdminFace(Protocol):
    """The coordinator's group administration (list, describe, delete). Implemented by
    :class:`~brokerd.kafka.groups.group_admin.GroupAdmin` (the operator package does not
    import the Kafka listener)."""

    def list_groups_with_states(
        self, states_filter: Collection[str] = ()
    ) -> tuple[int, list[tuple[str, str, str]]]:
        """``(error_code, [(group_id, protocol_type, state)])``."""
        ...

    def describe(self, group_ids: list[str]) -> Sequence[DescribedGroupView]: ...

    def group_type(self, group_id: str) -> str:
        """ListGroups v5's type of a listed group: ``classic`` or ``consumer``."""
        ...

    def delete_groups(self, group_ids: list[str]) -> Deferred[list[tuple[str, int]]]:
        """``[(group_id, error_code)]`` once the deletions are durable."""
        ...


class ShareMembersFace(Protocol):
    """The members of share groups, as the share group coordinator keeps them (members join
    with ShareGroupHeartbeat; memory only). Implemented by
    :class:`~brokerd.kafka.groups.share.coordinator.ShareGroupCoordinator` (the operator
    package does not import the Kafka listener)."""

    def member_groups(self) -> Collection[str]:
        """The share groups the coordinator holds (with members, or empty)."""
        ...

    def members(self, group_id: str) -> Sequence[DescribedMemberView]:
        """The members of share group ``group_id`` by member id (none if unknown)."""
        ...


class OperatorGroups(Protocol):
    """What the operator operations need of the group coordinator. Implemented by
    :class:`~brokerd.kafka.groups.coordinator.GroupCoordinator` (the operator package does
    not import the Kafka listener)."""

    @property
    def admin(self) -> GroupAdminFace: ...

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: list[OffsetEntry],
        *,
        group_instance_id: str | None = None,
    ) -> Deferred[CommitResults]: ...


__all__ = [
    "CommitResults",
    "DescribedGroupView",
    "DescribedMemberView",
    "GroupAdminFace",
    "GroupErrorOf",
    "OperatorGroups",
    "ShareMembersFace",
]
