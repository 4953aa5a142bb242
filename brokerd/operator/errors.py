"""The errors of the admin operations on consumer groups (:mod:`brokerd.operator.operations`).

They extend :class:`brokerd.errors.BrokerError`, so every protocol maps them the way it
maps the core's errors (the native protocol's table is ``brokerd.native.messages``).
What this module does not do: decide when they are raised.
"""

from __future__ import annotations

from brokerd.errors import AuthorizationFailed, BrokerError


class GroupsUnavailable(BrokerError):
    """The broker has no consumer groups: the Kafka listener (and with it the group
    coordinator) is off, or the coordinator has stopped."""


class InvalidGroupId(BrokerError):
    """A group id longer than Kafka's limit (255 bytes)."""


class GroupNotFound(BrokerError):
    """The broker knows nothing of the group (no members, no committed offsets)."""


class GroupNotEmpty(BrokerError):
    """The group has active members: its offsets cannot be reset, nor the group deleted."""


class GroupAuthorizationFailed(AuthorizationFailed):
    """The connection's principal may not do this to the group (ACLs)."""




class OperatorUnavailable(BrokerError):
    """This listener was built without the operator operations (a test or embedded use)."""


__all__ = [
    "GroupAuthorizationFailed",
    "GroupNotEmpty",
    "GroupNotFound",
    "GroupsUnavailable",
    "InvalidGroupId",
    "OperatorUnavailable",
]
